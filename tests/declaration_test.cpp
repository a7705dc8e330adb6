// Declarations and their store under hostile input: log forging, a rejected state file, future
// mtimes, overflowing times, concurrent writers, and a reload in place. Real files in a temp dir.
#include "detector/config/declaration.h"

#include <dirent.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "detector/common/logfmt.h"
#include "suppressors/declaration_store.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using std::chrono::hours;

std::vector<ConfigError> Errors(const std::variant<Declaration, std::vector<ConfigError>>& r) {
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&r)) return *errors;
  return {};
}

std::string AllErrors(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const auto& e : errors) out += e.ToString() + "\n";
  return out;
}

DeclarationRules ApiRules(WallTime now) {
  DeclarationRules rules;
  rules.now = now;
  rules.allow_duration = true;
  return rules;
}

std::string ApiBody(const std::string& extra) {
  return R"({"kind":"cutover","cluster":"green","reason":"CHG-2","duration":"30m")" + extra + "}";
}

// Files in `dir` whose name starts with `prefix` (left-over temporary files).
std::vector<std::string> FilesStartingWith(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

void SetMtime(const std::string& path, WallTime t) {
  const auto since = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch());
  struct timeval times[2];
  for (auto& tv : times) {
    tv.tv_sec = since.count() / 1000000;
    tv.tv_usec = since.count() % 1000000;
  }
  REQUIRE(utimes(path.c_str(), times) == 0);
}

// Captures what spdlog's default logger writes while it lives.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return text_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream text_;
};

std::string Valid(const std::string& id, WallTime now) {
  return R"({"id": ")" + id + R"(", "kind": "cutover", "cluster": "green", "reason": "r", )" +
         R"("author": "bob", "created": ")" + FormatRfc3339(now) + R"(", "expires": ")" +
         FormatRfc3339(now + hours(1)) + R"("})";
}

}  // namespace

TEST_CASE("logfmt: a value cannot end the line, close the quote or carry invalid UTF-8",
          "[declarations]") {
  CHECK(LogfmtEscape("plain text, 10% off") == "plain text, 10% off");
  CHECK(LogfmtEscape("a\"b\\c") == "a\\\"b\\\\c");
  CHECK(LogfmtEscape("x\nmsg=\"forged\"\r\t") == "x\\nmsg=\\\"forged\\\"\\r\\t");
  CHECK(LogfmtEscape(std::string("nul\0bell\x07"
                                 "del\x7f",
                                 13)) == "nul\\x00bell\\x07del\\x7F");
  CHECK(LogfmtEscape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  // Stray, overlong, surrogate and cut-off sequences are bytes, not characters.
  CHECK(LogfmtEscape("\xff\x80") == "\\xFF\\x80");
  CHECK(LogfmtEscape("\xc0\xaf") == "\\xC0\\xAF");
  CHECK(LogfmtEscape("\xed\xa0\x80") == "\\xED\\xA0\\x80");
  CHECK(LogfmtEscape("ok\xe2\x82") == "ok\\xE2\\x82");
}

TEST_CASE("declarations: reason, author and id are one line of printable text", "[declarations]") {
  const WallTime now = std::chrono::system_clock::now();
  const auto rejected = [&](const std::string& extra) {
    return AllErrors(Errors(ParseDeclarationText(
        R"({"kind":"cutover","cluster":"green","duration":"30m",)" + extra + "}", "request body",
        ApiRules(now))));
  };
  CHECK_THAT(rejected(R"("reason":"CHG-2\nmsg=\"forged\"","author":"bob")"),
             Catch::Contains("request body:1:") && Catch::Contains("reason: control character "
                                                                   "0x0A at byte 5"));
  CHECK_THAT(rejected(R"("reason":"CHG-2","author":"bob\r")"),
             Catch::Contains("author: control character 0x0D"));
  CHECK_THAT(rejected(R"("reason":"nul \u0000 inside","author":"bob")"),
             Catch::Contains("reason: control character 0x00"));
  CHECK_THAT(rejected("\"reason\":\"bad \xff byte\",\"author\":\"bob\""),
             Catch::Contains("reason: not valid UTF-8"));
  CHECK_THAT(rejected(R"("reason":")" + std::string(501, 'r') + R"(","author":"bob")"),
             Catch::Contains("reason: longer than 500 bytes"));
  CHECK_THAT(rejected(R"("reason":"r","author":")" + std::string(257, 'a') + R"(")"),
             Catch::Contains("author: longer than 256 bytes"));
  // An unknown key is shown escaped, so the error itself stays one line of valid UTF-8.
  CHECK_THAT(rejected("\"reason\":\"r\",\"author\":\"b\",\"k\\n\xff\":1"),
             Catch::Contains("k\\n\\xFF: unknown key"));
  CHECK(rejected(R"("reason":"r","author":"b\"ob")").empty());  // printable: kept, escaped in logs

  // The state file's id is a plain name.
  DeclarationRules state;
  state.now = now;
  state.allow_identity = true;
  state.allow_expired = true;
  const std::string with_newline = R"({"id":"api-1\nx","kind":"cutover","cluster":"green",)"
                                   R"("reason":"r","author":"b","created":")" +
                                   FormatRfc3339(now) + R"(","expires":")" +
                                   FormatRfc3339(now + hours(1)) + R"("})";
  CHECK_THAT(AllErrors(Errors(ParseDeclarationText(with_newline, "state.json", state))),
             Catch::Contains("state.json:1:") && Catch::Contains("id: control character"));
}

TEST_CASE("declaration store: reason and author cannot forge a log line", "[declarations]") {
  testing::TempDir dir("sbd-decl-log-");
  SuppressionsSpec spec;
  spec.state_file = dir.path() + "/state.json";
  DeclarationStore store(spec);
  LogCapture log;
  const auto added = store.Add(
      R"({"kind":"cutover","cluster":"green","reason":"r\" level=error msg=\"forged","author":"bob\\",)"
      R"("duration":"30m"})",
      std::chrono::system_clock::now());
  REQUIRE(std::holds_alternative<Declaration>(added));
  const std::string text = log.text();
  INFO(text);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
  CHECK_THAT(text,
             Catch::Contains("r\\\" level=error msg=\\\"forged") && Catch::Contains("by bob\\\\)"));
  CHECK_THAT(text, !Catch::Contains("r\" level=error"));
}

TEST_CASE("declaration store: a rejected state file is never rewritten, by POST or DELETE",
          "[declarations]") {
  testing::TempDir dir("sbd-decl-rejected-");
  SuppressionsSpec spec;
  spec.state_file = dir.path() + "/state.json";
  const WallTime now = std::chrono::system_clock::now();
  // One good entry, one the operator must fix (an unknown key).
  const std::string broken = "[" + Valid("api-000000000001", now) + ",\n" +
                             R"({"id": "api-000000000002", "kind": "cutover", "typo": 1}])" + "\n";
  testing::WriteFile(spec.state_file, broken, 0600);

  DeclarationStore store(spec);
  REQUIRE_FALSE(store.FileErrors().empty());
  CHECK(store.Active(now).size() == 1);  // what could be read still counts

  bool not_found = true;
  StoreRefusal refusal = StoreRefusal::kNone;
  const std::string why = store.Remove("api-000000000001", &not_found, &refusal);
  CHECK_THAT(why, Catch::Contains("was rejected") && Catch::Contains("state.json:2:"));
  CHECK_FALSE(not_found);
  CHECK(refusal == StoreRefusal::kStateFileRejected);
  // Not "not found": the rejected part may hold it.
  CHECK_FALSE(store.Remove("api-000000000002", &not_found, &refusal).empty());
  CHECK(refusal == StoreRefusal::kStateFileRejected);
  CHECK_FALSE(not_found);

  const auto added = store.Add(ApiBody(R"(,"author":"bob")"), now, std::nullopt, &refusal);
  REQUIRE(std::holds_alternative<std::vector<ConfigError>>(added));
  CHECK(refusal == StoreRefusal::kStateFileRejected);
  CHECK(testing::ReadFile(spec.state_file) == broken);
  CHECK(store.Active(now).size() == 1);

  // Fixed by the operator and reloaded: writes work again.
  testing::WriteFile(spec.state_file, "[" + Valid("api-000000000001", now) + "]\n", 0600);
  store.Reload(spec);
  CHECK(store.FileErrors().empty());
  CHECK(store.Remove("api-000000000001", &not_found, &refusal).empty());
  CHECK(refusal == StoreRefusal::kNone);
  CHECK(store.Active(now).empty());
}

TEST_CASE("declaration store: a drop-in file with a future mtime gets its maximum from now",
          "[declarations]") {
  testing::TempDir dir("sbd-decl-future-");
  SuppressionsSpec spec;
  spec.dropin_dir = dir.path();
  const WallTime now = std::chrono::system_clock::now();
  // 30h ahead: over the 24h maximum unless measured from the (future) mtime.
  const std::string stretched = dir.path() + "/stretched.yml";
  testing::WriteFile(
      stretched,
      "kind: cutover\ncluster: green\nreason: r\nexpires: " + FormatRfc3339(now + hours(30)) + "\n",
      0644);
  SetMtime(stretched, now + hours(48));
  // 2h ahead: fine, and created no later than now.
  const std::string honest = dir.path() + "/honest.yml";
  testing::WriteFile(
      honest, "kind: cutover\ncluster: blue\nreason: r\nexpires: " + FormatRfc3339(now + hours(2)),
      0644);
  SetMtime(honest, now + hours(48));

  LogCapture log;
  DeclarationStore store(spec);
  const auto active = store.Active(std::chrono::system_clock::now());
  REQUIRE(active.size() == 1);
  CHECK(active[0].id == "honest.yml");
  CHECK(active[0].created <= std::chrono::system_clock::now());
  const auto errors = store.FileErrors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].file == stretched);
  CHECK_THAT(errors[0].message, Catch::Contains("more than the maximum 1d"));
  CHECK_THAT(log.text(), Catch::Contains("written in the future"));

  // Seen first now, the file keeps that start: a later reload does not move it.
  store.Reload(spec);
  REQUIRE(store.Active(std::chrono::system_clock::now()).size() == 1);
  CHECK(store.FileErrors().size() == 1);
}

TEST_CASE("declarations: a huge duration or a far expiry is an error, never an overflow",
          "[declarations]") {
  const WallTime now = std::chrono::system_clock::now();
  const std::string huge = R"({"kind":"cutover","cluster":"green","reason":"r","author":"b",)"
                           R"("duration":"100000000000h"})";
  const auto errors = AllErrors(Errors(ParseDeclarationText(huge, "request body", ApiRules(now))));
  CHECK_THAT(errors, Catch::Contains("duration: more than the maximum 1d"));

  const std::string far = R"({"kind":"cutover","cluster":"green","reason":"r","author":"b",)"
                          R"("expires":"9999-12-31T23:59:59Z"})";
  CHECK_THAT(AllErrors(Errors(ParseDeclarationText(far, "request body", ApiRules(now)))),
             Catch::Contains("expires: expected an RFC 3339 time between 1970 and 2262"));
  DeclarationRules file_rules;  // a drop-in file: expired ones are kept, so no "expired" error
  file_rules.now = now;
  file_rules.allow_expired = true;
  CHECK_FALSE(Errors(ParseDeclarationText(far, "f.yml", file_rules)).empty());
  CHECK_FALSE(ParseRfc3339("9999-12-31T23:59:59Z"));
  CHECK_FALSE(ParseRfc3339("1900-01-01T00:00:00Z"));
  CHECK(ParseRfc3339("2262-01-01T00:00:00Z"));

  // A max_duration as large as a config can give does not wrap either.
  DeclarationRules generous = ApiRules(now);
  generous.max_duration = std::chrono::milliseconds::max();
  const auto accepted = ParseDeclarationText(ApiBody(R"(,"author":"bob")"), "body", generous);
  REQUIRE(std::holds_alternative<Declaration>(accepted));
  CHECK(std::get<Declaration>(accepted).expires == now + std::chrono::minutes(30));

  CHECK(AddSaturating(WallTime::max() - hours(1), hours(2)) == WallTime::max());
  CHECK(AddSaturating(now, std::chrono::milliseconds::max()) == WallTime::max());
  CHECK(AddSaturating(now, hours(1)) == now + hours(1));
}

TEST_CASE("declaration store: the state file is written whole, 0600, by concurrent writers",
          "[declarations]") {
  testing::TempDir dir("sbd-decl-write-");
  SuppressionsSpec spec;
  spec.state_file = dir.path() + "/state.json";
  DeclarationStore first(spec);
  DeclarationStore second(spec);
  const WallTime now = std::chrono::system_clock::now();
  REQUIRE(std::holds_alternative<Declaration>(first.Add(ApiBody(R"(,"author":"a")"), now)));
  struct stat st {};
  REQUIRE(stat(spec.state_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  // Two stores on one file (two detectors by mistake, or an old and a new one): each write is
  // a whole file, whichever lands last.
  constexpr int kWrites = 40;
  std::atomic<int> failures{0};
  auto writer = [&](DeclarationStore* store) {
    for (int i = 0; i < kWrites; ++i) {
      if (!std::holds_alternative<Declaration>(store->Add(ApiBody(R"(,"author":"w")"), now))) {
        ++failures;
      }
    }
  };
  std::thread a(writer, &first);
  std::thread b(writer, &second);
  a.join();
  b.join();
  CHECK(failures == 0);
  const auto parsed = nlohmann::json::parse(testing::ReadFile(spec.state_file), nullptr, false);
  REQUIRE_FALSE(parsed.is_discarded());
  CHECK(parsed.is_array());
  CHECK((parsed.size() == kWrites + 1 || parsed.size() == kWrites));
  DeclarationStore reread(spec);
  CHECK(reread.FileErrors().empty());
  CHECK(FilesStartingWith(dir.path(), ".state.json.").empty());

  // A write that fails (the target became a directory) leaves no temporary file behind.
  std::filesystem::remove(spec.state_file);
  REQUIRE(mkdir(spec.state_file.c_str(), 0700) == 0);
  StoreRefusal refusal = StoreRefusal::kNone;
  const auto failed = first.Add(ApiBody(R"(,"author":"a")"), now, std::nullopt, &refusal);
  CHECK_THAT(AllErrors(Errors(failed)), Catch::Contains("cannot rename"));
  CHECK(refusal == StoreRefusal::kNotPersisted);
  CHECK(FilesStartingWith(dir.path(), ".state.json.").empty());
}

TEST_CASE("declaration store: a reload in place keeps API declarations and rescans drop-ins",
          "[declarations]") {
  testing::TempDir dir("sbd-decl-reload-");
  const WallTime now = std::chrono::system_clock::now();
  REQUIRE(mkdir((dir.path() + "/d1").c_str(), 0755) == 0);
  REQUIRE(mkdir((dir.path() + "/d2").c_str(), 0755) == 0);
  const std::string expires = FormatRfc3339(now + hours(2));
  testing::WriteFile(dir.path() + "/d1/one.yml",
                     "kind: cutover\ncluster: a\nreason: r\nexpires: " + expires + "\n", 0644);
  testing::WriteFile(dir.path() + "/d2/two.yml",
                     "kind: cutover\ncluster: b\nreason: r\nexpires: " + expires + "\n", 0644);
  SuppressionsSpec spec;
  spec.dropin_dir = dir.path() + "/d1";
  spec.state_file = dir.path() + "/state.json";
  Declaration configured;
  configured.id = "config-0";
  configured.cluster = "old";
  configured.expires = now + hours(1);
  spec.declarations = {configured};
  DeclarationStore store(spec);
  const auto kept = store.Add(ApiBody(R"(,"author":"a")"), now);
  const auto removed = store.Add(ApiBody(R"(,"author":"a")"), now);
  REQUIRE(std::holds_alternative<Declaration>(kept));
  REQUIRE(std::holds_alternative<Declaration>(removed));
  bool not_found = false;
  REQUIRE(store.Remove(std::get<Declaration>(removed).id, &not_found).empty());

  auto ids = [&] {
    std::vector<std::string> out;
    for (const auto& d : store.All()) out.push_back(d.id);
    return out;
  };
  // The config's declarations replaced, the drop-in directory changed, the API kept; the one
  // removed before the reload stays removed.
  configured.id = "config-0";
  configured.cluster = "new";
  spec.declarations = {configured};
  spec.dropin_dir = dir.path() + "/d2";
  store.Reload(spec);
  CHECK(ids() == std::vector<std::string>{"config-0", "two.yml", std::get<Declaration>(kept).id});
  CHECK(store.All()[0].cluster == "new");

  // Another state file: its declarations replace the API ones.
  testing::WriteFile(dir.path() + "/other.json", "[" + Valid("api-00000000000a", now) + "]", 0600);
  spec.state_file = dir.path() + "/other.json";
  store.Reload(spec);
  CHECK(ids() == std::vector<std::string>{"config-0", "two.yml", "api-00000000000a"});
  // Writes go to the new file.
  REQUIRE(store.Remove("api-00000000000a", &not_found).empty());
  CHECK(testing::ReadFile(dir.path() + "/other.json") == "[]\n");
}

TEST_CASE("declaration store: a reload during writes loses none of them", "[declarations]") {
  testing::TempDir dir("sbd-decl-race-");
  SuppressionsSpec spec;
  spec.state_file = dir.path() + "/state.json";
  DeclarationStore store(spec);
  const WallTime now = std::chrono::system_clock::now();
  std::atomic<bool> done{false};
  std::thread reloader([&] {
    while (!done) store.Reload(spec);
  });
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    auto added = store.Add(ApiBody(R"(,"author":"a")"), now);
    REQUIRE(std::holds_alternative<Declaration>(added));
    ids.push_back(std::get<Declaration>(added).id);
  }
  bool not_found = false;
  for (size_t i = 0; i < ids.size(); i += 2) REQUIRE(store.Remove(ids[i], &not_found).empty());
  done = true;
  reloader.join();
  CHECK(store.All().size() == ids.size() / 2);
  CHECK(DeclarationStore(spec).All().size() == ids.size() / 2);
}

TEST_CASE("declaration store: a hung state file write never holds a round's reads",
          "[declarations]") {
  testing::TempDir dir("sbd-decl-hung-");
  SuppressionsSpec spec;
  spec.state_file = dir.path() + "/state.json";
  // The disk hangs inside the write (where fsync and rename would), until released.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  std::atomic<int> writes{0};
  auto hung_disk = [&](const std::string& path, const std::string& text, std::string* error) {
    if (writes++ == 0) {
      entered.set_value();
      released.wait();
    }
    return WriteFileAtomically(path, text, error);
  };
  DeclarationStore store(spec, hung_disk);
  const WallTime now = std::chrono::system_clock::now();
  std::future<std::variant<Declaration, std::vector<ConfigError>>> adding;
  std::future<size_t> reads;
  // Released on every path (and before the futures above wait in their destructors), so that
  // a failed REQUIRE never leaves the writer hung.
  struct Releaser {
    std::promise<void>& promise;
    bool done = false;
    void operator()() {
      if (!done) promise.set_value();
      done = true;
    }
    ~Releaser() { (*this)(); }
  } releaser{release};
  adding =
      std::async(std::launch::async, [&] { return store.Add(ApiBody(R"(,"author":"a")"), now); });
  REQUIRE(entered.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  // While the write hangs, what every round and every scrape calls answers at once.
  reads = std::async(std::launch::async, [&] {
    const size_t active = store.Active(now).size();
    const size_t shown = store.View().all.size();
    return active + shown + store.FileErrors().size();
  });
  const bool answered = reads.wait_for(std::chrono::milliseconds(500)) == std::future_status::ready;
  CHECK(answered);
  CHECK(adding.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  releaser();
  CHECK(reads.get() == 0);  // the declaration counts only once it is written
  const auto added = adding.get();
  REQUIRE(std::holds_alternative<Declaration>(added));
  // The write landed afterwards, whole, and the store now holds it.
  CHECK(store.Active(now).size() == 1);
  const auto written = nlohmann::json::parse(testing::ReadFile(spec.state_file), nullptr, false);
  REQUIRE(written.is_array());
  REQUIRE(written.size() == 1);
  CHECK(written[0]["id"] == std::get<Declaration>(added).id);
  CHECK(DeclarationStore(spec).All().size() == 1);
}

TEST_CASE("declaration store: the authenticated user is the author", "[declarations]") {
  testing::TempDir dir("sbd-decl-author-");
  SuppressionsSpec spec;
  spec.state_file = dir.path() + "/state.json";
  DeclarationStore store(spec);
  const WallTime now = std::chrono::system_clock::now();
  const auto typed = store.Add(ApiBody(R"(,"author":"mallory")"), now, std::string("alice"));
  REQUIRE(std::holds_alternative<Declaration>(typed));
  CHECK(std::get<Declaration>(typed).author == "alice");
  const auto omitted = store.Add(ApiBody(""), now, std::string("alice"));
  REQUIRE(std::holds_alternative<Declaration>(omitted));
  CHECK(std::get<Declaration>(omitted).author == "alice");
  // Without an authenticated user the body must say who.
  StoreRefusal refusal = StoreRefusal::kNone;
  CHECK_THAT(AllErrors(Errors(store.Add(ApiBody(""), now, std::nullopt, &refusal))),
             Catch::Contains("author: required"));
  CHECK(refusal == StoreRefusal::kInvalid);
  CHECK_THAT(AllErrors(Errors(store.Add(ApiBody(""), now, std::string("al\nice")))),
             Catch::Contains("author: authenticated user: control character"));
  CHECK(DeclarationStore(spec).All().at(0).author == "alice");
}

}  // namespace sbd
