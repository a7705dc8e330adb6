// What the detector shows, byte for byte, for a scripted incident in a cluster of every built-in
// kind (issue 26: a redesign of the engine must not change /metrics, /status, the alerts or the
// page). Each kind's cluster is the first one its documentation page configures
// (docs/kinds/*.md); three rounds are folded into its state as the scheduler folds them
// (FoldRound, on fixed clocks): one holder, then two holding at once (a confirmed split brain),
// then the zombie unreadable with the incident still open. After each round the output is
// rendered and compared with tests/testdata/golden/<kind>.txt.
//
// A change that alters the output on purpose regenerates the files with
//   SBD_GOLDEN_UPDATE=1 build/tests/unit_tests '[golden]'
// and the diff of tests/testdata/golden/ shows, in review, what changed for users.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "detector/engine/fold.h"
#include "detector/engine/kind_registry.h"
#include "detector/output/alerts.h"
#include "detector/output/metrics.h"
#include "detector/output/status.h"
#include "detector/output/status_page.h"
#include "detector/verdicts/lease_claims.h"
#include "probes/lease_adapters.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const WallClock::time_point kWall0 = WallClock::time_point(std::chrono::hours(494000));
const SteadyClock::time_point kSteady0 = SteadyClock::time_point(std::chrono::hours(1000));

// The first cluster of each kind in the yaml examples of docs/kinds/*.md, by kind.
std::map<std::string, ClusterSpec> DocumentedClusters() {
  std::map<std::string, ClusterSpec> out;
  const std::regex block("```yaml\n([\\s\\S]*?)```");
  std::vector<std::filesystem::path> pages;
  for (const auto& entry : std::filesystem::directory_iterator(SBD_SOURCE_DIR "/docs/kinds")) {
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  std::sort(pages.begin(), pages.end());
  for (const auto& page_path : pages) {
    std::ifstream in(page_path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string page = text.str();
    for (std::sregex_iterator it(page.begin(), page.end(), block), end; it != end; ++it) {
      const std::string yaml = (*it)[1];
      if (yaml.find("clusters:") == std::string::npos) continue;
      ConfigResult result = ParseConfig(yaml, page_path.filename().string());
      if (!std::holds_alternative<ValidatedConfig>(result)) continue;  // a fragment
      for (const ClusterSpec& spec : std::get<ValidatedConfig>(result).clusters()) {
        if (spec.members.size() >= 2) out.emplace(spec.kind, spec);
      }
    }
  }
  return out;
}

// The kinds whose members are processes that claim a lock by its name, with a token.
bool ClaimsLock(const ClusterSpec& spec) {
  return spec.kind == "redis_lease" || spec.kind == "k8s_lease" || spec.kind == "etcd_election" ||
         spec.kind == "zookeeper_lock";
}

// The lock's name as the kind's claim query labels it: the claims' lineage.
std::string ClaimLock(const ClusterSpec& spec) {
  if (spec.kind == "redis_lease") return ClaimQueryOf(spec.redis_lease).lock;
  if (spec.kind == "k8s_lease") return ClaimQueryOf(spec.k8s_lease).lock;
  if (spec.kind == "etcd_election") return ClaimQueryOf(spec.etcd_election).lock;
  return ClaimQueryOf(spec.zookeeper_lock).lock;
}

// Member `m` of `spec` read at `at`: holding its kind's claim or not, in the cluster's lineage.
Observation Reading(const ClusterSpec& spec, size_t m, bool holds, WallClock::time_point at,
                    SteadyClock::time_point sent) {
  const MemberSpec& member = spec.members[m];
  Observation obs;
  obs.member = member.name;
  obs.window.sent_wall = at;
  obs.window.sent = sent;
  obs.window.received = sent + milliseconds(3 + static_cast<int>(m));
  const std::string token = "token-" + member.name;
  if (spec.kind == "redis") {
    RedisReading r;
    r.role = holds ? "master" : "slave";
    r.master_replid = "5f1c0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b";
    if (holds && m > 0) {  // promoted: a new replication id, the old one kept as the second
      r.master_replid2 = r.master_replid;
      r.second_repl_offset = 73400;
      r.master_replid = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a291807";
    }
    r.run_id = "run-" + member.name;
    r.redis_version = "7.0.15";
    if (!holds) {
      r.master_host = "127.0.0.1";
      r.master_port = 6379;
      r.master_link_status = "up";
    }
    obs.result = r;
  } else if (ClaimsLock(spec)) {
    LockClaimReading r;
    r.lock = ClaimLock(spec);
    r.claims = holds;
    r.competes = true;
    r.token = holds ? token : "";
    obs.result = r;
  } else {
    PostgresReading r;
    r.in_recovery = !holds;
    r.read_only = !holds;
    r.system_identifier = "7301234567890123456";
    r.timeline = 3;
    r.wal_lsn = holds ? "0/3000148" : "0/3000060";
    r.server_version = 150010;
    r.postmaster_start = "2026-05-12T07:00:00Z";
    r.backend_pid = 4100 + static_cast<int>(m);
    if (!holds && m > 0) {
      WalReceiverReading up;
      up.status = "streaming";
      up.sender_host = "10.0.0.9";
      up.sender_port = 5432;
      up.flushed_lsn = "0/3000060";
      up.latest_end_time = "2026-05-12T07:59:59Z";
      r.upstream = up;
    }
    obs.result = r;
    if (spec.kind == "patroni") {
      PatroniReading p;
      p.state = "running";
      p.role = holds ? "primary" : "replica";
      p.timeline = 3;
      p.system_identifier = r.system_identifier;
      p.scope = spec.scope;
      p.name = member.name;
      p.dcs_last_seen = std::chrono::duration<double>(at.time_since_epoch()).count() - 1;
      obs.patroni = p;
    }
  }
  return obs;
}

Observation Unreadable(const ClusterSpec& spec, size_t m, WallClock::time_point at,
                       SteadyClock::time_point sent) {
  Observation obs;
  obs.member = spec.members[m].name;
  obs.window.sent_wall = at;
  obs.window.sent = sent;
  obs.window.received = sent + milliseconds(800);
  obs.result = ProbeFailure{ProbeFailureReason::kTimeout, "no answer within 800ms"};
  return obs;
}

// The lock store's answer naming member `holder` (the token kinds name it by token).
LockRecordResult Record(const ClusterSpec& spec, size_t holder, std::int64_t revision) {
  LockRecord record;
  record.endpoint = "http://127.0.0.1:2379";
  const std::string name = spec.members[holder].name;
  record.lease_ttl_remaining = 7;
  record.mod_revision = revision;
  record.store_revision = revision + 1000;
  record.lease_id = "7587869612345";
  record.lease_granted_ttl = 10;
  if (ClaimsLock(spec)) {
    record.holder_token = "token-" + name;
  } else if (spec.kind == "redis") {
    record.holder = name;
  } else {
    record.initialize = "7301234567890123456";  // the scope's PostgreSQL lineage
    record.holder = name;
  }
  for (const MemberSpec& m : spec.members) {
    DcsMember member;
    member.name = m.name;
    member.role = m.name == name ? "primary" : "replica";
    member.state = "running";
    record.members.push_back(member);
  }
  return record;
}

struct Round {
  std::vector<bool> holds;       // per member: holds its claim
  std::vector<bool> unreadable;  // per member: its read timed out
  size_t store_holder;
  bool confirmed;
};

// The output after a round; the metrics' HELP and TYPE lines only with `full` (the first
// round), the page only with `html` (the last).
std::string Render(const std::vector<ClusterSnapshot>& clusters, const AlertingSpec& alerting,
                   WallClock::time_point now, bool full, bool html) {
  std::ostringstream out;
  ConfigReloadStatus reload;
  reload.last_success_timestamp = 1700000000;
  reload.last_attempt_timestamp = 1700000000;
  DetectorCollector collector([&clusters] { return clusters; }, &reload);
  std::istringstream metrics(RenderMetrics(collector));
  out << "## /metrics\n";
  for (std::string line; std::getline(metrics, line);) {
    // The build's own identity changes with every commit; the rest must not.
    if (line.rfind("splitbrain_build_info{", 0) == 0) continue;
    if (!full && line.rfind("# ", 0) == 0) continue;
    out << line << "\n";
  }
  out << "## /status\n" << StatusJson(clusters).dump(2) << "\n";
  out << "## /status?format=text\n" << StatusText(clusters);
  out << "## alerts\n";
  const AlertLinks links{"http://detector.example:9108/", "http://detector.example:9108/runbooks/"};
  for (const ClusterSnapshot& c : clusters) {
    for (const Alert& alert : AlertsFor(c, alerting, links)) {
      for (const auto& [k, v] : alert.labels) out << "label " << k << "=" << v << "\n";
      for (const auto& [k, v] : alert.annotations) out << "annotation " << k << "=" << v << "\n";
      out << "generator_url " << alert.generator_url << "\n--\n";
    }
  }
  if (html) {
    StatusPageOptions options;
    options.auto_refresh = false;
    out << "## /\n" << StatusHtml(clusters, nullptr, now, options) << "\n";
  }
  return out.str();
}

std::string Script(const ClusterSpec& spec, const AlertingSpec& alerting) {
  ClusterSnapshot state;
  state.spec = spec;
  // Every kind but plain PostgreSQL keeps a record: its registry entry says where.
  const bool has_store = !DescribeLock(spec, true).record.empty();
  state.lock = DescribeLock(spec, has_store);
  const size_t n = spec.members.size();
  std::vector<bool> none(n, false);
  std::vector<bool> first = none, both = none, second = none, dark = none;
  first[0] = true;
  both[0] = both[1] = true;
  second[1] = true;
  dark[0] = true;
  const std::vector<Round> rounds = {
      {first, none, 0, false},
      {both, none, 1, true},
      {second, dark, 1, false},
  };
  std::ostringstream out;
  for (size_t r = 0; r < rounds.size(); ++r) {
    const WallClock::time_point start = kWall0 + seconds(r);
    const SteadyClock::time_point sent = kSteady0 + seconds(r);
    RoundReadings readings;
    for (size_t m = 0; m < n; ++m) {
      readings.members.push_back(rounds[r].unreadable[m]
                                     ? Unreadable(spec, m, start, sent)
                                     : Reading(spec, m, rounds[r].holds[m], start, sent));
    }
    if (has_store) readings.dcs = Record(spec, rounds[r].store_holder, 100 + r);
    if (readings.dcs) NameHolderByToken(*readings.dcs, readings.members);
    Confirmation confirmation;
    confirmation.candidate = rounds[r].confirmed;
    confirmation.confirmed = rounds[r].confirmed;
    const WallClock::time_point end = start + milliseconds(12);
    FoldRound(state, readings, confirmation, {}, end);
    state.has_round = true;
    ++state.rounds;
    state.last_round_start = start;
    state.last_round_end = end;
    state.last_round_seconds = 0.012;
    out << "# round " << r + 1 << "\n"
        << Render({state}, alerting, end + milliseconds(100), r == 0, r + 1 == rounds.size());
  }
  return out.str();
}

}  // namespace

TEST_CASE("golden: every kind's output for a scripted split brain is what it was, byte for byte",
          "[golden]") {
  const std::map<std::string, ClusterSpec> clusters = DocumentedClusters();
  const bool update = std::getenv("SBD_GOLDEN_UPDATE") != nullptr;
  const std::string dir = SBD_SOURCE_DIR "/tests/testdata/golden/";
  for (const std::string& kind : BuiltInKindNames()) {
    INFO("kind " << kind << " (its cluster from docs/kinds)");
    const auto found = clusters.find(kind);
    REQUIRE(found != clusters.end());
    AlertingSpec alerting;
    const std::string got = Script(found->second, alerting);
    const std::string path = dir + kind + ".txt";
    if (update) {
      std::filesystem::create_directories(dir);
      std::ofstream(path, std::ios::binary) << got;
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    std::stringstream want;
    want << in.rdbuf();
    if (got == want.str()) continue;
    // Name the first line that differs, not the whole files.
    std::istringstream a(want.str()), b(got);
    std::string wa, gb;
    int line = 0;
    while (true) {
      ++line;
      const bool more_a = static_cast<bool>(std::getline(a, wa));
      const bool more_b = static_cast<bool>(std::getline(b, gb));
      if (!more_a && !more_b) break;
      if (wa != gb || more_a != more_b) {
        FAIL(path << ":" << line << " differs\n  was: " << (more_a ? wa : "(end)")
                  << "\n  now: " << (more_b ? gb : "(end)"));
      }
    }
  }
}

}  // namespace sbd
