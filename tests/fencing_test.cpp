// Fencing-aware severity (issue 13, part 2): the verdict layer's judgement of a double holder
// against the resource's highest accepted token, and of tokens that go backwards.
#include "detector/verdicts/fencing.h"

#include <catch2/catch.hpp>
#include <string>
#include <tuple>
#include <vector>

namespace {

sbd::Observation Claimer(const std::string& member, const std::string& token) {
  sbd::Observation obs;
  obs.member = member;
  sbd::LockClaimReading claim;
  claim.lock = "orders";
  claim.claims = true;
  claim.competes = true;
  claim.token = token;
  obs.result = claim;
  return obs;
}

// A confirmed split brain: b holds the record, a is the zombie.
sbd::Assessment DoubleHolder() {
  sbd::Assessment a;
  a.verdict = sbd::Verdict::kSplitBrain;
  a.writable = {"a", "b"};
  a.zombies = {"a"};
  a.lock_holder = "b";
  return a;
}

sbd::LockRecord Witnessed(std::int64_t store_revision, std::optional<std::int64_t> resource) {
  sbd::LockRecord view;
  view.store_revision = store_revision;
  view.resource_token = resource;
  return view;
}

const sbd::WallClock::time_point kAt = sbd::WallClock::time_point(std::chrono::hours(1000));

}  // namespace

TEST_CASE("fencing: a zombie whose token is below the resource's is a fenced double holder",
          "[fencing]") {
  sbd::FencingMemory memory;
  const sbd::LockRecord view = Witnessed(50, 42);
  sbd::RecordFencing(memory, view, kAt);
  sbd::Assessment a = DoubleHolder();
  sbd::JudgeFencing(memory, &view, {Claimer("a", "17"), Claimer("b", "42")}, a);
  CHECK(a.fenced_zombies == std::vector<std::string>{"a"});
  CHECK(a.split_brain_fenced);
  CHECK(a.resource_token == std::optional<std::int64_t>(42));
  CHECK(a.fencing_regressions.empty());
}

TEST_CASE("fencing: a zombie at or above the resource's token, or not a number, is not fenced",
          "[fencing]") {
  sbd::FencingMemory memory;
  const sbd::LockRecord view = Witnessed(50, 17);
  for (const std::string token : {"17", "99", "x17", ""}) {
    CAPTURE(token);
    sbd::Assessment a = DoubleHolder();
    sbd::JudgeFencing(memory, &view, {Claimer("a", token), Claimer("b", "42")}, a);
    CHECK(a.fenced_zombies.empty());
    CHECK_FALSE(a.split_brain_fenced);
  }
}

TEST_CASE("fencing: without a witness reading, or a holder, nothing is fenced", "[fencing]") {
  sbd::FencingMemory memory;
  sbd::Assessment a = DoubleHolder();
  const sbd::LockRecord no_witness = Witnessed(50, std::nullopt);
  sbd::JudgeFencing(memory, &no_witness, {Claimer("a", "1"), Claimer("b", "42")}, a);
  CHECK_FALSE(a.split_brain_fenced);
  sbd::Assessment unread = DoubleHolder();
  sbd::JudgeFencing(memory, nullptr, {Claimer("a", "1"), Claimer("b", "42")}, unread);
  CHECK_FALSE(unread.split_brain_fenced);
  sbd::Assessment no_holder = DoubleHolder();
  no_holder.lock_holder.clear();
  const sbd::LockRecord view = Witnessed(50, 42);
  sbd::JudgeFencing(memory, &view, {Claimer("a", "1"), Claimer("b", "42")}, no_holder);
  CHECK_FALSE(no_holder.split_brain_fenced);
}

TEST_CASE("fencing: a resource token or store revision that goes back breaks the fence",
          "[fencing]") {
  sbd::FencingMemory memory;
  sbd::RecordFencing(memory, Witnessed(50, 42), kAt);
  sbd::RecordFencing(memory, Witnessed(51, 17), kAt + std::chrono::seconds(1));
  sbd::RecordFencing(memory, Witnessed(12, 42), kAt + std::chrono::seconds(2));
  REQUIRE(memory.regressions.size() == 2);
  CHECK(memory.regressions[0] == "the resource accepted token 17 after 42");
  CHECK(memory.regressions[1] ==
        "the lock store's revision went back from 51 to 12 (restored from a backup?)");
  // A broken fence fences nobody: the zombie's write may have landed.
  const sbd::LockRecord view = Witnessed(52, 42);
  sbd::Assessment a = DoubleHolder();
  sbd::JudgeFencing(memory, &view, {Claimer("a", "17"), Claimer("b", "42")}, a);
  CHECK(a.fenced_zombies == std::vector<std::string>{"a"});
  CHECK_FALSE(a.split_brain_fenced);
  CHECK(a.fencing_regressions.size() == 2);
  // Forgotten once nothing went back for the hold.
  sbd::RecordFencing(
      memory, Witnessed(53, 42),
      kAt + std::chrono::seconds(2) + sbd::kFencingRegressionHold + std::chrono::seconds(1));
  CHECK(memory.regressions.empty());
}

TEST_CASE("fencing: a witness token the lock store never issued fences nobody and is warned",
          "[fencing]") {
  sbd::FencingMemory memory;
  // The store is at revision 50: no key it holds, nor any token it issued, is above that.
  const std::int64_t forged = std::int64_t{1} << 53;
  const sbd::LockRecord view = Witnessed(50, forged);
  sbd::RecordFencing(memory, view, kAt);
  sbd::Assessment a = DoubleHolder();
  sbd::JudgeFencing(memory, &view, {Claimer("a", "17"), Claimer("b", "42")}, a);
  // Shown, and said to be unissued...
  CHECK(a.resource_token == std::optional<std::int64_t>(forged));
  CHECK(a.resource_token_unissued);
  CHECK(a.fencing_warning.find("never issued") != std::string::npos);
  CHECK(a.fencing_warning.find("50") != std::string::npos);
  // ...but no evidence of a fence: the split brain pages.
  CHECK(a.fenced_zombies.empty());
  CHECK_FALSE(a.split_brain_fenced);
  // Not remembered as the resource's high either: an honest 42 next is no regression.
  const sbd::LockRecord honest = Witnessed(51, 42);
  sbd::RecordFencing(memory, honest, kAt + std::chrono::seconds(1));
  CHECK(memory.regressions.empty());
  sbd::Assessment next = DoubleHolder();
  sbd::JudgeFencing(memory, &honest, {Claimer("a", "17"), Claimer("b", "42")}, next);
  CHECK_FALSE(next.resource_token_unissued);
  CHECK(next.fencing_warning.empty());
  CHECK(next.split_brain_fenced);
}

TEST_CASE(
    "fencing: a witness token at the store's revision is issued; above it, or with no "
    "revision to check, it is not",
    "[fencing]") {
  for (const auto& [store_revision, token, issued] :
       std::vector<std::tuple<std::int64_t, std::int64_t, bool>>{
           {50, 50, true}, {50, 18, true}, {50, 51, false}, {0, 18, false}}) {
    CAPTURE(store_revision, token);
    sbd::FencingMemory memory;
    const sbd::LockRecord view = Witnessed(store_revision, token);
    sbd::RecordFencing(memory, view, kAt);
    sbd::Assessment a = DoubleHolder();
    sbd::JudgeFencing(memory, &view, {Claimer("a", "17"), Claimer("b", "42")}, a);
    CHECK(a.resource_token_unissued == !issued);
    CHECK(a.split_brain_fenced == issued);
  }
}
