// The redis_lease kind's adapters: a lease record as the engine's LockRecord, the holder named by
// its token, tokens shown to people, the claim probe as a member probe, and the verdict on a
// round of claims.
#include "probes/lease_adapters.h"

#include <httplib.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "detector/common/logfmt.h"
#include "detector/verdicts/lease_claims.h"
#include "detector/verdicts/verdict.h"
#include "tests/support/hostile_http.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;

LeaseKeyReading Held(const std::string& key, const std::string& token, std::int64_t pttl) {
  LeaseKeyReading reading;
  reading.key = key;
  reading.state = LeaseKeyReading::State::kHeld;
  reading.token = token;
  reading.token_length = static_cast<std::int64_t>(token.size());
  reading.lease_left_ms = pttl;
  reading.type = "string";
  return reading;
}

LeaseRecord RecordOf(std::vector<LeaseKeyReading> keys) {
  LeaseRecord record;
  record.endpoint = "127.0.0.1:6379";
  record.keys = std::move(keys);
  return record;
}

MemberSpec Candidate(const std::string& name, const std::string& identity = "") {
  MemberSpec member;
  member.name = name;
  member.lease_identity = identity;
  return member;
}

Observation Claiming(const std::string& member, bool claims, const std::string& token,
                     SteadyClock::time_point at) {
  Observation obs;
  obs.member = member;
  obs.window = {WallClock::now(), at, at + milliseconds(5)};
  LockClaimReading reading;
  reading.lock = "orders";
  reading.claims = claims;
  reading.competes = true;
  reading.token = token;
  obs.result = reading;
  return obs;
}

}  // namespace

TEST_CASE("ShownToken: escapes control and quote bytes and cuts a long token", "[lease]") {
  CHECK(ShownToken("token-a") == "token-a");
  CHECK(ShownToken(std::string("a\nb\"\x01", 5)) == "a\\nb\\\"\\x01");
  const std::string shown = ShownToken(std::string(5000, 'x'));
  CHECK(shown == std::string(kShownTokenBytes, 'x') + "...(5000 bytes)");
  // A character split by the cut is left out whole, never shown as stray bytes.
  const std::string multibyte = std::string(kShownTokenBytes - 1, 'y') + "\xc3\xa9" + "zz";
  CHECK(ShownToken(multibyte) == std::string(kShownTokenBytes - 1, 'y') + "...(67 bytes)");
}

TEST_CASE("LeaseRecordAsView: a held key gives its token, lease left and the identity's member",
          "[lease]") {
  const LockRecord view = LeaseRecordAsView(RecordOf({Held("lease:orders", "w-2", 2001)}),
                                            {Candidate("a", "w-1"), Candidate("b", "w-2")});
  CHECK(view.endpoint == "127.0.0.1:6379");
  CHECK(view.holder_token == "w-2");
  CHECK(view.holder == "b");
  CHECK(view.lease_ttl_remaining == 3);  // 2001 ms rounded up
  CHECK(view.rejected.empty());

  // Without identities the engine names the holder from the claims; the store names nobody.
  const LockRecord bare =
      LeaseRecordAsView(RecordOf({Held("lease:orders", "w-2", 10)}), {Candidate("a")});
  CHECK(bare.holder.empty());
  CHECK(bare.holder_token == "w-2");
}

TEST_CASE("LeaseRecordAsView: gone, no TTL, another type, a cut token and two held keys",
          "[lease]") {
  LeaseKeyReading gone;
  gone.key = "lease:orders";
  const LockRecord nobody = LeaseRecordAsView(RecordOf({gone}), {Candidate("a", "w-1")});
  CHECK(nobody.holder.empty());
  CHECK(nobody.holder_token.empty());
  CHECK(nobody.lease_ttl_remaining == -1);
  CHECK(nobody.rejected.empty());

  const LockRecord forever =
      LeaseRecordAsView(RecordOf({Held("lease:orders", "w-1", -1)}), {Candidate("a", "w-1")});
  CHECK(forever.holder == "a");
  CHECK(forever.lease_ttl_remaining == -1);
  REQUIRE(forever.rejected.size() == 1);
  CHECK(forever.rejected[0] == "lease:orders: no TTL (PTTL -1): the lease never expires");

  LeaseKeyReading hash;
  hash.key = "lease:\x1b[31m";
  hash.state = LeaseKeyReading::State::kWrongType;
  hash.type = "hash";
  const LockRecord wrong = LeaseRecordAsView(RecordOf({hash}), {});
  CHECK(wrong.holder_token.empty());
  REQUIRE(wrong.rejected.size() == 1);
  CHECK(wrong.rejected[0] == "lease:\\x1B[31m: a hash, not a string: not a lease");

  LeaseKeyReading cut = Held("lease:orders", std::string(16, 't'), 500);
  cut.token_truncated = true;
  cut.token_length = 100000;
  const LockRecord unknown = LeaseRecordAsView(RecordOf({cut}), {});
  CHECK(unknown.holder_token.empty());
  REQUIRE(unknown.rejected.size() == 1);
  CHECK(unknown.rejected[0].find("100000 bytes") != std::string::npos);

  LeaseRecord two = RecordOf({Held("locks:1", "w-1", 500), Held("locks:2", "w-2", 500)});
  two.scan_limit_hit = "max_keys 2";
  const LockRecord several = LeaseRecordAsView(two, {Candidate("a", "w-1"), Candidate("b", "w-2")});
  CHECK(several.holder.empty());
  CHECK(several.holder_token.empty());
  REQUIRE(several.rejected.size() == 2);
  CHECK(several.rejected[0] == "SCAN stopped at max_keys 2: keys beyond it were not read");
  CHECK(several.rejected[1] == "2 keys held at once (locks:1, locks:2): the holder is unknown");
}

TEST_CASE("NameHolderByToken: the one claimer carrying the record's token is its holder",
          "[lease]") {
  const auto now = SteadyClock::now();
  LockRecord view;
  view.holder_token = "token-b";
  std::variant<LockRecord, ProbeFailure> record = view;
  NameHolderByToken(record,
                    {Claiming("a", true, "token-a", now), Claiming("b", true, "token-b", now)});
  CHECK(std::get<LockRecord>(record).holder == "b");

  // A claimer wins over a candidate that carries the token on a 0 series.
  record = view;
  NameHolderByToken(record,
                    {Claiming("a", false, "token-b", now), Claiming("b", true, "token-b", now)});
  CHECK(std::get<LockRecord>(record).holder == "b");

  // Two claiming with one token: the record cannot tell them apart, so it names nobody.
  record = view;
  NameHolderByToken(record,
                    {Claiming("a", true, "token-b", now), Claiming("b", true, "token-b", now)});
  CHECK(std::get<LockRecord>(record).holder.empty());

  // A holder the store named already stays.
  LockRecord named = view;
  named.holder = "a";
  record = named;
  NameHolderByToken(record, {Claiming("b", true, "token-b", now)});
  CHECK(std::get<LockRecord>(record).holder == "a");
}

TEST_CASE("Assess: two concurrent claimers of a lease are a split brain naming the zombie",
          "[lease]") {
  ClusterSpec spec;
  spec.name = "orders";
  spec.kind = "redis_lease";
  spec.members = {Candidate("a"), Candidate("b")};
  const auto now = SteadyClock::now();
  const std::vector<Observation> round = {Claiming("a", true, "token-a", now),
                                          Claiming("b", true, "token-b", now)};
  LockRecord view;
  view.holder_token = "token-b";
  LockRecordResult record = view;
  NameHolderByToken(record, round);
  ClusterHistory history;
  for (const auto& obs : round)
    RecordObservation(history.members[obs.member], obs, WallClock::now());

  // The re-probe's windows overlap: confirmed.
  CHECK(ConfirmedWritable(round, "orders") == std::vector<std::string>{"a", "b"});
  const Assessment split = Assess(spec, round, history, true, &record);
  CHECK(split.verdict == Verdict::kSplitBrain);
  CHECK(split.lineage == "orders");
  CHECK(split.lock_holder == "b");
  CHECK(split.zombies == std::vector<std::string>{"a"});

  // One claimer, the key's: healthy, no zombie.
  const std::vector<Observation> steady = {Claiming("a", false, "token-a", now),
                                           Claiming("b", true, "token-b", now)};
  ClusterHistory calm;
  for (const auto& obs : steady) RecordObservation(calm.members[obs.member], obs, WallClock::now());
  const Assessment one = Assess(spec, steady, calm, false, &record);
  CHECK(one.verdict == Verdict::kHealthy);
  CHECK(one.zombies.empty());
}

TEST_CASE("LeaseClaimProbe: a candidate's claim as an observation with its token or identity",
          "[lease]") {
  httplib::Server server;
  const int port = server.bind_to_any_port("127.0.0.1");
  server.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "leader_election_master_status{name=\"orders\",token=\"token-a\"} 1\n"
        "leader_election_master_status{name=\"other\",token=\"x\"} 1\n",
        "text/plain");
  });
  std::thread thread([&] { server.listen_after_bind(); });
  ClusterSpec spec;
  spec.redis_lease.lock = "orders";
  spec.redis_lease.token_label = "token";
  MemberSpec member = Candidate("a", "fallback");
  member.claim_url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";

  LeaseClaimProbe with_token(spec, member);
  const Observation obs = with_token.Probe(SteadyClock::now() + milliseconds(2000), nullptr);
  REQUIRE(obs.lock_claim() != nullptr);
  CHECK(obs.member == "a");
  CHECK(obs.lock_claim()->claims);
  CHECK(obs.claim()->lineage == "orders");
  CHECK(obs.claim()->token == "token-a");
  CHECK(obs.seen_writable());

  // Without a token label, the member's identity is its token.
  spec.redis_lease.token_label.clear();
  LeaseClaimProbe with_identity(spec, member);
  const Observation named = with_identity.Probe(SteadyClock::now() + milliseconds(2000), nullptr);
  REQUIRE(named.ok());
  CHECK(named.claim()->token == "fallback");

  // A lock the candidate does not compete for: not claiming, not writable.
  spec.redis_lease.lock = "absent";
  LeaseClaimProbe absent(spec, member);
  const Observation none = absent.Probe(SteadyClock::now() + milliseconds(2000), nullptr);
  REQUIRE(none.lock_claim() != nullptr);
  CHECK_FALSE(none.lock_claim()->competes);
  CHECK_FALSE(none.seen_writable());
  server.stop();
  thread.join();

  // Nothing listens any more: a failure, never a claim.
  const Observation refused = absent.Probe(SteadyClock::now() + milliseconds(500), nullptr);
  CHECK_FALSE(refused.ok());
}

}  // namespace sbd

namespace sbd {
namespace {

size_t ThreadsOfThisProcess() {
  size_t threads = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ++threads;
  }
  return threads;
}

}  // namespace

TEST_CASE("LeaseClaimProbe: forty trickling endpoints fail at the deadline and hold no thread",
          "[lease][loop]") {
  constexpr int kMembers = 40;
  testing::HostileHttp trickle(testing::Hostility::kTrickleHeader, kMembers);
  ClusterSpec spec;
  spec.redis_lease.lock = "orders";
  std::vector<std::unique_ptr<LeaseClaimProbe>> probes;
  for (int i = 0; i < kMembers; ++i) {
    MemberSpec member = Candidate("m" + std::to_string(i), "id");
    member.claim_url = trickle.url(static_cast<size_t>(i));
    probes.push_back(std::make_unique<LeaseClaimProbe>(spec, member));
  }
  EventLoop& loop = EventLoop::Shared();
  loop.Post([] {});  // the shared loop's thread exists before counting
  const size_t before = ThreadsOfThisProcess();
  std::mutex mu;
  std::condition_variable answered;
  std::vector<Observation> observations;
  const auto start = SteadyClock::now();
  const auto deadline = start + milliseconds(1500);
  for (auto& probe : probes) {
    loop.Post([&, probe = probe.get()] {
      probe->Start(deadline, nullptr, [&](Observation obs) {
        std::lock_guard<std::mutex> lock(mu);
        observations.push_back(std::move(obs));
        answered.notify_all();
      });
    });
  }
  // Once the loop has run every Start(), every request is in flight there: count the threads.
  std::promise<void> started;
  loop.Post([&] { started.set_value(); });
  started.get_future().wait();
  const size_t during = ThreadsOfThisProcess();
  std::unique_lock<std::mutex> lock(mu);
  REQUIRE(answered.wait_until(lock, deadline + milliseconds(500),
                              [&] { return observations.size() == kMembers; }));
  const double took = std::chrono::duration<double>(SteadyClock::now() - start).count();
  INFO("threads before " << before << ", during " << during << "; answered after " << took << " s");
  CHECK(during <= before);
  CHECK(took < 1.5 + 0.3);
  CHECK(trickle.accepted() == kMembers);
  for (const Observation& obs : observations) {
    REQUIRE(obs.failure() != nullptr);
    CHECK(obs.failure()->reason == ProbeFailureReason::kTimeout);
    CHECK(obs.failure()->message.find("outlasted the deadline") != std::string::npos);
  }
}

}  // namespace sbd
