// Sharding against the real binary and real PostgreSQL 15: two detectors with one config,
// --shard=0/2 and --shard=1/2, split the clusters between them, at start and on reload.
#include <signal.h>

#include <catch2/catch.hpp>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "detector/output/shard.h"
#include "tests/support/detector_process.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using sbd::testing::DetectorProcess;
using sbd::testing::HasLine;
using sbd::testing::HttpGet;
using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::RunCommand;
using sbd::testing::WaitFor;
using sbd::testing::WriteFile;
using std::chrono::seconds;

using Clusters = std::vector<std::pair<std::string, std::vector<const PgInstance*>>>;

std::string ShardConfigYaml(const PgSandbox& sandbox, const Clusters& clusters) {
  // A declaration for inventory, a cluster of shard 1 (and, before the reload, of neither):
  // never an error on either shard.
  char expires[32];
  const std::time_t in_an_hour = std::time(nullptr) + 3600;
  std::tm tm{};
  std::strftime(expires, sizeof(expires), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&in_an_hour, &tm));
  std::ostringstream out;
  out << "suppressions:\n  declarations:\n    - kind: provisioning\n      cluster: inventory\n"
      << "      reason: \"building inventory\"\n      author: test\n      expires: " << expires
      << "\nclusters:\n";
  for (const auto& [name, members] : clusters) {
    // Reads get 2 s: this case is about which shard holds a cluster, not about timing, and
    // under AddressSanitizer on a loaded 2-core machine a loopback connect has taken over
    // 400 ms (CI: the check command read payments "unknown (timeout)").
    out << "  - name: " << name
        << "\n    ttl: 6s\n    probe_interval: 2s\n    probe_timeout: 2s\n    members:\n";
    for (const PgInstance* m : members) {
      out << "      - name: " << m->name() << "\n        dsn: \"" << m->MonitorDsn()
          << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
    }
  }
  return out.str();
}

// One detector process of the pair, on its own port.
struct ShardProcess {
  int port = 0;
  std::unique_ptr<DetectorProcess> process;
};

ShardProcess StartShard(const std::string& config, const std::string& shard,
                        const std::string& log) {
  ShardProcess started;
  started.port = sbd::testing::FreeLoopbackPort();
  started.process = std::make_unique<DetectorProcess>(
      SBD_BINARY,
      std::vector<std::string>{"--config.file=" + config, "--shard=" + shard,
                               "--web.listen-address=127.0.0.1:" + std::to_string(started.port)},
      log);
  return started;
}

// The clusters a detector's /status lists, with its shard block; empty when unreadable.
std::set<std::string> StatusClusters(int port, nlohmann::json* shard = nullptr) {
  const auto status = nlohmann::json::parse(HttpGet(port, "/status"), nullptr, false);
  std::set<std::string> names;
  if (!status.is_object() || !status.contains("clusters")) return names;
  for (const auto& c : status["clusters"]) names.insert(c["name"].get<std::string>());
  if (shard != nullptr) *shard = status["shard"];
  return names;
}

// The configured names `index` of 2 holds by the algorithm's own definition.
std::set<std::string> Expected(const std::vector<std::string>& names, std::uint64_t index) {
  std::set<std::string> held;
  for (const auto& n : names) {
    if (ShardIndexOf(n, 2) == index) held.insert(n);
  }
  return held;
}

std::string VerdictLine(const std::string& cluster, const std::string& verdict) {
  return "splitbrain_cluster_verdict{cluster=\"" + cluster + "\",verdict=\"" + verdict + "\"} 1";
}

}  // namespace

TEST_CASE("shard: an invalid --shard stops the detector at start, naming the flag",
          "[shard][integration]") {
  for (const std::string bad : {"3/2", "-1/2", "0/0", "a/b", "1", "0/2junk", "0/99999999999999"}) {
    // Flags are read before the config, so none is needed to refuse them.
    auto result = RunCommand({SBD_BINARY, "--shard=" + bad, "--config.file=/nonexistent.yml"},
                             false, seconds(30));
    INFO("--shard=" << bad << ":\n" << result.output);
    CHECK(result.exit_code == 1);
    CHECK(result.output.find("splitbrain-detector: --shard") != std::string::npos);
  }
  auto separate = RunCommand({SBD_BINARY, "--shard", "2/2"}, false, seconds(30));
  CHECK(separate.exit_code == 1);
  CHECK(separate.output.find("--shard") != std::string::npos);
}

TEST_CASE("shard: two shards cover every cluster once and each pages its own split brain",
          "[shard][postgres]") {
  // By the hash, orders and inventory go to shard 1 of 2, payments to shard 0.
  REQUIRE(ShardIndexOf("orders", 2) == 1);
  REQUIRE(ShardIndexOf("payments", 2) == 0);
  REQUIRE(ShardIndexOf("inventory", 2) == 1);
  PgSandbox sandbox;
  PgInstance& orders_a = sandbox.StartPrimary("orders-a");
  PgInstance& orders_b = sandbox.StartReplica("orders-b", orders_a);
  PgInstance& payments_a = sandbox.StartPrimary("payments-a");
  PgInstance& payments_b = sandbox.StartReplica("payments-b", payments_a);
  PgInstance& inventory_a = sandbox.StartPrimary("inventory-a");
  const Clusters two = {{"orders", {&orders_a, &orders_b}},
                        {"payments", {&payments_a, &payments_b}}};
  const std::string config =
      WriteFile(sandbox.root(), "detector.yml", ShardConfigYaml(sandbox, two));
  ShardProcess shards[2] = {StartShard(config, "0/2", sandbox.root() + "/shard0.log"),
                            StartShard(config, "1/2", sandbox.root() + "/shard1.log")};
  for (auto& s : shards) {
    REQUIRE(WaitFor([&] { return HttpGet(s.port, "/-/ready") == "Ready\n"; }, seconds(20)));
  }

  auto status_errors = [](int port) {
    const auto status = nlohmann::json::parse(HttpGet(port, "/status"), nullptr, false);
    return !status.is_object() || status["declarations"].size() != 1 ||
           !status["declaration_errors"].empty();
  };
  // Together the shards hold every configured cluster exactly once, as the hash says.
  auto covered_once = [&](const std::vector<std::string>& names) {
    std::multiset<std::string> together;
    for (std::uint64_t index = 0; index < 2; ++index) {
      nlohmann::json shard;
      const auto held = StatusClusters(shards[index].port, &shard);
      if (status_errors(shards[index].port) || held != Expected(names, index) ||
          shard["index"] != index || shard["total"] != 2 || shard["clusters"] != held.size() ||
          shard["configured_clusters"] != names.size()) {
        return false;
      }
      together.insert(held.begin(), held.end());
    }
    return together == std::multiset<std::string>(names.begin(), names.end());
  };
  CHECK(covered_once({"orders", "payments"}));
  const std::string text = HttpGet(shards[1].port, "/status?format=text");
  INFO(text);
  CHECK(text.rfind("Shard 1/2: 1 of 2 configured clusters", 0) == 0);
  CHECK(HasLine(HttpGet(shards[0].port, "/metrics"),
                "splitbrain_shard_info{index=\"0\",total=\"2\"} 1"));

  // A reload (SIGHUP, as a file_sd change does) filters the new config the same way.
  Clusters three = two;
  three.push_back({"inventory", {&inventory_a}});
  WriteFile(sandbox.root(), "detector.yml", ShardConfigYaml(sandbox, three));
  for (auto& s : shards) s.process->Signal(SIGHUP);
  CHECK(WaitFor([&] { return covered_once({"orders", "payments", "inventory"}); }, seconds(20)));

  // The check command probes only its shard's clusters too.
  auto check = RunCommand({SBD_BINARY, "check", "--config.file=" + config, "--shard=0/2"}, false,
                          seconds(60));
  INFO(check.output);
  CHECK(check.exit_code == 0);
  CHECK(check.output.rfind("Shard 0/2: 1 of 3 configured clusters", 0) == 0);
  CHECK(check.output.find("Cluster: payments") != std::string::npos);
  CHECK(check.output.find("Cluster: orders") == std::string::npos);

  // A promoted replica while the old primary stays up, in one cluster of each shard: the
  // shard that holds it says split brain; the other never shows that cluster.
  orders_b.Promote();
  payments_b.Promote();
  auto pages = [&](int port, const std::string& cluster) {
    return HasLine(HttpGet(port, "/metrics"), VerdictLine(cluster, "split_brain"));
  };
  CHECK(WaitFor([&] { return pages(shards[1].port, "orders"); }, seconds(20)));
  CHECK(WaitFor([&] { return pages(shards[0].port, "payments"); }, seconds(20)));
  const std::string metrics0 = HttpGet(shards[0].port, "/metrics");
  const std::string metrics1 = HttpGet(shards[1].port, "/metrics");
  CHECK(metrics0.find("cluster=\"orders\"") == std::string::npos);
  CHECK(metrics1.find("cluster=\"payments\"") == std::string::npos);
  CHECK(HasLine(metrics1, VerdictLine("inventory", "healthy")));
  CHECK(HasLine(metrics1, "splitbrain_shard_clusters 2"));
  CHECK(HasLine(metrics1, "splitbrain_config_clusters 3"));
}

}  // namespace sbd
