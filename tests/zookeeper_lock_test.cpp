// The zookeeper_lock kind's pure parts (issue 27): the recipes' child names, the order the
// candidates hold in, the holder's node as the engine's LockRecord, and the config block.
#include "probes/zookeeper_lock.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "tests/support/config_errors.h"

namespace {

using Kind = sbd::ChildName::Kind;

const char* kCuratorLock = "_c_2d0b8b2e-6c0e-4a8f-9b1d-3f4e5a6b7c8d-lock-0000000007";
const char* kKazooLock = "8e34e2661af24cc599307e66c83ed4b4__lock__0000000003";

sbd::ConfigResult Parse(const std::string& block) {
  return sbd::ParseConfig(
      "clusters:\n  - name: orders\n    kind: zookeeper_lock\n" + block +
          "    members:\n      - name: a\n        metrics_url: http://127.0.0.1:9101/metrics\n",
      "zk.yml");
}

using sbd::testing::ConfigErrorLines;

}  // namespace

TEST_CASE("zookeeper_lock: Curator's and kazoo's children are candidates with their sequence",
          "[zookeeper]") {
  const sbd::ChildName curator = sbd::ParseLockChildName(kCuratorLock);
  REQUIRE(curator.kind == Kind::kCandidate);
  CHECK(curator.child.recipe == sbd::LockRecipe::kCurator);
  CHECK(curator.child.sequence == 7);
  const sbd::ChildName latch =
      sbd::ParseLockChildName("_c_2d0b8b2e-6c0e-4a8f-9b1d-3f4e5a6b7c8d-latch-2147483647");
  REQUIRE(latch.kind == Kind::kCandidate);
  CHECK(latch.child.sequence == 2147483647);
  const sbd::ChildName unprotected = sbd::ParseLockChildName("lock-0000000012");
  REQUIRE(unprotected.kind == Kind::kCandidate);
  CHECK(unprotected.child.sequence == 12);
  const sbd::ChildName kazoo = sbd::ParseLockChildName(kKazooLock);
  REQUIRE(kazoo.kind == Kind::kCandidate);
  CHECK(kazoo.child.recipe == sbd::LockRecipe::kKazoo);
  CHECK(kazoo.child.sequence == 3);
  CHECK(kazoo.child.name == kKazooLock);
}

TEST_CASE("zookeeper_lock: children of no recipe's form are foreign and ignored", "[zookeeper]") {
  for (const char* name :
       {"config", "leader", "_c_not-a-uuid-lock-0000000001", "locked", "lockless-0000000001x"}) {
    INFO(name);
    CHECK(sbd::ParseLockChildName(name).kind == Kind::kForeign);
  }
}

TEST_CASE("zookeeper_lock: hostile names and sizes are refused with a reason", "[zookeeper]") {
  const sbd::ChildName long_name = sbd::ParseLockChildName(std::string(300, 'a') + "__lock__1");
  CHECK(long_name.kind == Kind::kRefused);
  CHECK_THAT(long_name.reason, Catch::Contains("bytes, above 256"));
  const sbd::ChildName not_utf8 = sbd::ParseLockChildName("ab\xff\xfe__lock__0000000001");
  CHECK(not_utf8.kind == Kind::kRefused);
  CHECK_THAT(not_utf8.reason, Catch::Contains("not UTF-8"));
  const sbd::ChildName control = sbd::ParseLockChildName("ab\n__lock__0000000001");
  CHECK(control.kind == Kind::kRefused);
  CHECK_THAT(control.reason, Catch::Contains("control character"));
  const sbd::ChildName overflowed = sbd::ParseLockChildName("lock--2147483648");
  CHECK(overflowed.kind == Kind::kRefused);
  CHECK_THAT(overflowed.reason, Catch::Contains("overflowed"));
  const sbd::ChildName short_sequence = sbd::ParseLockChildName("abc__lock__12");
  CHECK(short_sequence.kind == Kind::kRefused);
  CHECK_THAT(short_sequence.reason, Catch::Contains("10-digit sequence"));
  const sbd::ChildName too_big = sbd::ParseLockChildName("abc__lock__9999999999");
  CHECK(too_big.kind == Kind::kRefused);
  const sbd::ChildName read_lock = sbd::ParseLockChildName("abc__rlock__0000000001");
  CHECK(read_lock.kind == Kind::kRefused);
  CHECK_THAT(read_lock.reason, Catch::Contains("read lock"));
}

TEST_CASE("zookeeper_lock: the lowest sequence holds, whatever the recipe and the order",
          "[zookeeper]") {
  sbd::LockRecord view;
  const std::vector<sbd::LockChild> order = sbd::OrderCandidates(
      {"aa__lock__0000000009", kCuratorLock, "config", kKazooLock, "bad\xff__lock__0000000001"},
      view);
  REQUIRE(order.size() == 3);
  CHECK(order[0].name == kKazooLock);
  CHECK(order[1].name == kCuratorLock);
  CHECK(order[2].name == "aa__lock__0000000009");
  CHECK(view.waiting == std::vector<std::string>{std::string(kCuratorLock) + " (sequence 7)",
                                                 "aa__lock__0000000009 (sequence 9)"});
  REQUIRE(view.rejected.size() == 2);
  CHECK_THAT(view.rejected[0], Catch::Contains("not UTF-8"));
  CHECK_THAT(view.rejected[1], Catch::Contains("1 children of no lock recipe's form"));
}

TEST_CASE("zookeeper_lock: many refused children are listed up to a cap", "[zookeeper]") {
  std::vector<std::string> names(1000, std::string(400, 'x'));
  sbd::LockRecord view;
  CHECK(sbd::OrderCandidates(names, view).empty());
  CHECK(view.rejected.size() <= 16);
}

TEST_CASE("zookeeper_lock: the holder's czxid is the token, its data names the member",
          "[zookeeper]") {
  sbd::MemberSpec a, b;
  a.name = "a";
  a.lease_identity = "worker-a";
  b.name = "b";
  b.lease_identity = "worker-b";
  sbd::LockHolderNode node;
  node.czxid = 4294967298;  // epoch 1, counter 2: above 32 bits, as zxids are
  node.ephemeral_owner = 0x100000abcdef;
  node.data = "worker-b";
  node.data_length = 8;
  sbd::LockRecord view;
  sbd::FillHolder(sbd::LockChild{kKazooLock, sbd::LockRecipe::kKazoo, 3}, node, 1024, {a, b}, view);
  CHECK(view.holder_token == "4294967298");
  CHECK(view.mod_revision == 4294967298);
  CHECK(view.lease_id == "0x100000abcdef");
  CHECK(view.holder == "b");
  CHECK(view.rejected.empty());
}

TEST_CASE("zookeeper_lock: a persistent or oversized holder node is said in rejected",
          "[zookeeper]") {
  sbd::MemberSpec a;
  a.name = "a";
  a.lease_identity = "worker-a";
  sbd::LockHolderNode node;
  node.czxid = 5;
  node.data = "";
  node.data_length = 1 << 20;
  sbd::LockRecord view;
  sbd::FillHolder(sbd::LockChild{kKazooLock, sbd::LockRecipe::kKazoo, 3}, node, 1024, {a}, view);
  CHECK(view.holder_token == "5");
  CHECK(view.lease_id == "0");
  CHECK(view.holder.empty());
  REQUIRE(view.rejected.size() == 2);
  CHECK_THAT(view.rejected[0], Catch::Contains("not ephemeral"));
  CHECK_THAT(view.rejected[1], Catch::Contains("1048576 bytes, above 1024"));
}

TEST_CASE("config: a zookeeper_lock cluster reads its ensemble, path, limits, digest and claim",
          "[config][zookeeper]") {
  const auto result = Parse(
      "    zookeeper_lock:\n      hosts: [127.0.0.1:2181, 'zk2:2181']\n      path: /locks/orders\n"
      "      session_timeout: 6s\n      max_children: 500\n      digest:\n"
      "        username: detector\n        password_env: ZK_PASSWORD\n"
      "      claim:\n        token_label: token\n");
  INFO(ConfigErrorLines(result).size());
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(result));
  const sbd::ClusterSpec& c = std::get<sbd::ValidatedConfig>(result).clusters().at(0);
  CHECK(c.kind == "zookeeper_lock");
  CHECK(c.zookeeper_lock.hosts == std::vector<std::string>{"127.0.0.1:2181", "zk2:2181"});
  CHECK(c.zookeeper_lock.path == "/locks/orders");
  CHECK(c.zookeeper_lock.session_timeout == std::chrono::seconds(6));
  CHECK(c.zookeeper_lock.max_children == 500);
  CHECK(c.zookeeper_lock.max_data_bytes == 1024);
  CHECK(c.zookeeper_lock.username == "detector");
  CHECK(c.zookeeper_lock.password_env == std::optional<std::string>("ZK_PASSWORD"));
  CHECK(c.zookeeper_lock.lock == "orders");
  CHECK(c.zookeeper_lock.token_label == "token");
  CHECK_FALSE(c.zookeeper_lock.resource_witness.has_value());
}

TEST_CASE(
    "config: a zookeeper_lock cluster reads its resource witness, the claims' lock by default",
    "[config][zookeeper][fencing]") {
  const auto result = Parse(
      "    zookeeper_lock:\n      hosts: [127.0.0.1:2181]\n      path: /locks/orders\n"
      "      claim:\n        lock: orders-db\n      resource_witness:\n"
      "        url: http://127.0.0.1:9200/metrics\n        lock_label: lock\n");
  INFO(ConfigErrorLines(result).size());
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(result));
  const sbd::ClusterSpec& c = std::get<sbd::ValidatedConfig>(result).clusters().at(0);
  REQUIRE(c.zookeeper_lock.resource_witness.has_value());
  CHECK(c.zookeeper_lock.resource_witness->url == "http://127.0.0.1:9200/metrics");
  CHECK(c.zookeeper_lock.resource_witness->metric == "fencing_token_highest_accepted");
  CHECK(c.zookeeper_lock.resource_witness->lock_label == "lock");
  CHECK(c.zookeeper_lock.resource_witness->lock == "orders-db");
  CHECK(ConfigErrorLines(Parse(
            "    zookeeper_lock:\n      hosts: [127.0.0.1:2181]\n      path: /locks/orders\n"
            "      resource_witness:\n        metric: 'no good'\n        token_label: t\n")) ==
        std::vector<std::string>{
            "zk.yml:8:9: clusters[0].zookeeper_lock.resource_witness.url: required",
            "zk.yml:8:17: clusters[0].zookeeper_lock.resource_witness.metric: expected a metric "
            "name ([a-zA-Z_:][a-zA-Z0-9_:]*)",
            "zk.yml:9:9: clusters[0].zookeeper_lock.resource_witness.token_label: unknown key"});
}

TEST_CASE("config: TLS to ZooKeeper is refused with the reason, in both ZooKeeper blocks",
          "[config][zookeeper]") {
  const std::string why =
      ".tls: not supported: Debian 12's ZooKeeper C client is built without TLS; reach the "
      "ensemble over a trusted network or a local TLS tunnel";
  CHECK(ConfigErrorLines(Parse("    zookeeper_lock:\n      hosts: [127.0.0.1:2181]\n"
                               "      path: /locks/orders\n      tls: {ca_file: /etc/ca.pem}\n")) ==
        std::vector<std::string>{"zk.yml:7:12: clusters[0].zookeeper_lock" + why});
  const auto patroni = sbd::ParseConfig(
      "clusters:\n  - name: main\n    kind: patroni\n    scope: main\n    zookeeper:\n"
      "      hosts: [127.0.0.1:2181]\n      tls: true\n    discover: true\n",
      "zk.yml");
  CHECK(ConfigErrorLines(patroni) ==
        std::vector<std::string>{"zk.yml:7:12: clusters[0].zookeeper" + why});
}

TEST_CASE("config: a zookeeper_lock block reports each mistake at its key", "[config][zookeeper]") {
  CHECK(ConfigErrorLines(Parse("")) ==
        std::vector<std::string>{"zk.yml:2:5: clusters[0].zookeeper_lock: required"});
  CHECK(ConfigErrorLines(Parse("    zookeeper_lock:\n      hosts: [127.0.0.1:2181]\n")) ==
        std::vector<std::string>{"zk.yml:5:7: clusters[0].zookeeper_lock.path: required"});
  CHECK(
      ConfigErrorLines(Parse("    zookeeper_lock:\n      hosts: [nohost]\n      path: locks/\n")) ==
      std::vector<std::string>{
          "zk.yml:5:15: clusters[0].zookeeper_lock.hosts[0]: expected host:port",
          "zk.yml:6:13: clusters[0].zookeeper_lock.path: expected an absolute znode path "
          "(\"/locks/orders\"), no trailing '/'"});
  CHECK(ConfigErrorLines(Parse("    zookeeper_lock:\n      hosts: [a:1]\n      path: /l/../m\n"
                               "      digest:\n        username: 'u:x'\n")) ==
        std::vector<std::string>{
            "zk.yml:6:13: clusters[0].zookeeper_lock.path: expected an absolute znode path "
            "(\"/locks/orders\"), no trailing '/'",
            "zk.yml:8:9: clusters[0].zookeeper_lock.digest: expected password_file or "
            "password_env",
            "zk.yml:8:19: clusters[0].zookeeper_lock.digest.username: expected a non-empty name "
            "without ':'"});
}
