// Issue 12, test 5 (the field guide's rungs 1 and 2) on the lease components alone: two lease
// workers compete for one key on a real redis-server; the lease reader, the claim probes and
// the zombie rule must see one holder in a steady run, and name the zombie when the holder,
// frozen past its TTL, resumes and still claims.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "detector/verdicts/lease_claims.h"
#include "probes/metrics_claim.h"
#include "probes/redis_lease.h"
#include "tests/support/lease_sandbox.h"
#include "tests/support/process.h"

namespace {

using sbd::AssessLeaseClaims;
using sbd::LeaseAssessment;
using sbd::SteadyClock;
using sbd::testing::LeaseWorker;
using sbd::testing::RedisServer;
using sbd::testing::WaitFor;
using std::chrono::milliseconds;

constexpr milliseconds kTtl{3000};
constexpr milliseconds kRenew{1000};
constexpr milliseconds kPoll{200};
constexpr milliseconds kProbeDeadline{150};

/// The lease's components as an engine would hold them for one lock and two candidates.
class LeaseWatch {
 public:
  LeaseWatch(const RedisServer& redis, const LeaseWorker& a, const LeaseWorker& b)
      : reader_(Endpoint(redis.port()), Keys()), a_(Target("a", a)), b_(Target("b", b)) {}

  /// Both claims sent together through one start gate, then the record.
  LeaseAssessment Round() {
    const auto deadline = SteadyClock::now() + kProbeDeadline;
    sbd::StartGate gate(2);
    auto other = std::async(std::launch::async, [&] { return b_.Probe(deadline, &gate); });
    sbd::CandidateClaim claim_a{a_.Probe(deadline, &gate), ""};
    sbd::CandidateClaim claim_b{other.get(), ""};
    auto record = reader_.Read(SteadyClock::now() + milliseconds(500));
    sbd::LeaseRecordView view;  // unknown when the store could not be read
    if (auto* read = std::get_if<sbd::LeaseRecord>(&record)) view = RecordViewOf(read->keys.at(0));
    return AssessLeaseClaims(view, {claim_a, claim_b});
  }

  /// A split brain seen, then confirmed at once by a second round that sees it too.
  std::optional<LeaseAssessment> ConfirmedSplitBrain() {
    if (!Round().split_brain()) return std::nullopt;
    auto confirmation = Round();
    if (!confirmation.split_brain()) return std::nullopt;
    return confirmation;
  }

 private:
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
  static sbd::ClaimTarget Target(const std::string& member, const LeaseWorker& worker) {
    sbd::ClaimTarget target;
    target.member = member;
    target.url = worker.metrics_url() + "/metrics";
    target.query.lock = "demo";
    target.query.token_label = "token";
    return target;
  }

  sbd::RedisLeaseReader reader_;
  sbd::MetricsClaimProbe a_;
  sbd::MetricsClaimProbe b_;
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
    const auto assessment = watch.Round();
    CAPTURE(rounds);
    REQUIRE(assessment.claimers.size() == 1);
    CHECK_FALSE(assessment.split_brain());
    CHECK(assessment.named_holder == assessment.claimers[0]);
    CHECK(assessment.zombies.empty());
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
      std::optional<std::pair<SteadyClock::time_point, LeaseAssessment>> found;
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
    const auto confirmed = std::optional<LeaseAssessment>(found->second);
    CHECK(named_at > resumed_at);  // nothing named while the holder was frozen
    REQUIRE(confirmed.has_value());
    REQUIRE(confirmed->zombies.size() == 1);
    CHECK(confirmed->zombies[0].member == holder_member);
    CHECK(confirmed->zombies[0].claimed_token == holder.token());
    CHECK(confirmed->zombies[0].record_token == other.token());
    CHECK(confirmed->named_holder == std::optional<std::string>(a_holds ? "b" : "a"));
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
