// The redis_lease kind in the engine, through its interfaces with in-process fakes: the
// registry's line, and a round of claims and a record that keeps a token.
#include <catch2/catch.hpp>
#include <memory>
#include <mutex>

#include "detector/engine/scheduler.h"
#include "detector/output/alerts.h"
#include "detector/output/metrics.h"
#include "probes/lease_adapters.h"

namespace sbd {
namespace {

ValidatedConfig LeaseConfig() {
  ConfigResult result = ParseConfig(
      "clusters:\n  - name: orders\n    kind: redis_lease\n    ttl: 3s\n"
      "    probe_interval: 300ms\n    probe_timeout: 250ms\n    redis_lease:\n"
      "      address: 127.0.0.1:6379\n      key: \"lease:orders\"\n"
      "      claim: {token_label: token}\n    members:\n"
      "      - name: a\n        metrics_url: http://127.0.0.1:1/metrics\n"
      "      - name: b\n        metrics_url: http://127.0.0.1:2/metrics\n",
      "lease.yml");
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    FAIL("config rejected: " << errors->front().ToString());
  }
  return std::get<ValidatedConfig>(std::move(result));
}

// A candidate that claims (or not) with its token, through the start gate like a real probe.
class FakeClaim : public MemberProbe {
 public:
  FakeClaim(std::string member, bool claims, std::string token)
      : member_(std::move(member)), claims_(claims), token_(std::move(token)) {}
  Observation Probe(SteadyClock::time_point deadline, StartGate* gate) override {
    Observation obs;
    obs.member = member_;
    obs.window.sent_wall = WallClock::now();
    obs.window.sent = SteadyClock::now();
    if (gate) gate->ArriveAndWait(deadline);
    obs.window.received = SteadyClock::now();
    LockClaimReading reading;
    reading.lock = "orders";
    reading.claims = claims_;
    reading.competes = true;
    reading.token = token_;
    obs.result = reading;
    return obs;
  }

 private:
  std::string member_;
  bool claims_;
  std::string token_;
};

// The key as a lease store keeps it: a token, no member name; `dissent` as a store kept by
// several keepers reports the ones that disagreed.
class FakeKey : public LockStore {
 public:
  FakeKey(std::string token, std::vector<std::string> dissent)
      : token_(std::move(token)), dissent_(std::move(dissent)) {}
  std::variant<LockRecord, ProbeFailure> Read(SteadyClock::time_point) override {
    LockRecord view;
    view.endpoint = "127.0.0.1:6379";
    view.holder_token = token_;
    view.lease_ttl_remaining = 2;
    view.dissent = dissent_;
    return view;
  }

 private:
  std::string token_;
  std::vector<std::string> dissent_;
};

ProbeFactories Fakes(bool a_claims, const std::string& key_token,
                     std::vector<std::string> dissent = {}) {
  ProbeFactories factories;
  factories.members = [a_claims](const ClusterSpec&, const MemberSpec& member) {
    const bool claims = member.name == "a" ? a_claims : true;
    return std::make_unique<FakeClaim>(member.name, claims, "token-" + member.name);
  };
  factories.lock_stores = [key_token, dissent](const ClusterSpec&) -> std::unique_ptr<LockStore> {
    return std::make_unique<FakeKey>(key_token, dissent);
  };
  factories.managers = [](const ClusterSpec&, const MemberSpec&) { return nullptr; };
  return factories;
}

}  // namespace

TEST_CASE("engine: the redis_lease kind builds the claim probe and the lease store", "[lease]") {
  const ClusterSpec spec = LeaseConfig().clusters().front();
  const std::unique_ptr<MemberProbe> probe = BuiltInMemberProbeFactory()(spec, spec.members[0]);
  CHECK(dynamic_cast<LeaseClaimProbe*>(probe.get()) != nullptr);
  const std::unique_ptr<LockStore> store = BuiltInLockStoreFactory()(spec);
  CHECK(dynamic_cast<RedisLeaseStore*>(store.get()) != nullptr);
  const LockDescription lock = DescribeLock(spec, true);
  CHECK(lock.kind == "redis_lease");
  CHECK(lock.has_store);
  CHECK(lock.record == "Redis 127.0.0.1:6379 key lease:orders");
}

TEST_CASE("engine: one lease claimer, the key's, is healthy and holds the lock", "[lease]") {
  Scheduler scheduler(LeaseConfig(), Fakes(false, "token-b"));
  scheduler.RunOnce();
  const ClusterSnapshot c = scheduler.Snapshot().front();
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kHealthy);
  CHECK(c.assessment.lock_holder == "b");
  CHECK(c.assessment.zombies.empty());
  CHECK(c.confirmations_accepted == 0);
  // A lease's candidates claim it; they are not "writable".
  CHECK(c.assessment.summary == "b is the only member claiming the lease");
}

TEST_CASE("engine: two lease claimers re-probed at once are a split brain naming the zombie",
          "[lease]") {
  Scheduler scheduler(LeaseConfig(), Fakes(true, "token-b"));
  scheduler.RunOnce();
  const ClusterSnapshot c = scheduler.Snapshot().front();
  INFO(c.assessment.summary);
  CHECK(c.assessment.verdict == Verdict::kSplitBrain);
  CHECK(c.confirmations_accepted == 1);
  CHECK(c.assessment.lineage == "orders");
  CHECK(c.assessment.lock_holder == "b");
  CHECK(c.assessment.zombies == std::vector<std::string>{"a"});
  REQUIRE(c.last_good_dcs.has_value());
  CHECK(c.last_good_dcs->holder == "b");
  CHECK(c.last_good_dcs->holder_token == "token-b");
  // The summary and the page word the claim as a lease's: who claims it, not who is writable.
  CHECK(c.assessment.summary.find("2 members claiming the lease at once in lineage orders: a, b") ==
        0);
  const std::vector<Alert> alerts = AlertsFor(c, AlertingSpec{}, AlertLinks{"", ""});
  REQUIRE_FALSE(alerts.empty());
  CHECK(alerts.front().annotations.at("summary").find(
            "Split brain in orders: a, b claiming the lease at once; zombie a, lock holder b") ==
        0);
  CHECK(alerts.front().annotations.at("summary").find("writable") == std::string::npos);
  const std::string description = alerts.front().annotations.at("description");
  INFO(description);
  CHECK(description.find("ZOMBIE (claims the lease while the store names another holder)") !=
        std::string::npos);
  CHECK(description.find(", claiming the lease since ") != std::string::npos);
}

TEST_CASE("engine: the dashboard's lease series count claims, lease left and dissent", "[lease]") {
  const ConfigReloadStatus reload;
  Scheduler two(LeaseConfig(), Fakes(true, "token-b", {"sentinel s2: no answer (timeout)"}));
  two.RunOnce();
  const std::string metrics =
      RenderMetrics(DetectorCollector([&] { return two.Snapshot(); }, &reload));
  INFO(metrics);
  CHECK(metrics.find("splitbrain_member_claims_lock{cluster=\"orders\",member=\"a\"} 1\n") !=
        std::string::npos);
  CHECK(metrics.find("splitbrain_member_claims_lock{cluster=\"orders\",member=\"b\"} 1\n") !=
        std::string::npos);
  CHECK(metrics.find("splitbrain_lock_lease_remaining_seconds{cluster=\"orders\"} 2\n") !=
        std::string::npos);
  CHECK(metrics.find("splitbrain_lock_store_dissent{cluster=\"orders\"} 1\n") != std::string::npos);
  CHECK(metrics.find("splitbrain_cluster_info{cluster=\"orders\",kind=\"redis_lease\"") !=
        std::string::npos);

  Scheduler one(LeaseConfig(), Fakes(false, "token-b"));
  one.RunOnce();
  const std::string quiet =
      RenderMetrics(DetectorCollector([&] { return one.Snapshot(); }, &reload));
  CHECK(quiet.find("splitbrain_member_claims_lock{cluster=\"orders\",member=\"a\"} 0\n") !=
        std::string::npos);
  CHECK(quiet.find("splitbrain_lock_store_dissent{cluster=\"orders\"} 0\n") != std::string::npos);
}

TEST_CASE("engine: a key whose token no claimer carries names no holder and no zombie", "[lease]") {
  Scheduler scheduler(LeaseConfig(), Fakes(true, "token-somebody-else"));
  scheduler.RunOnce();
  const ClusterSnapshot c = scheduler.Snapshot().front();
  CHECK(c.assessment.verdict == Verdict::kSplitBrain);
  CHECK(c.assessment.lock_holder.empty());
  CHECK(c.assessment.zombies.empty());
}

}  // namespace sbd
