// Hardening against real PostgreSQL 15 and etcd 3.4: a reload mid-incident keeps the page,
// DCS discovery stays within its limits, and the discovery password is never sent in clear.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "detector/common/json_text.h"
#include "detector/common/network_text.h"
#include "detector/config/config.h"
#include "detector/engine/scheduler.h"
#include "detector/output/alerts.h"
#include "detector/output/metrics.h"
#include "detector/output/status.h"
#include "probes/http_json.h"
#include "probes/postgres.h"
#include "probes/postgres_async.h"
#include "tests/support/files.h"
#include "tests/support/patroni_sandbox.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using sbd::testing::EtcdServer;
using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using sbd::testing::WaitFor;
using std::chrono::milliseconds;
using std::chrono::seconds;

ValidatedConfig MustParse(const std::string& yaml) {
  ConfigResult result = ParseConfig(yaml, "test.yml");
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    FAIL("config rejected: " << errors->front().ToString());
  }
  return std::get<ValidatedConfig>(std::move(result));
}

std::string PlainCluster(const PgSandbox& sandbox, const std::vector<const PgInstance*>& members) {
  std::ostringstream out;
  out << "clusters:\n  - name: demo\n    ttl: 3s\n    probe_interval: 500ms\n"
      << "    probe_timeout: 400ms\n    members:\n";
  for (const PgInstance* m : members) {
    out << "      - name: " << m->name() << "\n        dsn: \"" << m->MonitorDsn()
        << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
  }
  return out.str();
}

// A Patroni-kind cluster whose lock is in `etcd` (scope "s"), one configured member and
// discovery on, with the given extra discovery settings.
std::string DiscoveringCluster(const PgSandbox& sandbox, const EtcdServer& etcd,
                               const PgInstance& configured, const std::string& discovery) {
  std::ostringstream out;
  out << "clusters:\n  - name: disc\n    kind: patroni\n    scope: s\n    ttl: 3s\n"
      << "    probe_interval: 500ms\n    probe_timeout: 400ms\n"
      << "    etcd:\n      endpoints: [\"" << etcd.endpoint() << "\"]\n"
      << "    discover: true\n    discovery:\n      dsn: \"user=splitbrain dbname=postgres "
      << "connect_timeout=2\"\n      password_file: " << sandbox.PasswordFile() << "\n"
      << discovery << "    members:\n      - name: " << configured.name() << "\n        dsn: \""
      << configured.MonitorDsn() << "\"\n        password_file: " << sandbox.PasswordFile() << "\n";
  return out.str();
}

void Put(const EtcdServer& etcd, const std::string& key, const std::string& value) {
  etcd.PostV3("kv/put",
              nlohmann::json{{"key", Base64Encode(key)}, {"value", Base64Encode(value)}}.dump());
}

void Delete(const EtcdServer& etcd, const std::string& key) {
  etcd.PostV3("kv/deleterange", nlohmann::json{{"key", Base64Encode(key)}}.dump());
}

std::string MemberKey(const std::string& conn_url) {
  return nlohmann::json{{"conn_url", conn_url}, {"role", "replica"}, {"state", "running"}}.dump();
}

std::vector<std::string> MemberNames(const ClusterSnapshot& c) {
  std::vector<std::string> names;
  for (const auto& m : c.spec.members) names.push_back(m.name);
  return names;
}

bool HasAlert(const ClusterSnapshot& c, const std::string& name) {
  for (const auto& alert : AlertsFor(c, AlertingSpec{}, AlertLinks{})) {
    if (alert.labels.at("alertname") == name) return true;
  }
  return false;
}

// A port nothing listens on: bound, then closed.
int ClosedPort() { return sbd::testing::FreeLoopbackPort(); }

}  // namespace

TEST_CASE("reload: a split-brain incident stays open across a reload with a member unreadable",
          "[hardening]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  const std::string yaml = PlainCluster(sandbox, {&a, &b});
  auto before = std::make_unique<Scheduler>(MustParse(yaml));
  before->RunOnce();
  b.Promote();
  before->RunOnce();
  const ClusterSnapshot open = before->Snapshot().front();
  INFO(open.assessment.summary);
  REQUIRE(open.assessment.verdict == Verdict::kSplitBrain);
  REQUIRE(open.split_brain_open);
  REQUIRE(HasAlert(open, "SplitBrain"));

  // Mid-incident, the old primary stops answering; then the config is reloaded.
  a.Freeze();
  Scheduler after(MustParse(yaml));
  after.Inherit(before->Snapshot());
  before.reset();
  after.RunOnce();
  const ClusterSnapshot c = after.Snapshot().front();
  INFO(c.assessment.summary);
  CHECK(c.assessment.unreadable == std::vector<std::string>{"pg-a"});
  CHECK(c.split_brain_open);
  CHECK(c.split_brain_opened_at == open.split_brain_opened_at);
  CHECK(HasAlert(c, "SplitBrain"));
  CHECK(c.rounds == open.rounds + 1);
  CHECK(c.history.members.at("pg-a").last_seen_writable.has_value());
  a.Thaw();
}

TEST_CASE("discovery: at most max_members are probed, and a hostile members key is skipped",
          "[hardening]") {
  PgSandbox sandbox;
  sbd::testing::TempDir dir;
  EtcdServer etcd(dir.path() + "/etcd");
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  Put(etcd, "/service/s/leader", "pg-a");
  Put(etcd, "/service/s/members/pg-b",
      MemberKey("postgres://splitbrain@127.0.0.1:" + std::to_string(b.port()) + "/postgres"));
  // Anyone who can write to the DCS: a wrongly typed key, and a flood of members (listed
  // after pg-b: the DCS lists keys in order, and the first max_members are taken).
  Put(etcd, "/service/s/members/evil", R"({"conn_url": 5})");
  for (int i = 0; i < 8; ++i) {
    Put(etcd, "/service/s/members/zz-flood" + std::to_string(i),
        MemberKey("postgres://x@127.0.0.1:" + std::to_string(ClosedPort()) + "/postgres"));
  }
  Scheduler scheduler(MustParse(DiscoveringCluster(sandbox, etcd, a, "      max_members: 3\n")));
  const size_t threads_before = scheduler.probe_threads();
  scheduler.RunOnce();  // reads the DCS and adopts members for the next round
  scheduler.RunOnce();
  const ClusterSnapshot c = scheduler.Snapshot().front();
  INFO(c.assessment.summary);
  const auto names = MemberNames(c);
  CHECK(names.size() == 4);  // the configured one and three discovered
  CHECK(std::find(names.begin(), names.end(), "pg-b") != names.end());
  CHECK(std::find(names.begin(), names.end(), "evil") == names.end());
  CHECK(c.discovery_rejected.size() == 6);
  CHECK(c.history.members.at("pg-b").last_reading.has_value());
  CHECK(c.assessment.verdict != Verdict::kSplitBrain);
  // Every read of this cluster (the etcd scope, each member's PostgreSQL and Patroni REST API)
  // runs on the event loop, so the members discovery adds take no pool thread: a flood of
  // registered members costs the process no threads.
  CHECK(scheduler.probe_threads() == threads_before);
}

TEST_CASE("discovery: a member gone from the DCS expires only while it is unreadable too",
          "[hardening]") {
  PgSandbox sandbox;
  sbd::testing::TempDir dir;
  EtcdServer etcd(dir.path() + "/etcd");
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  Put(etcd, "/service/s/leader", "pg-a");
  Put(etcd, "/service/s/members/pg-b",
      MemberKey("postgres://splitbrain@127.0.0.1:" + std::to_string(b.port()) + "/postgres"));
  Put(etcd, "/service/s/members/gone",
      MemberKey("postgres://x@127.0.0.1:" + std::to_string(ClosedPort()) + "/postgres"));
  Scheduler scheduler(MustParse(DiscoveringCluster(sandbox, etcd, a, "      expire_after: 1s\n")));
  scheduler.RunOnce();
  scheduler.RunOnce();
  REQUIRE(MemberNames(scheduler.Snapshot().front()).size() == 3);

  // Both keys go (as a zombie's does when its lease expires): the one that still answers
  // stays watched, the unreadable one is dropped after expire_after.
  Delete(etcd, "/service/s/members/pg-b");
  Delete(etcd, "/service/s/members/gone");
  const auto deleted = SteadyClock::now();
  REQUIRE(WaitFor(
      [&] {
        scheduler.RunOnce();
        return MemberNames(scheduler.Snapshot().front()).size() == 2;
      },
      seconds(10), milliseconds(200)));
  CHECK(SteadyClock::now() - deleted >= seconds(1));
  const ClusterSnapshot c = scheduler.Snapshot().front();
  CHECK(MemberNames(c) == std::vector<std::string>{"pg-a", "pg-b"});
  CHECK(c.discovered_expired == 1);
  CHECK(c.history.members.count("gone") == 0);
}

TEST_CASE(
    "discovery: channel_binding=require never sends the password to a server that asks "
    "for it in clear",
    "[hardening]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  // The server (or whoever answers at the address the DCS gave) asks for a cleartext password.
  const std::string hba = a.data_dir() + "/pg_hba.conf";
  std::string rules;
  {
    std::ifstream in(hba);
    rules.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(hba, std::ios::trunc);
    out << "host all splitbrain 127.0.0.1/32 password\n" << rules;
  }
  a.Query("SELECT pg_reload_conf()");
  auto probe_with = [&](const std::string& extra) {
    const HostPort at{"127.0.0.1", std::to_string(a.port())};
    MemberSpec m = MemberAt("pg-a", at, "user=splitbrain dbname=postgres " + extra,
                            sandbox.PasswordFile(), std::nullopt);
    PostgresAsyncProbe on_loop(m, milliseconds(3000));
    return on_loop.Probe(SteadyClock::now() + seconds(3), nullptr);
  };
  // Without it, libpq answers the cleartext request: the password crosses the wire.
  const auto exposed = probe_with("sslmode=disable");
  CHECK(exposed.ok());
  // With it, libpq refuses before sending anything.
  const Observation guarded = probe_with("channel_binding=require");
  REQUIRE_FALSE(guarded.ok());
  INFO(guarded.failure()->message);
  CHECK(guarded.failure()->message.find("channel binding") != std::string::npos);
  CHECK(guarded.failure()->message.find(PgSandbox::kMonitorPassword) == std::string::npos);
}

TEST_CASE(
    "discovery: a member registered under a name with invalid UTF-8 leaves the scrape valid "
    "for promtool, and the etcd password shows nowhere",
    "[hardening]") {
  PgSandbox sandbox;
  sbd::testing::TempDir dir;
  EtcdServer etcd(dir.path() + "/etcd");
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  const std::string raw = "bad\xff\xfename";
  Put(etcd, "/service/s/leader", "pg-a");
  Put(etcd, "/service/s/members/" + raw,
      MemberKey("postgres://splitbrain@127.0.0.1:" + std::to_string(b.port()) + "/postgres"));
  // The endpoint as an operator may write it, credentials inline.
  std::string yaml = DiscoveringCluster(sandbox, etcd, a, "");
  const std::string endpoint = etcd.endpoint();
  REQUIRE(endpoint.rfind("http://", 0) == 0);
  yaml.replace(yaml.find(endpoint), endpoint.size(),
               "http://root:Etcd-S3cret@" + endpoint.substr(7) + "/?token=Etcd-T0ken");
  Scheduler scheduler(MustParse(yaml));
  scheduler.RunOnce();  // reads the DCS and adopts the member for the next round
  scheduler.RunOnce();
  const std::vector<ClusterSnapshot> clusters = scheduler.Snapshot();
  const ClusterSnapshot& c = clusters.front();
  INFO(c.assessment.summary);
  std::string name;
  for (const std::string& n : MemberNames(c)) {
    if (n.rfind("bad", 0) == 0) name = n;
  }
  REQUIRE(!name.empty());
  CHECK(name == NetworkName(raw));
  CHECK(c.history.members.at(name).last_reading.has_value());  // probed like any other
  REQUIRE(c.last_good_dcs.has_value());
  CHECK(c.assessment.verdict == Verdict::kHealthy);

  const std::string metrics =
      RenderMetrics(DetectorCollector([&] { return scheduler.Snapshot(); }, nullptr));
  CHECK(IsValidUtf8(metrics, metrics.size()));
  CHECK(metrics.find("member=\"" + name + "\"") != std::string::npos);
  const std::string file = dir.path() + "/metrics.txt";
  sbd::testing::WriteFile(file, metrics, 0600);
  auto lint = sbd::testing::RunCommand({"sh", "-c", "promtool check metrics < " + file});
  INFO(lint.output);
  CHECK(lint.exit_code == 0);

  const std::string status = JsonText(StatusJson(clusters));
  CHECK(IsValidUtf8(status, status.size()));
  CHECK(nlohmann::json::parse(status)["clusters"][0]["lock"]["endpoint"] == endpoint + "/");
  for (const std::string& shown : {metrics, status, StatusText(clusters)}) {
    CHECK(shown.find("Etcd-S3cret") == std::string::npos);
    CHECK(shown.find("Etcd-T0ken") == std::string::npos);
  }
}

}  // namespace sbd
