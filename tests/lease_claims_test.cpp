// The zombie rule for application leases: claims against the key's record.
#include "detector/verdicts/lease_claims.h"

#include <catch2/catch.hpp>

namespace sbd {
namespace {

using std::chrono::milliseconds;

const SteadyClock::time_point kT0 = SteadyClock::now();

CandidateClaim Claimer(const std::string& member, std::optional<std::string> token, int from_ms,
                       int to_ms, ClaimReading::State state = ClaimReading::State::kClaims) {
  CandidateClaim claim;
  claim.observation.member = member;
  claim.observation.window.sent = kT0 + milliseconds(from_ms);
  claim.observation.window.received = kT0 + milliseconds(to_ms);
  ClaimReading reading;
  reading.state = state;
  reading.token = std::move(token);
  claim.observation.result = reading;
  return claim;
}

LeaseRecordView Held(const std::string& token) {
  LeaseRecordView record;
  record.known = true;
  record.token = token;
  record.lease_left_ms = 2500;
  return record;
}

}  // namespace

TEST_CASE("AssessLeaseClaims: one claimer holding the key's token is the holder, no zombie") {
  auto assessment = AssessLeaseClaims(
      Held("tok-a"), {Claimer("a", "tok-a", 0, 10),
                      Claimer("b", "tok-b", 0, 10, ClaimReading::State::kDoesNotClaim)});
  CHECK(assessment.claimers == std::vector<std::string>{"a"});
  CHECK_FALSE(assessment.split_brain());
  CHECK(assessment.named_holder == std::optional<std::string>("a"));
  CHECK(assessment.zombies.empty());
}

TEST_CASE("AssessLeaseClaims: two overlapping claimers, the one off the record is the zombie") {
  auto assessment = AssessLeaseClaims(Held("tok-b"),
                                      {Claimer("a", "tok-a", 0, 10), Claimer("b", "tok-b", 5, 12)});
  CHECK(assessment.split_brain());
  CHECK(assessment.concurrent.size() == 2);
  CHECK(assessment.named_holder == std::optional<std::string>("b"));
  REQUIRE(assessment.zombies.size() == 1);
  CHECK(assessment.zombies[0].member == "a");
  CHECK(assessment.zombies[0].claimed_token == "tok-a");
  CHECK(assessment.zombies[0].record_token == "tok-b");
  CHECK_FALSE(assessment.zombies[0].record_gone);
}

TEST_CASE("AssessLeaseClaims: claims whose windows do not overlap are no split brain") {
  auto assessment = AssessLeaseClaims(
      Held("tok-b"), {Claimer("a", "tok-a", 0, 10), Claimer("b", "tok-b", 11, 20)});
  CHECK(assessment.claimers.size() == 2);
  CHECK(assessment.concurrent.size() == 1);
  CHECK_FALSE(assessment.split_brain());
  // The record still has moved past a: it is named, for a warning.
  REQUIRE(assessment.zombies.size() == 1);
  CHECK(assessment.zombies[0].member == "a");
}

TEST_CASE("AssessLeaseClaims: the concurrent set is the largest group sharing one instant") {
  // a and c overlap, b overlaps a only, d overlaps nobody: {a, b} or {a, c}, never three.
  auto assessment =
      AssessLeaseClaims(Held("x"), {Claimer("a", "1", 0, 10), Claimer("b", "2", 2, 4),
                                    Claimer("c", "3", 6, 12), Claimer("d", "4", 20, 30)});
  CHECK(assessment.concurrent.size() == 2);
  CHECK(assessment.concurrent[0] == "a");
  // Three windows sharing instant 5.
  auto three = AssessLeaseClaims(
      Held("x"), {Claimer("a", "1", 0, 10), Claimer("b", "2", 5, 6), Claimer("c", "3", 3, 7)});
  CHECK(three.concurrent.size() == 3);
}

TEST_CASE("AssessLeaseClaims: without a token label, the configured identity is compared") {
  auto a = Claimer("a", std::nullopt, 0, 10);
  a.identity = "host-a";
  auto b = Claimer("b", std::nullopt, 0, 10);
  b.identity = "host-b";
  auto c = Claimer("c", std::nullopt, 0, 10);  // neither token nor identity
  auto assessment = AssessLeaseClaims(Held("host-a"), {a, b, c});
  CHECK(assessment.named_holder == std::optional<std::string>("a"));
  REQUIRE(assessment.zombies.size() == 1);
  CHECK(assessment.zombies[0].member == "b");
  CHECK(assessment.unidentified == std::vector<std::string>{"c"});
}

TEST_CASE("AssessLeaseClaims: a claim on a gone key is a zombie; an unknown record names none") {
  LeaseRecordView gone;
  gone.known = true;
  auto on_gone = AssessLeaseClaims(gone, {Claimer("a", "tok-a", 0, 10)});
  REQUIRE(on_gone.zombies.size() == 1);
  CHECK(on_gone.zombies[0].record_gone);
  CHECK_FALSE(on_gone.named_holder.has_value());

  auto unknown = AssessLeaseClaims(LeaseRecordView{},
                                   {Claimer("a", "tok-a", 0, 10), Claimer("b", "tok-b", 0, 10)});
  CHECK(unknown.split_brain());
  CHECK_FALSE(unknown.record_known);
  CHECK(unknown.zombies.empty());
  CHECK_FALSE(unknown.named_holder.has_value());
}

TEST_CASE("AssessLeaseClaims: failed probes are no claims") {
  CandidateClaim failed;
  failed.observation.member = "a";
  failed.observation.result = ProbeFailure{ProbeFailureReason::kTimeout, "deadline"};
  auto assessment = AssessLeaseClaims(Held("tok-b"), {failed, Claimer("b", "tok-b", 0, 10)});
  CHECK(assessment.claimers == std::vector<std::string>{"b"});
  CHECK(assessment.zombies.empty());
}

TEST_CASE("RecordViewOf: held, cut short, gone and another type") {
  LeaseKeyReading key;
  key.state = LeaseKeyReading::State::kHeld;
  key.token = "t";
  key.lease_left_ms = 100;
  auto held = RecordViewOf(key);
  CHECK(held.known);
  CHECK(held.token == std::optional<std::string>("t"));
  key.token_truncated = true;
  CHECK_FALSE(RecordViewOf(key).known);
  key.state = LeaseKeyReading::State::kGone;
  auto gone = RecordViewOf(key);
  CHECK(gone.known);
  CHECK_FALSE(gone.token.has_value());
  key.state = LeaseKeyReading::State::kWrongType;
  CHECK_FALSE(RecordViewOf(key).known);
}

}  // namespace sbd
