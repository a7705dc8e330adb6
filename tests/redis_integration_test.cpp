// End to end on real Redis 7 servers under three real sentinels (tests/support/redis_sandbox):
// the detector binary probes them and pushes to a real Alertmanager 0.25, and an independent
// writer (its own hiredis connections) says when two members really accepted writes at once.
#include <hiredis.h>

#include <catch2/catch.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/hostile_resp.h"
#include "tests/support/process.h"
#include "tests/support/redis_sandbox.h"

namespace sbd {
namespace {

using testing::AlertmanagerServer;
using testing::DetectorProcess;
using testing::HttpGet;
using testing::RedisProcess;
using testing::RedisSandbox;
using testing::WaitFor;
using testing::WebhookReceiver;
using testing::WriteFile;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kDownAfterMs = 5000;

// One replication group (a master and two replicas) under three sentinels, watched by the
// detector binary, which pushes to a real Alertmanager.
struct Group {
  RedisSandbox sandbox;
  std::vector<RedisProcess*> members;
  WebhookReceiver webhook;
  std::unique_ptr<AlertmanagerServer> alertmanager;
  std::unique_ptr<DetectorProcess> detector;
  int port = 0;

  explicit Group(int replicas = 2) {
    RedisProcess& master = sandbox.StartServer("m");
    members.push_back(&master);
    for (int i = 1; i <= replicas; ++i) {
      members.push_back(&sandbox.StartServer("r" + std::to_string(i), &master));
    }
    sandbox.StartSentinels("cache", master, 3, milliseconds(kDownAfterMs), seconds(10));
    alertmanager = std::make_unique<AlertmanagerServer>(sandbox.root() + "/am", webhook.url());
  }

  // Starts the detector on `extra` members besides the group's own.
  void StartDetector(const std::string& expect = "healthy",
                     const std::vector<RedisProcess*>& extra = {}) {
    std::ostringstream yaml;
    yaml << "alerting:\n  alertmanagers:\n    - url: " << alertmanager->url()
         << "\n  resend_interval: 5s\nclusters:\n  - name: cache\n    kind: redis\n    ttl: "
         << kDownAfterMs << "ms\n    probe_interval: 500ms\n    probe_timeout: 400ms\n"
         << "    members:\n";
    for (const auto* list : {&std::as_const(members), &extra}) {
      for (const RedisProcess* m : *list) {
        yaml << "      - name: " << m->name() << "\n        address: " << m->address() << "\n";
      }
    }
    yaml << "    redis:\n      master_name: cache\n      sentinels: [";
    for (size_t i = 0; i < sandbox.sentinels().size(); ++i) {
      yaml << (i ? ", " : "") << sandbox.sentinels()[i]->address();
    }
    yaml << "]\n";
    const std::string config = WriteFile(sandbox.root(), "detector.yml", yaml.str());
    port = testing::FreeLoopbackPort();
    detector = std::make_unique<DetectorProcess>(
        SBD_BINARY,
        std::vector<std::string>{"--config.file=" + config,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        sandbox.root() + "/detector.log");
    REQUIRE(WaitFor([&] { return Verdict() == expect; }, seconds(20)));
  }

  nlohmann::json Status() const {
    const std::string body = HttpGet(port, "/status");
    return body.empty() ? nlohmann::json() : nlohmann::json::parse(body)["clusters"][0];
  }
  std::string Verdict() const {
    const nlohmann::json status = Status();
    return status.is_object() ? status.value("verdict", "") : "";
  }

  /// Deliveries after `since` firing an alert named `alertname`.
  std::vector<WebhookReceiver::Delivery> Firing(const std::string& alertname,
                                                Clock::time_point since) const {
    std::vector<WebhookReceiver::Delivery> out;
    for (const auto& d : webhook.Deliveries()) {
      if (d.at < since || !d.body.contains("alerts")) continue;
      for (const auto& alert : d.body["alerts"]) {
        if (alert["labels"].value("alertname", "") == alertname &&
            alert.value("status", "") == "firing") {
          out.push_back(d);
          break;
        }
      }
    }
    return out;
  }
};

// An independent writer: SET on every member in turn, each on its own connection, and the
// first pass in which both `a` and `b` accepted a write (their answers overlap that pass).
class Writer {
 public:
  Writer(const RedisProcess& a, const RedisProcess& b) : a_(Connect(a)), b_(Connect(b)) {}
  ~Writer() {
    redisFree(a_);
    redisFree(b_);
  }
  /// Writes until both accept in one pass or `deadline` passes; the pass's start.
  std::optional<Clock::time_point> BothAccept(milliseconds deadline) {
    const auto until = Clock::now() + deadline;
    while (Clock::now() < until) {
      const auto pass = Clock::now();
      if (Accepts(a_) && Accepts(b_)) return pass;
      WaitFor([] { return false; }, milliseconds(10), milliseconds(10));
    }
    return std::nullopt;
  }

 private:
  static redisContext* Connect(const RedisProcess& p) {
    redisContext* c = redisConnectWithTimeout("127.0.0.1", p.port(), timeval{2, 0});
    REQUIRE(c != nullptr);
    REQUIRE(c->err == 0);
    return c;
  }
  static bool Accepts(redisContext* c) {
    auto* reply = static_cast<redisReply*>(redisCommand(c, "SET writer-probe x"));
    const bool ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
    if (reply != nullptr) freeReplyObject(reply);
    return ok;
  }
  redisContext* a_;
  redisContext* b_;
};

nlohmann::json AlertNamed(const WebhookReceiver::Delivery& d, const std::string& name) {
  for (const auto& a : d.body["alerts"]) {
    if (a["labels"]["alertname"] == name) return a;
  }
  return {};
}

}  // namespace

TEST_CASE("redis: a replica promoted by hand pages within one down-after naming it",
          "[redis_integration]") {
  std::vector<double> figures;
  for (int run = 0; run < 3; ++run) {
    Group group;
    group.StartDetector();
    RedisProcess& master = *group.members[0];
    RedisProcess& promoted = *group.members[1];
    Writer writer(master, promoted);
    const auto start = Clock::now();
    promoted.Cli({"REPLICAOF", "NO", "ONE"});
    const auto onset = writer.BothAccept(seconds(5));
    REQUIRE(onset.has_value());
    REQUIRE(group.webhook.WaitFor(
        [&](const WebhookReceiver::Delivery& d) {
          return d.at >= start && testing::Fires(d, "SplitBrain");
        },
        milliseconds(2 * kDownAfterMs)));
    const auto page = group.Firing("SplitBrain", start).front();
    const double onset_to_page = std::chrono::duration<double>(page.at - *onset).count();
    figures.push_back(onset_to_page);
    const nlohmann::json alert = AlertNamed(page, "SplitBrain");
    INFO(alert.dump(2));
    CHECK(alert["labels"]["cluster"] == "cache");
    const std::string summary = alert["annotations"]["summary"];
    CHECK(summary.find("zombie r1, lock holder m") != std::string::npos);
    // How bad: the fork offset from r1's second_repl_offset, each master's stream since it.
    const std::string description = alert["annotations"]["description"];
    CHECK(description.find("fork at replication offset ") != std::string::npos);
    CHECK(description.find("of replication stream since the fork") != std::string::npos);
    CHECK(onset_to_page < kDownAfterMs / 1000.0);
    const nlohmann::json status = group.Status();
    for (const auto& member : status["members"]) {
      if (member["name"] == "r1") CHECK(member["in_lineage"] == true);  // linked by replid2
    }
  }
  std::cout << "redis promoted by hand, onset to page (s):";
  for (double f : figures) std::cout << " " << f;
  std::cout << " (down-after " << kDownAfterMs / 1000.0 << " s)\n";
}

TEST_CASE(
    "redis: a master frozen past down-after and resumed after the failover pages as the "
    "zombie when a writer sees both accept writes",
    "[redis_integration]") {
  std::vector<double> figures;
  for (int run = 0; run < 3; ++run) {
    Group group;
    group.StartDetector();
    RedisProcess& old_master = *group.members[0];
    const auto start = Clock::now();
    old_master.Freeze();
    REQUIRE(WaitFor([&] { return group.sandbox.SentinelMaster("cache") != old_master.address(); },
                    milliseconds(4 * kDownAfterMs), milliseconds(100)));
    RedisProcess* promoted = nullptr;
    for (RedisProcess* m : group.members) {
      if (m->address() == group.sandbox.SentinelMaster("cache")) promoted = m;
    }
    REQUIRE(promoted != nullptr);
    REQUIRE(WaitFor([&] { return promoted->Role() == "master"; }, seconds(10)));
    const auto resumed = Clock::now();
    old_master.Resume();
    // The writer decides: does the old master take writes beside the new one?
    Writer writer(old_master, *promoted);
    const auto onset = writer.BothAccept(seconds(5));
    const bool paged = group.webhook.WaitFor(
        [&](const WebhookReceiver::Delivery& d) {
          return d.at >= start && testing::Fires(d, "SplitBrain");
        },
        milliseconds(2 * kDownAfterMs));
    INFO("run " << run << ": writer saw both accept: " << onset.has_value());
    CHECK(paged == onset.has_value());
    if (!paged || !onset) continue;
    const auto page = group.Firing("SplitBrain", start).front();
    const std::string summary = AlertNamed(page, "SplitBrain")["annotations"]["summary"];
    CHECK(summary.find("zombie m,") != std::string::npos);
    figures.push_back(std::chrono::duration<double>(page.at - *onset).count());
    CHECK(page.at - resumed < milliseconds(kDownAfterMs));
  }
  std::cout << "redis frozen master resumed, onset to page (s):";
  for (double f : figures) std::cout << " " << f;
  std::cout << "\n";
}

TEST_CASE("redis: three planned Sentinel failovers page nobody and warn nobody",
          "[redis_integration]") {
  Group group;
  group.StartDetector();
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) {
    const std::string before = group.sandbox.SentinelMaster("cache");
    // Sentinel refuses (NOGOODSLAVE) until it has seen the replicas of the last failover.
    REQUIRE(WaitFor(
        [&] {
          return group.sandbox.sentinels()[0]->Cli({"SENTINEL", "FAILOVER", "cache"}) == "OK";
        },
        seconds(30), milliseconds(500)));
    REQUIRE(WaitFor([&] { return group.sandbox.SentinelMaster("cache") != before; }, seconds(15)));
    // Done when the old master is a replica again and the detector says so.
    REQUIRE(WaitFor(
        [&] {
          for (RedisProcess* m : group.members) {
            if (m->address() != group.sandbox.SentinelMaster("cache") && m->Role() != "slave") {
              return false;
            }
          }
          return group.Verdict() == "healthy";
        },
        seconds(40), milliseconds(200)));
  }
  // Alertmanager would have delivered within group_wait (1 s); give it three.
  WaitFor([] { return false; }, seconds(3));
  const nlohmann::json status = group.Status();
  INFO(status.dump(2));
  for (const auto& d : group.Firing("SplitBrainSuspected", start)) {
    UNSCOPED_INFO("warned: " << AlertNamed(d, "SplitBrainSuspected")["annotations"].dump());
  }
  CHECK(group.Firing("SplitBrain", start).empty());
  CHECK(group.Firing("SplitBrainSuspected", start).empty());
  CHECK(status["confirmations"]["confirmed"] == 0);
  CHECK(status["transitions"].get<int>() >= 3);
}

TEST_CASE("redis: two unrelated groups under one name are drift, never a page",
          "[redis_integration]") {
  Group group(1);
  // A second group (its own master and replica, its own replication id) listed in the first.
  RedisProcess& stranger = group.sandbox.StartServer("other");
  RedisProcess& stranger_replica = group.sandbox.StartServer("other-r", &stranger);
  const auto start = Clock::now();
  group.StartDetector("drift", {&stranger, &stranger_replica});
  const nlohmann::json status = group.Status();
  INFO(status.dump(2));
  CHECK(status["evidence"]["drift"] == std::vector<std::string>{"other"});
  CHECK(group.webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return d.at >= start && testing::Fires(d, "InventoryDrift");
      },
      seconds(15)));
  CHECK(group.Firing("SplitBrain", start).empty());

  // A sentinel that stops answering is shown; the other two still make a majority.
  group.sandbox.sentinels()[2]->Stop();
  REQUIRE(WaitFor(
      [&] {
        const nlohmann::json s = group.Status();
        return s.is_object() && s["lock"].value("dissent", nlohmann::json::array()).size() == 1;
      },
      seconds(10)));
  const nlohmann::json lock = group.Status()["lock"];
  INFO(lock.dump(2));
  CHECK(lock["holder"] == "m");
  CHECK(lock["dissent"][0].get<std::string>().find(group.sandbox.sentinels()[2]->address() +
                                                   ": no answer (") != std::string::npos);
}

TEST_CASE("redis: a master fenced by min-replicas-to-write is warned, not paged",
          "[redis_integration]") {
  Group group;
  // Only the old master guards itself: once Sentinel moves its replicas away, it refuses writes.
  RedisProcess& old_master = *group.members[0];
  old_master.Cli({"CONFIG", "SET", "min-replicas-to-write", "1"});
  old_master.Cli({"CONFIG", "SET", "min-replicas-max-lag", "10"});
  group.StartDetector();
  const auto start = Clock::now();
  group.sandbox.sentinels()[0]->Cli({"SENTINEL", "FAILOVER", "cache"});
  REQUIRE(WaitFor(
      [&] {
        const nlohmann::json s = group.Status();
        return s.is_object() && s.value("verdict", "") == "suspected" &&
               s["evidence"].value("fenced", nlohmann::json::array()).size() == 1;
      },
      seconds(15), milliseconds(50)));
  const nlohmann::json status = group.Status();
  INFO(status.dump(2));
  CHECK(status["evidence"]["fenced"] == std::vector<std::string>{"m"});
  CHECK(status["summary"].get<std::string>().find("fenced holder") != std::string::npos);
  // Warned while it lasts (SplitBrainSuspected), never paged.
  CHECK(group.webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return d.at >= start && testing::Fires(d, "SplitBrainSuspected");
      },
      seconds(10)));
  REQUIRE(WaitFor([&] { return group.Verdict() == "healthy"; }, seconds(30)));
  CHECK(group.Firing("SplitBrain", start).empty());
}

TEST_CASE(
    "redis: sentinels naming another master at a newer or an out-of-range epoch cannot hide a "
    "replica promoted by hand",
    "[redis_integration]") {
  Group group;
  // Two more sentinels in the detector's list, each configured for another master under the
  // same name: one at an epoch far above the group's, one at an epoch no real group reaches.
  // (Apart: sentinels of one master would adopt the higher epoch from each other.)
  auto monitor = [](const RedisProcess& other, const std::string& epoch) {
    return "sentinel monitor cache 127.0.0.1 " + std::to_string(other.port()) +
           " 2\nsentinel config-epoch cache " + epoch + "\n";
  };
  RedisProcess& elsewhere = group.sandbox.StartServer("elsewhere");
  group.sandbox.StartSentinel("sentinel-newer", monitor(elsewhere, "1000000"));
  group.sandbox.StartSentinel("sentinel-far",
                              monitor(group.sandbox.StartServer("farther"), "9999999999"));
  group.StartDetector();
  const std::string newer = group.sandbox.sentinels()[3]->address();
  const std::string far = group.sandbox.sentinels()[4]->address();
  nlohmann::json lock = group.Status()["lock"];
  INFO(lock.dump(2));
  CHECK(lock["holder"] == "m");
  auto said = [&](const std::string& text) {
    for (const auto& line : group.Status()["lock"].value("dissent", nlohmann::json::array())) {
      if (line.get<std::string>().find(text) != std::string::npos) return true;
    }
    return false;
  };
  // Both shown: the newer one's view, and why the other's answer was refused.
  CHECK(said("sentinel " + newer + " names " + elsewhere.address() + " at epoch 1000000"));
  CHECK(said("sentinel " + far +
             ": no answer (protocol): SENTINEL master: config-epoch 9999999999 is out of range"));
  CHECK(said("a failover is reported by 1 of 5 sentinels, not a majority"));
  // Believed for the time the others take to hear of a failover at most, then not at all.
  CHECK(WaitFor([&] { return said("is not trusted: a minority is believed for 3000 ms"); },
                seconds(10), milliseconds(100)));

  RedisProcess& master = *group.members[0];
  RedisProcess& promoted = *group.members[1];
  Writer writer(master, promoted);
  const auto start = Clock::now();
  promoted.Cli({"REPLICAOF", "NO", "ONE"});
  REQUIRE(writer.BothAccept(seconds(5)).has_value());
  // Paged as without those sentinels (the fresh window past, at once).
  REQUIRE(group.webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return d.at >= start && testing::Fires(d, "SplitBrain");
      },
      milliseconds(2 * kDownAfterMs)));
  const nlohmann::json status = group.Status();
  INFO(status.dump(2));
  CHECK(status["verdict"] == "split_brain");
  CHECK(status["raw_verdict"] == "split_brain");
  const std::string summary =
      AlertNamed(group.Firing("SplitBrain", start).front(), "SplitBrain")["annotations"]["summary"];
  CHECK(summary.find("zombie r1, lock holder m") != std::string::npos);
}

}  // namespace sbd

namespace sbd {

TEST_CASE(
    "redis: forty trickling Redis members beside a healthy Sentinel group blind it in no "
    "round",
    "[redis][hostile]") {
  constexpr size_t kHostile = 40;
  Group group;
  // Each member answers a command with "$100000\r\n", then one byte every 0.5 s, for ever: a
  // timeout per read never fires, only a deadline for the whole answer does.
  testing::HostileResp trickle(testing::RespHostility::kTrickle, kHostile);
  std::ostringstream yaml;
  yaml << "clusters:\n  - name: cache\n    kind: redis\n    ttl: " << kDownAfterMs
       << "ms\n    probe_interval: 500ms\n    probe_timeout: 400ms\n    members:\n";
  for (const RedisProcess* m : group.members) {
    yaml << "      - name: " << m->name() << "\n        address: " << m->address() << "\n";
  }
  std::string sentinels;
  for (size_t i = 0; i < group.sandbox.sentinels().size(); ++i) {
    sentinels += (i ? ", " : "") + group.sandbox.sentinels()[i]->address();
  }
  yaml << "    redis:\n      master_name: cache\n      sentinels: [" << sentinels << "]\n";
  yaml << "  - name: trickle\n    kind: redis\n    ttl: 5s\n    probe_interval: 1s\n"
       << "    probe_timeout: 1s\n    members:\n";
  for (size_t i = 0; i < kHostile; ++i) {
    yaml << "      - name: t" << i << "\n        address: " << trickle.address(i) << "\n";
  }
  yaml << "    redis:\n      master_name: trickle\n      sentinels: [" << sentinels << "]\n";
  const std::string config = WriteFile(group.sandbox.root(), "detector.yml", yaml.str());
  const int port = testing::FreeLoopbackPort();
  const auto detector =
      testing::StartReadyDetector(SBD_BINARY, config, port, group.sandbox.root() + "/detector.log");
  auto healthy = [](const nlohmann::json& c) {
    return !c.is_null() && c.value("verdict", "") == "healthy" && !c["lock"].contains("error");
  };
  nlohmann::json settling;
  const bool settled = WaitFor(
      [&] {
        settling = testing::ClusterStatus(port, "cache");
        return healthy(settling) && trickle.accepted() >= static_cast<int>(kHostile);
      },
      seconds(20));
  INFO("the healthy group while settling: " << settling.dump());
  REQUIRE(settled);
  // While the trickle lasts, every sample of the healthy group is healthy, its record read.
  const auto until = Clock::now() + milliseconds(6000);
  int samples = 0;
  while (Clock::now() < until) {
    const nlohmann::json cache = testing::ClusterStatus(port, "cache");
    INFO("sample " << samples << ": " << cache.dump());
    REQUIRE(healthy(cache));
    for (const auto& m : cache["members"]) REQUIRE_FALSE(m.contains("error"));
    ++samples;
    std::this_thread::sleep_for(milliseconds(100));  // the sampling pace, not a wait
  }
  std::printf("trickling redis members: %d samples of the healthy group, all healthy\n", samples);
  // Each hostile member failed with the bound it broke: the whole answer's deadline.
  const nlohmann::json hostile = testing::ClusterStatus(port, "trickle");
  REQUIRE(hostile["members"].size() == kHostile);
  for (const auto& m : hostile["members"]) {
    INFO(m.dump());
    REQUIRE(m.contains("error"));
    CHECK(m["error"].value("reason", "") == "timeout");
    CHECK(m["error"].value("message", "").find("deadline") != std::string::npos);
  }
}

}  // namespace sbd
