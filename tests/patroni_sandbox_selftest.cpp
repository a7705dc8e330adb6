// Self-test of the Patroni test harness (tests/support/patroni_sandbox.h): a real etcd, a real
// 3-member Patroni cluster, a switchover, and the split brain a frozen Patroni leader causes.
//
// Set SBD_PATRONI_PAYLOAD_DIR=<dir> to save the raw REST and etcd payloads seen on the way (the
// fixtures in tests/testdata/patroni/ were captured that way).
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "probes/http_json.h"
#include "tests/support/patroni_sandbox.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace {

using json = nlohmann::json;
using sbd::Base64Decode;
using sbd::Base64Encode;
using sbd::testing::EtcdServer;
using sbd::testing::PatroniCluster;
using sbd::testing::ScopedTempDir;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// Raw POST to etcd's v3 JSON gateway, the way the detector will talk to it.
std::string EtcdPost(const EtcdServer& etcd, const std::string& api, const json& body) {
  httplib::Client cli("127.0.0.1", etcd.client_port());
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(5, 0);
  auto res = cli.Post(("/v3/" + api).c_str(), body.dump(), "application/json");
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 200);
  return res->body;
}

std::string PrefixEnd(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// First line of the member's postmaster.pid (we may read it: root, or the postgres user).
pid_t PostmasterPid(const sbd::testing::PatroniMember& m) {
  std::ifstream in(m.data_dir + "/postmaster.pid");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

void SavePayload(const std::string& file, const std::string& body) {
  const char* dir = std::getenv("SBD_PATRONI_PAYLOAD_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::ofstream out(std::string(dir) + "/" + file, std::ios::binary | std::ios::trunc);
  out << body;
  if (!body.empty() && body.back() != '\n') out << '\n';
}

}  // namespace

TEST_CASE("EtcdServer: ready, v3 gateway, stop and restart keep the data", "[patroni-sandbox]") {
  ScopedTempDir root("sbd-patroni-");
  EtcdServer etcd(root.path() + "/etcd");
  CHECK(etcd.endpoint() == "http://127.0.0.1:" + std::to_string(etcd.client_port()));
  CHECK(etcd.client_port() != 2379);
  const pid_t first_pid = etcd.pid();
  REQUIRE(first_pid > 0);

  EtcdPost(etcd, "kv/put", {{"key", Base64Encode("/sbd/test")}, {"value", Base64Encode("hello")}});
  json range = json::parse(EtcdPost(etcd, "kv/range", {{"key", Base64Encode("/sbd/test")}}));
  REQUIRE(range["kvs"].size() == 1);
  CHECK(Base64Decode(range["kvs"][0]["value"].get<std::string>()).value_or("") == "hello");
  CHECK(etcd.Get("/sbd/test") == "hello");
  CHECK(etcd.Get("/sbd/missing").empty());

  etcd.Stop();
  CHECK(etcd.pid() == -1);
  CHECK(sbd::testing::ProcessState(first_pid) == '\0');
  etcd.Stop();  // idempotent
  etcd.Start();
  CHECK(etcd.pid() > 0);
  CHECK(etcd.Get("/sbd/test") == "hello");

  // A frozen etcd is still cleaned up by the destructor.
  const pid_t pid = etcd.pid();
  ::kill(pid, SIGSTOP);
  etcd.Stop();
  CHECK(sbd::testing::ProcessState(pid) == '\0');
}

TEST_CASE("PatroniCluster: bootstrap, switchover, frozen Patroni leader gives two primaries",
          "[patroni-sandbox]") {
  ScopedTempDir root("sbd-patroni-");
  EtcdServer etcd(root.path() + "/etcd");
  const std::string scope = "sbd-selftest";
  const int ttl = 10;
  std::vector<pid_t> started;  // every patroni and postmaster seen, all must be gone at the end
  Clock::time_point t_down;

  {
    auto t0 = Clock::now();
    PatroniCluster cluster(root.path() + "/cluster", scope, etcd, 3, ttl, 1, 3);
    cluster.WaitHealthy();
    const double bring_up = SecondsSince(t0);
    std::printf("[patroni-sandbox] bring-up (3 members, healthy, monitoring role): %.1f s\n",
                bring_up);

    REQUIRE(cluster.members().size() == 3);
    CHECK(cluster.scope() == scope);
    for (const auto& m : cluster.members()) {
      CHECK(m.patroni_pid > 0);
      CHECK(m.pg_port != 5432);
      CHECK(m.RestUrl() == "http://127.0.0.1:" + std::to_string(m.rest_port));
      CHECK(m.MonitorDsn() == "host=127.0.0.1 port=" + std::to_string(m.pg_port) +
                                  " user=splitbrain dbname=postgres");
      started.push_back(m.patroni_pid);
      started.push_back(PostmasterPid(m));
    }

    // Password file: 0600, owned by us, password and newline.
    struct stat st {};
    REQUIRE(stat(cluster.PasswordFile().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == geteuid());
    std::ifstream pw(cluster.PasswordFile());
    std::string content((std::istreambuf_iterator<char>(pw)), std::istreambuf_iterator<char>());
    CHECK(content == std::string(PatroniCluster::kMonitorPassword) + "\n");
    CHECK(std::string(PatroniCluster::kMonitorPassword) ==
          sbd::testing::PgSandbox::kMonitorPassword);

    // Exactly one writable member, and it is the leader everywhere.
    const std::string leader = cluster.Leader();
    CHECK(leader == "node1");
    CHECK(cluster.WritableMembers() == std::vector<std::string>{leader});
    const std::string sysid =
        cluster.Query(leader, "SELECT system_identifier FROM pg_control_system()");
    for (const auto& m : cluster.members()) {
      CHECK(cluster.Query(m.name, "SELECT system_identifier FROM pg_control_system()") == sysid);
      // The monitoring role replicated and works with its password over TCP.
      auto mon = sbd::testing::RunCommand(
          {sbd::testing::PgBin("psql"), "-X", "-A", "-t", "-q", "-d",
           m.MonitorDsn() + " password=" + PatroniCluster::kMonitorPassword, "-c",
           "SELECT pg_is_in_recovery() FROM pg_control_checkpoint()"},
          true, seconds(20));
      CHECK(mon.exit_code == 0);
      CHECK(mon.output == (m.name == leader ? "f\n" : "t\n"));
    }

    // etcd: the leader key holds the leader's name, attached to a lease with the ttl.
    const std::string prefix = "/service/" + scope + "/";
    const std::string range_leader =
        EtcdPost(etcd, "kv/range", {{"key", Base64Encode(prefix + "leader")}});
    json leader_kv = json::parse(range_leader);
    REQUIRE(leader_kv["kvs"].size() == 1);
    CHECK(Base64Decode(leader_kv["kvs"][0]["value"].get<std::string>()).value_or("") == leader);
    const std::string lease = leader_kv["kvs"][0]["lease"].get<std::string>();
    const std::string timetolive =
        EtcdPost(etcd, "lease/timetolive", {{"ID", lease}, {"keys", true}});
    json ttl_json = json::parse(timetolive);
    CHECK(ttl_json["grantedTTL"].get<std::string>() == std::to_string(ttl));
    const std::string range_members =
        EtcdPost(etcd, "kv/range",
                 {{"key", Base64Encode(prefix + "members/")},
                  {"range_end", Base64Encode(PrefixEnd(prefix + "members/"))}});
    CHECK(json::parse(range_members)["kvs"].size() == 3);
    const std::string range_all =
        EtcdPost(etcd, "kv/range",
                 {{"key", Base64Encode(prefix)}, {"range_end", Base64Encode(PrefixEnd(prefix))}});
    json all = json::parse(range_all);
    std::printf("[patroni-sandbox] etcd keys under %s:\n", prefix.c_str());
    for (const auto& kv : all["kvs"]) {
      std::printf("  %s = %s\n", Base64Decode(kv["key"].get<std::string>()).value_or("").c_str(),
                  Base64Decode(kv["value"].get<std::string>()).value_or("").c_str());
    }
    CHECK(etcd.Get(prefix + "initialize") == sysid);

    const std::string replica = leader == "node1" ? "node2" : "node1";
    const std::string patroni_leader = cluster.RestGet(leader, "patroni");
    const std::string patroni_replica = cluster.RestGet(replica, "patroni");
    const std::string cluster_json = cluster.RestGet(replica, "cluster");
    CHECK(json::parse(patroni_leader)["state"] == "running");
    CHECK(json::parse(patroni_replica)["state"] == "running");
    SavePayload("patroni-leader.json", patroni_leader);
    SavePayload("patroni-replica.json", patroni_replica);
    SavePayload("cluster.json", cluster_json);
    SavePayload("etcd-range-leader.json", range_leader);
    SavePayload("etcd-lease-timetolive.json", timetolive);
    SavePayload("etcd-range-members.json", range_members);
    SavePayload("etcd-range-all.json", range_all);
    SavePayload("cluster-leader-view.json", cluster.RestGet(leader, "cluster"));

    // Switchover: another member leads, still exactly one writable.
    auto t_switch = Clock::now();
    const std::string new_leader = cluster.Switchover();
    std::printf("[patroni-sandbox] switchover %s -> %s, healthy again: %.1f s\n", leader.c_str(),
                new_leader.c_str(), SecondsSince(t_switch));
    CHECK(new_leader != leader);
    CHECK(cluster.Leader() == new_leader);
    CHECK(etcd.Get(prefix + "leader") == new_leader);
    CHECK(cluster.WritableMembers() == std::vector<std::string>{new_leader});
    SavePayload("etcd-range-history.json",
                EtcdPost(etcd, "kv/range", {{"key", Base64Encode(prefix + "history")}}));
    const std::string back = cluster.Switchover(leader);  // to a named candidate
    CHECK(back == leader);

    // Freeze the leader's Patroni: its PostgreSQL keeps serving as a primary, the leader key
    // expires, and another member is promoted: a real double primary.
    const std::string frozen = cluster.Leader();
    const std::string frozen_lease = json::parse(
        EtcdPost(etcd, "kv/range", {{"key", Base64Encode(prefix + "leader")}}))["kvs"][0]["lease"];
    auto t_freeze = Clock::now();
    cluster.FreezePatroni(frozen);
    CHECK(cluster.member(frozen).frozen);
    CHECK(sbd::testing::ProcessState(cluster.member(frozen).patroni_pid) == 'T');
    CHECK(cluster.Query(frozen, "SELECT 1") == "1");
    std::vector<std::string> writable;
    bool double_primary = sbd::testing::WaitFor(
        [&] {
          writable = cluster.WritableMembers();
          return writable.size() == 2;
        },
        seconds(ttl + 20), milliseconds(100));
    const double to_second_writable = SecondsSince(t_freeze);
    std::printf("[patroni-sandbox] freeze of %s's patroni -> second writable member: %.1f s\n",
                frozen.c_str(), to_second_writable);
    REQUIRE(double_primary);
    CHECK(to_second_writable <= ttl + 10);
    CHECK(std::find(writable.begin(), writable.end(), frozen) != writable.end());
    CHECK(cluster.Query(frozen, "SELECT 1") == "1");
    const std::string promoted = writable[0] == frozen ? writable[1] : writable[0];
    CHECK(cluster.Leader() == promoted);  // as the other members see it
    SavePayload("patroni-promoted-during-freeze.json", cluster.RestGet(promoted, "patroni"));
    SavePayload("cluster-during-freeze.json", cluster.RestGet(promoted, "cluster"));
    // etcd: the leader key now holds the promoted member under a new lease; the frozen leader's
    // lease has expired (TTL -1) and took its leader and member keys with it.
    const std::string range_leader_freeze =
        EtcdPost(etcd, "kv/range", {{"key", Base64Encode(prefix + "leader")}});
    json leader_freeze = json::parse(range_leader_freeze);
    REQUIRE(leader_freeze["kvs"].size() == 1);
    CHECK(Base64Decode(leader_freeze["kvs"][0]["value"].get<std::string>()).value_or("") ==
          promoted);
    CHECK(leader_freeze["kvs"][0]["lease"].get<std::string>() != frozen_lease);
    const std::string expired =
        EtcdPost(etcd, "lease/timetolive", {{"ID", frozen_lease}, {"keys", true}});
    CHECK(json::parse(expired)["TTL"] == "-1");
    const std::string range_members_freeze =
        EtcdPost(etcd, "kv/range",
                 {{"key", Base64Encode(prefix + "members/")},
                  {"range_end", Base64Encode(PrefixEnd(prefix + "members/"))}});
    CHECK(json::parse(range_members_freeze)["kvs"].size() == 2);
    SavePayload("etcd-range-leader-during-freeze.json", range_leader_freeze);
    SavePayload("etcd-lease-timetolive-expired.json", expired);
    SavePayload("etcd-range-members-during-freeze.json", range_members_freeze);
    // A frozen Patroni's REST API accepts the TCP connection (kernel backlog) but never answers.
    auto t_rest = Clock::now();
    CHECK_THROWS(cluster.RestGet(frozen, "patroni"));
    CHECK(SecondsSince(t_rest) < 10);
    // Both really accept writes.
    cluster.Query(frozen, "CREATE TABLE IF NOT EXISTS sb_old (x int)");
    cluster.Query(promoted, "CREATE TABLE IF NOT EXISTS sb_new (x int)");

    // Thaw: the old leader's Patroni finds its lease expired. Normally it sees the new leader key
    // and demotes its PostgreSQL. But Patroni 3.0.2's etcd3 update_leader() writes the leader key
    // unconditionally with a fresh lease when its cached view (not yet refreshed by the watch
    // right after SIGCONT) still shows itself as the leader; then it takes the key back and the
    // member promoted meanwhile demotes itself instead (fixed in Patroni 3.0.3, patroni#2689).
    // Either way exactly one writable member remains, within seconds.
    auto t_thaw = Clock::now();
    cluster.ThawPatroni(frozen);
    CHECK_FALSE(cluster.member(frozen).frozen);
    bool single = sbd::testing::WaitFor(
        [&] {
          writable = cluster.WritableMembers();
          return writable.size() == 1;
        },
        seconds(45), milliseconds(100));
    const double to_single = SecondsSince(t_thaw);
    REQUIRE(single);
    const std::string survivor = writable[0];
    const std::string demoted = survivor == frozen ? promoted : frozen;
    std::printf("[patroni-sandbox] thaw of %s's patroni -> single writable member: %.1f s (%s)\n",
                frozen.c_str(), to_single,
                survivor == frozen
                    ? ("old leader took the key back, " + promoted + " demoted").c_str()
                    : ("old leader " + frozen + " demoted").c_str());
    CHECK(to_single <= 30);
    CHECK((survivor == frozen || survivor == promoted));
    auto t_heal = Clock::now();
    const std::vector<std::string> reinitialized = cluster.Heal();
    std::string reinit_list;
    for (const auto& name : reinitialized) reinit_list += " " + name;
    std::printf(
        "[patroni-sandbox] -> healthy again (every replica streaming): +%.1f s (%zu "
        "reinitialized:%s)\n",
        SecondsSince(t_heal), reinitialized.size(), reinit_list.c_str());
    CHECK(cluster.Leader() == survivor);
    CHECK(cluster.WritableMembers() == std::vector<std::string>{survivor});
    CHECK(cluster.Query(demoted, "SELECT pg_is_in_recovery()") == "t");

    // Leave a frozen Patroni and a stopped postmaster behind: the destructor must cope.
    for (const auto& m : cluster.members()) {
      started.push_back(PostmasterPid(m));
    }
    const std::string victim = survivor == "node3" ? "node2" : "node3";
    const pid_t victim_postmaster = PostmasterPid(cluster.member(victim));
    cluster.FreezePatroni(victim);
    ::kill(victim_postmaster, SIGSTOP);
    t_down = Clock::now();
  }
  std::printf("[patroni-sandbox] teardown (frozen patroni + stopped postmaster included): %.1f s\n",
              SecondsSince(t_down));
  for (pid_t pid : started) {
    char state = sbd::testing::ProcessState(pid);
    INFO("pid " << pid << " state '" << state << "'");
    CHECK(state == '\0');
  }
}
