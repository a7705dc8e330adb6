#include "detector/output/alerts.h"

#include <catch2/catch.hpp>

#include "detector/common/alertmanager_url.h"

namespace sbd {
namespace {

// What the cluster has: members' claims only, or a lock store keeping a record too.
enum class Lock { kNone, kStore };

// Two writable members of lineage 7000; with a store, it names pg-2 and pg-1 is the zombie.
// The spec's kind is left at its default: the alerts must follow what the cluster has, the
// lock's kind included (a lock without a store is described as the claims-only redis_lease).
ClusterSnapshot Snapshot(Verdict verdict, std::uint64_t rounds, Lock lock) {
  ClusterSnapshot c;
  c.spec.name = "orders";
  c.lock = LockDescription{"redis_lease", false, ""};
  if (lock == Lock::kStore) {
    c.spec.scope = "orders-scope";
    c.lock = LockDescription{"patroni", true, "/service/orders-scope/leader"};
  }
  for (const char* name : {"pg-1", "pg-2"}) {
    MemberSpec m;
    m.name = name;
    m.address = std::string(name) + ":5432";
    c.spec.members.push_back(m);
    Observation obs;
    obs.member = name;
    PostgresReading r;
    r.in_recovery = false;
    r.read_only = false;
    r.system_identifier = "7000";
    r.timeline = name == std::string("pg-1") ? 1 : 2;
    obs.result = r;
    RecordObservation(c.history.members[name], obs, WallClock::now());
  }
  c.has_round = true;
  c.verdict_rounds = rounds;
  // Rounds one probe interval apart, the latest ending now.
  c.last_round_end = WallClock::now();
  c.verdict_since = c.last_round_end - std::chrono::duration_cast<WallClock::duration>(
                                           c.spec.probe_interval * static_cast<int>(rounds - 1));
  c.assessment.verdict = verdict;
  c.assessment.summary = "test summary";
  c.assessment.writable = {"pg-1", "pg-2"};
  if (lock == Lock::kStore) {
    c.assessment.lock_readable = true;
    c.assessment.lock_holder = "pg-2";
    c.assessment.zombies = {"pg-1"};
  }
  return c;
}

const AlertLinks kLinks{"http://detector:10259/status?format=text",
                        "http://detector:10259/runbooks/"};

}  // namespace

TEST_CASE("alerts: a confirmed split brain pages at once, naming zombie and holder", "[alerts]") {
  AlertingSpec alerting;
  alerting.external_labels = {{"env", "prod"}};
  auto alerts = AlertsFor(Snapshot(Verdict::kSplitBrain, 1, Lock::kStore), alerting, kLinks);
  REQUIRE(alerts.size() == 1);
  const Alert& a = alerts.front();
  CHECK(a.labels == std::map<std::string, std::string>{{"alertname", "SplitBrain"},
                                                       {"severity", "critical"},
                                                       {"cluster", "orders"},
                                                       {"scope", "orders-scope"},
                                                       {"lock_kind", "patroni"},
                                                       {"env", "prod"}});
  CHECK(a.annotations.at("summary").find("zombie pg-1, lock holder pg-2") != std::string::npos);
  CHECK(a.annotations.at("description").find("pg-2 (pg-2:5432): writable, timeline 2") !=
        std::string::npos);
  CHECK(a.annotations.at("description")
            .find("pg-1 (pg-1:5432): writable, timeline 1, system "
                  "identifier 7000, ZOMBIE") != std::string::npos);
  CHECK(a.annotations.at("description")
            .find("Leader key (/service/orders-scope/leader) held by pg-2.") != std::string::npos);
  CHECK(a.annotations.at("runbook_url") == "http://detector:10259/runbooks/split-brain.md");
  CHECK(a.generator_url == kLinks.generator_url);
}

TEST_CASE("alerts: the page stays up until the incident is seen to be over", "[alerts]") {
  AlertingSpec alerting;
  auto c = Snapshot(Verdict::kSuspected, 1, Lock::kNone);
  c.split_brain_open = true;  // a member turned unreadable mid-incident
  auto alerts = AlertsFor(c, alerting, kLinks);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts.front().labels.at("alertname") == "SplitBrain");
  CHECK(alerts.front().annotations.at("summary").find("not yet seen to be over (suspected)") !=
        std::string::npos);
  CHECK(alerts.front().annotations.at("summary").find("zombie") == std::string::npos);
  c.split_brain_open = false;
  CHECK(AlertsFor(c, alerting, kLinks).empty());
}

TEST_CASE("alerts: a zombie turned unreadable mid-incident is still named, with when it was seen",
          "[alerts]") {
  AlertingSpec alerting;
  auto c = Snapshot(Verdict::kUnknown, 1, Lock::kStore);
  c.split_brain_open = true;  // this round could not read the zombie
  c.assessment.zombies.clear();
  c.assessment.lock_holder.clear();
  c.split_brain_zombies = {"pg-1"};
  c.split_brain_holder = "pg-2";
  c.split_brain_zombies_at = WallClock::time_point(std::chrono::seconds(1796354731));
  auto alerts = AlertsFor(c, alerting, kLinks);
  REQUIRE(alerts.size() == 1);
  const std::string summary = alerts.front().annotations.at("summary");
  INFO(summary);
  CHECK(summary.find("not yet seen to be over (unknown); zombie pg-1 (last seen at "
                     "2026-12-04T03:25:31") != std::string::npos);
  CHECK(summary.find("), lock holder pg-2") != std::string::npos);
  // Once the incident closes, the remembered zombie is not shown.
  c.split_brain_open = false;
  CHECK(AlertsFor(c, alerting, kLinks).empty());
}

TEST_CASE("alerts: a page sent in an unconfirmed round of an open incident still names the zombie",
          "[alerts]") {
  AlertingSpec alerting;
  auto c = Snapshot(Verdict::kSuspected, 1, Lock::kStore);
  c.split_brain_open = true;  // the re-probe of this round did not overlap
  c.assessment.zombies = {"pg-1"};
  c.assessment.lock_holder = "pg-2";
  const auto alerts = AlertsFor(c, alerting, kLinks);
  REQUIRE(alerts.size() == 1);
  const std::string summary = alerts.front().annotations.at("summary");
  CHECK(summary.find("not yet seen to be over (suspected); zombie pg-1, lock holder pg-2") !=
        std::string::npos);
}

TEST_CASE("alerts: the description does not change from round to round", "[alerts]") {
  AlertingSpec alerting;
  auto c = Snapshot(Verdict::kSplitBrain, 1, Lock::kStore);
  LockRecord view;
  view.holder = "pg-2";
  view.mod_revision = 42;
  view.lease_ttl_remaining = 9;
  c.last_good_dcs = view;
  const auto before = AlertsFor(c, alerting, kLinks).front().annotations;
  // Another round: WAL moves, the holder is seen holding again, the lease counts down.
  for (auto& [name, h] : c.history.members) {
    std::get<PostgresReading>(h.last->result).wal_lsn = "0/9999999";
    h.last_reading->wal_bytes += 4096;
  }
  c.history.members["pg-2"].last_seen_holding = WallClock::now();
  view.lease_ttl_remaining = 3;
  c.last_good_dcs = view;
  const auto after = AlertsFor(c, alerting, kLinks).front().annotations;
  CHECK(before == after);
}

TEST_CASE("alerts: warnings wait for the verdict to persist; healthy fires nothing", "[alerts]") {
  AlertingSpec alerting;
  CHECK(AlertsFor(Snapshot(Verdict::kSuspected, kWarningRounds - 1, Lock::kNone), alerting, kLinks)
            .empty());
  auto suspected =
      AlertsFor(Snapshot(Verdict::kSuspected, kWarningRounds, Lock::kNone), alerting, kLinks);
  REQUIRE(suspected.size() == 1);
  CHECK(suspected.front().labels.at("alertname") == "SplitBrainSuspected");
  CHECK(suspected.front().labels ==
        std::map<std::string, std::string>{{"alertname", "SplitBrainSuspected"},
                                           {"severity", "warning"},
                                           {"cluster", "orders"},
                                           {"lock_kind", "redis_lease"}});
  auto drift = AlertsFor(Snapshot(Verdict::kDrift, 10, Lock::kNone), alerting, kLinks);
  REQUIRE(drift.size() == 1);
  CHECK(drift.front().labels.at("alertname") == "InventoryDrift");
  CHECK(AlertsFor(Snapshot(Verdict::kHealthy, 10, Lock::kStore), alerting, kLinks).empty());
  CHECK(AlertsFor(Snapshot(Verdict::kUnknown, 10, Lock::kNone), alerting, kLinks).empty());
}

TEST_CASE("alerts: a warning counts in time, so fast follow-up rounds do not raise it",
          "[alerts]") {
  AlertingSpec alerting;
  auto c = Snapshot(Verdict::kSuspected, 30, Lock::kStore);
  c.assessment.verdict = Verdict::kSuspected;
  // Thirty rounds 100 ms apart (a watch's follow-up) hold for 2.9 s of a 3 s interval.
  c.spec.probe_interval = std::chrono::milliseconds(3000);
  c.verdict_since = c.last_round_end - std::chrono::milliseconds(2900);
  CHECK(AlertsFor(c, alerting, kLinks).empty());
  c.verdict_since = c.last_round_end - std::chrono::milliseconds(5000);
  auto alerts = AlertsFor(c, alerting, kLinks);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts.front().labels.at("alertname") == "SplitBrainSuspected");
}

TEST_CASE("alerts: an unreadable lock store warns after three rounds", "[alerts]") {
  AlertingSpec alerting;
  auto c = Snapshot(Verdict::kHealthy, 10, Lock::kStore);
  c.dcs_consecutive_failures = 2;
  CHECK(AlertsFor(c, alerting, kLinks).empty());
  c.dcs_consecutive_failures = 3;
  auto alerts = AlertsFor(c, alerting, kLinks);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts.front().labels ==
        std::map<std::string, std::string>{{"alertname", "LockStoreUnreadable"},
                                           {"severity", "warning"},
                                           {"cluster", "orders"},
                                           {"scope", "orders-scope"},
                                           {"lock_kind", "patroni"}});
}

TEST_CASE("alerts: a cluster without a lock store never speaks of one", "[alerts]") {
  AlertingSpec alerting;
  auto c = Snapshot(Verdict::kSplitBrain, 10, Lock::kNone);
  c.spec.scope = "orders-scope";  // a scope alone keeps no record
  c.dcs_consecutive_failures = 10;
  auto alerts = AlertsFor(c, alerting, kLinks);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts.front().labels.at("alertname") == "SplitBrain");
  const std::string& description = alerts.front().annotations.at("description");
  CHECK(description.find("Leader key") == std::string::npos);
  CHECK(description.find("Lock store") == std::string::npos);
}

TEST_CASE("alertmanager url: credentials are split out, decoded and never shown", "[alerts]") {
  const AlertmanagerEndpoint ep =
      SplitAlertmanagerUrl("HTTPS://am%40ops:p%3Ass@am.example:9093/prefix/?x=1#f");
  CHECK(ep.error.empty());
  CHECK(ep.scheme_host_port == "https://am.example:9093");
  CHECK(ep.base_path == "/prefix");
  CHECK(ep.has_auth);
  CHECK(ep.user == "am@ops");
  CHECK(ep.password == "p:ss");
  CHECK(ep.redacted == "https://am.example:9093/prefix");
  CHECK(SplitAlertmanagerUrl("ftp://am:1").error.find("http://") != std::string::npos);
  CHECK(SplitAlertmanagerUrl("http://user:secret@:9093").error.find("no host") !=
        std::string::npos);
  CHECK(SplitAlertmanagerUrl("http://user:secret@:9093").redacted.find("secret") ==
        std::string::npos);
  CHECK(SplitAlertmanagerUrl("http://am:9093%").base_path.empty());
}

}  // namespace sbd
