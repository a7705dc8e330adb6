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
