// Issue 25: no network read runs on the probe pool. Every built-in kind, as its documentation
// page configures it (each `yaml` example of docs/kinds/*.md that is a whole config), is built
// with the built-in factories, as the detector builds it: each member probe, lock store and
// manager probe must be the event-loop kind (AsyncMemberProbe, AsyncLockStore,
// AsyncManagerProbe), so that nothing of theirs runs on the pool, and the scheduler reserves no
// pool thread for them beyond its floor. A new kind with a blocking read fails here.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "detector/common/internal_errors.h"
#include "detector/config/config.h"
#include "detector/engine/kind_registry.h"
#include "detector/engine/scheduler.h"
#include "probes/async_probe.h"

namespace sbd {
namespace {

struct Example {
  std::string where;  // page and block number, for the failure message
  ValidatedConfig config;
};

// Every yaml block of docs/kinds/*.md that parses as a config with clusters.
std::vector<Example> KindExamples() {
  std::vector<Example> out;
  const std::regex block("```yaml\n([\\s\\S]*?)```");
  for (const auto& entry : std::filesystem::directory_iterator(SBD_SOURCE_DIR "/docs/kinds")) {
    if (entry.path().extension() != ".md") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string page = text.str();
    int n = 0;
    for (std::sregex_iterator it(page.begin(), page.end(), block), end; it != end; ++it) {
      ++n;
      const std::string yaml = (*it)[1];
      if (yaml.find("clusters:") == std::string::npos) continue;
      ConfigResult result = ParseConfig(yaml, entry.path().filename().string());
      if (!std::holds_alternative<ValidatedConfig>(result)) continue;  // a fragment
      out.push_back({entry.path().filename().string() + " block " + std::to_string(n),
                     std::get<ValidatedConfig>(std::move(result))});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("kinds: every built-in kind's reads run on the event loop, none on the probe pool",
          "[engine][kinds]") {
  const std::vector<Example> examples = KindExamples();
  REQUIRE(examples.size() >= BuiltInKindNames().size());
  const ProbeFactories factories;
  // Built and dropped here, off the loop thread, as a config load builds them: nothing of
  // libuv may be touched (see event_loop_test.cpp), and nothing is counted as an error.
  const std::uint64_t errors_before = InternalErrors();
  std::set<std::string> kinds_seen;
  bool patroni_on_zookeeper = false;
  for (const Example& example : examples) {
    for (const ClusterSpec& spec : example.config.clusters()) {
      INFO(example.where << ": cluster " << spec.name << " (" << spec.kind << ")");
      kinds_seen.insert(spec.kind);
      patroni_on_zookeeper =
          patroni_on_zookeeper || (spec.kind == "patroni" && spec.patroni_zookeeper);
      for (const MemberSpec& member : spec.members) {
        INFO("member " << member.name);
        const std::unique_ptr<MemberProbe> probe = factories.members(spec, member);
        REQUIRE(probe != nullptr);
        CHECK(dynamic_cast<AsyncMemberProbe*>(probe.get()) != nullptr);
        const std::unique_ptr<ManagerProbe> manager = factories.managers(spec, member);
        if (manager) CHECK(dynamic_cast<AsyncManagerProbe*>(manager.get()) != nullptr);
      }
      const std::unique_ptr<LockStore> store = factories.lock_stores(spec);
      if (store) CHECK(dynamic_cast<AsyncLockStore*>(store.get()) != nullptr);
    }
    // What the detector itself would reserve on the pool for this config: its floor.
    Scheduler scheduler(example.config, ProbeFactories{});
    INFO(example.where);
    CHECK(scheduler.probe_threads() == 2);
  }
  // Every kind the engine builds was among the examples.
  for (const std::string& kind : BuiltInKindNames()) {
    INFO("kind " << kind << " has no whole example config in docs/kinds/");
    CHECK(kinds_seen.count(kind) == 1);
  }
  CHECK(patroni_on_zookeeper);
  CHECK(InternalErrors() == errors_before);
}

}  // namespace sbd
