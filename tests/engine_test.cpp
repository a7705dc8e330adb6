// The engine (Scheduler) driven through its interfaces: member probes and lock stores are
// in-process fakes that answer from a script, so each scenario is exact and needs no server.
#include <algorithm>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "detector/common/base64.h"
#include "detector/config/config.h"
#include "detector/config/kinds/kinds.h"
#include "detector/engine/scheduler.h"
#include "detector/output/metrics.h"
#include "detector/output/status.h"
#include "probes/etcd.h"
#include "probes/kind.h"
#include "tests/support/process.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;

const std::string kLineage = "7000000000000000001";
const std::string kOther = "7000000000000000002";

// One scripted answer of a fake member.
struct Answer {
  bool writable = false;
  std::string lineage = kLineage;
  std::int64_t timeline = 1;
  int backend_pid = 100;                      // the same pid on two answers means the same session
  std::optional<ProbeFailureReason> failure;  // fail with this instead of reading
  bool hang = false;                          // block until released, past any deadline
  milliseconds shift{0};                      // move the reading's window into the past
};

Answer Primary(std::int64_t timeline = 1) {
  Answer a;
  a.writable = true;
  a.timeline = timeline;
  return a;
}

Answer Replica(std::int64_t timeline = 1) {
  Answer a;
  a.timeline = timeline;
  return a;
}

// A member the test scripts: each probe takes the next answer, and the last one repeats.
// Thread-safe: probes run on the executor's threads while the test reads the counts.
class FakeMember {
 public:
  void Script(std::vector<Answer> answers) {
    std::lock_guard<std::mutex> lock(mu_);
    script_.assign(answers.begin(), answers.end());
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // Probes that came through a start gate: the confirmation re-probes.
  int gated_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return gated_calls_;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

  Observation Probe(const std::string& name, SteadyClock::time_point deadline, StartGate* gate) {
    const Answer answer = Next(gate != nullptr);
    Observation obs;
    obs.member = name;
    obs.window.sent_wall = WallClock::now() - answer.shift;
    obs.window.sent = SteadyClock::now();
    if (answer.hang) {
      if (gate) gate->Arrive();
      std::unique_lock<std::mutex> lock(mu_);
      // Capped, so that a test that forgot to release still ends.
      cv_.wait_for(lock, std::chrono::seconds(10), [this] { return released_; });
    } else if (gate) {
      // Sent before and received after every party arrived: the windows share that instant.
      gate->ArriveAndWait(deadline);
    }
    obs.window.received = SteadyClock::now();
    obs.window.sent -= answer.shift;
    obs.window.received -= answer.shift;
    if (answer.failure) {
      obs.result = ProbeFailure{*answer.failure, "scripted failure"};
      return obs;
    }
    PostgresReading r;
    r.in_recovery = !answer.writable;
    r.read_only = false;
    r.system_identifier = answer.lineage;
    r.timeline = answer.timeline;
    r.backend_pid = answer.backend_pid;
    r.postmaster_start = "2026-11-30T00:00:00Z";
    r.server_version = 150000;
    obs.result = r;
    return obs;
  }

 private:
  Answer Next(bool gated) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if (gated) ++gated_calls_;
    Answer answer = script_.empty() ? Replica() : script_.front();
    if (script_.size() > 1) script_.pop_front();
    return answer;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Answer> script_;
  int calls_ = 0;
  int gated_calls_ = 0;
  bool released_ = false;
};

class FakeProbe : public MemberProbe {
 public:
  FakeProbe(std::shared_ptr<FakeMember> member, std::string name)
      : member_(std::move(member)), name_(std::move(name)) {}
  Observation Probe(SteadyClock::time_point deadline, StartGate* gate) override {
    return member_->Probe(name_, deadline, gate);
  }

 private:
  std::shared_ptr<FakeMember> member_;
  std::string name_;
};

// The record a fake lock store answers with; the test changes it between rounds. Thread-safe.
class FakeRecord {
 public:
  void Set(LockRecord view) {
    std::lock_guard<std::mutex> lock(mu_);
    view_ = std::move(view);
  }
  LockRecord Get() {
    std::lock_guard<std::mutex> lock(mu_);
    ++reads_;
    return view_;
  }
  int reads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_;
  }

 private:
  mutable std::mutex mu_;
  LockRecord view_;
  int reads_ = 0;
};

class FakeLockStore : public LockStore {
 public:
  explicit FakeLockStore(std::shared_ptr<FakeRecord> record) : record_(std::move(record)) {}
  std::variant<LockRecord, ProbeFailure> Read(SteadyClock::time_point) override {
    return record_->Get();
  }

 private:
  std::shared_ptr<FakeRecord> record_;
};

// Every fake a scheduler is built with: members by name (made on first use), one lock record
// for every Patroni cluster, and the names the member factory was asked for. Thread-safe.
class FakeWorld {
 public:
  std::shared_ptr<FakeMember> Member(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& member = members_[name];
    if (!member) member = std::make_shared<FakeMember>();
    return member;
  }
  std::shared_ptr<FakeRecord> record() const { return record_; }
  std::vector<std::string> built() const {
    std::lock_guard<std::mutex> lock(mu_);
    return built_;
  }
  void ReleaseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, member] : members_) member->Release();
  }

  ProbeFactories Factories() {
    ProbeFactories factories;
    factories.members = [this](const ClusterSpec&, const MemberSpec& member) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        built_.push_back(member.name);
      }
      return std::make_unique<FakeProbe>(Member(member.name), member.name);
    };
    factories.lock_stores = [this](const ClusterSpec& spec) -> std::unique_ptr<LockStore> {
      if (spec.kind != "patroni") return nullptr;
      return std::make_unique<FakeLockStore>(record_);
    };
    factories.managers = [](const ClusterSpec&, const MemberSpec&) { return nullptr; };
    return factories;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<FakeMember>> members_;
  std::vector<std::string> built_;
  std::shared_ptr<FakeRecord> record_ = std::make_shared<FakeRecord>();
};

// Releases every hung fake before the scheduler (declared earlier) joins its threads.
struct ReleaseOnExit {
  FakeWorld& world;
  ~ReleaseOnExit() { world.ReleaseAll(); }
};

ValidatedConfig MustParse(const std::string& yaml) {
  ConfigResult result = ParseConfig(yaml, "engine.yml");
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    FAIL("config rejected: " << errors->front().ToString());
  }
  return std::get<ValidatedConfig>(std::move(result));
}

std::string MembersYaml(const std::vector<std::string>& names) {
  std::ostringstream out;
  out << "    members:\n";
  for (const auto& name : names) {
    out << "      - name: " << name << "\n        dsn: \"host=127.0.0.1 port=1 user=x\"\n";
  }
  return out.str();
}

// A plain PostgreSQL cluster "orders" (no lock store).
ValidatedConfig PostgresCluster(const std::vector<std::string>& names) {
  return MustParse(
      "clusters:\n  - name: orders\n    ttl: 3s\n    probe_interval: 500ms\n"
      "    probe_timeout: 300ms\n" +
      MembersYaml(names));
}

// A Patroni cluster "orders" whose lock record is the fake's; `extra` adds settings.
ValidatedConfig PatroniCluster(const std::vector<std::string>& names, const std::string& extra) {
  return MustParse(
      "clusters:\n  - name: orders\n    kind: patroni\n"
      "    etcd:\n      endpoints: [\"http://127.0.0.1:1\"]\n" +
      extra + MembersYaml(names));
}

LockRecord Record(const std::string& holder, std::vector<std::string> registered = {}) {
  LockRecord view;
  view.holder = holder;
  view.initialize = kLineage;
  for (size_t i = 0; i < registered.size(); ++i) {
    DcsMember member;
    member.name = registered[i];
    member.conn_url = "postgres://x@10.0.0." + std::to_string(i + 1) + ":5432/postgres";
    view.members.push_back(member);
  }
  return view;
}

ClusterSnapshot Only(const Scheduler& scheduler) { return scheduler.Snapshot().front(); }

std::vector<std::string> MemberNames(const ClusterSnapshot& c) {
  std::vector<std::string> names;
  for (const auto& m : c.spec.members) names.push_back(m.name);
  return names;
}

const Observation& Find(const ClusterSnapshot& c, const std::string& member) {
  for (const auto& obs : c.last_round) {
    if (obs.member == member) return obs;
  }
  FAIL("no observation of " << member);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("engine: two writable members of one lineage are a split brain once re-probed",
          "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.Member("b")->Script({Primary()});
  Scheduler scheduler(PostgresCluster({"a", "b"}), world.Factories());
  scheduler.RunOnce();
  const ClusterSnapshot c = Only(scheduler);
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kSplitBrain);
  CHECK(c.assessment.writable == std::vector<std::string>{"a", "b"});
  CHECK(c.confirmations_accepted == 1);
  CHECK(c.split_brain_open);
  // The candidate was re-probed, concurrently through a start gate, before it was believed.
  for (const char* name : {"a", "b"}) {
    CHECK(world.Member(name)->calls() == 2);
    CHECK(world.Member(name)->gated_calls() == 1);
  }
}

TEST_CASE("engine: a candidate whose re-probe reads not writable is no split brain", "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.Member("b")->Script({Primary(), Replica()});
  Scheduler scheduler(PostgresCluster({"a", "b"}), world.Factories());
  scheduler.RunOnce();
  const ClusterSnapshot c = Only(scheduler);
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict != Verdict::kSplitBrain);
  CHECK(c.assessment.writable == std::vector<std::string>{"a"});
  CHECK(c.confirmations_rejected == 1);
  CHECK(c.confirmations_accepted == 0);
  CHECK_FALSE(c.split_brain_open);
  // The re-probe replaced the first reading: b is a replica in the round kept.
  REQUIRE(Find(c, "b").ok());
  CHECK(Find(c, "b").reading()->in_recovery);
}

TEST_CASE("engine: writable re-probes that do not overlap in time stay suspected", "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  // b's re-probe reads writable, but on a new session and at an instant long before a's.
  Answer stale = Primary();
  stale.backend_pid = 200;
  stale.shift = std::chrono::seconds(10);
  world.Member("b")->Script({Primary(), stale});
  Scheduler scheduler(PostgresCluster({"a", "b"}), world.Factories());
  scheduler.RunOnce();
  const ClusterSnapshot c = Only(scheduler);
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kSuspected);
  CHECK(c.confirmations_rejected == 1);
  CHECK_FALSE(c.split_brain_open);
}

TEST_CASE("engine: a writable member of another system identifier is drift, not split brain",
          "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.Member("b")->Script({Replica()});
  Answer stranger = Primary();
  stranger.lineage = kOther;
  world.Member("c")->Script({stranger});
  Scheduler scheduler(PostgresCluster({"a", "b", "c"}), world.Factories());
  scheduler.RunOnce();
  const ClusterSnapshot c = Only(scheduler);
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kDrift);
  CHECK(c.assessment.lineage == kLineage);
  CHECK(c.assessment.drift == std::vector<std::string>{"c"});
  CHECK(c.assessment.writable == std::vector<std::string>{"a"});
  // One writable member per lineage is no candidate: nobody was re-probed.
  CHECK(c.confirmations_accepted + c.confirmations_rejected == 0);
  CHECK(world.Member("c")->calls() == 1);
}

TEST_CASE("engine: a member that answers past its deadline is unreadable, never healthy",
          "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  Answer frozen = Replica();
  frozen.hang = true;
  world.Member("b")->Script({frozen});
  Scheduler scheduler(PostgresCluster({"a", "b"}), world.Factories());
  ReleaseOnExit release{world};
  const auto start = SteadyClock::now();
  scheduler.RunOnce();
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  const ClusterSnapshot c = Only(scheduler);
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kUnknown);
  CHECK(c.assessment.unreadable == std::vector<std::string>{"b"});
  REQUIRE(Find(c, "b").failure() != nullptr);
  CHECK(Find(c, "b").failure()->reason == ProbeFailureReason::kTimeout);
  CHECK(c.counters.at("b").failures_by_reason.at("timeout") == 1);
  // The round ended at the 300 ms deadline (plus a short grace), not when b answered.
  CHECK(seconds < 1.5);

  // Still blocked next round: it is not called again, and stays unreadable.
  scheduler.RunOnce();
  const ClusterSnapshot next = Only(scheduler);
  CHECK(next.assessment.verdict == Verdict::kUnknown);
  CHECK(Find(next, "b").failure()->message == "previous probe still running");
  CHECK(world.Member("b")->calls() == 1);
}

TEST_CASE("engine: a Patroni cluster without a ttl takes its round interval from the record",
          "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  LockRecord record = Record("a");
  record.config_ttl = 6;
  world.record()->Set(record);
  Scheduler scheduler(PatroniCluster({"a"}, ""), world.Factories());
  REQUIRE(Only(scheduler).spec.probe_interval == milliseconds(3000));  // ttl 30s by default
  scheduler.Start();
  // ttl 6s puts the interval at 600 ms: three rounds long before the old 3 s interval ends.
  const bool cadence = sbd::testing::WaitFor([&] { return Only(scheduler).rounds >= 3; },
                                             milliseconds(2800), milliseconds(20));
  scheduler.Stop();
  CHECK(cadence);
  const ClusterSnapshot c = Only(scheduler);
  CHECK(c.rounds >= 3);
  CHECK(c.timing().ttl == milliseconds(6000));
  CHECK(c.timing().probe_interval == milliseconds(600));
  CHECK(c.timing().probe_timeout == milliseconds(600));
  CHECK(c.spec.probe_interval == milliseconds(3000));  // the spec as validated
  const nlohmann::json status = StatusJson(scheduler.Snapshot())["clusters"][0];
  CHECK(status["probe_interval_seconds"] == 0.6);
  CHECK(status["ttl_source"] == "lock store");
  CHECK(status["probe_interval_source"] == "ttl/10");
  CHECK(c.assessment.verdict == Verdict::kHealthy);
}

TEST_CASE("engine: /status never shows a negative or wrapped ttl from the record's config",
          "[engine]") {
  // The record as etcd's answer gives it: Patroni's config key with a ttl that overflowed
  // once multiplied into milliseconds (measured: ttl_seconds -0.616 in /status).
  const std::string prefix = "/service/orders/";
  const nlohmann::json range = {
      {"kvs",
       {{{"key", Base64Encode(prefix + "config")},
         {"value", Base64Encode(R"({"ttl":18446744073709551,"loop_wait":10})")},
         {"mod_revision", "7"},
         {"lease", "0"}}}}};
  auto parsed = EtcdScopeProbe::ParseRange(range, prefix);
  REQUIRE(std::holds_alternative<LockRecord>(parsed));
  LockRecord record = Record("a");
  record.config_ttl = std::get<LockRecord>(parsed).config_ttl;
  record.rejected = std::get<LockRecord>(parsed).rejected;
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.record()->Set(record);
  Scheduler scheduler(PatroniCluster({"a"}, ""), world.Factories());
  scheduler.RunOnce();
  const nlohmann::json cluster = StatusJson(scheduler.Snapshot())["clusters"][0];
  INFO(cluster.dump());
  CHECK(cluster["ttl_seconds"] == 30.0);  // the default: the rejected ttl is not used
  CHECK(cluster["ttl_source"] == "default");
  CHECK(cluster["probe_interval_seconds"].get<double>() > 0);
  CHECK(cluster.dump().find("ttl is out of range 1..31622400") != std::string::npos);
}

TEST_CASE("engine: an explicit ttl is kept whatever the record says", "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  LockRecord record = Record("a");
  record.config_ttl = 6;
  world.record()->Set(record);
  Scheduler scheduler(PatroniCluster({"a"}, "    ttl: 30s\n"), world.Factories());
  scheduler.RunOnce();
  const ClusterSnapshot c = Only(scheduler);
  CHECK(c.timing().ttl == milliseconds(30000));
  CHECK(c.timing().probe_interval == milliseconds(3000));
  CHECK(std::string(c.timing().ttl_source) == "config");
  CHECK(world.record()->reads() == 1);
}

TEST_CASE("engine: members registered in the lock record are probed from the next round on",
          "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.record()->Set(Record("a", {"a", "d1", "d2", "d3"}));
  Scheduler scheduler(
      PatroniCluster({"a"},
                     "    discover: true\n    discovery:\n      dsn: \"user=x dbname=postgres\"\n"
                     "      max_members: 2\n"),
      world.Factories());
  scheduler.RunOnce();
  const ClusterSnapshot first = Only(scheduler);
  CHECK(MemberNames(first) == std::vector<std::string>{"a", "d1", "d2"});
  CHECK(first.discovery_rejected == std::vector<std::string>{"d3"});
  CHECK(first.spec.members[1].discovered);
  CHECK(first.spec.members[1].address == "10.0.0.2:5432");
  CHECK(world.Member("d1")->calls() == 0);  // adopted after this round's probes

  scheduler.RunOnce();
  const ClusterSnapshot second = Only(scheduler);
  CHECK(world.Member("d1")->calls() == 1);
  CHECK(world.Member("d2")->calls() == 1);
  CHECK(second.last_round.size() == 3);
  // Over the cap: never even built, so never probed.
  const auto built = world.built();
  CHECK(std::find(built.begin(), built.end(), "d3") == built.end());
  CHECK(second.assessment.verdict == Verdict::kHealthy);
}

TEST_CASE("engine: a failover between rounds is a transition, not a split brain", "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary(1), Replica(2)});
  world.Member("b")->Script({Replica(1), Primary(2)});
  world.record()->Set(Record("a"));
  Scheduler scheduler(PatroniCluster({"a", "b"}, ""), world.Factories());
  scheduler.RunOnce();
  REQUIRE(Only(scheduler).last_primary == "a");

  world.record()->Set(Record("b"));
  scheduler.RunOnce();
  const ClusterSnapshot c = Only(scheduler);
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kHealthy);
  CHECK(c.assessment.lock_holder == "b");
  CHECK(c.last_primary == "b");
  CHECK(c.transitions == 1);
  REQUIRE(c.last_transition.has_value());
  CHECK(c.last_transition->summary.find("primary moved from a") != std::string::npos);
  CHECK_FALSE(c.split_brain_open);
}

TEST_CASE("engine: a failover caught with both writable is a transition once re-probed",
          "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary(1), Primary(1), Replica(2)});
  world.Member("b")->Script({Replica(1), Primary(2)});
  world.record()->Set(Record("a"));
  Scheduler scheduler(PatroniCluster({"a", "b"}, ""), world.Factories());
  scheduler.RunOnce();

  // b took the lock and promoted; a reads writable once more, then demoted on the re-probe.
  world.record()->Set(Record("b"));
  scheduler.RunOnce();
  const ClusterSnapshot c = Only(scheduler);
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict != Verdict::kSplitBrain);
  CHECK(c.assessment.writable == std::vector<std::string>{"b"});
  CHECK(c.confirmations_rejected == 1);
  CHECK(c.transitions == 1);
  REQUIRE(c.last_transition.has_value());
  CHECK(c.last_transition->from_candidate);
  CHECK(c.last_transition->summary.find("a demoted") != std::string::npos);
  CHECK(c.last_primary == "b");
  CHECK_FALSE(c.split_brain_open);
  // The lock store was read again at confirmation.
  CHECK(world.record()->reads() == 3);
}

TEST_CASE("engine: the built-in kinds name their lock store and where it keeps the record",
          "[engine]") {
  const ClusterSpec plain = PostgresCluster({"a"}).clusters().front();
  const ClusterSpec patroni = PatroniCluster({"a"}, "    scope: orders-eu\n").clusters().front();
  CHECK(BuiltInLockStoreFactory()(plain) == nullptr);
  CHECK(BuiltInLockStoreFactory()(patroni) != nullptr);
  const LockDescription none = DescribeLock(plain, false);
  CHECK(none.kind == "postgres");
  CHECK_FALSE(none.has_store);
  CHECK(none.record.empty());
  const LockDescription etcd = DescribeLock(patroni, true);
  CHECK(etcd.kind == "patroni");
  CHECK(etcd.has_store);
  CHECK(etcd.record == "/service/orders-eu/leader");
}

// A cluster's lock series, status fields and executor room come from the store its factories
// built, whatever its kind: here a plain PostgreSQL cluster is given a store, and a Patroni
// one is given none.
TEST_CASE("engine: the outputs follow the lock store a cluster has, not its kind", "[engine]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.record()->Set(Record("a"));
  ProbeFactories swapped = world.Factories();
  swapped.lock_stores = [&world](const ClusterSpec& spec) -> std::unique_ptr<LockStore> {
    if (spec.kind == "patroni") return nullptr;
    return std::make_unique<FakeLockStore>(world.record());
  };
  const ConfigReloadStatus reload;

  Scheduler with_store(PostgresCluster({"a", "b"}), swapped);
  with_store.RunOnce();
  const ClusterSnapshot stored = Only(with_store);
  CHECK(stored.lock.has_store);
  CHECK(stored.lock.kind == "postgres");
  CHECK(with_store.probe_threads() == 1 + 2 * 5);  // the store, and room for five members
  const std::string metrics =
      RenderMetrics(DetectorCollector([&] { return with_store.Snapshot(); }, &reload));
  CHECK(metrics.find("splitbrain_lock_store_up{cluster=\"orders\"} 1") != std::string::npos);
  CHECK(metrics.find("splitbrain_member_holds_lock{cluster=\"orders\",member=\"a\"} 1") !=
        std::string::npos);
  CHECK(metrics.find("splitbrain_cluster_info{cluster=\"orders\",kind=\"postgres\"") !=
        std::string::npos);
  const nlohmann::json status = StatusJson(with_store.Snapshot());
  const nlohmann::json& cluster = status["clusters"][0];
  CHECK(cluster["lock"]["holder"] == "a");
  CHECK(cluster["evidence"].contains("zombies"));
  CHECK_FALSE(cluster["evidence"].contains("other_scope"));  // no scope to claim against
  CHECK(cluster["members"][0]["holds_lock"] == true);

  Scheduler without(PatroniCluster({"a", "b"}, ""), swapped);
  without.RunOnce();
  const ClusterSnapshot bare = Only(without);
  CHECK_FALSE(bare.lock.has_store);
  CHECK(bare.lock.kind == "patroni");
  CHECK(without.probe_threads() == 2);  // one probe per member, no manager
  const std::string bare_metrics =
      RenderMetrics(DetectorCollector([&] { return without.Snapshot(); }, &reload));
  CHECK(bare_metrics.find("splitbrain_lock_store_failures_total{") == std::string::npos);
  CHECK(bare_metrics.find("splitbrain_member_holds_lock{") == std::string::npos);
  CHECK(bare_metrics.find("splitbrain_member_zombie{") == std::string::npos);
  const nlohmann::json bare_status = StatusJson(without.Snapshot())["clusters"][0];
  CHECK_FALSE(bare_status.contains("lock"));
  CHECK_FALSE(bare_status["evidence"].contains("zombies"));
  CHECK(bare_status["evidence"].contains("other_scope"));  // its scope is still checked
  CHECK_FALSE(bare_status["members"][0].contains("holds_lock"));
}
size_t ThreadsOfThisProcess() {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++count;
  }
  return count;
}

// Issue 25: a Patroni cluster's reads (its etcd scope, PostgreSQL, Patroni REST) all run on
// the event loop, so the pool reserves no thread for them, whatever the number of members.
TEST_CASE("engine: clusters whose reads are all on the event loop reserve no pool thread",
          "[engine]") {
  std::ostringstream yaml;
  yaml << "clusters:\n";
  for (int i = 0; i < 20; ++i) {
    yaml << "  - name: c" << i << "\n    kind: patroni\n"
         << "    etcd:\n      endpoints: [\"http://127.0.0.1:1\"]\n    members:\n";
    for (const char* member : {"a", "b", "c"}) {
      yaml << "      - name: " << member << "\n        dsn: \"host=127.0.0.1 port=1 user=x\"\n"
           << "        patroni_url: http://127.0.0.1:1\n";
    }
  }
  Scheduler scheduler(MustParse(yaml.str()), ProbeFactories{});
  CHECK(scheduler.probe_threads() == 2);  // the floor; before, the cap (six calls a cluster)
}

// Rounds run on the event loop and blocking calls on a bounded pool: starting 200 clusters
// adds no thread (a thread per cluster would add 200).
TEST_CASE("engine: the threads stay the same whatever the number of clusters", "[engine]") {
  FakeWorld world;
  std::ostringstream yaml;
  yaml << "clusters:\n";
  for (int i = 0; i < 200; ++i) {
    yaml << "  - name: c" << i << "\n    ttl: 3s\n    probe_interval: 500ms\n"
         << "    probe_timeout: 300ms\n"
         << MembersYaml({"c" + std::to_string(i) + "-a", "c" + std::to_string(i) + "-b"});
  }
  Scheduler scheduler(MustParse(yaml.str()), world.Factories());
  CHECK(scheduler.probe_threads() == kMaxProbeThreads);  // 400 probe calls, a bounded pool
  const size_t before = ThreadsOfThisProcess();
  scheduler.Start();
  const bool ran = sbd::testing::WaitFor(
      [&] {
        const auto clusters = scheduler.Snapshot();
        return std::all_of(clusters.begin(), clusters.end(),
                           [](const ClusterSnapshot& c) { return c.rounds >= 2; });
      },
      std::chrono::seconds(20), milliseconds(50));
  const size_t during = ThreadsOfThisProcess();
  scheduler.Stop();
  CHECK(ran);
  CHECK(during <= before + 2);
  CHECK(scheduler.probe_threads() == kMaxProbeThreads);
}
}  // namespace sbd

namespace sbd {
namespace {

// A lock store offering a watch whose changes the test fires by hand.
class FakeWatch : public LockWatch {
 public:
  explicit FakeWatch(std::shared_ptr<LockWatch::Changed> hook) : hook_(std::move(hook)) {}
  ~FakeWatch() override { *hook_ = nullptr; }
  LockWatchStatus Status() const override { return LockWatchStatus{true, 2, 1}; }

 private:
  std::shared_ptr<LockWatch::Changed> hook_;
};

class WatchedLockStore : public LockStore {
 public:
  WatchedLockStore(std::shared_ptr<FakeRecord> record, std::shared_ptr<LockWatch::Changed> hook)
      : record_(std::move(record)), hook_(std::move(hook)) {}
  std::variant<LockRecord, ProbeFailure> Read(SteadyClock::time_point) override {
    return record_->Get();
  }
  std::unique_ptr<LockWatch> Watch(LockWatch::Changed on_change) override {
    *hook_ = std::move(on_change);
    return std::make_unique<FakeWatch>(hook_);
  }

 private:
  std::shared_ptr<FakeRecord> record_;
  std::shared_ptr<LockWatch::Changed> hook_;
};

// A Patroni cluster of a and b whose timed rounds are 20 s apart: any round after the first
// was started by Wake().
ValidatedConfig SlowPatroni() {
  return PatroniCluster({"a", "b"}, "    ttl: 60s\n    probe_interval: 20s\n");
}

// True when the cluster's round count stays put for `quiet`.
bool RoundsStayPut(const Scheduler& scheduler, milliseconds quiet) {
  const auto before = Only(scheduler).rounds;
  std::this_thread::sleep_for(quiet);  // asserting an absence: nothing to wait on
  return Only(scheduler).rounds == before;
}

}  // namespace

TEST_CASE("engine: Wake runs a round at once and follows up until one holder remains",
          "[engine][watch]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.Member("b")->Script({Replica()});
  world.record()->Set(Record("a"));
  Scheduler scheduler(SlowPatroni(), world.Factories());
  scheduler.Start();
  REQUIRE(sbd::testing::WaitFor([&] { return Only(scheduler).rounds == 1; }, milliseconds(3000),
                                milliseconds(10)));
  // The lock moves to b, which has not promoted yet, and a has stepped down: not settled.
  world.Member("a")->Script({Replica()});
  world.record()->Set(Record("b"));
  scheduler.Wake("orders", milliseconds(10000));
  CHECK(sbd::testing::WaitFor([&] { return Only(scheduler).rounds >= 4; }, milliseconds(3000),
                              milliseconds(10)));
  // b promotes: the next follow-up round sees one holder, and the follow-up stops.
  world.Member("b")->Script({Primary()});
  CHECK(sbd::testing::WaitFor(
      [&] {
        const auto c = Only(scheduler);
        return c.assessment.writable == std::vector<std::string>{"b"};
      },
      milliseconds(3000), milliseconds(10)));
  CHECK(RoundsStayPut(scheduler, milliseconds(600)));
  scheduler.Stop();
  const ClusterSnapshot c = Only(scheduler);
  CHECK(c.wakes == 1);
  CHECK(c.follow_up_rounds + 1 == c.rounds);
  CHECK(c.overruns == 0);
  CHECK(c.assessment.verdict == Verdict::kHealthy);
}

TEST_CASE("engine: a reload keeps the watch's counts beside the rounds' own",
          "[engine][watch][reload]") {
  // splitbrain_follow_up_rounds_total and the wakes are counters like the rounds: a reload
  // (SIGHUP, a file_sd change) must not reset them while it keeps `rounds`.
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.Member("b")->Script({Replica()});
  world.record()->Set(Record("a"));
  Scheduler before(SlowPatroni(), world.Factories());
  before.Start();
  REQUIRE(sbd::testing::WaitFor([&] { return Only(before).rounds == 1; }, milliseconds(3000),
                                milliseconds(10)));
  before.Wake("orders", milliseconds(300));
  REQUIRE(sbd::testing::WaitFor([&] { return Only(before).follow_up_rounds >= 1; },
                                milliseconds(3000), milliseconds(10)));
  before.Stop();
  const ClusterSnapshot old = Only(before);
  REQUIRE(old.wakes == 1);

  Scheduler after(SlowPatroni(), world.Factories());
  after.Inherit(before.Snapshot());
  const ClusterSnapshot c = Only(after);
  CHECK(c.rounds == old.rounds);
  CHECK(c.wakes == old.wakes);
  CHECK(c.follow_up_rounds == old.follow_up_rounds);
  CHECK(c.counters.at("a").probes == old.counters.at("a").probes);
  CHECK(c.assessment.verdict == old.assessment.verdict);
}

TEST_CASE("engine: the kinds the config parses are exactly the kinds with registered probes",
          "[engine][kinds]") {
  // Both come from the one list (probes/kinds/kinds.cpp): a kind the config parsed that the
  // engine did not build would run as "unregistered", keeping no lock record.
  std::vector<std::string> parsed;
  for (const KindConfig& kind : Kinds()) parsed.emplace_back(kind.name);
  std::vector<std::string> registered = BuiltInKindNames();
  std::sort(parsed.begin(), parsed.end());
  std::sort(registered.begin(), registered.end());
  CHECK(registered == parsed);
  // And no kind is listed twice (the first line would shadow the second), and each has a probe.
  for (const KindDescriptor& kind : KindDescriptors()) CHECK(kind.member != nullptr);
  CHECK(std::adjacent_find(registered.begin(), registered.end()) == registered.end());
}

TEST_CASE("engine: a follow-up ends when its window has passed, settled or not",
          "[engine][watch]") {
  FakeWorld world;
  world.Member("a")->Script({Replica()});
  world.Member("b")->Script({Replica()});
  world.record()->Set(Record(""));
  Scheduler scheduler(SlowPatroni(), world.Factories());
  scheduler.Start();
  REQUIRE(sbd::testing::WaitFor([&] { return Only(scheduler).rounds == 1; }, milliseconds(3000),
                                milliseconds(10)));
  scheduler.Wake("orders", milliseconds(400));
  scheduler.Wake("no such cluster", milliseconds(400));
  CHECK(sbd::testing::WaitFor([&] { return Only(scheduler).rounds >= 3; }, milliseconds(3000),
                              milliseconds(10)));
  // At 100 ms a round, a 400 ms window holds about five; it then falls back to the 20 s timer.
  CHECK(sbd::testing::WaitFor([&] { return RoundsStayPut(scheduler, milliseconds(500)); },
                              milliseconds(4000), milliseconds(10)));
  scheduler.Stop();
  const ClusterSnapshot c = Only(scheduler);
  CHECK(c.rounds <= 1 + 10);
  CHECK(c.wakes == 1);
}

TEST_CASE("engine: a lock store's watch wakes its cluster and shows in the snapshot",
          "[engine][watch]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.Member("b")->Script({Replica()});
  world.record()->Set(Record("a"));
  auto hook = std::make_shared<LockWatch::Changed>();
  ProbeFactories factories = world.Factories();
  factories.lock_stores = [&](const ClusterSpec&) -> std::unique_ptr<LockStore> {
    return std::make_unique<WatchedLockStore>(world.record(), hook);
  };
  Scheduler scheduler(SlowPatroni(), factories);
  CHECK_FALSE(Only(scheduler).watch.has_value());  // started with the scheduler
  scheduler.Start();
  REQUIRE(sbd::testing::WaitFor([&] { return Only(scheduler).rounds == 1; }, milliseconds(3000),
                                milliseconds(10)));
  REQUIRE(*hook);
  (*hook)();
  CHECK(sbd::testing::WaitFor([&] { return Only(scheduler).rounds == 2; }, milliseconds(3000),
                              milliseconds(10)));
  const ClusterSnapshot c = Only(scheduler);
  REQUIRE(c.watch.has_value());
  CHECK(c.watch->up);
  CHECK(c.watch->breaks == 2);
  CHECK(c.wakes == 1);
  ConfigReloadStatus reload;
  const std::string metrics =
      RenderMetrics(DetectorCollector([&] { return scheduler.Snapshot(); }, &reload));
  CHECK(metrics.find("splitbrain_lock_watch_up{cluster=\"orders\"} 1") != std::string::npos);
  CHECK(metrics.find("splitbrain_lock_watch_breaks_total{cluster=\"orders\"} 2") !=
        std::string::npos);
  scheduler.Stop();
  CHECK_FALSE(*hook);  // the watch was destroyed with the scheduler's stop
}

TEST_CASE("engine: watch: false leaves a cluster to its probe interval", "[engine][watch]") {
  FakeWorld world;
  world.Member("a")->Script({Primary()});
  world.record()->Set(Record("a"));
  auto hook = std::make_shared<LockWatch::Changed>();
  ProbeFactories factories = world.Factories();
  factories.lock_stores = [&](const ClusterSpec&) -> std::unique_ptr<LockStore> {
    return std::make_unique<WatchedLockStore>(world.record(), hook);
  };
  Scheduler scheduler(
      PatroniCluster({"a"}, "    ttl: 60s\n    probe_interval: 20s\n    watch: false\n"),
      factories);
  scheduler.Start();
  REQUIRE(sbd::testing::WaitFor([&] { return Only(scheduler).rounds == 1; }, milliseconds(3000),
                                milliseconds(10)));
  scheduler.Stop();
  CHECK_FALSE(*hook);  // never asked for a watch
  CHECK_FALSE(Only(scheduler).watch.has_value());
}

}  // namespace sbd
