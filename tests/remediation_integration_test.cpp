// Opt-in remediation end to end, on a real Patroni 3.0 cluster (etcd 3.4, PostgreSQL 15,
// Alertmanager 0.25) with the detector binary: Patroni paused (maintenance mode) and a replica
// promoted by hand, the split brain Patroni's own loop never ends. Without the block and in
// dry_run the detector never connects as the fencing role (its server log says so); in
// fence mode the zombie refuses writes within 2 s of the page, and the page says so; with
// the lock store down, nothing is done.
//
// The PostgreSQL scenarios share one environment and run in the order written (each heals what
// it broke). The Redis one builds its own group: a master and two replicas under three
// sentinels, a replica promoted by hand, fenced by its own write guard; Sentinel's planned
// failover beside it is never touched.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tests/support/files.h"
#include "tests/support/patroni_environment.h"
#include "tests/support/redis_sandbox.h"

namespace sbd::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr const char* kFenceUser = "splitbrain_fence";
constexpr const char* kFencePassword = "sbd-fence-secret";
constexpr const char* kFenceApp = "splitbrain-detector-fence";

std::string RemediationYaml(const std::string& mode, const std::string& password_file) {
  if (mode == "off") return "";
  return "    remediation:\n      mode: " + mode + "\n      user: " + kFenceUser +
         "\n      password_file: " + password_file + "\n      timeout: 2s\n";
}

struct Fixture {
  std::unique_ptr<Environment> env;
  std::string password_file;

  Fixture() {
    env = std::make_unique<Environment>(SBD_BINARY);
    password_file = env->root.path() + "/fence-password";
    WriteFile(password_file, std::string(kFencePassword) + "\n", 0600);
    // The fencing role with the privileges docs/remediation.md lists and nothing more; made on
    // the leader, it reaches every replica. Every member logs connections, so that the tests
    // can tell whether the detector ever logged in as it.
    const std::string leader = env->cluster->Leader();
    env->cluster->Query(leader, std::string("CREATE ROLE ") + kFenceUser + " LOGIN PASSWORD '" +
                                    kFencePassword + "'");
    env->cluster->Query(leader, std::string("GRANT ALTER SYSTEM ON PARAMETER "
                                            "default_transaction_read_only TO ") +
                                    kFenceUser);
    env->cluster->Query(leader,
                        std::string("GRANT EXECUTE ON FUNCTION pg_reload_conf() TO ") + kFenceUser);
    env->cluster->Query(leader, std::string("GRANT pg_signal_backend TO ") + kFenceUser);
    for (const auto& m : env->cluster->members()) {
      env->cluster->Query(m.name, "ALTER SYSTEM SET log_connections = on");
      env->cluster->Query(m.name, "SELECT pg_reload_conf()");
    }
  }

  void SetMode(const std::string& mode) {
    env->cluster_extra = RemediationYaml(mode, password_file);
    env->WriteConfig({});
    REQUIRE(env->detector->Reload(seconds(20)));
  }

  // The logins of `user` in every member's log since `offsets` (from LogSizes()).
  size_t Logins(const std::vector<size_t>& offsets, const std::string& user) const {
    const std::string needle = "connection authorized: user=" + user + " ";
    size_t logins = 0;
    const auto& members = env->cluster->members();
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string log = ReadFile(members[i].log_file);
      const std::string since = log.size() > offsets[i] ? log.substr(offsets[i]) : "";
      for (size_t at = since.find(needle); at != std::string::npos;
           at = since.find(needle, at + 1)) {
        ++logins;
      }
    }
    return logins;
  }
  // The fencing role's, checked against the monitoring role's: the logs do record logins.
  size_t FenceLogins(const std::vector<size_t>& offsets) const {
    CHECK(Logins(offsets, "postgres") > 0);
    return Logins(offsets, kFenceUser);
  }
  std::vector<size_t> LogSizes() const {
    std::vector<size_t> sizes;
    for (const auto& m : env->cluster->members()) sizes.push_back(ReadFile(m.log_file).size());
    return sizes;
  }

  // Pauses Patroni and picks a replica to promote; the leader keeps the key.
  std::string PauseAndPick() {
    env->cluster->SetPaused(true);
    const std::string leader = env->cluster->Leader();
    std::string replica;
    for (const auto& m : env->cluster->members()) {
      if (m.name != leader) replica = m.name;
    }
    return replica;
  }
  void Promote(const std::string& replica) {
    env->cluster->Query(replica, "SELECT pg_promote(true, 30)");
  }
  std::string PromoteByHand() {
    const std::string replica = PauseAndPick();
    Promote(replica);
    return replica;
  }

  // Resumes Patroni; it demotes the hand-promoted member, and Heal() rebuilds what diverged.
  void Restore() {
    env->cluster->SetPaused(false);
    env->Settle(seconds(240));
  }

  // Whether a new superuser session on `member` may write ("" when it may; else the error).
  std::string WriteError(const std::string& member) const {
    std::string out;
    if (env->cluster->TryQuery(member, "BEGIN; CREATE TABLE splitbrain_it_write (); ROLLBACK;",
                               &out, seconds(5))) {
      return "";
    }
    return out.empty() ? "failed" : out;
  }

  nlohmann::json Remediation() const {
    return env->Status().value("remediation", nlohmann::json());
  }
};

Fixture& Shared() {
  static std::unique_ptr<Fixture> fixture;
  if (!fixture) fixture = std::make_unique<Fixture>();
  return *fixture;
}

size_t CountRecords(const nlohmann::json& remediation, const std::string& member,
                    const std::string& result) {
  size_t count = 0;
  if (!remediation.is_object()) return count;
  for (const auto& r : remediation["records"]) {
    if (r.value("member", "") == member && r.value("result", "") == result) ++count;
  }
  return count;
}
bool HasRecord(const nlohmann::json& remediation, const std::string& member,
               const std::string& result) {
  return CountRecords(remediation, member, result) > 0;
}

}  // namespace

TEST_CASE("remediation: without the block and in dry_run nothing connects as the fencing role",
          "[remediation]") {
  Fixture& f = Shared();
  f.SetMode("off");
  const auto start = f.env->Settle();
  const std::vector<size_t> offsets = f.LogSizes();
  const std::string zombie = f.PromoteByHand();
  REQUIRE(f.env->webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) { return d.at >= start && Fires(d, "SplitBrain"); },
      seconds(20)));
  // Five more rounds of the confirmed split brain, with no block.
  const auto rounds = f.env->Status().value("rounds", 0);
  REQUIRE(WaitFor([&] { return f.env->Status().value("rounds", 0) >= rounds + 5; }, seconds(20)));
  CHECK(f.Remediation().is_null());

  f.SetMode("dry_run");
  REQUIRE(WaitFor([&] { return HasRecord(f.Remediation(), zombie, "dry_run"); }, seconds(10)));
  const nlohmann::json remediation = f.Remediation();
  INFO(remediation.dump(2));
  CHECK(remediation["mode"] == "dry_run");
  // The incident log says what would have been done.
  const nlohmann::json events =
      nlohmann::json::parse(HttpGet(f.env->port, "/api/v1/incidents?cluster=demo"), nullptr, false);
  bool logged = false;
  for (const auto& e : events["events"]) {
    logged = logged || (e["kind"] == "remediation" && e["fields"]["result"] == "dry_run" &&
                        e["fields"]["member"] == zombie);
  }
  CHECK(logged);
  CHECK(f.WriteError(zombie).empty());  // nothing changed: the zombie still takes writes
  CHECK(f.FenceLogins(offsets) == 0);
  CHECK_THAT(f.env->Metrics(),
             Catch::Contains("splitbrain_remediations_total{cluster=\"demo\",action=\"postgres_"
                             "read_only\",result=\"dry_run\"} 1"));
  f.Restore();
}

TEST_CASE("remediation: in fence mode the zombie refuses writes within 2 s of the page",
          "[remediation]") {
  Fixture& f = Shared();
  f.SetMode("fence");
  const auto start = f.env->Settle();
  const std::string holder = f.env->cluster->Leader();
  WritablePoller poller(f.env->cluster->members());  // the onset, independent of the detector
  const std::string zombie = f.PromoteByHand();
  REQUIRE(f.env->webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) { return d.at >= start && Fires(d, "SplitBrain"); },
      seconds(20)));
  const auto pages = f.env->Notifications("SplitBrain", "firing", start);
  REQUIRE(!pages.empty());
  const auto page = pages.front().at;
  std::string error;
  REQUIRE(WaitFor([&] { return !(error = f.WriteError(zombie)).empty(); }, seconds(10),
                  milliseconds(20)));
  const auto refused = Clock::now();
  REQUIRE(poller.SecondWritableAt().has_value());
  const auto onset = *poller.SecondWritableAt();
  const double page_to_fenced = std::chrono::duration<double>(refused - page).count();
  std::cout << "postgres (patroni, paused), probe interval 1 s: onset to page "
            << std::chrono::duration<double>(page - onset).count() << " s, onset to writes refused "
            << std::chrono::duration<double>(refused - onset).count()
            << " s, page to writes refused " << page_to_fenced << " s\n";
  CHECK(page_to_fenced < 2.0);
  CHECK_THAT(error, Catch::Contains("read-only transaction"));
  CHECK(f.WriteError(holder).empty());  // the holder is never touched

  // The page, as Alertmanager holds it now, says what was done (a notification repeats it at
  // the route's repeat_interval); ZombieFenced warns beside it, delivered at once.
  CHECK(WaitFor(
      [&] {
        for (const auto& a : f.env->alertmanager->Alerts()) {
          if (a["labels"].value("alertname", "") == "SplitBrain" &&
              a["annotations"].value("summary", "").find("fenced " + zombie) != std::string::npos) {
            return true;
          }
        }
        return false;
      },
      seconds(10)));
  CHECK(f.env->webhook->WaitFor(
      [&](const WebhookReceiver::Delivery& d) { return d.at >= start && Fires(d, "ZombieFenced"); },
      seconds(20)));
  const nlohmann::json remediation = f.Remediation();
  INFO(remediation.dump(2));
  CHECK(HasRecord(remediation, zombie, "fenced"));
  CHECK_THAT(f.env->Metrics(),
             Catch::Contains("splitbrain_remediations_total{cluster=\"demo\",action=\"postgres_"
                             "read_only\",result=\"fenced\"} 1"));
  // Undone as the runbook says, the zombie takes writes again.
  f.env->cluster->Query(zombie, "ALTER SYSTEM RESET default_transaction_read_only");
  f.env->cluster->Query(zombie, "SELECT pg_reload_conf()");
  CHECK(WaitFor([&] { return f.WriteError(zombie).empty(); }, seconds(5)));
  f.Restore();
}

TEST_CASE("remediation: with the lock store down nothing is done", "[remediation]") {
  Fixture& f = Shared();
  f.SetMode("fence");
  f.env->Settle();
  const std::vector<size_t> offsets = f.LogSizes();
  const std::string zombie = f.PauseAndPick();
  const size_t fenced_before = CountRecords(f.Remediation(), zombie, "fenced");  // earlier cases'
  f.env->etcd->Stop();  // first: no round may read the store once the zombie is writable
  f.Promote(zombie);
  REQUIRE(WaitFor(
      [&] {
        const nlohmann::json r = f.Remediation();
        return r.is_object() &&
               r.value("hold", "").find("lock store was not read") != std::string::npos;
      },
      seconds(20)));
  const auto rounds = f.env->Status().value("rounds", 0);
  REQUIRE(WaitFor([&] { return f.env->Status().value("rounds", 0) >= rounds + 3; }, seconds(20)));
  CHECK(f.WriteError(zombie).empty());
  CHECK(CountRecords(f.Remediation(), zombie, "fenced") == fenced_before);
  CHECK(f.FenceLogins(offsets) == 0);
  f.SetMode("dry_run");  // so that the store's return does not fence in this scenario
  f.env->etcd->Start();
  f.Restore();
}

namespace {

// The postmaster of the PostgreSQL in `data_dir` and every process it started.
std::vector<pid_t> PostgresProcesses(const std::string& data_dir) {
  std::vector<pid_t> pids;
  std::ifstream pidfile(data_dir + "/postmaster.pid");
  pid_t postmaster = -1;
  if (!(pidfile >> postmaster) || postmaster <= 0) return pids;
  pids.push_back(postmaster);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    char state = 0;
    pid_t ppid = -1;
    if (rest >> state >> ppid && ppid == postmaster) pids.push_back(std::stoi(name));
  }
  return pids;
}

}  // namespace

TEST_CASE("remediation: with the holder unreadable nothing is done", "[remediation]") {
  Fixture& f = Shared();
  f.SetMode("fence");
  f.env->Settle();
  const std::vector<size_t> offsets = f.LogSizes();
  const std::string zombie = f.PauseAndPick();
  const std::string holder = f.env->cluster->Leader();
  const size_t fenced_before = CountRecords(f.Remediation(), zombie, "fenced");  // earlier cases'
  // The holder's PostgreSQL frozen whole (postmaster and backends, the probe's session too):
  // its reads time out while the lock store still names it.
  const std::vector<pid_t> frozen = PostgresProcesses(f.env->cluster->member(holder).data_dir);
  REQUIRE(frozen.size() > 1);
  for (pid_t pid : frozen) kill(pid, SIGSTOP);
  struct Thaw {
    const std::vector<pid_t>& pids;
    ~Thaw() {
      for (pid_t pid : pids) kill(pid, SIGCONT);
    }
  } thaw{frozen};
  f.Promote(zombie);
  nlohmann::json held;
  REQUIRE(WaitFor(
      [&] {
        held = f.Remediation();
        return held.is_object() && !held.value("hold", "").empty() && f.WriteError(zombie).empty();
      },
      seconds(20)));
  INFO(held.dump(2));
  const auto rounds = f.env->Status().value("rounds", 0);
  REQUIRE(WaitFor([&] { return f.env->Status().value("rounds", 0) >= rounds + 3; }, seconds(20)));
  const nlohmann::json status = f.env->Status();
  INFO(status.dump(2));
  CHECK(status.value("verdict", "") != "healthy");  // a writable zombie is never healthy
  const std::string hold = f.Remediation().value("hold", "");
  CHECK((hold.find("suspected") != std::string::npos ||
         hold.find("the holder " + holder + " was not read writable") != std::string::npos));
  CHECK(f.WriteError(zombie).empty());  // still takes writes: nothing was done to it
  CHECK(CountRecords(f.Remediation(), zombie, "fenced") == fenced_before);
  CHECK(f.FenceLogins(offsets) == 0);
  f.SetMode("dry_run");  // so that the holder's return does not fence in this scenario
  for (pid_t pid : frozen) kill(pid, SIGCONT);
  f.Restore();
}

namespace {

// A Redis group under three sentinels, watched by the detector with `mode: fence`.
struct RedisGroup {
  RedisSandbox sandbox;
  std::vector<RedisProcess*> members;
  WebhookReceiver webhook;
  std::unique_ptr<AlertmanagerServer> alertmanager;
  std::unique_ptr<DetectorProcess> detector;
  int port = 0;

  RedisGroup() {
    RedisProcess& master = sandbox.StartServer("m");
    members = {&master, &sandbox.StartServer("r1", &master), &sandbox.StartServer("r2", &master)};
    sandbox.StartSentinels("cache", master, 3, milliseconds(5000), seconds(10));
    alertmanager = std::make_unique<AlertmanagerServer>(sandbox.root() + "/am", webhook.url());
    std::string yaml = "alerting:\n  alertmanagers:\n    - url: " + alertmanager->url() +
                       "\n  resend_interval: 5s\nclusters:\n  - name: cache\n    kind: redis\n"
                       "    ttl: 5s\n    probe_interval: 500ms\n    probe_timeout: 400ms\n"
                       "    remediation:\n      mode: fence\n      timeout: 1s\n    members:\n";
    for (const RedisProcess* m : members) {
      yaml += "      - name: " + m->name() + "\n        address: " + m->address() + "\n";
    }
    yaml += "    redis:\n      master_name: cache\n      sentinels: [";
    for (size_t i = 0; i < sandbox.sentinels().size(); ++i) {
      yaml += (i ? ", " : "") + sandbox.sentinels()[i]->address();
    }
    yaml += "]\n";
    const std::string config = WriteFile(sandbox.root(), "detector.yml", yaml);
    port = FreeLoopbackPort();
    detector = std::make_unique<DetectorProcess>(
        SBD_BINARY,
        std::vector<std::string>{"--config.file=" + config,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        sandbox.root() + "/detector.log");
  }
  nlohmann::json Status() const {
    const std::string body = HttpGet(port, "/status");
    return body.empty() ? nlohmann::json() : nlohmann::json::parse(body)["clusters"][0];
  }
  std::string Verdict() const {
    const nlohmann::json s = Status();
    return s.is_object() ? s.value("verdict", "") : "";
  }
  // The answer to a SET on `member` from a fresh redis-cli ("OK" when it took the write).
  static std::string Write(const RedisProcess& member) {
    try {
      return member.Cli({"SET", "splitbrain-it", "x"});
    } catch (const std::exception& e) {
      return e.what();
    }
  }
};

}  // namespace

TEST_CASE("remediation: a Redis replica promoted by hand is fenced by its own write guard",
          "[remediation]") {
  RedisGroup group;
  REQUIRE(WaitFor([&] { return group.Verdict() == "healthy"; }, seconds(20)));
  // Sentinel's own failover first: a planned move is never acted on.
  group.sandbox.sentinels()[0]->Cli({"SENTINEL", "FAILOVER", "cache"});
  REQUIRE(
      WaitFor([&] { return group.sandbox.SentinelMaster("cache") != group.members[0]->address(); },
              seconds(30)));
  REQUIRE(WaitFor([&] { return group.Verdict() == "healthy"; }, seconds(30)));
  const nlohmann::json after_failover = group.Status();
  const bool untouched =
      !after_failover.contains("remediation") || after_failover["remediation"]["records"].empty();
  CHECK(untouched);

  // Now a replica promoted by hand beside Sentinel's master.
  const std::string master_address = group.sandbox.SentinelMaster("cache");
  RedisProcess* zombie = nullptr;
  for (RedisProcess* m : group.members) {
    if (m->address() != master_address && m->Role() == "slave") zombie = m;
  }
  REQUIRE(zombie != nullptr);
  const auto start = Clock::now();
  zombie->Cli({"REPLICAOF", "NO", "ONE"});
  const bool paged = group.webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) { return d.at >= start && Fires(d, "SplitBrain"); },
      seconds(10));
  INFO(group.Status().dump(2));
  REQUIRE(paged);
  const auto page = Clock::now();
  std::string answer;
  REQUIRE(WaitFor(
      [&] { return (answer = RedisGroup::Write(*zombie)).find("NOREPLICAS") != std::string::npos; },
      seconds(5), milliseconds(20)));
  const double page_to_fenced = std::chrono::duration<double>(Clock::now() - page).count();
  std::cout << "redis: page to writes refused: " << page_to_fenced << " s\n";
  CHECK(page_to_fenced < 2.0);
  for (RedisProcess* m : group.members) {
    if (m->address() == master_address) CHECK(RedisGroup::Write(*m) == "OK");  // the holder
  }
  const nlohmann::json status = group.Status();
  INFO(status.dump(2));
  bool fenced = false;
  for (const auto& r : status["remediation"]["records"]) {
    fenced = fenced || (r["member"] == zombie->name() && r["result"] == "fenced" &&
                        r["action"] == "redis_write_guard" &&
                        r.value("undo", "").find("min-replicas-to-write") != std::string::npos);
  }
  CHECK(fenced);
}

}  // namespace sbd::testing
