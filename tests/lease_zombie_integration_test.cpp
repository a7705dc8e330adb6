// Issue 12, test 5 (the field guide's rungs 1 and 2) on the lease components alone: two lease
// workers compete for one key on a real redis-server; the lease reader, the claim probes and
// the engine's zombie rule (NameHolderByToken, ConfirmedWritable, Assess) must see one holder in a
// steady run, and name the zombie when the holder, frozen past its TTL, resumes and still claims.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "detector/verdicts/lease_claims.h"
#include "detector/verdicts/verdict.h"
#include "probes/lease_adapters.h"
#include "probes/redis_lease.h"
#include "tests/support/lease_sandbox.h"
#include "tests/support/on_loop.h"
#include "tests/support/process.h"

namespace {

using sbd::SteadyClock;
using sbd::testing::LeaseWorker;
using sbd::testing::RedisServer;
using sbd::testing::WaitFor;
using std::chrono::milliseconds;

constexpr milliseconds kTtl{3000};
constexpr milliseconds kRenew{1000};
constexpr milliseconds kPoll{200};
constexpr milliseconds kProbeDeadline{150};

/// One round as the engine judges it: the two claims, the record with its holder named by the
/// token it keeps, and the engine's verdict on them.
struct LeaseRound {
  std::vector<sbd::Observation> claims;
  sbd::LockRecordResult record;
  sbd::Assessment assessment;
  std::vector<std::string> claimers() const { return assessment.writable; }
};

/// The lease's components as an engine holds them for one lock and two candidates, judged by
/// the engine's own rule (NameHolderByToken, ConfirmedWritable, Assess).
class LeaseWatch {
 public:
  LeaseWatch(const RedisServer& redis, const LeaseWorker& a, const LeaseWorker& b)
      : reader_(Endpoint(redis.port()), Keys()),
        a_(Candidate("a", a), Query()),
        b_(Candidate("b", b), Query()) {
    spec_.name = "demo";
    spec_.kind = "redis_lease";
    for (const char* name : {"a", "b"}) {
      sbd::MemberSpec member;
      member.name = name;
      spec_.members.push_back(member);
    }
  }

  /// Both claims sent together through one start gate, then the record; `confirmed` as the
  /// engine's re-probe decided.
  LeaseRound Round(bool confirmed = false) {
    LeaseRound round = Read();
    sbd::ClusterHistory history;
    for (const auto& obs : round.claims) {
      sbd::RecordObservation(history.members[obs.member], obs, sbd::WallClock::now());
    }
    round.assessment = sbd::Assess(spec_, round.claims, history, confirmed, &round.record);
    return round;
  }

  /// A split brain seen, then confirmed as the engine confirms it: a re-probe whose claims
  /// overlap, both still claiming.
  std::optional<LeaseRound> ConfirmedSplitBrain() {
    const LeaseRound first = Read();
    if (sbd::ConfirmedWritable(first.claims, "demo").size() < 2) return std::nullopt;
    LeaseRound again = Round(true);
    if (sbd::ConfirmedWritable(again.claims, "demo", &first.claims).size() < 2) {
      return std::nullopt;
    }
    return again;
  }

 private:
  LeaseRound Read() {
    const auto deadline = SteadyClock::now() + kProbeDeadline;
    sbd::StartGate gate(2);
    auto other = std::async(std::launch::async, [&] { return b_.Probe(deadline, &gate); });
    LeaseRound round;
    round.claims.push_back(a_.Probe(deadline, &gate));
    round.claims.push_back(other.get());
    auto record = reader_.Read(SteadyClock::now() + milliseconds(500));
    if (auto* read = std::get_if<sbd::LeaseRecord>(&record)) {
      round.record = sbd::LeaseRecordAsView(*read, spec_.members);
    } else {
      round.record = std::get<sbd::ProbeFailure>(record);
    }
    sbd::NameHolderByToken(round.record, round.claims);
    return round;
  }

  static sbd::RedisEndpoint Endpoint(int port) {
    sbd::RedisEndpoint endpoint;
    endpoint.port = port;
    return endpoint;
  }
  static sbd::LeaseKeys Keys() {
    sbd::LeaseKeys keys;
    keys.names = {"lease:demo"};
    return keys;
  }
  static sbd::MemberSpec Candidate(const std::string& member, const LeaseWorker& worker) {
    sbd::MemberSpec spec;
    spec.name = member;
    spec.claim_url = worker.metrics_url() + "/metrics";
    return spec;
  }
  static sbd::ClaimQuery Query() {
    sbd::ClaimQuery query;
    query.lock = "demo";
    query.token_label = "token";
    return query;
  }

  sbd::testing::LeaseReaderOnLoop reader_;
  sbd::LeaseClaimProbe a_;  // on the event loop, read through its blocking adapter
  sbd::LeaseClaimProbe b_;
  sbd::ClusterSpec spec_;
};

LeaseWorker::Options Worker(int redis_port, const std::string& token) {
  LeaseWorker::Options options;
  options.redis_port = redis_port;
  options.token = token;
  options.ttl = kTtl;
  options.renew = kRenew;
  return options;
}

double Millis(SteadyClock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

TEST_CASE("Lease worker: acquires with its token, renews within the TTL, releases on SIGTERM") {
  RedisServer redis;
  sbd::testing::TempDir logs("sbd-lease-logs");
  {
    LeaseWorker worker(SBD_LEASE_WORKER, Worker(redis.port(), "w-1"), logs.path());
    REQUIRE(WaitFor([&] { return worker.Claims(); }, milliseconds(5000)));
    CHECK(redis.Command({"GET", "lease:demo"}) == "w-1");
    const long renewals = worker.Renewals();
    REQUIRE(WaitFor([&] { return worker.Renewals() >= renewals + 2; }, 3 * kRenew));
    const std::string pttl = redis.Command({"PTTL", "lease:demo"});
    CHECK(std::stol(pttl.substr(pttl.find(' ') + 1)) > kTtl.count() - kRenew.count() - 200);
    // The release checks the token: a key someone else holds by now is not deleted.
  }
  CHECK(redis.Command({"GET", "lease:demo"}) == "(nil)");
}

TEST_CASE("Application lease: a steady run has one claimer, the one the key's token names") {
  RedisServer redis;
  sbd::testing::TempDir logs("sbd-lease-logs");
  LeaseWorker a(SBD_LEASE_WORKER, Worker(redis.port(), "token-a"), logs.path());
  LeaseWorker b(SBD_LEASE_WORKER, Worker(redis.port(), "token-b"), logs.path());
  LeaseWatch watch(redis, a, b);
  REQUIRE(WaitFor([&] { return a.Claims() || b.Claims(); }, 2 * kRenew));
  // Over two TTLs of renewals, every round: one claimer, named by the record, no zombie.
  int rounds = 0;
  const auto end = SteadyClock::now() + 2 * kTtl;
  while (SteadyClock::now() < end) {
    const auto next = SteadyClock::now() + kPoll;
    const LeaseRound round = watch.Round();
    CAPTURE(rounds, round.assessment.summary);
    REQUIRE(round.claimers().size() == 1);
    CHECK(round.assessment.verdict == sbd::Verdict::kHealthy);
    CHECK(round.assessment.lock_holder == round.claimers()[0]);
    CHECK(round.assessment.zombies.empty());
    ++rounds;
    std::this_thread::sleep_until(next);  // the poll period, not a wait for a condition
  }
  CHECK(rounds >= 20);
}

TEST_CASE("Application lease: the holder frozen past its TTL and resumed is named the zombie") {
  for (int run = 1; run <= 3; ++run) {
    CAPTURE(run);
    RedisServer redis;
    sbd::testing::TempDir logs("sbd-lease-logs");
    LeaseWorker a(SBD_LEASE_WORKER, Worker(redis.port(), "token-a"), logs.path());
    LeaseWorker b(SBD_LEASE_WORKER, Worker(redis.port(), "token-b"), logs.path());
    LeaseWatch watch(redis, a, b);
    REQUIRE(WaitFor([&] { return a.Claims() || b.Claims(); }, 2 * kRenew));
    const bool a_holds = redis.Command({"GET", "lease:demo"}) == a.token();
    const LeaseWorker& holder = a_holds ? a : b;
    const LeaseWorker& other = a_holds ? b : a;
    const std::string holder_member = a_holds ? "a" : "b";

    // Freeze the holder just after a renewal, so that resumed it claims for about one period.
    const long renewals = holder.Renewals();
    REQUIRE(WaitFor([&] { return holder.Renewals() > renewals; }, 2 * kRenew, milliseconds(5)));
    // The watch polls every kPoll from the freeze on, as a detector would, so the figure
    // includes where resumption falls in the poll period; each run starts the polls at
    // another phase.
    std::atomic<bool> stop{false};
    const auto first_poll = SteadyClock::now() + (run - 1) * milliseconds(70);
    auto poller = std::async(std::launch::async, [&] {
      std::optional<std::pair<SteadyClock::time_point, LeaseRound>> found;
      std::this_thread::sleep_until(first_poll);  // the phase, not a wait for a condition
      while (!stop && !found) {
        const auto next = SteadyClock::now() + kPoll;
        if (auto split = watch.ConfirmedSplitBrain()) {
          found.emplace(SteadyClock::now(), *split);
        } else {
          std::this_thread::sleep_until(next);  // the poll period
        }
      }
      return found;
    });
    holder.Freeze();
    const auto frozen_at = SteadyClock::now();
    REQUIRE(WaitFor(
        [&] {
          return redis.Command({"GET", "lease:demo"}) == other.token();
        },
        kTtl + 2 * kRenew));
    REQUIRE(WaitFor([&] { return other.Claims(); }, kRenew));
    holder.Resume();
    const auto resumed_at = SteadyClock::now();
    poller.wait_until(resumed_at + kTtl);
    stop = true;
    auto found = poller.get();
    REQUIRE(found.has_value());
    const auto named_at = found->first;
    const LeaseRound& confirmed = found->second;
    CAPTURE(confirmed.assessment.summary);
    CHECK(named_at > resumed_at);  // nothing named while the holder was frozen
    CHECK(confirmed.assessment.verdict == sbd::Verdict::kSplitBrain);
    REQUIRE(confirmed.assessment.zombies == std::vector<std::string>{holder_member});
    const sbd::Observation& zombie = confirmed.claims[a_holds ? 0 : 1];
    REQUIRE(zombie.lock_claim() != nullptr);
    CHECK(zombie.lock_claim()->token == holder.token());
    REQUIRE(std::holds_alternative<sbd::LockRecord>(confirmed.record));
    CHECK(std::get<sbd::LockRecord>(confirmed.record).holder_token == other.token());
    CHECK(confirmed.assessment.lock_holder == (a_holds ? "b" : "a"));
    CHECK(named_at - resumed_at < kTtl);

    // The zombie window closes at its next renewal, which fails.
    REQUIRE(WaitFor([&] { return !holder.Claims(); }, 2 * kRenew, milliseconds(10)));
    const auto closed_at = SteadyClock::now();
    std::printf(
        "lease zombie run %d: frozen %.0f ms; zombie named %.0f ms after resumption; it stopped "
        "claiming %.0f ms after resumption\n",
        run, Millis(resumed_at - frozen_at), Millis(named_at - resumed_at),
        Millis(closed_at - resumed_at));
    std::fflush(stdout);
  }
}
