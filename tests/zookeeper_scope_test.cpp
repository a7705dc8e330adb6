// Patroni on ZooKeeper's pure parts (issue 27): the scope's znodes as the engine's LockRecord, and
// the `zookeeper:` block of a patroni cluster.
#include "probes/zookeeper_scope.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "tests/support/config_errors.h"

namespace {

// What Patroni 3.0's touch_member writes to members/<name> (json.dumps, compact).
const char* kMemberJson =
    R"({"conn_url":"postgres://127.0.0.1:5433/postgres","api_url":"http://127.0.0.1:8009/patroni",)"
    R"("state":"running","role":"master","version":"3.0.2","xlog_location":50331800,"timeline":1})";

sbd::ScopeZnode Znode(const std::string& data, std::int64_t czxid = 0x1a,
                      std::int64_t owner = 0x100000abcdef) {
  sbd::ScopeZnode node;
  node.data = data;
  node.data_length = static_cast<std::int64_t>(data.size());
  node.czxid = czxid;
  node.ephemeral_owner = owner;
  return node;
}

sbd::ConfigResult Parse(const std::string& block) {
  return sbd::ParseConfig("clusters:\n  - name: main\n    kind: patroni\n" + block +
                              "    discover: true\n    discovery:\n"
                              "      dsn: \"user=splitbrain dbname=postgres\"\n"
                              "      password_env: PGPASSWORD\n",
                          "zk.yml");
}

using sbd::testing::ConfigErrorLines;

}  // namespace

TEST_CASE("zookeeper_scope: the leader znode names the holder, its czxid is the token",
          "[zookeeper][patroni]") {
  sbd::LockRecord view;
  REQUIRE_FALSE(sbd::ApplyScopeZnode("leader", Znode("node2", 4294967338), 16384, view));
  CHECK(view.holder == "node2");
  CHECK(view.mod_revision == 4294967338);  // a zxid: epoch 1, counter 42
  CHECK(view.lease_id == "0x100000abcdef");
  CHECK(view.rejected.empty());
  CHECK(view.holder_token.empty());  // Patroni names its leader: no token to resolve
}

TEST_CASE("zookeeper_scope: members, initialize and config fill the view as on etcd",
          "[zookeeper][patroni]") {
  sbd::LockRecord view;
  REQUIRE_FALSE(sbd::ApplyScopeZnode("members/node1", Znode(kMemberJson), 16384, view));
  REQUIRE_FALSE(sbd::ApplyScopeZnode("initialize", Znode("7301234567890123456"), 16384, view));
  REQUIRE_FALSE(sbd::ApplyScopeZnode(
      "config", Znode(R"({"ttl":20,"loop_wait":2,"retry_timeout":4})"), 16384, view));
  REQUIRE_FALSE(
      sbd::ApplyScopeZnode("history", Znode("[[1,25165984,\"no recovery target\"]]"), 16384, view));
  REQUIRE(view.members.size() == 1);
  CHECK(view.members[0].name == "node1");
  CHECK(view.members[0].conn_url == "postgres://127.0.0.1:5433/postgres");
  CHECK(view.members[0].api_url == "http://127.0.0.1:8009/patroni");
  CHECK(view.members[0].role == "master");
  CHECK(view.initialize == "7301234567890123456");
  CHECK(view.config_ttl == std::optional<std::int64_t>(20));
  CHECK(view.holder.empty());  // no leader znode read: nobody holds
  CHECK(view.rejected.empty());
}

TEST_CASE("zookeeper_scope: an oversized leader fails the read, other oversized znodes are refused",
          "[zookeeper][patroni]") {
  sbd::LockRecord view;
  sbd::ScopeZnode big = Znode("");
  big.data_length = 1 << 20;  // the client read 1 MiB, the data was not kept
  const auto failure = sbd::ApplyScopeZnode("leader", big, 16384, view);
  REQUIRE(failure);
  CHECK(failure->reason == sbd::ProbeFailureReason::kProtocol);
  CHECK(failure->message ==
        "leader: data of 1048576 bytes, above max_data_bytes 16384: the leader cannot be told");
  CHECK(view.holder.empty());

  REQUIRE_FALSE(sbd::ApplyScopeZnode("members/node3", big, 16384, view));
  REQUIRE_FALSE(sbd::ApplyScopeZnode("config", Znode(std::string(20000, ' ')), 16384, view));
  CHECK(view.members.empty());
  CHECK_FALSE(view.config_ttl);
  CHECK(view.rejected ==
        std::vector<std::string>{
            "members/node3: data of 1048576 bytes, above max_data_bytes 16384: not read",
            "config: data of 20000 bytes, above max_data_bytes 16384: not read"});
}

TEST_CASE("zookeeper_scope: a persistent or nameless leader znode is said in rejected",
          "[zookeeper][patroni]") {
  sbd::LockRecord persistent;
  REQUIRE_FALSE(sbd::ApplyScopeZnode("leader", Znode("node1", 7, 0), 16384, persistent));
  CHECK(persistent.holder == "node1");
  CHECK(persistent.lease_id == "0");
  CHECK(persistent.rejected ==
        std::vector<std::string>{"leader: not ephemeral: no session of Patroni's owns it"});
  sbd::LockRecord nameless;
  REQUIRE_FALSE(sbd::ApplyScopeZnode("leader", Znode(""), 16384, nameless));
  CHECK(nameless.holder.empty());
  CHECK(nameless.rejected == std::vector<std::string>{"leader: no member name in its data"});
}

TEST_CASE("zookeeper_scope: a hostile member is refused with a reason and the rest stands",
          "[zookeeper][patroni]") {
  sbd::LockRecord view;
  REQUIRE_FALSE(sbd::ApplyScopeZnode("members/evil", Znode("{not json"), 16384, view));
  REQUIRE_FALSE(sbd::ApplyScopeZnode("members/odd", Znode(R"({"conn_url":5})"), 16384, view));
  REQUIRE_FALSE(sbd::ApplyScopeZnode("members/node1", Znode(kMemberJson), 16384, view));
  REQUIRE_FALSE(sbd::ApplyScopeZnode("leader", Znode("bad\xff\x01name"), 16384, view));
  REQUIRE(view.members.size() == 1);
  CHECK(view.members[0].name == "node1");
  REQUIRE(view.rejected.size() == 2);
  CHECK(view.rejected[0].rfind("members/evil: ", 0) == 0);
  CHECK(view.rejected[1].rfind("members/odd: ", 0) == 0);
  CHECK(view.holder != "bad\xff\x01name");  // never a raw byte from the network
  CHECK(view.holder.find('\x01') == std::string::npos);
}

TEST_CASE("zookeeper_scope: the scope's path is the namespace and the scope", "[zookeeper]") {
  sbd::ClusterSpec spec;
  spec.scope = "main";
  CHECK(sbd::PatroniScopePath(spec) == "/service/main");
  spec.dcs_namespace = "";  // namespace "/" trimmed
  CHECK(sbd::PatroniScopePath(spec) == "/main");
}

TEST_CASE("config: a patroni cluster on ZooKeeper reads its ensemble, limits and digest",
          "[config][zookeeper][patroni]") {
  const auto result = Parse(
      "    zookeeper:\n      hosts: [127.0.0.1:2181, 'zk2:2181']\n      session_timeout: 6s\n"
      "      digest:\n        username: detector\n        password_file: /etc/sbd/zk\n");
  INFO(ConfigErrorLines(result).size());
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(result));
  const sbd::ClusterSpec& c = std::get<sbd::ValidatedConfig>(result).clusters().at(0);
  CHECK(c.kind == "patroni");
  CHECK(c.etcd_endpoints.empty());
  REQUIRE(c.patroni_zookeeper);
  CHECK(c.patroni_zookeeper->hosts == std::vector<std::string>{"127.0.0.1:2181", "zk2:2181"});
  CHECK(c.patroni_zookeeper->session_timeout == std::chrono::seconds(6));
  CHECK(c.patroni_zookeeper->max_children == 64);
  CHECK(c.patroni_zookeeper->max_data_bytes == 16384);
  CHECK(c.patroni_zookeeper->username == "detector");
  CHECK(c.patroni_zookeeper->password_file == std::optional<std::string>("/etc/sbd/zk"));
  CHECK(c.ttl_from_dcs);
  const auto etcd = Parse("    etcd:\n      endpoints: [http://127.0.0.1:2379]\n");
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(etcd));
  CHECK_FALSE(std::get<sbd::ValidatedConfig>(etcd).clusters().at(0).patroni_zookeeper);
}

TEST_CASE("config: a patroni zookeeper block reports each mistake at its key",
          "[config][zookeeper][patroni]") {
  CHECK(ConfigErrorLines(Parse("")) ==
        std::vector<std::string>{"zk.yml:2:5: clusters[0].etcd: required (or zookeeper)"});
  CHECK(ConfigErrorLines(Parse("    etcd:\n      endpoints: [http://127.0.0.1:2379]\n"
                               "    zookeeper:\n      hosts: [a:1]\n")) ==
        std::vector<std::string>{"zk.yml:7:7: clusters[0].zookeeper: give either etcd or "
                                 "zookeeper, not both: Patroni uses one DCS"});
  CHECK(ConfigErrorLines(Parse("    zookeeper:\n      session_timeout: 6s\n")) ==
        std::vector<std::string>{"zk.yml:5:7: clusters[0].zookeeper.hosts: required"});
  CHECK(ConfigErrorLines(
            Parse("    zookeeper:\n      hosts: [nohost, 'a:1,b:2']\n      max_data_bytes: 0\n"
                  "      path: /x\n")) ==
        std::vector<std::string>{
            "zk.yml:5:15: clusters[0].zookeeper.hosts[0]: expected host:port",
            "zk.yml:5:23: clusters[0].zookeeper.hosts[1]: expected host:port",
            "zk.yml:6:23: clusters[0].zookeeper.max_data_bytes: expected a whole number from 1 "
            "to 65536",
            "zk.yml:7:7: clusters[0].zookeeper.path: unknown key"});
  CHECK(ConfigErrorLines(
            Parse("    zookeeper:\n      hosts: [a:1]\n      digest:\n        username: u\n")) ==
        std::vector<std::string>{
            "zk.yml:7:9: clusters[0].zookeeper.digest: expected password_file or password_env"});
  CHECK(ConfigErrorLines(Parse("    zookeeper: [a:1]\n")) ==
        std::vector<std::string>{"zk.yml:4:16: clusters[0].zookeeper: expected a mapping"});
}
