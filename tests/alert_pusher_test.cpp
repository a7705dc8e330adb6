// AlertPusher against a real Alertmanager 0.25 whose notifications land in an in-test webhook
// receiver, plus dead, black-holed and fake Alertmanagers.
#include "detector/alerting/alert_pusher.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <sstream>

#include "probes/http_json.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/hostile_http.h"
#include "tests/support/process.h"

namespace {

using sbd::Alert;
using sbd::AlertPusher;
using sbd::AlertPusherOptions;
using sbd::testing::AlertmanagerServer;
using sbd::testing::BlackHoleListener;
using sbd::testing::TempDir;
using sbd::testing::WebhookReceiver;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;

long long Ms(SteadyClock::duration d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

Alert SplitBrainAlert(const std::string& alertname, const std::string& cluster) {
  Alert alert;
  alert.labels = {
      {"alertname", alertname}, {"severity", "page"}, {"cluster", cluster}, {"scope", "cluster"}};
  alert.annotations = {{"summary", "Two writable primaries in " + cluster},
                       {"description", "pg-a and pg-b both accept writes"},
                       {"runbook_url", "https://runbooks.example/splitbrain"}};
  alert.generator_url = "http://detector.example:9187/status";
  return alert;
}

// Parses "2006-01-02T15:04:05[.fff...]Z" (what Alertmanager returns) to millisecond precision.
SystemClock::time_point ParseRfc3339(const std::string& text) {
  tm t{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, consumed = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d%n", &year, &month, &day, &hour, &minute, &second,
                  &consumed) != 6) {
    FAIL("not an RFC 3339 time: " << text);
  }
  t.tm_year = year - 1900;
  t.tm_mon = month - 1;
  t.tm_mday = day;
  t.tm_hour = hour;
  t.tm_min = minute;
  t.tm_sec = second;
  long long millis = 0;
  std::string rest = text.substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest[0] == '.') {
    std::string digits;
    for (size_t i = 1; i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])); ++i) {
      digits += rest[i];
    }
    rest = rest.substr(1 + digits.size());
    digits = (digits + "000").substr(0, 3);
    millis = std::stoll(digits);
  }
  REQUIRE(rest == "Z");
  return SystemClock::time_point(std::chrono::seconds(timegm(&t))) + milliseconds(millis);
}

// The alert called `alertname` in a JSON array of alerts (Alertmanager's GET /api/v2/alerts, a
// webhook's "alerts", or a raw push), or null.
nlohmann::json FindAlert(const nlohmann::json& alerts, const std::string& alertname) {
  if (!alerts.is_array()) return nullptr;
  for (const auto& alert : alerts) {
    if (alert.contains("labels") && alert["labels"].value("alertname", "") == alertname) {
      return alert;
    }
  }
  return nullptr;
}

// A webhook notification from Alertmanager carrying `alertname` with `status`.
bool Notified(const WebhookReceiver::Delivery& d, const std::string& alertname,
              const std::string& status) {
  if (d.path != "/webhook" || !d.body.is_object() || !d.body.contains("alerts")) return false;
  const auto alert = FindAlert(d.body["alerts"], alertname);
  return !alert.is_null() && alert.value("status", "") == status;
}

nlohmann::json ActiveInAlertmanager(const AlertmanagerServer& am, const std::string& alertname) {
  return FindAlert(am.Alerts(), alertname);
}

// Routes spdlog's default logger into a string for the lifetime of this object.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    auto logger = std::make_shared<spdlog::logger>("captured", sink);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() {
    spdlog::default_logger()->flush();
    return stream_.str();
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

const milliseconds kDeliveryDeadline{15000};

}  // namespace

TEST_CASE("alert pusher: a firing alert reaches the webhook with its labels and annotations",
          "[alertmanager]") {
  TempDir dir("sbd-am");
  WebhookReceiver webhook;
  AlertmanagerServer am(dir.path(), webhook.url());
  AlertPusherOptions options;
  options.alertmanager_urls = {am.url()};
  AlertPusher pusher(options);

  const Alert alert = SplitBrainAlert("SplitBrainTwoPrimaries", "orders");
  const auto pushed_at = SteadyClock::now();
  pusher.Update("orders", {alert});

  REQUIRE(
      webhook.WaitFor([](const auto& d) { return Notified(d, "SplitBrainTwoPrimaries", "firing"); },
                      kDeliveryDeadline));
  WebhookReceiver::Delivery delivery;
  for (const auto& d : webhook.Deliveries()) {
    if (Notified(d, "SplitBrainTwoPrimaries", "firing")) {
      delivery = d;
      break;
    }
  }
  const auto latency = delivery.at - pushed_at;
  INFO("Update -> webhook: " << Ms(latency) << " ms (group_wait 1s)");
  CHECK(latency < std::chrono::seconds(4));

  const auto got = FindAlert(delivery.body["alerts"], "SplitBrainTwoPrimaries");
  CHECK(got["labels"] == nlohmann::json(alert.labels));
  CHECK(got["annotations"] == nlohmann::json(alert.annotations));
  CHECK(got["generatorURL"] == alert.generator_url);
  CHECK(delivery.body["groupLabels"] ==
        nlohmann::json({{"alertname", "SplitBrainTwoPrimaries"}, {"cluster", "orders"}}));

  const auto firing = pusher.Firing();
  REQUIRE(firing.size() == 1);
  CHECK(firing[0].first.labels == alert.labels);
  CHECK(std::chrono::abs(ParseRfc3339(got["startsAt"]) - firing[0].second) < milliseconds(1));

  const auto stats = pusher.Stats();
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].url == am.url());
  CHECK(stats[0].pushes >= 1);
  CHECK(stats[0].failures == 0);
  CHECK(stats[0].alerts_sent >= 1);
  CHECK(stats[0].last_success_unix > 0);
  CHECK(stats[0].last_error.empty());
}

TEST_CASE("alert pusher: resending keeps startsAt stable while endsAt moves forward",
          "[alertmanager]") {
  TempDir dir("sbd-am");
  WebhookReceiver webhook;
  AlertmanagerServer am(dir.path(), webhook.url());
  // A second receiver poses as an Alertmanager and records every raw push: the real one merges
  // alerts (keeping the earliest startsAt), which could hide a startsAt that moves.
  WebhookReceiver raw;
  AlertPusherOptions options;
  options.alertmanager_urls = {am.url(), raw.base_url()};
  options.resend_interval = milliseconds(300);
  AlertPusher pusher(options);

  const Alert alert = SplitBrainAlert("SplitBrainResend", "billing");
  pusher.Update("billing", {alert});
  nlohmann::json first;
  REQUIRE(sbd::testing::WaitFor(
      [&] {
        first = ActiveInAlertmanager(am, "SplitBrainResend");
        return !first.is_null();
      },
      milliseconds(5000)));
  const auto starts_at = ParseRfc3339(first["startsAt"]);
  const auto first_ends_at = ParseRfc3339(first["endsAt"]);
  CHECK(first_ends_at - starts_at <= 4 * options.resend_interval);

  // Call Update like the scheduler does each round, until a resend has moved endsAt.
  nlohmann::json later;
  REQUIRE(sbd::testing::WaitFor(
      [&] {
        pusher.Update("billing", {alert});
        later = ActiveInAlertmanager(am, "SplitBrainResend");
        return !later.is_null() && ParseRfc3339(later["endsAt"]) > first_ends_at;
      },
      milliseconds(5000), milliseconds(50)));
  CHECK(ParseRfc3339(later["startsAt"]) == starts_at);
  CHECK(ParseRfc3339(later["endsAt"]) > first_ends_at);

  // Keep the rounds going until the raw receiver has seen a few resends.
  REQUIRE(sbd::testing::WaitFor(
      [&] {
        pusher.Update("billing", {alert});
        return raw.Deliveries().size() >= 4;
      },
      milliseconds(5000), milliseconds(50)));
  const auto pushes = raw.Deliveries();
  SystemClock::time_point previous_ends_at{};
  SteadyClock::time_point previous_at{};
  for (size_t i = 0; i < pushes.size(); ++i) {
    INFO("raw push " << i << ": " << pushes[i].body.dump());
    CHECK(pushes[i].path == "/api/v2/alerts");
    const auto pushed = FindAlert(pushes[i].body, "SplitBrainResend");
    REQUIRE(!pushed.is_null());
    CHECK(ParseRfc3339(pushed["startsAt"]) == starts_at);
    const auto ends_at = ParseRfc3339(pushed["endsAt"]);
    CHECK(ends_at > previous_ends_at);
    // endsAt leases four resend intervals from the send.
    CHECK(ends_at - pushes[i].wall <= 4 * options.resend_interval + milliseconds(5));
    CHECK(ends_at - pushes[i].wall >= 4 * options.resend_interval - milliseconds(500));
    // Update runs every 50 ms, but resends are throttled to resend_interval.
    if (i > 0) CHECK(pushes[i].at - previous_at >= milliseconds(250));
    previous_ends_at = ends_at;
    previous_at = pushes[i].at;
  }
  const auto firing = pusher.Firing();
  REQUIRE(firing.size() == 1);
  CHECK(std::chrono::time_point_cast<milliseconds>(firing[0].second) == starts_at);
}

TEST_CASE("alert pusher: an alert dropped from Update is resolved", "[alertmanager]") {
  TempDir dir("sbd-am");
  WebhookReceiver webhook;
  AlertmanagerServer am(dir.path(), webhook.url());
  AlertPusherOptions options;
  options.alertmanager_urls = {am.url()};
  AlertPusher pusher(options);

  pusher.Update("inventory", {SplitBrainAlert("SplitBrainResolve", "inventory")});
  pusher.Update("payments", {SplitBrainAlert("SplitBrainOtherGroup", "payments")});
  REQUIRE(webhook.WaitFor([](const auto& d) { return Notified(d, "SplitBrainResolve", "firing"); },
                          kDeliveryDeadline));
  REQUIRE(
      webhook.WaitFor([](const auto& d) { return Notified(d, "SplitBrainOtherGroup", "firing"); },
                      kDeliveryDeadline));

  const auto resolved_at = SteadyClock::now();
  pusher.Update("inventory", {});
  REQUIRE(
      webhook.WaitFor([](const auto& d) { return Notified(d, "SplitBrainResolve", "resolved"); },
                      kDeliveryDeadline));
  for (const auto& d : webhook.Deliveries()) {
    if (Notified(d, "SplitBrainResolve", "resolved")) {
      INFO("Update -> resolved notification: " << Ms(d.at - resolved_at) << " ms");
      CHECK(d.at - resolved_at < std::chrono::seconds(4));
      CHECK(d.body["status"] == "resolved");
      break;
    }
  }
  CHECK(sbd::testing::WaitFor(
      [&] { return ActiveInAlertmanager(am, "SplitBrainResolve").is_null(); }, milliseconds(5000)));
  // Only the group that was updated lost its alert.
  CHECK_FALSE(ActiveInAlertmanager(am, "SplitBrainOtherGroup").is_null());
  const auto firing = pusher.Firing();
  REQUIRE(firing.size() == 1);
  CHECK(firing[0].first.labels.at("alertname") == "SplitBrainOtherGroup");

  // Shutdown resolves the rest and waits for the POST.
  CHECK(pusher.ResolveAll(milliseconds(5000)));
  CHECK(pusher.Firing().empty());
  CHECK(ActiveInAlertmanager(am, "SplitBrainOtherGroup").is_null());
  REQUIRE(
      webhook.WaitFor([](const auto& d) { return Notified(d, "SplitBrainOtherGroup", "resolved"); },
                      kDeliveryDeadline));
  CHECK(pusher.Stats()[0].failures == 0);
}

TEST_CASE("alert pusher: a dead Alertmanager does not delay a live one and counts failures",
          "[alertmanager]") {
  TempDir dir("sbd-am");
  WebhookReceiver webhook;
  AlertmanagerServer live(dir.path() + "/live", webhook.url());
  AlertmanagerServer dead(dir.path() + "/dead", webhook.url());
  dead.Stop();
  BlackHoleListener black_hole;

  AlertPusherOptions options;
  options.alertmanager_urls = {black_hole.url(), dead.url(), live.url()};
  options.timeout = milliseconds(500);
  options.max_attempts = 3;
  options.retry_backoff = milliseconds(50);
  AlertPusher pusher(options);

  const auto pushed_at = SteadyClock::now();
  pusher.Update("ledger", {SplitBrainAlert("SplitBrainDeadPeer", "ledger")});
  REQUIRE(sbd::testing::WaitFor(
      [&] { return !ActiveInAlertmanager(live, "SplitBrainDeadPeer").is_null(); },
      milliseconds(5000), milliseconds(10)));
  const auto stored_after = SteadyClock::now() - pushed_at;
  INFO("Update -> stored in the live Alertmanager: " << Ms(stored_after) << " ms");
  CHECK(stored_after < milliseconds(1000));
  REQUIRE(webhook.WaitFor([](const auto& d) { return Notified(d, "SplitBrainDeadPeer", "firing"); },
                          kDeliveryDeadline));

  // Both dead ones fail after their retries: refused at once, black hole after 3 x 500 ms.
  REQUIRE(sbd::testing::WaitFor(
      [&] {
        const auto stats = pusher.Stats();
        return stats[0].failures >= 1 && stats[1].failures >= 1;
      },
      milliseconds(10000)));
  const auto stats = pusher.Stats();
  REQUIRE(stats.size() == 3);

  INFO("black hole last_error: " << stats[0].last_error);
  CHECK(stats[0].url == black_hole.url());
  CHECK(stats[0].alerts_sent == 0);
  CHECK(stats[0].last_failure_unix > 0);
  CHECK(stats[0].last_success_unix == 0);
  // One deadline for the whole POST, whichever phase the black hole held it in.
  CHECK(stats[0].last_error.find("the answer outlasted the deadline of") != std::string::npos);

  INFO("dead last_error: " << stats[1].last_error);
  CHECK(stats[1].url == dead.url());
  CHECK(stats[1].pushes >= 1);
  CHECK(stats[1].alerts_sent == 0);
  CHECK(stats[1].last_failure_unix > 0);
  CHECK(stats[1].last_error.find("cannot connect") != std::string::npos);

  CHECK(stats[2].url == live.url());
  CHECK(stats[2].failures == 0);
  CHECK(stats[2].alerts_sent >= 1);
  CHECK(stats[2].last_error.empty());
}

TEST_CASE("alert pusher: Update never blocks on a black-holed Alertmanager", "[alertmanager]") {
  BlackHoleListener black_hole;
  AlertPusherOptions options;
  options.alertmanager_urls = {black_hole.url()};
  options.timeout = milliseconds(2000);
  options.max_queued_alerts = 5;
  auto pusher = std::make_unique<AlertPusher>(options);

  // 200 rounds over 20 clusters, each firing a new alert or resolving the previous one.
  SteadyClock::duration slowest{};
  const auto start = SteadyClock::now();
  for (int round = 0; round < 200; ++round) {
    const std::string cluster = "c" + std::to_string(round % 20);
    std::vector<Alert> firing;
    if (round % 40 < 20) firing.push_back(SplitBrainAlert("SplitBrainBlackHole", cluster));
    const auto before = SteadyClock::now();
    pusher->Update(cluster, firing);
    slowest = std::max(slowest, SteadyClock::now() - before);
  }
  const auto total = SteadyClock::now() - start;
  INFO("200 Updates: " << Ms(total) << " ms, slowest " << Ms(slowest) << " ms");
  CHECK(slowest < milliseconds(50));
  CHECK(total < milliseconds(500));

  // The queue stayed bounded: 200 states of 20 alerts were queued; at most 5 wait and one batch
  // of at most 5 is in flight, the rest were dropped (oldest first).
  const auto stats = pusher->Stats();
  CHECK(stats[0].dropped >= 200 - 5 - 5);
  CHECK(stats[0].alerts_sent == 0);

  // A round with everything firing again, then a bounded ResolveAll that cannot drain.
  for (int c = 0; c < 20; ++c) {
    pusher->Update("c" + std::to_string(c),
                   {SplitBrainAlert("SplitBrainBlackHole", "c" + std::to_string(c))});
  }
  auto before = SteadyClock::now();
  CHECK_FALSE(pusher->ResolveAll(milliseconds(200)));
  const auto resolve_all = SteadyClock::now() - before;
  INFO("ResolveAll(200ms): " << Ms(resolve_all) << " ms");
  CHECK(resolve_all < milliseconds(1000));

  // Destruction aborts the POST that hangs in the black hole instead of waiting it out.
  before = SteadyClock::now();
  pusher.reset();
  const auto destroy = SteadyClock::now() - before;
  INFO("~AlertPusher: " << Ms(destroy) << " ms");
  CHECK(destroy < milliseconds(1000));
}

// Issue 25: a peer's answer is bounded as a whole. An Alertmanager that trickles its answer, or
// answers without end, costs each push its timeout at most, the failure names the bound it
// broke, and the next push goes out in its turn (a trickle once held the sender for as long as
// it lasted, and every page after it with it).
TEST_CASE("alert pusher: a hostile Alertmanager costs each push at most its timeout",
          "[alertmanager][hostile]") {
  using sbd::testing::HostileHttp;
  using sbd::testing::Hostility;
  struct Case {
    Hostility hostility;
    const char* says;
  };
  const Case cases[] = {
      // The deadline's figure is what was left of the 500 ms when the loop started the POST.
      {Hostility::kTrickleStatus, " ms: no complete status line"},
      {Hostility::kTrickleHeader, " ms: the headers not complete"},
      {Hostility::kEndlessHeader, "a header line longer than"},
      {Hostility::kManyHeaders, "more than 100 headers"},
      {Hostility::kLongStatus, "status line longer than 1024 bytes"},
      {Hostility::kHugeBody, "answer larger than 65536 bytes"},
      {Hostility::kSilent, " ms: no complete status line"},
  };
  for (const Case& c : cases) {
    CAPTURE(static_cast<int>(c.hostility));
    HostileHttp hostile(c.hostility, 1, "", milliseconds(100));
    const std::string url = hostile.url().substr(0, hostile.url().rfind('/'));
    AlertPusherOptions options;
    options.alertmanager_urls = {url};
    options.timeout = milliseconds(500);
    options.max_attempts = 1;
    auto pusher = std::make_unique<AlertPusher>(options);

    const auto start = SteadyClock::now();
    pusher->Update("ledger", {SplitBrainAlert("SplitBrainHostile", "ledger")});
    REQUIRE(sbd::testing::WaitFor([&] { return pusher->Stats()[0].failures >= 1; },
                                  milliseconds(5000)));
    const auto first = SteadyClock::now() - start;
    const std::string error = pusher->Stats()[0].last_error;
    INFO("Update -> failed push: " << Ms(first) << " ms; last_error: " << error);
    CHECK(first < milliseconds(500 + 1000));
    CHECK(error.find(c.says) != std::string::npos);
    const bool timed = c.hostility == Hostility::kTrickleStatus ||
                       c.hostility == Hostility::kTrickleHeader ||
                       c.hostility == Hostility::kSilent;
    if (timed) CHECK(error.find("the answer outlasted the deadline of") != std::string::npos);

    // The next page goes out in its turn, and fails in its turn.
    pusher->Update("ledger", {SplitBrainAlert("SplitBrainHostile", "ledger"),
                              SplitBrainAlert("SplitBrainNext", "ledger")});
    CHECK(sbd::testing::WaitFor([&] { return pusher->Stats()[0].failures >= 2; },
                                milliseconds(5000)));
    CHECK(hostile.accepted() >= 2);
    CHECK(pusher->Stats()[0].alerts_sent == 0);

    // Shutting down abandons a push in flight at once.
    pusher->Update("ledger", {SplitBrainAlert("SplitBrainLast", "ledger")});
    const auto before = SteadyClock::now();
    pusher.reset();
    CHECK(SteadyClock::now() - before < milliseconds(300));
  }
}

TEST_CASE("alert pusher: credentials in a URL are used for basic auth but never shown",
          "[alertmanager]") {
  CapturedLog log;
  WebhookReceiver fake_alertmanager;  // answers 200 like an Alertmanager and records headers
  const int dead_port = sbd::testing::FreeLoopbackPort();
  const std::string good =
      "http://alice:s3cr%40t@127.0.0.1:" + std::to_string(fake_alertmanager.port()) + "/am/";
  const std::string bad = "https://bob:hunter2@127.0.0.1:" + std::to_string(dead_port) + "/am";

  {
    AlertPusherOptions options;
    options.alertmanager_urls = {good, bad};
    options.timeout = milliseconds(500);
    options.retry_backoff = milliseconds(10);
    AlertPusher pusher(options);
    pusher.Update("secrets", {SplitBrainAlert("SplitBrainCredentials", "secrets")});

    REQUIRE(fake_alertmanager.WaitFor([](const auto& d) { return d.path == "/am/api/v2/alerts"; },
                                      milliseconds(5000)));
    CHECK(fake_alertmanager.Deliveries()[0].authorization ==
          "Basic " + sbd::Base64Encode("alice:s3cr@t"));
    REQUIRE(
        sbd::testing::WaitFor([&] { return pusher.Stats()[1].failures >= 1; }, milliseconds(5000)));

    const auto stats = pusher.Stats();
    CHECK(stats[0].url == "http://127.0.0.1:" + std::to_string(fake_alertmanager.port()) + "/am");
    CHECK(stats[1].url == "https://127.0.0.1:" + std::to_string(dead_port) + "/am");
    CHECK_FALSE(stats[1].last_error.empty());
    for (const auto& s : stats) {
      for (const std::string& field : {s.url, s.last_error}) {
        for (const char* secret : {"alice", "s3cr", "bob", "hunter2", "@"}) {
          INFO(field);
          CHECK(field.find(secret) == std::string::npos);
        }
      }
    }
  }

  try {
    AlertPusherOptions options;
    options.alertmanager_urls = {"ftp://carol:pw123@127.0.0.1:9093"};
    AlertPusher pusher(options);
    FAIL("an ftp:// URL was accepted");
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("ftp://127.0.0.1:9093") != std::string::npos);
    CHECK(message.find("carol") == std::string::npos);
    CHECK(message.find("pw123") == std::string::npos);
  }

  const std::string text = log.text();
  INFO("log:\n" << text);
  CHECK(text.find("alertmanager push failed") != std::string::npos);  // it did log the failure
  CHECK(text.find("https://127.0.0.1:" + std::to_string(dead_port) + "/am") != std::string::npos);
  for (const char* secret : {"alice", "s3cr", "bob", "hunter2", "carol", "pw123"}) {
    CHECK(text.find(secret) == std::string::npos);
  }
}

TEST_CASE("alert pusher: https Alertmanagers are verified against ca_file", "[alertmanager]") {
  TempDir dir("sbd-tls");
  const auto [cert, key] = sbd::testing::MakeLoopbackCertificate(dir.path());
  WebhookReceiver fake_alertmanager(cert, key);
  REQUIRE(fake_alertmanager.base_url().rfind("https://", 0) == 0);

  AlertPusherOptions options;
  options.alertmanager_urls = {fake_alertmanager.base_url()};
  options.timeout = milliseconds(1000);
  options.retry_backoff = milliseconds(10);

  SECTION("trusted through ca_file") {
    options.ca_file = cert;
    AlertPusher pusher(options);
    pusher.Update("tls", {SplitBrainAlert("SplitBrainTls", "tls")});
    REQUIRE(fake_alertmanager.WaitFor(
        [](const auto& d) { return !FindAlert(d.body, "SplitBrainTls").is_null(); },
        milliseconds(5000)));
    CHECK(sbd::testing::WaitFor([&] { return pusher.Stats()[0].alerts_sent == 1; },
                                milliseconds(5000)));
    CHECK(pusher.Stats()[0].failures == 0);
  }
  SECTION("refused without it: the self-signed certificate does not verify") {
    AlertPusher pusher(options);
    pusher.Update("tls", {SplitBrainAlert("SplitBrainTls", "tls")});
    REQUIRE(
        sbd::testing::WaitFor([&] { return pusher.Stats()[0].failures >= 1; }, milliseconds(5000)));
    INFO("last_error: " << pusher.Stats()[0].last_error);
    CHECK(pusher.Stats()[0].last_error.find("certificate verification failed") !=
          std::string::npos);
    CHECK(fake_alertmanager.Deliveries().empty());
  }
}
