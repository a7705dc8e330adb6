// The probes' answer parsers against hostile answers: every wrongly typed field is a protocol
// failure saying what was wrong (or, for one member's DCS registration, that member skipped
// with the reason), and nothing throws.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "detector/common/network_text.h"
#include "detector/config/config.h"
#include "detector/config/file_sd.h"
#include "probes/etcd.h"
#include "probes/http_json.h"
#include "probes/json_fields.h"
#include "probes/patroni.h"
#include "probes/postgres.h"
#include "probes/redis_info.h"
#include "tests/support/files.h"
#include "tests/support/on_loop.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

const char* const kPrefix = "/service/demo/";

nlohmann::json Json(const std::string& text) { return nlohmann::json::parse(text); }

/// A valid /patroni answer with one field replaced (or added).
nlohmann::json PatroniWith(const std::string& key, nlohmann::json value) {
  nlohmann::json body = Json(R"({"state":"running","role":"master","timeline":3,
    "database_system_identifier":"7713570374210613906","dcs_last_seen":1700000000,
    "patroni":{"scope":"demo","version":"3.0.2"},"pause":false})");
  body[key] = std::move(value);
  return body;
}

/// The failure ParsePatroni gives, requiring that it gives one and does not throw.
ProbeFailure PatroniFailure(const nlohmann::json& body) {
  std::variant<PatroniReading, ProbeFailure> result;
  REQUIRE_NOTHROW(result = PatroniRestProbe::ParsePatroni(body));
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  return std::get<ProbeFailure>(result);
}

ProbeFailure ClusterFailure(const nlohmann::json& body) {
  PatroniReading reading;
  std::optional<ProbeFailure> failure;
  REQUIRE_NOTHROW(failure = PatroniRestProbe::ParseCluster(body, &reading));
  REQUIRE(failure);
  CHECK(reading.cluster_members.empty());
  return *failure;
}

/// One etcd kv entry as the v3 gateway writes it.
nlohmann::json Kv(const std::string& key, const std::string& value) {
  return {{"key", Base64Encode(kPrefix + key)},
          {"value", Base64Encode(value)},
          {"mod_revision", "42"},
          {"lease", "7587869722434566000"}};
}

std::variant<LockRecord, ProbeFailure> Range(const nlohmann::json& body) {
  std::variant<LockRecord, ProbeFailure> result;
  REQUIRE_NOTHROW(result = EtcdScopeProbe::ParseRange(body, kPrefix));
  return result;
}

ProbeFailure RangeFailure(const nlohmann::json& body) {
  auto result = Range(body);
  REQUIRE(std::holds_alternative<ProbeFailure>(result));
  return std::get<ProbeFailure>(result);
}

}  // namespace

TEST_CASE("patroni parser: pause given as a string is a protocol failure", "[parse]") {
  const ProbeFailure failure = PatroniFailure(PatroniWith("pause", "yes"));
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message == "/patroni: pause is not a boolean");
}

TEST_CASE("patroni parser: each wrongly typed field is named in a protocol failure", "[parse]") {
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {PatroniWith("timeline", "3"), "/patroni: timeline is not an integer"},
      {PatroniWith("timeline", 1.5), "/patroni: timeline is not an integer"},
      {PatroniWith("timeline", -1), "/patroni: timeline is out of range 0..4294967295"},
      {PatroniWith("timeline", 18446744073709551615ULL),
       "/patroni: timeline is out of range 0..4294967295"},
      {PatroniWith("cluster_unlocked", 1), "/patroni: cluster_unlocked is not a boolean"},
      {PatroniWith("state", 7), "/patroni: state is not a string"},
      {PatroniWith("role", nlohmann::json::array()), "/patroni: role is not a string"},
      {PatroniWith("database_system_identifier", 7713570374210613906LL),
       "/patroni: database_system_identifier is not a string"},
      {PatroniWith("dcs_last_seen", "yesterday"), "/patroni: dcs_last_seen is not a number"},
      {PatroniWith("patroni", "demo"), "/patroni: patroni is not an object"},
      {PatroniWith("patroni", Json(R"({"scope":["demo"]})")),
       "/patroni: patroni: scope is not a string"},
      {Json("[1,2]"), "/patroni: not a JSON object"},
      {Json("\"running\""), "/patroni: not a JSON object"},
  };
  for (const auto& [body, message] : cases) {
    INFO(body.dump());
    const ProbeFailure failure = PatroniFailure(body);
    CHECK(failure.reason == ProbeFailureReason::kProtocol);
    CHECK(failure.message == message);
  }
}

TEST_CASE("patroni parser: null or absent optional fields keep their defaults", "[parse]") {
  nlohmann::json body = PatroniWith("pause", nullptr);
  body.erase("timeline");
  body["dcs_last_seen"] = nullptr;
  auto result = PatroniRestProbe::ParsePatroni(body);
  REQUIRE(std::holds_alternative<PatroniReading>(result));
  const auto& reading = std::get<PatroniReading>(result);
  CHECK_FALSE(reading.pause);
  CHECK(reading.timeline == 0);
  CHECK_FALSE(reading.dcs_last_seen);
  CHECK(reading.role == "primary");
  CHECK(reading.scope == "demo");
}

TEST_CASE("patroni parser: a malformed /cluster is a protocol failure and adds nothing",
          "[parse]") {
  const std::string leader = R"({"name":"pg-1","role":"leader","state":"running","port":5432})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"members":{"pg-1":{}}})", "/cluster: members is not a list"},
      {R"({"members":"pg-1"})", "/cluster: members is not a list"},
      {R"({})", "/cluster: no members list"},
      {R"([])", "/cluster: not a JSON object"},
      {"{\"members\":[" + leader + ",7]}", "/cluster: members[1]: not a JSON object"},
      {R"({"members":[{"name":5}]})", "/cluster: members[0]: name is not a string"},
      {"{\"members\":[" + leader + R"(,{"name":"pg-2","port":"5432"}]})",
       "/cluster: members[1]: port is not an integer"},
      {R"({"members":[{"name":"pg-2","port":70000}]})",
       "/cluster: members[0]: port is out of range 0..65535"},
      {R"({"members":[{"name":"pg-2","timeline":"2"}]})",
       "/cluster: members[0]: timeline is not an integer"},
      {R"({"members":[{"name":"pg-2","api_url":false}]})",
       "/cluster: members[0]: api_url is not a string"},
      {R"({"members":[{"role":"leader"}]})", "/cluster: a member has no name"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    const ProbeFailure failure = ClusterFailure(Json(text));
    CHECK(failure.reason == ProbeFailureReason::kProtocol);
    CHECK(failure.message == message);
  }
}

TEST_CASE("etcd parser: a kvs item that is not an object is a protocol failure", "[parse]") {
  const ProbeFailure failure = RangeFailure(Json(R"({"kvs":[7]})"));
  CHECK(failure.reason == ProbeFailureReason::kProtocol);
  CHECK(failure.message == "range: kvs[0]: not a JSON object");
}

TEST_CASE("etcd parser: wrongly typed keys, values, revisions and leases are protocol failures",
          "[parse]") {
  nlohmann::json numeric_key = Kv("leader", "pg-1");
  numeric_key["key"] = 12;
  nlohmann::json garbage = Kv("leader", "pg-1");
  garbage["value"] = "!!!!";
  nlohmann::json odd_length = Kv("leader", "pg-1");
  odd_length["key"] = "abc";
  nlohmann::json lease_object = Kv("leader", "pg-1");
  lease_object["lease"] = nlohmann::json::object({{"id", 1}});
  nlohmann::json revision_text = Kv("leader", "pg-1");
  revision_text["mod_revision"] = "42abc";
  nlohmann::json revision_huge = Kv("leader", "pg-1");
  revision_huge["mod_revision"] = "99999999999999999999";
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"kvs", {numeric_key}}}, "range: kvs[0]: key is not a string"},
      {{{"kvs", {Kv("initialize", "1"), garbage}}}, "range: kvs[1]: a key or value is not base64"},
      {{{"kvs", {odd_length}}}, "range: kvs[0]: a key or value is not base64"},
      {{{"kvs", {lease_object}}}, "range: kvs[0]: lease is not a decimal integer"},
      {{{"kvs", {revision_text}}}, "range: kvs[0]: mod_revision is not a decimal integer"},
      {{{"kvs", {revision_huge}}},
       "range: kvs[0]: mod_revision is out of range 0..9007199254740992"},
      {{{"kvs", "leader"}}, "range: kvs is not a list"},
      {nlohmann::json::array(), "range: not a JSON object"},
  };
  for (const auto& [body, message] : cases) {
    INFO(body.dump());
    const ProbeFailure failure = RangeFailure(body);
    CHECK(failure.reason == ProbeFailureReason::kProtocol);
    CHECK(failure.message == message);
  }
}

TEST_CASE("etcd parser: a malformed member registration skips that member, with the reason",
          "[parse]") {
  const nlohmann::json body = {
      {"kvs",
       {Kv("leader", "pg-1"), Kv("members/evil", R"({"conn_url": 5})"),
        Kv("members/pg-1", R"({"conn_url":"postgres://10.0.0.1:5432/postgres","role":"master"})"),
        Kv("members/notjson", "{"), Kv("members/list", "[1]"),
        Kv("members/", R"({"conn_url":"postgres://10.0.0.9:5432/postgres"})"),
        Kv("config", R"({"ttl":{"seconds":30}})")}}};
  auto result = Range(body);
  REQUIRE(std::holds_alternative<LockRecord>(result));
  const LockRecord& view = std::get<LockRecord>(result);
  CHECK(view.holder == "pg-1");
  CHECK(view.mod_revision == 42);
  CHECK(view.lease_id == "7587869722434566000");
  REQUIRE(view.members.size() == 1);
  CHECK(view.members[0].name == "pg-1");
  CHECK(view.members[0].conn_url == "postgres://10.0.0.1:5432/postgres");
  CHECK_FALSE(view.config_ttl);
  CHECK(view.rejected == std::vector<std::string>{
                             "members/evil: conn_url is not a string", "members/notjson: not JSON",
                             "members/list: not a JSON object", "members/: no member name",
                             "config: ttl is not a decimal integer"});
}

TEST_CASE("etcd parser: a rejected member's name is shown escaped and bounded", "[parse]") {
  const std::string name = "evil\nlevel=info msg=\"all good\"" + std::string(100, 'x');
  auto result = Range({{"kvs", {Kv("members/" + name, "7")}}});
  REQUIRE(std::holds_alternative<LockRecord>(result));
  const LockRecord& view = std::get<LockRecord>(result);
  CHECK(view.members.empty());
  REQUIRE(view.rejected.size() == 1);
  CHECK(view.rejected[0] == "members/evil\\x0alevel=info msg=\"all good\"" +
                                std::string(64 - 30, 'x') + "...: not a JSON object");
}

TEST_CASE("etcd parser: the config ttl may be a number or decimal text", "[parse]") {
  for (const char* config : {R"({"ttl":30})", R"({"ttl":"30"})"}) {
    auto result = Range({{"kvs", {Kv("config", config)}}});
    REQUIRE(std::holds_alternative<LockRecord>(result));
    CHECK(std::get<LockRecord>(result).config_ttl == 30);
    CHECK(std::get<LockRecord>(result).rejected.empty());
  }
}

TEST_CASE("etcd parser: a config ttl out of range is rejected with the reason, never kept",
          "[parse]") {
  // Measured: 18446744073709551 s became a negative ttl in /status once in milliseconds.
  for (const char* config :
       {R"({"ttl":18446744073709551})", R"({"ttl":"18446744073709551"})", R"({"ttl":0})",
        R"({"ttl":-30})", R"({"ttl":31622401})", R"({"ttl":"99999999999999999999"})"}) {
    INFO(config);
    auto result = Range({{"kvs", {Kv("leader", "pg-1"), Kv("config", config)}}});
    REQUIRE(std::holds_alternative<LockRecord>(result));
    const LockRecord& view = std::get<LockRecord>(result);
    CHECK_FALSE(view.config_ttl);
    CHECK(view.holder == "pg-1");  // the rest of the scope is still read
    CHECK(view.rejected == std::vector<std::string>{"config: ttl is out of range 1..31622400"});
  }
  auto longest = Range({{"kvs", {Kv("config", R"({"ttl":31622400})")}}});
  REQUIRE(std::holds_alternative<LockRecord>(longest));
  CHECK(std::get<LockRecord>(longest).config_ttl == 31622400);
}

TEST_CASE("etcd parser: revisions above 2^53 or below 0 fail the read, naming the field",
          "[parse]") {
  nlohmann::json high = Kv("leader", "pg-1");
  high["mod_revision"] = "9007199254740993";
  nlohmann::json negative = Kv("leader", "pg-1");
  negative["mod_revision"] = "-5";
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"kvs", {high}}}, "range: kvs[0]: mod_revision is out of range 0..9007199254740992"},
      {{{"kvs", {negative}}}, "range: kvs[0]: mod_revision is out of range 0..9007199254740992"},
      {{{"header", {{"revision", "9223372036854775807"}}}},
       "range: header: revision is out of range 0..9007199254740992"},
      {{{"header", {{"revision", -1}}}},
       "range: header: revision is out of range 0..9007199254740992"},
  };
  for (const auto& [body, message] : cases) {
    INFO(body.dump());
    const ProbeFailure failure = RangeFailure(body);
    CHECK(failure.reason == ProbeFailureReason::kProtocol);
    CHECK(failure.message == message);
  }
  nlohmann::json top = Kv("leader", "pg-1");
  top["mod_revision"] = "9007199254740992";
  auto result = Range({{"kvs", {top}}});
  REQUIRE(std::holds_alternative<LockRecord>(result));
  CHECK(std::get<LockRecord>(result).mod_revision == 9007199254740992);
}

TEST_CASE("json fields: an integer out of its range names the range and changes nothing",
          "[parse]") {
  const auto object =
      Json(R"({"big":18446744073709551615,"neg":-2,"text":"18446744073709551616","ok":"7"})");
  std::int64_t out = 5;
  CHECK(JsonFields(object, "w").Int64("big", &out, 0, 10).error() ==
        "w: big is out of range 0..10");
  CHECK(JsonFields(object, "w").Int64("neg", &out, -1, 10).error() ==
        "w: neg is out of range -1..10");
  CHECK(JsonFields(object, "w").DecimalInt64("text", &out, 0, 10).error() ==
        "w: text is out of range 0..10");
  CHECK(JsonFields(object, "w").DecimalInt64("ok", &out, 0, 6).error() ==
        "w: ok is out of range 0..6");
  CHECK(out == 5);
  CHECK(JsonFields(object, "w").DecimalInt64("ok", &out, 0, 7).ok());
  CHECK(out == 7);
}

TEST_CASE("json fields: nesting deeper than 64 levels is refused before parsing", "[parse]") {
  // 256 KiB of brackets: ~130,000 levels, enough to overflow a stack walked recursively.
  const std::string deep = std::string(131072, '[') + std::string(131072, ']');
  auto parsed = ParseUntrustedJson(deep);
  REQUIRE(std::holds_alternative<std::string>(parsed));
  CHECK(std::get<std::string>(parsed) == "nested deeper than 64 levels");
  CHECK(JsonNestingProblem(std::string(64, '{') + std::string(64, '}')) == std::nullopt);
  CHECK(JsonNestingProblem(std::string(65, '[')) == "nested deeper than 64 levels");
  // Brackets inside strings, escaped quotes among them, are text, not nesting.
  const std::string text = R"({"a":")" + std::string(100, '[') + R"(\"[[[","b":[1,2]})";
  auto quoted = ParseUntrustedJson(text);
  REQUIRE(std::holds_alternative<nlohmann::json>(quoted));
  CHECK(std::get<nlohmann::json>(quoted)["b"].size() == 2);
  CHECK(std::get<std::string>(ParseUntrustedJson("{\"a\":")) == "not JSON");
}

TEST_CASE("etcd parser: a deeply nested member registration is rejected, not parsed", "[parse]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto result = Range(
      {{"kvs",
        {Kv("leader", "pg-1"), Kv("members/deep", deep), Kv("config", "{\"ttl\":" + deep + "}")}}});
  REQUIRE(std::holds_alternative<LockRecord>(result));
  const LockRecord& view = std::get<LockRecord>(result);
  CHECK(view.holder == "pg-1");
  CHECK(view.rejected == std::vector<std::string>{"members/deep: nested deeper than 64 levels",
                                                  "config: nested deeper than 64 levels"});
}

TEST_CASE("json fields: decimal text is all digits within int64", "[parse]") {
  CHECK(ParseDecimalInt64("42") == 42);
  CHECK(ParseDecimalInt64("-1") == -1);
  CHECK(ParseDecimalInt64("9223372036854775807") == INT64_MAX);
  CHECK_FALSE(ParseDecimalInt64("9223372036854775808"));
  CHECK_FALSE(ParseDecimalInt64(""));
  CHECK_FALSE(ParseDecimalInt64(" 4"));
  CHECK_FALSE(ParseDecimalInt64("+4"));
  CHECK_FALSE(ParseDecimalInt64("4 "));
  CHECK_FALSE(ParseDecimalInt64("0x10"));
}

TEST_CASE("json fields: the first error wins and later reads change nothing", "[parse]") {
  const auto object = Json(R"({"a":"x","b":1,"c":"late"})");
  std::string a, c = "unchanged";
  bool b = false;
  JsonFields fields(object, "where");
  fields.String("a", &a).Bool("b", &b).String("c", &c);
  CHECK(a == "x");
  CHECK(fields.error() == "where: b is not a boolean");
  CHECK(c == "unchanged");
}

TEST_CASE("http probe: base64 with misplaced padding or outside the alphabet is rejected",
          "[parse]") {
  const std::vector<std::string> texts = {"====",    "A===",     "=AAA", "AA=A",
                                          "    ",    "\n\n\n\n", "  AA", std::string("AA\0A", 4),
                                          "AAA\xff", "-_AA"};
  for (const std::string& text : texts) {
    INFO(text);
    std::optional<std::string> decoded;
    REQUIRE_NOTHROW(decoded = Base64Decode(text));
    CHECK_FALSE(decoded);
  }
  CHECK(Base64Decode("AA==") == std::string(1, '\0'));
  CHECK(Base64Decode("AAA=") == std::string(2, '\0'));
  CHECK(Base64Decode("+/+/") == std::string("\xfb\xff\xbf"));
}

TEST_CASE("http probe: an unusable URL from the DCS is a failure, not an exception", "[parse]") {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(300);
  for (const char* url : {"ftp://127.0.0.1:1/patroni", "http://127.0.0.1:99999999999/patroni",
                          "http://127.0.0.1:99999/", "http://:8008/patroni", "gopher://x"}) {
    INFO(url);
    std::variant<nlohmann::json, ProbeFailure> result;
    REQUIRE_NOTHROW(result = ::sbd::testing::FetchJsonOnLoop(url, "/patroni", "", deadline));
    REQUIRE(std::holds_alternative<ProbeFailure>(result));
    CHECK(std::get<ProbeFailure>(result).reason == ProbeFailureReason::kConfig);
  }
}

TEST_CASE("file_sd: a FIFO or device matched by a glob is an error, not a hang", "[parse]") {
  testing::TempDir dir("sbd-file-sd");
  REQUIRE(mkfifo((dir.path() + "/targets.json").c_str(), 0600) == 0);
  FileSdTargets found = ReadFileSdTargets({dir.path() + "/*.json", "/dev/zero"});
  CHECK(found.targets.empty());
  REQUIRE(found.errors.size() == 2);
  CHECK(found.errors[0].message == "not a regular file");
  CHECK(found.errors[1].message == "not a regular file");
}

TEST_CASE("file_sd: a target file above the size bound is an error", "[parse]") {
  testing::TempDir dir("sbd-file-sd");
  const std::string targets = R"({"targets":["10.0.0.1:5432"],"labels":{"cluster":"a"}},)";
  std::string text = "[";
  while (text.size() <= (16u << 20)) text += targets;
  text += targets.substr(0, targets.size() - 1) + "]";
  testing::WriteFile(dir.path() + "/big.json", text, 0600);
  FileSdTargets found = ReadFileSdTargets({dir.path() + "/big.json"});
  CHECK(found.targets.empty());
  REQUIRE(found.errors.size() == 1);
  CHECK(found.errors[0].message == "larger than 16777216 bytes");
}

}  // namespace sbd

namespace sbd {

TEST_CASE("config parser: a text yaml-cpp's LoadAll never finishes is an error", "[parse]") {
  // jbeder/yaml-cpp#1040: LoadAll(",") loops forever in yaml-cpp 0.7 (found by fuzz_config).
  for (const char* text : {",", "clusters: []\n,", ",\n---\n,"}) {
    INFO(text);
    auto result = ParseConfig(text, "c.yml");
    CHECK(std::holds_alternative<std::vector<ConfigError>>(result));
  }
}

}  // namespace sbd

namespace sbd {

TEST_CASE("timeline history: the lines PostgreSQL writes parse, oldest first", "[probe]") {
  auto parsed = ParseTimelineHistory(
      "1\t0/3000148\tno recovery target specified\n\n# a comment\n"
      "2\tA/FF000028\tat restore point \"x\"\n",
      3);
  REQUIRE(std::holds_alternative<std::vector<TimelineSwitch>>(parsed));
  const auto& switches = std::get<std::vector<TimelineSwitch>>(parsed);
  REQUIRE(switches.size() == 2);
  CHECK(switches[0].parent_timeline == 1);
  CHECK(switches[0].switch_lsn == 0x3000148u);
  CHECK(switches[0].switch_lsn_text == "0/3000148");
  CHECK(switches[1].parent_timeline == 2);
  CHECK(switches[1].switch_lsn == ((std::uint64_t{0xA} << 32) | 0xFF000028u));
}

TEST_CASE("timeline history: malformed text is an error naming the line", "[probe]") {
  auto error = [](const std::string& text, std::int64_t timeline) {
    auto parsed = ParseTimelineHistory(text, timeline);
    REQUIRE(std::holds_alternative<std::string>(parsed));
    return std::get<std::string>(parsed);
  };
  CHECK(error("", 2) == "the history file names no parent timeline");
  CHECK(error("# only a comment\n", 2) == "the history file names no parent timeline");
  CHECK(error("x\t0/1\treason\n", 2) == "history line 1: the parent timeline is not a number");
  CHECK(error("1\t0/1\n-2\t0/2\n", 3) == "history line 2: the parent timeline is not a number");
  CHECK(error("1\t0/ZZ\n", 2) == "history line 1: the switch point is not an LSN");
  CHECK(error("1\t0/123456789\n", 2) == "history line 1: the switch point is not an LSN");
  CHECK(error("1\t03000148\n", 2) == "history line 1: the switch point is not an LSN");
  CHECK(error("1\n", 2) == "history line 1: the switch point is not an LSN");
  CHECK(error("0\t0/1\n", 2) == "history line 1: the parent timeline is out of range");
  CHECK(error("99999999999\t0/1\n", 2) == "history line 1: the parent timeline is not a number");
  CHECK(error("2\t0/1\n", 2) == "history line 1: parent timeline 2 is not below timeline 2");
  CHECK(error("1\t0/5\n1\t0/6\n", 3) == "history line 2: timelines or switch points go back");
  CHECK(error("1\t0/5\n2\t0/4\n", 3) == "history line 2: timelines or switch points go back");
}

TEST_CASE("timeline history: a file over the size limit is refused, not truncated", "[probe]") {
  std::string huge = "1\t0/3000148\t" + std::string(kMaxTimelineHistoryBytes, 'r') + "\n";
  auto parsed = ParseTimelineHistory(huge, 2);
  REQUIRE(std::holds_alternative<std::string>(parsed));
  CHECK(std::get<std::string>(parsed) == "the history file is larger than 65536 bytes");
}

}  // namespace sbd

namespace sbd {

TEST_CASE(
    "NetworkName: a clean name stays; invalid, control and long ones become valid, bounded "
    "and still distinct",
    "[parse]") {
  CHECK(NetworkName("pg-1") == "pg-1");
  CHECK(NetworkName("caf\xc3\xa9-\xe2\x82\xac") == "caf\xc3\xa9-\xe2\x82\xac");
  const std::string bad = NetworkName("bad\xff\xfename");
  CHECK(bad.rfind("bad\xef\xbf\xbd\xef\xbf\xbdname~", 0) == 0);
  CHECK(bad.size() == std::string("bad\xef\xbf\xbd\xef\xbf\xbdname~").size() + 8);
  CHECK(IsValidUtf8(bad, kMaxNetworkNameBytes));
  CHECK(bad == NetworkName("bad\xff\xfename"));  // the holder still matches its member
  CHECK(bad != NetworkName("bad\xfe\xffname"));  // two raw names stay two names
  CHECK(NetworkName("a\nb").rfind("a\xef\xbf\xbd"
                                  "b~",
                                  0) == 0);  // no control characters
  const std::string long_name = NetworkName(std::string(5000, 'x'));
  CHECK(long_name.size() <= kMaxNetworkNameBytes);
  CHECK(long_name.find("x\xe2\x80\xa6~") != std::string::npos);  // cut, with the marker
  CHECK(long_name != NetworkName(std::string(5001, 'x')));
}

TEST_CASE("etcd parser: a member name and holder with invalid UTF-8 are made valid and still match",
          "[parse]") {
  const std::string raw = "bad\xff\xfename";
  auto result =
      Range({{"kvs",
              {Kv("leader", raw),
               Kv("members/" + raw, R"({"conn_url":"postgres://10.0.0.1:5432/postgres"})")}}});
  REQUIRE(std::holds_alternative<LockRecord>(result));
  const LockRecord& view = std::get<LockRecord>(result);
  REQUIRE(view.members.size() == 1);
  CHECK(IsValidUtf8(view.members[0].name, kMaxNetworkNameBytes));
  CHECK(IsValidUtf8(view.holder, kMaxNetworkNameBytes));
  CHECK(view.members[0].name == view.holder);
  CHECK(view.members[0].name == NetworkName(raw));
}

TEST_CASE("patroni parser: member names, scope and name with invalid UTF-8 are made valid",
          "[parse]") {
  nlohmann::json body = PatroniWith("state", "running");
  body["patroni"]["scope"] = std::string("de\xffmo");
  auto own = PatroniRestProbe::ParsePatroni(body);
  // nlohmann keeps the bytes as given; the parser makes them a name.
  REQUIRE(std::holds_alternative<PatroniReading>(own));
  PatroniReading reading = std::get<PatroniReading>(own);
  CHECK(reading.scope == NetworkName("de\xffmo"));
  nlohmann::json cluster = {
      {"members", {{{"name", std::string("pg\xfe")}, {"role", "leader"}, {"state", "running"}}}}};
  REQUIRE_FALSE(PatroniRestProbe::ParseCluster(cluster, &reading));
  REQUIRE(reading.cluster_members.size() == 1);
  CHECK(reading.cluster_members[0].name == NetworkName("pg\xfe"));
  CHECK(reading.cluster_leader == NetworkName("pg\xfe"));
}

TEST_CASE("sentinel parser: a master address with invalid UTF-8 is made valid", "[parse]") {
  auto view =
      ParseSentinelMaster({"flags", "master", "config-epoch", "1"}, {"10.0.0.\xff", "6379"});
  REQUIRE(std::holds_alternative<SentinelView>(view));
  CHECK(std::get<SentinelView>(view).address == NetworkName("10.0.0.\xff") + ":6379");
  CHECK(IsValidUtf8(std::get<SentinelView>(view).address, kMaxNetworkNameBytes + 6));
}

TEST_CASE("file_sd: a target or label with invalid UTF-8 or control characters is made valid",
          "[parse]") {
  testing::TempDir dir("sbd-file-sd");
  // YAML double quotes may carry any byte as \x escapes; a JSON file the same through \u.
  testing::WriteFile(dir.path() + "/targets.yml",
                     "- targets: [\"10.0.0.1:5432\", \"10.0.0.2:5432\\x01\"]\n"
                     "  labels: {cluster: a, name: \"pg\\x1b[31m\\u0007\"}\n",
                     0600);
  FileSdTargets found = ReadFileSdTargets({dir.path() + "/targets.yml"});
  INFO((found.errors.empty() ? "" : found.errors[0].ToString()));
  REQUIRE(found.errors.empty());
  REQUIRE(found.targets.size() == 2);
  CHECK(found.targets[0].address == "10.0.0.1:5432");
  CHECK(found.targets[1].address == NetworkName("10.0.0.2:5432\x01"));
  CHECK(found.targets[0].labels.at("cluster") == "a");
  CHECK(found.targets[0].labels.at("name") == NetworkName("pg\x1b[31m\x07"));
  CHECK(found.targets[0].labels.at("name").find('\x1b') == std::string::npos);
}

}  // namespace sbd
