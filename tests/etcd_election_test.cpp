// The etcd_election lock store's parser (issue 13): a /v3/kv/range answer over the election's
// keys as the engine's LockRecord.
#include "probes/etcd_election.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detector/common/base64.h"
#include "probes/resource_witness.h"

namespace {

using nlohmann::json;

json Kv(const std::string& key, const std::string& value, std::int64_t create_revision,
        const std::string& lease) {
  return {{"key", sbd::Base64Encode(key)},
          {"value", sbd::Base64Encode(value)},
          {"create_revision", std::to_string(create_revision)},
          {"mod_revision", std::to_string(create_revision)},
          {"version", "1"},
          {"lease", lease}};
}

sbd::LockRecord Parsed(const json& body, const std::vector<sbd::MemberSpec>& members = {}) {
  auto result = sbd::ParseElectionRange(body, "/election/orders/", members);
  REQUIRE(std::holds_alternative<sbd::LockRecord>(result));
  return std::get<sbd::LockRecord>(result);
}

}  // namespace

TEST_CASE("etcd_election: the recipe's prefix gets its trailing slash", "[election]") {
  CHECK(sbd::ElectionKeyPrefix("/election/orders") == "/election/orders/");
  CHECK(sbd::ElectionKeyPrefix("/election/orders/") == "/election/orders/");
}

TEST_CASE("etcd_election: the lowest create revision holds, its revision the token", "[election]") {
  // Out of order on purpose: the parser does not trust the answer's order.
  const json body = {{"kvs",
                      {Kv("/election/orders/694d7", "b", 42, "7587"),
                       Kv("/election/orders/694d5", "a", 17, "7585"),
                       Kv("/election/orders/694d9", "c", 90, "7589")}},
                     {"count", "3"}};
  const sbd::LockRecord view = Parsed(body);
  CHECK(view.holder_token == "17");
  CHECK(view.mod_revision == 17);
  CHECK(view.lease_id == "7585");
  CHECK(view.holder.empty());  // nobody configured the value: the claims name the holder
  CHECK(view.waiting == std::vector<std::string>{"/election/orders/694d7 (revision 42)",
                                                 "/election/orders/694d9 (revision 90)"});
  CHECK(view.rejected.empty());
}

TEST_CASE("etcd_election: a member whose identity is the holder's value is named", "[election]") {
  sbd::MemberSpec a, b;
  a.name = "a";
  a.lease_identity = "worker-a";
  b.name = "b";
  b.lease_identity = "worker-b";
  const json body = {{"kvs", {Kv("/election/orders/1", "worker-b", 5, "1")}}};
  CHECK(Parsed(body, {a, b}).holder == "b");
}

TEST_CASE("etcd_election: no candidates is an empty record, not a failure", "[election]") {
  const sbd::LockRecord view = Parsed(json{{"header", {{"revision", "7"}}}});
  CHECK(view.holder_token.empty());
  CHECK(view.lease_id == "0");
  CHECK(view.waiting.empty());
}

TEST_CASE("etcd_election: a holder without lease, a capped read and keys outside are said",
          "[election]") {
  const json body = {{"kvs",
                      {Kv("/election/orders/x", "a", 3, "0"), Kv("/election/ordersX", "z", 1, "9"),
                       Kv("/election/orders/y", "b", 4, "12")}},
                     {"more", true}};
  const sbd::LockRecord view = Parsed(body);
  CHECK(view.holder_token == "3");  // the key outside the prefix is skipped
  REQUIRE(view.rejected.size() == 2);
  CHECK(view.rejected[0] == "/election/orders/x: no lease: the holder's key never expires");
  CHECK(view.rejected[1] == "more than 1000 candidates' keys: those beyond were not read");
}

TEST_CASE("etcd_election: the waiting list is capped and hostile key names are escaped",
          "[election]") {
  json kvs = json::array();
  for (int i = 0; i < 20; ++i) {
    kvs.push_back(Kv("/election/orders/k\n" + std::to_string(i), "", 10 + i, "1"));
  }
  const sbd::LockRecord view = Parsed(json{{"kvs", kvs}});
  REQUIRE(view.waiting.size() == sbd::kMaxShownWaiting + 1);
  CHECK(view.waiting[0] == "/election/orders/k\\n1 (revision 11)");
  CHECK(view.waiting.back() == "and 3 more");
}

TEST_CASE("etcd_election: an answer that is not etcd's fails the read with the reason",
          "[election]") {
  auto failure = [](const json& body) {
    auto result = sbd::ParseElectionRange(body, "/election/orders/", {});
    REQUIRE(std::holds_alternative<sbd::ProbeFailure>(result));
    CHECK(std::get<sbd::ProbeFailure>(result).reason == sbd::ProbeFailureReason::kProtocol);
    return std::get<sbd::ProbeFailure>(result).message;
  };
  CHECK(failure(json::array()) == "range: not a JSON object");
  CHECK(failure(json{{"kvs", "nope"}}) == "range: kvs is not a list");
  json bad_revision = Kv("/election/orders/1", "a", 1, "1");
  bad_revision["create_revision"] = "one";
  CHECK(failure(json{{"kvs", {bad_revision}}}).find("create_revision") != std::string::npos);
  json no_revision = Kv("/election/orders/1", "a", 1, "1");
  no_revision.erase("create_revision");
  CHECK(failure(json{{"kvs", {no_revision}}}) == "range: kvs[0]: no create_revision");
  // Revisions are tokens compared and shown in /status: above 2^53 is no etcd's answer.
  CHECK(failure(json{{"kvs", {Kv("/election/orders/1", "a", INT64_MAX, "1")}}}) ==
        "range: kvs[0]: create_revision is out of range 0..9007199254740992");
  CHECK(failure(json{{"header", {{"revision", "18446744073709551615"}}}}) ==
        "range: header: revision is out of range 0..9007199254740992");
  json not_base64 = Kv("/election/orders/1", "a", 1, "1");
  not_base64["key"] = "***";
  CHECK(failure(json{{"kvs", {not_base64}}}) == "range: kvs[0]: a key or value is not base64");
}

TEST_CASE("etcd_election: the resource witness's token is its lock's sample, a whole number",
          "[election][fencing]") {
  sbd::ResourceWitnessSpec witness;
  witness.lock = "orders";
  auto token = [&](const std::string& text) { return sbd::WitnessToken(text, witness); };
  using Token = std::variant<std::int64_t, std::string>;
  CHECK(token("fencing_token_highest_accepted{name=\"jobs\"} 7\n"
              "fencing_token_highest_accepted{name=\"orders\"} 42\n") == Token(42));
  CHECK(token("fencing_token_highest_accepted 42\n") == Token(42));  // the only sample
  CHECK(token("other 1\n") == Token("no fencing_token_highest_accepted sample for lock orders"));
  CHECK(token("fencing_token_highest_accepted{name=\"orders\",x=\"1\"} 1\n"
              "fencing_token_highest_accepted{name=\"orders\",x=\"2\"} 2\n") ==
        Token("several fencing_token_highest_accepted samples for one lock"));
  for (const char* bad : {"-1", "1.5", "NaN", "+Inf", "1e300"}) {
    CAPTURE(bad);
    CHECK(token(std::string("fencing_token_highest_accepted ") + bad + "\n") ==
          Token("fencing_token_highest_accepted is not a whole number from 0 to 2^53"));
  }
  CHECK(std::holds_alternative<std::string>(token("fencing_token_highest_accepted{ 1\n")));
}
