// Issue 12, test 5 end to end: two lease workers compete for one key on a real redis-server,
// the real detector binary watches them as a redis_lease cluster and pages through a real
// Alertmanager 0.25. A steady run has one holder and no page; the holder frozen past its TTL
// and resumed while the other holds the key is paged within one TTL of the resumption, naming
// the zombie and both tokens.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/lease_sandbox.h"
#include "tests/support/process.h"

namespace {

using nlohmann::json;
using sbd::testing::AlertmanagerServer;
using sbd::testing::DetectorProcess;
using sbd::testing::HttpGet;
using sbd::testing::LeaseWorker;
using sbd::testing::RedisServer;
using sbd::testing::TempDir;
using sbd::testing::WaitFor;
using sbd::testing::WebhookReceiver;
using sbd::testing::WriteFile;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTtl{3000};
constexpr milliseconds kRenew{1000};

LeaseWorker::Options Worker(int redis_port, const std::string& token) {
  LeaseWorker::Options options;
  options.redis_port = redis_port;
  options.key = "lease:orders";
  options.lock = "orders";
  options.token = token;
  options.ttl = kTtl;
  options.renew = kRenew;
  return options;
}

// A firing SplitBrain for cluster `orders`, as Alertmanager notified it.
std::optional<json> SplitBrainIn(const WebhookReceiver::Delivery& d) {
  if (!d.body.contains("alerts")) return std::nullopt;
  for (const auto& a : d.body["alerts"]) {
    if (a["labels"].value("alertname", "") == "SplitBrain" &&
        a["labels"].value("cluster", "") == "orders" && a.value("status", "") == "firing") {
      return a;
    }
  }
  return std::nullopt;
}

// Redis, two workers, Alertmanager with its webhook, and the detector watching the lease.
struct LeaseSandbox {
  TempDir dir{"sbd-lease-e2e"};
  RedisServer redis;
  LeaseWorker a{SBD_LEASE_WORKER, Worker(redis.port(), "token-a"), dir.path()};
  LeaseWorker b{SBD_LEASE_WORKER, Worker(redis.port(), "token-b"), dir.path()};
  WebhookReceiver webhook;
  AlertmanagerServer alertmanager{dir.path() + "/am", webhook.url(), "100ms", "1s"};
  int port = sbd::testing::FreeLoopbackPort();
  std::unique_ptr<DetectorProcess> detector;

  LeaseSandbox() {
    const std::string config = WriteFile(
        dir.path(), "detector.yml",
        "alerting:\n  alertmanagers:\n    - url: " + alertmanager.url() +
            "\n  resend_interval: 5s\nclusters:\n"
            "  - name: orders\n    kind: redis_lease\n    ttl: 3s\n    probe_interval: 300ms\n"
            "    probe_timeout: 250ms\n    redis_lease:\n      address: 127.0.0.1:" +
            std::to_string(redis.port()) +
            "\n      key: \"lease:orders\"\n      claim:\n        lock: orders\n"
            "        token_label: token\n    members:\n"
            "      - name: a\n        metrics_url: " +
            a.metrics_url() + "/metrics\n      - name: b\n        metrics_url: " + b.metrics_url() +
            "/metrics\n");
    detector =
        sbd::testing::StartReadyDetector(SBD_BINARY, config, port, dir.path() + "/detector.log");
  }

  json Cluster() const { return sbd::testing::ClusterStatus(port, "orders"); }

  // The member /status names as holding the lock, or "".
  static std::string Holder(const json& cluster) {
    for (const auto& m : cluster["members"]) {
      if (m.value("holds_lock", false)) return m["name"];
    }
    return "";
  }

  bool Healthy() const {
    const json c = Cluster();
    return !c.is_null() && c.value("verdict", "") == "healthy" && !Holder(c).empty();
  }

  std::optional<json> FirstPage() const {
    for (const auto& d : webhook.Deliveries()) {
      if (auto page = SplitBrainIn(d)) return page;
    }
    return std::nullopt;
  }
};

// On a failed REQUIRE, the detector's own account of what it saw.
struct PrintLogOnFailure {
  const LeaseSandbox& sb;
  ~PrintLogOnFailure() {
    if (std::uncaught_exceptions() > 0 && sb.detector) {
      std::printf("detector log:\n%s\n", sb.detector->Log().c_str());
    }
  }
};

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

TEST_CASE("redis_lease detector: a steady run shows one holder, the key's, and pages nobody",
          "[lease][redis]") {
  LeaseSandbox sb;
  PrintLogOnFailure print{sb};
  REQUIRE(WaitFor([&] { return sb.Healthy(); }, 3 * kTtl));
  // Over two TTLs of renewals, every /status read: one writable claimer, the key's holder.
  int reads = 0;
  const auto end = Clock::now() + 2 * kTtl;
  while (Clock::now() < end) {
    const json c = sb.Cluster();
    const std::string key_token = sb.redis.Command({"GET", "lease:orders"});
    CAPTURE(reads, c.dump());
    REQUIRE(c.value("verdict", "") == "healthy");
    REQUIRE(c["evidence"]["writable"].size() == 1);
    const std::string holder = c["evidence"]["writable"][0];
    CHECK(LeaseSandbox::Holder(c) == holder);
    CHECK(c["lock"].value("holder_token", "") == (holder == "a" ? "token-a" : "token-b"));
    CHECK(key_token == (holder == "a" ? "token-a" : "token-b"));
    CHECK(c["evidence"]["zombies"].empty());
    CHECK(c["lock"].value("kind", "") == "redis_lease");
    CHECK(c["lock"].value("record", "") ==
          "Redis 127.0.0.1:" + std::to_string(sb.redis.port()) + " key lease:orders");
    ++reads;
    std::this_thread::sleep_for(milliseconds(200));  // the read period, not a wait
  }
  CHECK(reads >= 20);
  CHECK_FALSE(sb.FirstPage().has_value());
}

TEST_CASE(
    "redis_lease detector: the holder frozen past its TTL and resumed is paged as the "
    "zombie within one TTL, with both tokens",
    "[lease][redis]") {
  for (int run = 1; run <= 3; ++run) {
    CAPTURE(run);
    LeaseSandbox sb;
    PrintLogOnFailure print{sb};
    REQUIRE(WaitFor([&] { return sb.Healthy(); }, 3 * kTtl));
    const bool a_holds = sb.redis.Command({"GET", "lease:orders"}) == "token-a";
    const LeaseWorker& holder = a_holds ? sb.a : sb.b;
    const LeaseWorker& other = a_holds ? sb.b : sb.a;
    const std::string zombie = a_holds ? "a" : "b";
    const std::string keeper = a_holds ? "b" : "a";

    // Freeze the holder just after a renewal, so that resumed it claims for about one period.
    const long renewals = holder.Renewals();
    REQUIRE(WaitFor([&] { return holder.Renewals() > renewals; }, 2 * kRenew, milliseconds(5)));
    holder.Freeze();
    const auto frozen_at = Clock::now();
    REQUIRE(WaitFor(
        [&] {
          return sb.redis.Command({"GET", "lease:orders"}) == other.token();
        },
        kTtl + 2 * kRenew));
    REQUIRE(WaitFor([&] { return other.Claims(); }, kRenew));
    holder.Resume();
    const auto resumed_at = Clock::now();
    CHECK_FALSE(sb.FirstPage().has_value());  // nothing paged while the holder was frozen

    std::optional<json> page;
    Clock::time_point paged_at;
    REQUIRE(sb.webhook.WaitFor(
        [&](const WebhookReceiver::Delivery& d) {
          page = SplitBrainIn(d);
          if (page) paged_at = d.at;
          return page.has_value();
        },
        2 * kTtl));
    CHECK(paged_at > resumed_at);
    CHECK(paged_at - resumed_at < kTtl);
    const std::string summary = (*page)["annotations"].value("summary", "");
    const std::string description = (*page)["annotations"].value("description", "");
    CAPTURE(summary, description);
    CHECK(summary.find("zombie " + zombie + ", lock holder " + keeper) != std::string::npos);
    CHECK(summary.find(zombie + " claims with token " + holder.token()) != std::string::npos);
    CHECK(summary.find(keeper + " claims with token " + other.token()) != std::string::npos);
    CHECK(summary.find("the key holds token " + other.token()) != std::string::npos);
    CHECK(description.find(zombie + " (" + holder.metrics_url() +
                           "/metrics): holder, lineage "
                           "orders, token " +
                           holder.token() + ", ZOMBIE") != std::string::npos);
    std::printf("redis_lease detector run %d: frozen %.0f ms; paged %.0f ms after resumption\n",
                run, Millis(resumed_at - frozen_at), Millis(paged_at - resumed_at));
    std::fflush(stdout);
  }
}
