// Issue 27, first slice, against a real ZooKeeper 3.8 (the Debian package) with candidates on
// real kazoo Locks: the zookeeper_lock store read directly (holder, token, waiters, limits, a
// stopped server and the reconnect), then the real detector binary paging through a real
// Alertmanager 0.25 (one holder healthy; a holder frozen past its session, replaced and
// resumed, paged as the zombie with both tokens; ZooKeeper stopped reads LockStoreUnreadable).
// Then Patroni on ZooKeeper's scope store read directly: a scope as Patroni lays it out, its caps,
// and its watch.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "probes/event_loop.h"
#include "probes/zookeeper_lock.h"
#include "probes/zookeeper_scope.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/process.h"
#include "tests/support/syn_drop.h"
#include "tests/support/temp_dir.h"
#include "tests/support/zookeeper_sandbox.h"

namespace {

using nlohmann::json;
using sbd::testing::AlertmanagerServer;
using sbd::testing::DetectorProcess;
using sbd::testing::HttpGet;
using sbd::testing::TempDir;
using sbd::testing::WaitFor;
using sbd::testing::WebhookReceiver;
using sbd::testing::ZooKeeperCandidate;
using sbd::testing::ZooKeeperServer;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTtl{3000};
constexpr double kSessionSeconds = 2.0;
const char* kPath = "/locks/orders";

sbd::ClusterSpec Spec(const ZooKeeperServer& zk) {
  sbd::ClusterSpec spec;
  spec.name = "orders";
  spec.kind = "zookeeper_lock";
  spec.zookeeper_lock.hosts = {zk.host()};
  spec.zookeeper_lock.path = kPath;
  spec.zookeeper_lock.session_timeout = milliseconds(4000);
  sbd::MemberSpec a, b;
  a.name = "a";
  a.lease_identity = "cand-a";
  b.name = "b";
  b.lease_identity = "cand-b";
  spec.members = {a, b};
  return spec;
}

std::variant<sbd::LockRecord, sbd::ProbeFailure> ReadOnce(sbd::LockStore& store) {
  return store.Read(Clock::now() + milliseconds(2000));
}

// Runs a kazoo script against the server (setup the candidates cannot do).
void Kazoo(const ZooKeeperServer& zk, const std::string& body) {
  const std::string script = "from kazoo.client import KazooClient\nc = KazooClient(hosts='" +
                             zk.host() + "')\nc.start(timeout=10)\n" + body + "c.stop()\n";
  const auto run = sbd::testing::RunCommand({"/usr/bin/python3", "-c", script}, false,
                                            std::chrono::seconds(120));
  if (run.exit_code != 0) throw std::runtime_error("kazoo script failed:\n" + run.output);
}

std::optional<json> Firing(const WebhookReceiver::Delivery& d, const std::string& name) {
  return sbd::testing::FiringAlert(d, name, "orders");
}

// ZooKeeper, two kazoo candidates, Alertmanager with its webhook, and the detector.
struct ZooKeeperSandbox {
  TempDir dir{"sbd-zookeeper-e2e"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  ZooKeeperCandidate a{zk.host(), kPath, "cand-a", kSessionSeconds, dir.path()};
  ZooKeeperCandidate b{zk.host(), kPath, "cand-b", kSessionSeconds, dir.path()};
  WebhookReceiver webhook;
  AlertmanagerServer alertmanager{dir.path() + "/am", webhook.url(), "100ms", "1s"};
  int port = sbd::testing::FreeLoopbackPort();
  std::unique_ptr<DetectorProcess> detector;

  ZooKeeperSandbox() {
    const std::string config = sbd::testing::WriteFile(
        dir.path(), "detector.yml",
        "alerting:\n  alertmanagers:\n    - url: " + alertmanager.url() +
            "\n  resend_interval: 5s\nclusters:\n"
            "  - name: orders\n    kind: zookeeper_lock\n    ttl: 3s\n    probe_interval: 300ms\n"
            "    probe_timeout: 250ms\n    zookeeper_lock:\n      hosts: [" +
            zk.host() + "]\n      path: " + kPath +
            "\n      session_timeout: 4s\n      claim:\n        token_label: token\n"
            "    members:\n      - name: a\n        metrics_url: " +
            a.metrics_url() + "\n      - name: b\n        metrics_url: " + b.metrics_url() + "\n");
    detector =
        sbd::testing::StartReadyDetector(SBD_BINARY, config, port, dir.path() + "/detector.log");
  }

  json Cluster() const { return sbd::testing::ClusterStatus(port, "orders"); }

  // The healthy holder /status names, once the record's token is the claimer's; else "".
  std::string HealthyHolder() const {
    const json c = Cluster();
    if (c.is_null() || c.value("verdict", "") != "healthy") return "";
    for (const auto& m : c["members"]) {
      if (!m.value("holds_lock", false)) continue;
      const std::string name = m["name"];
      const std::string claimed = (name == "a" ? a : b).ClaimedToken();
      return c["lock"].value("holder_token", "") == claimed ? name : "";
    }
    return "";
  }

  std::optional<json> FirstPage(const std::string& name) const {
    for (const auto& d : webhook.Deliveries()) {
      if (auto page = Firing(d, name)) return page;
    }
    return std::nullopt;
  }
};

struct PrintLogOnFailure {
  const ZooKeeperSandbox& sb;
  ~PrintLogOnFailure() {
    if (std::uncaught_exceptions() > 0 && sb.detector) {
      std::printf("detector log:\n%s\n", sb.detector->Log().c_str());
    }
  }
};

}  // namespace

TEST_CASE(
    "zookeeper_lock store: the lowest kazoo child holds, its czxid the token, the other "
    "queued",
    "[zookeeper]") {
  TempDir dir{"sbd-zookeeper-store"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  ZooKeeperCandidate a{zk.host(), kPath, "cand-a", kSessionSeconds, dir.path()};
  REQUIRE(WaitFor([&] { return !a.ClaimedToken().empty(); }, milliseconds(10000)));
  ZooKeeperCandidate b{zk.host(), kPath, "cand-b", kSessionSeconds, dir.path()};
  sbd::ZooKeeperLockStore store(Spec(zk));
  std::variant<sbd::LockRecord, sbd::ProbeFailure> read;
  REQUIRE(WaitFor(
      [&] {
        read = ReadOnce(store);
        const auto* view = std::get_if<sbd::LockRecord>(&read);
        return view && view->waiting.size() == 1;
      },
      milliseconds(10000)));
  const sbd::LockRecord& view = std::get<sbd::LockRecord>(read);
  CHECK(view.holder == "a");
  CHECK(view.holder_token == a.ClaimedToken());
  CHECK(view.mod_revision == std::stoll(a.ClaimedToken()));
  CHECK(view.lease_id.rfind("0x", 0) == 0);
  CHECK(view.waiting[0].find("__lock__") != std::string::npos);
  CHECK(view.rejected.empty());
  // The store's revision (the lock path's pzxid): b's child came after a's, so it is b's czxid.
  CHECK(view.store_revision > view.mod_revision);
  // The holder leaves: the waiter's child holds, with a higher czxid, and the revision moves on.
  const std::int64_t first_token = view.mod_revision;
  const std::int64_t first_revision = view.store_revision;
  a.Resign();
  REQUIRE(WaitFor([&] { return !b.ClaimedToken().empty(); }, milliseconds(10000)));
  read = ReadOnce(store);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  const sbd::LockRecord& after = std::get<sbd::LockRecord>(read);
  CHECK(after.holder == "b");
  CHECK(std::stoll(after.holder_token) > first_token);
  CHECK(after.store_revision > first_revision);
  CHECK(after.store_revision >= std::stoll(after.holder_token));
}

TEST_CASE(
    "zookeeper_lock store: an ensemble whose SYNs are dropped fails each read at its deadline, "
    "and a real server beside it still reads",
    "[zookeeper][hostile]") {
  TempDir dir{"sbd-zookeeper-syn"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  ZooKeeperCandidate a{zk.host(), kPath, "cand-a", 30.0, dir.path()};
  REQUIRE(WaitFor([&] { return !a.ClaimedToken().empty(); }, milliseconds(10000)));
  sbd::testing::SynDropListener dropped;
  sbd::ClusterSpec lost = Spec(zk);
  lost.name = "lost";
  lost.zookeeper_lock.hosts = {dropped.address()};
  sbd::ZooKeeperLockStore unreachable(lost);
  sbd::ZooKeeperLockStore healthy(Spec(zk));
  for (int read = 0; read < 2; ++read) {
    CAPTURE(read);
    const auto started = Clock::now();
    const auto failed = unreachable.Read(started + milliseconds(1000));
    const auto took = Clock::now() - started;
    REQUIRE(std::holds_alternative<sbd::ProbeFailure>(failed));
    CAPTURE(std::get<sbd::ProbeFailure>(failed).message);
    CHECK(took >= milliseconds(950));  // nothing answered, nothing refused
    CHECK(took < milliseconds(1300));
    std::variant<sbd::LockRecord, sbd::ProbeFailure> beside;
    REQUIRE(WaitFor(
        [&] {
          beside = ReadOnce(healthy);
          return std::holds_alternative<sbd::LockRecord>(beside);
        },
        milliseconds(10000)));
    CHECK(std::get<sbd::LockRecord>(beside).holder == "a");
  }
}

TEST_CASE(
    "zookeeper_lock store: ZooKeeper stopped fails the read with a reason, never a holder; "
    "restarted, the store reads again",
    "[zookeeper]") {
  TempDir dir{"sbd-zookeeper-store"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  ZooKeeperCandidate a{zk.host(), kPath, "cand-a", 30.0, dir.path()};
  REQUIRE(WaitFor([&] { return !a.ClaimedToken().empty(); }, milliseconds(10000)));
  sbd::ZooKeeperLockStore store(Spec(zk));
  REQUIRE(WaitFor([&] { return std::holds_alternative<sbd::LockRecord>(ReadOnce(store)); },
                  milliseconds(10000)));
  zk.Stop();
  const auto started = Clock::now();
  const auto down = ReadOnce(store);
  CHECK(Clock::now() - started < milliseconds(2300));  // bounded by the deadline
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(down));
  CAPTURE(std::get<sbd::ProbeFailure>(down).message);
  CHECK_FALSE(std::get<sbd::ProbeFailure>(down).message.empty());
  zk.Start();
  std::variant<sbd::LockRecord, sbd::ProbeFailure> up;
  REQUIRE(WaitFor(
      [&] {
        up = ReadOnce(store);
        return std::holds_alternative<sbd::LockRecord>(up);
      },
      milliseconds(20000)));
  CHECK(std::get<sbd::LockRecord>(up).holder == "a");
}

TEST_CASE(
    "zookeeper_lock store: more children than max_children fail the read; a holder node of "
    "1 MiB is not read as an identity",
    "[zookeeper]") {
  TempDir dir{"sbd-zookeeper-store"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  Kazoo(zk,
        "c.ensure_path('/locks/big')\n"
        "c.create('/locks/big/aa__lock__', b'x' * (1024 * 1023), ephemeral=False, "
        "sequence=True)\n"
        "c.ensure_path('/locks/many')\n"
        "for i in range(12): c.create('/locks/many/aa__lock__', b'', sequence=True)\n");
  sbd::ClusterSpec spec = Spec(zk);
  spec.zookeeper_lock.path = "/locks/big";
  sbd::ZooKeeperLockStore big(spec);
  const auto read = ReadOnce(big);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  const sbd::LockRecord& view = std::get<sbd::LockRecord>(read);
  CHECK(view.holder.empty());
  CHECK_FALSE(view.holder_token.empty());
  REQUIRE(view.rejected.size() == 2);
  CHECK(view.rejected[0].find("not ephemeral") != std::string::npos);
  CHECK(view.rejected[1].find("1047552 bytes, above 1024") != std::string::npos);
  spec.zookeeper_lock.path = "/locks/many";
  spec.zookeeper_lock.max_children = 10;
  sbd::ZooKeeperLockStore many(spec);
  const auto refused = ReadOnce(many);
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(refused));
  CHECK(std::get<sbd::ProbeFailure>(refused).message ==
        "12 children under the lock path, above max_children 10: the holder cannot be told");
}

TEST_CASE(
    "zookeeper_lock store: a lock path of 100,000 children fails the read with a reason, and "
    "the server and a store beside it read on",
    "[zookeeper]") {
  TempDir dir{"sbd-zookeeper-store"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  const auto made = Clock::now();
  Kazoo(zk,
        "c.ensure_path('/locks/huge')\n"
        "for batch in range(100):\n"
        "  t = c.transaction()\n"
        "  for i in range(1000): t.create('/locks/huge/%032x__lock__' % i, b'', sequence=True)\n"
        "  assert all(isinstance(r, str) for r in t.commit())\n");
  std::printf("100,000 children made in %.1f s\n",
              std::chrono::duration<double>(Clock::now() - made).count());
  ZooKeeperCandidate a{zk.host(), kPath, "cand-a", kSessionSeconds, dir.path()};
  REQUIRE(WaitFor([&] { return !a.ClaimedToken().empty(); }, milliseconds(10000)));
  sbd::ClusterSpec spec = Spec(zk);
  spec.zookeeper_lock.path = "/locks/huge";
  sbd::ZooKeeperLockStore huge(spec);
  const auto refused = huge.Read(Clock::now() + milliseconds(10000));
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(refused));
  const std::string why = std::get<sbd::ProbeFailure>(refused).message;
  CAPTURE(why);
  std::printf("100,000 children: %s\n", why.c_str());
  // The list (about 3.8 MB) arrives whole, and is refused by its count: never a holder.
  CHECK(why ==
        "100000 children under the lock path, above max_children 1000: the holder "
        "cannot be told");
  sbd::ZooKeeperLockStore beside(Spec(zk));
  const auto read = ReadOnce(beside);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  CHECK(std::get<sbd::LockRecord>(read).holder == "a");
}

TEST_CASE(
    "zookeeper_lock detector: one kazoo holder reads healthy; three clean releases page nobody",
    "[zookeeper]") {
  ZooKeeperSandbox sb;
  PrintLogOnFailure print{sb};
  std::string holder;
  REQUIRE(WaitFor([&] { return !(holder = sb.HealthyHolder()).empty(); }, 3 * kTtl));
  const json c = sb.Cluster();
  CAPTURE(c.dump());
  CHECK(c["lock"].value("kind", "") == "zookeeper_lock");
  CHECK(c["lock"].value("record", "") == "ZooKeeper children of /locks/orders, lowest sequence");
  CHECK(c["lock"]["waiting"].size() == 1);
  const auto end = Clock::now() + kTtl;
  while (Clock::now() < end) {
    REQUIRE(sb.Cluster().value("verdict", "") == "healthy");
    std::this_thread::sleep_for(milliseconds(200));  // the read period, not a wait
  }
  CHECK_FALSE(sb.FirstPage("SplitBrain").has_value());

  // Three clean releases: each time the other candidate takes the lock with a higher czxid,
  // and nothing is paged or warned.
  std::string token = c["lock"].value("holder_token", "");
  for (int release = 1; release <= 3; ++release) {
    CAPTURE(release, holder, token);
    const std::string next = holder == "a" ? "b" : "a";
    (holder == "a" ? sb.a : sb.b).Resign();
    REQUIRE(WaitFor([&] { return sb.HealthyHolder() == next; }, 2 * kTtl));
    const std::string next_token = sb.Cluster()["lock"].value("holder_token", "");
    CHECK(std::stoll(next_token) > std::stoll(token));  // the token only grows
    holder = next;
    token = next_token;
  }
  const auto after = Clock::now() + kTtl;
  while (Clock::now() < after) {
    const json now = sb.Cluster();
    CAPTURE(now.dump());
    REQUIRE(now.value("verdict", "") == "healthy");
    std::this_thread::sleep_for(milliseconds(200));  // the read period, not a wait
  }
  for (const char* alert : {"SplitBrain", "SplitBrainSuspected", "LockStoreUnreadable"}) {
    CAPTURE(alert);
    CHECK_FALSE(sb.FirstPage(alert).has_value());
  }
}

TEST_CASE(
    "zookeeper_lock detector: a holder frozen past its session, replaced and resumed still "
    "claiming is paged as the zombie with both tokens",
    "[zookeeper]") {
  ZooKeeperSandbox sb;
  PrintLogOnFailure print{sb};
  std::string zombie;
  REQUIRE(WaitFor([&] { return !(zombie = sb.HealthyHolder()).empty(); }, 3 * kTtl));
  const ZooKeeperCandidate& holder = zombie == "a" ? sb.a : sb.b;
  const ZooKeeperCandidate& other = zombie == "a" ? sb.b : sb.a;
  const std::string keeper = zombie == "a" ? "b" : "a";
  const std::string old_token = holder.ClaimedToken();
  holder.Freeze();
  std::string new_token;
  REQUIRE(
      WaitFor([&] { return !(new_token = other.ClaimedToken()).empty(); }, milliseconds(15000)));
  holder.Resume();
  const auto resumed_at = Clock::now();
  CHECK(std::stoll(new_token) > std::stoll(old_token));
  std::optional<json> page;
  Clock::time_point paged_at;
  REQUIRE(sb.webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        page = Firing(d, "SplitBrain");
        if (page) paged_at = d.at;
        return page.has_value();
      },
      3 * kTtl));
  const std::string summary = (*page)["annotations"].value("summary", "");
  CAPTURE(summary, old_token, new_token);
  CHECK(summary.find("zombie " + zombie + ", lock holder " + keeper) != std::string::npos);
  CHECK(summary.find(zombie + " claims with token " + old_token) != std::string::npos);
  CHECK(summary.find(keeper + " claims with token " + new_token) != std::string::npos);
  std::printf("zookeeper_lock detector: paged %.0f ms after resumption\n",
              std::chrono::duration<double, std::milli>(paged_at - resumed_at).count());
}

TEST_CASE("zookeeper_lock detector: ZooKeeper stopped reads LockStoreUnreadable, not healthy",
          "[zookeeper]") {
  ZooKeeperSandbox sb;
  PrintLogOnFailure print{sb};
  REQUIRE(WaitFor([&] { return !sb.HealthyHolder().empty(); }, 3 * kTtl));
  sb.zk.Stop();
  REQUIRE(WaitFor(
      [&] {
        const json c = sb.Cluster();
        return !c.is_null() && c["lock"].value("readable", true) == false;
      },
      3 * kTtl));
  const json c = sb.Cluster();
  CAPTURE(c.dump());
  CHECK_FALSE(c["lock"].value("error", "").empty());
  REQUIRE(sb.webhook.WaitFor(
      [&](const WebhookReceiver::Delivery& d) {
        return Firing(d, "LockStoreUnreadable").has_value();
      },
      4 * kTtl));
  CHECK_FALSE(sb.FirstPage("SplitBrain").has_value());
}

TEST_CASE(
    "zookeeper_lock store: digest auth reads a protected lock path; without it the read fails "
    "as auth, and the secret is never in a message",
    "[zookeeper]") {
  TempDir dir{"sbd-zookeeper-store"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  Kazoo(zk,
        "from kazoo.security import make_digest_acl\n"
        "acl = [make_digest_acl('detector', 'pw-7f3a91', all=True)]\n"
        "c.add_auth('digest', 'detector:pw-7f3a91')\n"
        "c.create('/locks/secret', b'', acl=acl, makepath=True)\n"
        "c.create('/locks/secret/aa__lock__', b'cand-a', acl=acl, sequence=True)\n");
  sbd::ClusterSpec spec = Spec(zk);
  spec.zookeeper_lock.path = "/locks/secret";
  sbd::ZooKeeperLockStore anonymous(spec);
  const auto refused = ReadOnce(anonymous);
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(refused));
  CHECK(std::get<sbd::ProbeFailure>(refused).reason == sbd::ProbeFailureReason::kAuth);
  const std::string password_file = dir.path() + "/zk-password";
  sbd::testing::WriteFile(dir.path(), "zk-password", "pw-7f3a91");
  spec.zookeeper_lock.username = "detector";
  spec.zookeeper_lock.password_file = password_file;
  sbd::ZooKeeperLockStore authorized(spec);
  const auto read = ReadOnce(authorized);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  CHECK(std::get<sbd::LockRecord>(read).holder == "a");
  spec.zookeeper_lock.password_file.reset();
  spec.zookeeper_lock.password_env = "SBD_ZK_TEST_NO_SUCH_VARIABLE";
  sbd::ZooKeeperLockStore unset(spec);
  const auto unset_read = ReadOnce(unset);
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(unset_read));
  CHECK(std::get<sbd::ProbeFailure>(unset_read).reason == sbd::ProbeFailureReason::kConfig);
  for (const auto* result : {&refused, &unset_read}) {
    CHECK(std::get<sbd::ProbeFailure>(*result).message.find("pw-7f3a91") == std::string::npos);
  }
}

TEST_CASE(
    "zookeeper_lock store: its own session expired, a read fails (never a holder) and the "
    "next session reads again",
    "[zookeeper]") {
  TempDir dir{"sbd-zookeeper-store"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  ZooKeeperCandidate a{zk.host(), kPath, "cand-a", 30.0, dir.path()};
  REQUIRE(WaitFor([&] { return !a.ClaimedToken().empty(); }, milliseconds(10000)));
  sbd::ClusterSpec spec = Spec(zk);
  spec.zookeeper_lock.session_timeout = milliseconds(1000);
  sbd::ZooKeeperLockStore store(spec);
  REQUIRE(WaitFor([&] { return std::holds_alternative<sbd::LockRecord>(ReadOnce(store)); },
                  milliseconds(10000)));
  // The loop stalls past the session timeout: no pings, so the server expires the session.
  sbd::EventLoop::Shared().Post([] { std::this_thread::sleep_for(milliseconds(3000)); });
  std::this_thread::sleep_for(milliseconds(3000));  // the stall itself, not a wait on a state
  std::vector<std::string> failures;
  std::variant<sbd::LockRecord, sbd::ProbeFailure> read;
  REQUIRE(WaitFor(
      [&] {
        read = ReadOnce(store);
        if (auto* failure = std::get_if<sbd::ProbeFailure>(&read)) {
          failures.push_back(failure->message);
        }
        return std::holds_alternative<sbd::LockRecord>(read);
      },
      milliseconds(15000)));
  CAPTURE(failures);
  REQUIRE_FALSE(failures.empty());  // the lost session was read as a failure, not a holder
  std::printf("zookeeper_lock store: after the expiry, %zu failed reads first: %s\n",
              failures.size(), failures.front().c_str());
  CHECK(std::get<sbd::LockRecord>(read).holder == "a");
}

TEST_CASE(
    "zookeeper_lock store: its watch calls at once when the lock path appears and when a "
    "child leaves, without a read in between",
    "[zookeeper]") {
  TempDir dir{"sbd-zookeeper-store"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  sbd::ZooKeeperLockStore store(Spec(zk));
  std::atomic<int> changes{0};
  std::unique_ptr<sbd::LockWatch> watch = store.Watch([&] { changes.fetch_add(1); });
  REQUIRE(watch != nullptr);
  // The path does not exist yet: the watch waits for its creation.
  REQUIRE(WaitFor([&] { return watch->Status().up; }, milliseconds(10000)));
  CHECK(changes.load() == 0);
  ZooKeeperCandidate a{zk.host(), kPath, "cand-a", 30.0, dir.path()};
  REQUIRE(WaitFor([&] { return changes.load() > 0; }, milliseconds(5000)));
  REQUIRE(WaitFor([&] { return !a.ClaimedToken().empty(); }, milliseconds(10000)));
  const int before = changes.load();
  a.Resign();  // its child is deleted, a new one created
  REQUIRE(WaitFor([&] { return changes.load() > before; }, milliseconds(5000)));
  CHECK(watch->Status().changes >= 2);
  CHECK(watch->Status().up);
  watch.reset();  // no callback after this
  const int after = changes.load();
  a.Resign();
  std::this_thread::sleep_for(milliseconds(500));  // room for a stray callback to show
  CHECK(changes.load() == after);
}

// Patroni on ZooKeeper's store, read directly: a scope laid out as Patroni 3.0 writes it
// (kazoo here holds the leader as a persistent znode, since its session ends with the script).
sbd::ClusterSpec ScopeSpec(const ZooKeeperServer& zk) {
  sbd::ClusterSpec spec;
  spec.name = "demo";
  spec.kind = "patroni";
  spec.scope = "demo";
  sbd::ZooKeeperLockSpec session;
  session.hosts = {zk.host()};
  session.session_timeout = milliseconds(4000);
  session.max_children = 3;
  session.max_data_bytes = 16384;
  spec.patroni_zookeeper = session;
  return spec;
}

const char* kScopeSetup =
    "c.create('/service/demo/initialize', b'7301234567890123456', makepath=True)\n"
    "c.create('/service/demo/config', b'{\"ttl\":12,\"loop_wait\":1}')\n"
    "c.create('/service/demo/members/node1', "
    "b'{\"conn_url\":\"postgres://127.0.0.1:5433/postgres\",\"role\":\"master\"}', "
    "makepath=True)\n"
    "c.create('/service/demo/members/node2', b'{\"conn_url\":7}')\n"
    "c.create('/service/demo/leader', b'node1')\n"
    "print(c.get('/service/demo/leader')[1].czxid)\n";

TEST_CASE(
    "zookeeper_scope store: reads a Patroni scope (leader, czxid, members, config, initialize) "
    "and fails the read past max_children",
    "[zookeeper][patroni]") {
  TempDir dir{"sbd-zookeeper-scope"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  sbd::ZooKeeperScopeStore store(ScopeSpec(zk));
  // No scope yet: read, nobody holds. A read before the store's first session is up fails
  // ("no ZooKeeper session (connecting)"), never names a holder: wait for one that reads.
  std::variant<sbd::LockRecord, sbd::ProbeFailure> empty;
  REQUIRE(WaitFor(
      [&] {
        empty = ReadOnce(store);
        const auto* failure = std::get_if<sbd::ProbeFailure>(&empty);
        CHECK((failure == nullptr || failure->message.find("session") != std::string::npos));
        return failure == nullptr;
      },
      milliseconds(15000)));
  CHECK(std::get<sbd::LockRecord>(empty).holder.empty());

  Kazoo(zk, kScopeSetup);
  auto read = ReadOnce(store);
  INFO((std::holds_alternative<sbd::ProbeFailure>(read) ? std::get<sbd::ProbeFailure>(read).message
                                                        : ""));
  REQUIRE(std::holds_alternative<sbd::LockRecord>(read));
  const sbd::LockRecord& view = std::get<sbd::LockRecord>(read);
  CHECK(view.holder == "node1");
  CHECK(view.mod_revision > 0);
  CHECK(view.lease_id == "0");  // kazoo's script made it persistent: said in rejected
  CHECK(view.initialize == "7301234567890123456");
  CHECK(view.config_ttl == std::optional<std::int64_t>(12));
  REQUIRE(view.members.size() == 1);
  CHECK(view.members[0].name == "node1");
  CHECK(view.members[0].conn_url == "postgres://127.0.0.1:5433/postgres");
  // In the order the answers came: the leader's and the member's are read at once.
  std::vector<std::string> rejected = view.rejected;
  std::sort(rejected.begin(), rejected.end());
  CHECK(rejected ==
        std::vector<std::string>{"leader: not ephemeral: no session of Patroni's owns it",
                                 "members/node2: conn_url is not a string"});

  // Two more members, four: above max_children 3, the read fails, never a holder.
  Kazoo(zk, "for n in ('node3', 'node4'):\n  c.create('/service/demo/members/' + n, b'{}')\n");
  auto crowded = ReadOnce(store);
  REQUIRE(std::holds_alternative<sbd::ProbeFailure>(crowded));
  CHECK(std::get<sbd::ProbeFailure>(crowded).reason == sbd::ProbeFailureReason::kProtocol);
  CHECK(std::get<sbd::ProbeFailure>(crowded).message ==
        "4 members under the scope, above max_children 3");
}

TEST_CASE(
    "zookeeper_scope store: its watch calls at once when the leader znode comes and goes and when "
    "a member joins, without a read in between",
    "[zookeeper][patroni]") {
  TempDir dir{"sbd-zookeeper-scope-watch"};
  ZooKeeperServer zk{dir.path() + "/zk"};
  sbd::ZooKeeperScopeStore store(ScopeSpec(zk));
  std::atomic<int> changes{0};
  std::unique_ptr<sbd::LockWatch> watch = store.Watch([&] { changes.fetch_add(1); });
  REQUIRE(WaitFor([&] { return watch->Status().up; }, milliseconds(10000)));
  CHECK(changes.load() == 0);
  Kazoo(zk, "c.create('/service/demo/leader', b'node1', makepath=True)\n");
  REQUIRE(WaitFor([&] { return changes.load() > 0; }, milliseconds(5000)));
  int before = changes.load();
  Kazoo(zk, "c.delete('/service/demo/leader')\n");
  REQUIRE(WaitFor([&] { return changes.load() > before; }, milliseconds(5000)));
  // members/ did not exist when the watches were set: the leader's next event sets both.
  Kazoo(zk, "c.create('/service/demo/members/node1', b'{}', makepath=True)\n");
  before = changes.load();
  Kazoo(zk, "c.create('/service/demo/leader', b'node2')\n");
  REQUIRE(WaitFor([&] { return changes.load() > before; }, milliseconds(5000)));
  before = changes.load();
  Kazoo(zk, "c.create('/service/demo/members/node2', b'{}')\n");
  REQUIRE(WaitFor([&] { return changes.load() > before; }, milliseconds(5000)));
  CHECK(watch->Status().up);
  watch.reset();  // no callback after this
  const int after = changes.load();
  Kazoo(zk, "c.delete('/service/demo/leader')\n");
  std::this_thread::sleep_for(milliseconds(500));  // room for a stray callback to show
  CHECK(changes.load() == after);
}
