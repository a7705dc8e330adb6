// The claim probe: the exposition parser on hostile input, and the scrape against real
// loopback listeners (refused, hung, oversized, non-200, two probes sent through one gate).
#include "probes/metrics_claim.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <thread>

#include "probes/exposition.h"

namespace sbd {
namespace {

using State = ClaimReading::State;

ClaimQuery Lock(const std::string& lock, const std::string& token_label = "") {
  ClaimQuery query;
  query.lock = lock;
  query.token_label = token_label;
  return query;
}

ClaimReading FoundClaim(const std::string& text, const ClaimQuery& query) {
  auto result = FindClaim(text, query);
  if (auto* failure = std::get_if<ProbeFailure>(&result)) FAIL(failure->message);
  return std::get<ClaimReading>(result);
}

std::string Malformed(const std::string& text, const ClaimQuery& query = Lock("a")) {
  auto result = FindClaim(text, query);
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  CHECK(std::get<ProbeFailure>(result).reason == ProbeFailureReason::kProtocol);
  return std::get<ProbeFailure>(result).message;
}

}  // namespace

TEST_CASE("FindClaim: client-go's series says claims, does not claim, or nothing at all") {
  const std::string text =
      "# HELP leader_election_master_status Gauge of if the reporting system is master\n"
      "# TYPE leader_election_master_status gauge\n"
      "leader_election_master_status{name=\"a\"} 1\n"
      "leader_election_master_status{name=\"b\"} 0\n"
      "process_cpu_seconds_total 12.5\n";
  CHECK(FoundClaim(text, Lock("a")).state == State::kClaims);
  CHECK(FoundClaim(text, Lock("b")).state == State::kDoesNotClaim);
  CHECK(FoundClaim(text, Lock("c")).state == State::kAbsent);
  CHECK_FALSE(FoundClaim(text, Lock("a")).token.has_value());
  CHECK(FoundClaim("", Lock("a")).state == State::kAbsent);
}

TEST_CASE("FindClaim: the token label, escapes, blanks, timestamps and a custom metric") {
  const std::string text =
      "  my_claim { lock = \"q\\\"x\\\\y\\nz\" , holder=\"t-1\", } +1.0e0 1700000000000\r\n"
      "my_claim{lock=\"other\",holder=\"t-2\"} 0 -5\n";
  ClaimQuery query;
  query.metric = "my_claim";
  query.lock_label = "lock";
  query.lock = "q\"x\\y\nz";
  query.token_label = "holder";
  auto claim = FoundClaim(text, query);
  CHECK(claim.state == State::kClaims);
  REQUIRE(claim.token.has_value());
  CHECK(*claim.token == "t-1");
}

TEST_CASE("FindClaim: a stale 0 series beside the claiming one keeps the claim and its token") {
  const std::string text =
      "leader_election_master_status{name=\"a\",token=\"old\"} 0\n"
      "leader_election_master_status{name=\"a\",token=\"new\"} 1\n";
  auto claim = FoundClaim(text, Lock("a", "token"));
  CHECK(claim.state == State::kClaims);
  CHECK(claim.token == std::optional<std::string>("new"));
}

TEST_CASE("FindClaim: values other than 0 and 1 for the lock are malformed, elsewhere fine") {
  for (const char* value : {"NaN", "+Inf", "-Inf", "0.5", "2"}) {
    CAPTURE(value);
    const std::string line = std::string("leader_election_master_status{name=\"a\"} ") + value;
    CHECK(Malformed(line).find("neither 0 nor 1") != std::string::npos);
    CHECK(FoundClaim("other_metric " + std::string(value) + "\n" + line, Lock("b")).state ==
          State::kAbsent);
  }
}

TEST_CASE("FindClaim: two claims under different tokens, or the same series twice, are errors") {
  CHECK(Malformed("leader_election_master_status{name=\"a\",token=\"x\"} 1\n"
                  "leader_election_master_status{name=\"a\",token=\"y\"} 1\n",
                  Lock("a", "token"))
            .find("two different tokens") != std::string::npos);
  CHECK(Malformed("leader_election_master_status{name=\"a\",x=\"1\"} 0\n"
                  "leader_election_master_status{x=\"1\",name=\"a\"} 1\n")
            .find("line 2: the same series twice") != std::string::npos);
}

TEST_CASE("ParseExposition: hostile lines are errors that name the line, never echo it") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"m{name=\"a} 1", "not closed"},
      {"m{name=\"a\\q\"} 1", "unknown escape"},
      {"m{name=\"a\",name=\"b\"} 1", "appears twice"},
      {"m{name=\"\xff\"} 1", "not UTF-8"},
      {"m{1x=\"a\"} 1", "expected a name"},
      {"m{name \"a\"} 1", "expected '='"},
      {"m{name=\"a\" x=\"b\"} 1", "expected ',' or '}'"},
      {"m 1 2 3", "unexpected text"},
      {"m 1 12.5", "timestamp"},
      {"m nan(0x1)", "not a number"},
      {"m infinity", "not a number"},
      {"m 1e999", "not a number"},
      {"m", "not a number"},
      {"9m 1", "expected a name"},
      {"m{", "not closed"},
      {"m{name=\"a\"", "expected ',' or '}'"},
  };
  for (const auto& [line, expected] : cases) {
    CAPTURE(line);
    auto parsed = ParseExposition("ok 1\n" + line + "\n", "m");
    REQUIRE(std::holds_alternative<std::string>(parsed));
    const auto& error = std::get<std::string>(parsed);
    CHECK(error.rfind("line 2: ", 0) == 0);
    CHECK(error.find(expected) != std::string::npos);
  }
  auto huge =
      ParseExposition("m{name=\"" + std::string(kMaxExpositionLineBytes, 'a') + "\"} 1", "m");
  REQUIRE(std::holds_alternative<std::string>(huge));
  CHECK(std::get<std::string>(huge) == "line 1: longer than the line limit");
}

TEST_CASE("ParseExposition: NaN, infinities, comments and blank lines parse like Prometheus") {
  auto parsed = ParseExposition(
      "# a comment with \xff bytes\n\n  \nm NaN\nm{a=\"1\"} +Inf 0\n"
      "m{a=\"2\"} -inf\nm{a=\"3\"} -0.25e1\n",
      "m");
  REQUIRE(std::holds_alternative<std::vector<ExpositionSample>>(parsed));
  const auto& samples = std::get<std::vector<ExpositionSample>>(parsed);
  REQUIRE(samples.size() == 4);
  CHECK(std::isnan(samples[0].value));
  CHECK(samples[1].value == INFINITY);
  CHECK(samples[2].value == -INFINITY);
  CHECK(samples[3].value == -2.5);
  CHECK(samples[3].line == 7);
}

}  // namespace sbd
