// The suppressors, declarations, file_sd inventory and lineage forks, without I/O except the
// declaration store's own files (in a temp dir).
#include "suppressors/suppressor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "detector/config/config.h"
#include "detector/config/declaration.h"
#include "detector/config/file_sd.h"
#include "detector/verdicts/lineage.h"
#include "suppressors/declaration_store.h"
#include "suppressors/label_regrouping.h"
#include "suppressors/provisioning.h"
#include "suppressors/transition.h"
#include "tests/support/temp_dir.h"

namespace sbd {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

const std::string kLineage = "7000000000000000001";
const std::string kOther = "7000000000000000002";
const WallTime kNow = std::chrono::system_clock::from_time_t(1795000000);  // 2026-11-18

ClusterSpec Cluster(std::vector<std::string> members, const std::string& scope = "") {
  ClusterSpec spec;
  spec.name = "orders";
  spec.scope = scope;
  spec.kind = scope.empty() ? "postgres" : "patroni";
  for (auto& name : members) {
    MemberSpec member;
    member.name = name;
    spec.members.push_back(member);
  }
  return spec;
}

Observation Read(const std::string& member, bool writable, const std::string& lineage = kLineage,
                 std::int64_t timeline = 1, const std::string& started = "t0") {
  Observation obs;
  obs.member = member;
  obs.window = ReadingWindow{WallClock::now(), SteadyClock::now(), SteadyClock::now()};
  PostgresReading r;
  r.in_recovery = !writable;
  r.read_only = false;
  r.system_identifier = lineage;
  r.timeline = timeline;
  r.backend_pid = 100;
  r.postmaster_start = started;
  obs.result = r;
  return obs;
}

Observation Claiming(Observation obs, const std::string& scope) {
  PatroniReading claim;
  claim.scope = scope;
  obs.patroni = claim;
  return obs;
}

Observation Fail(const std::string& member, ProbeFailureReason reason) {
  Observation obs;
  obs.member = member;
  obs.result = ProbeFailure{reason, "test"};
  return obs;
}

Declaration Declared(DeclarationKind kind, const std::string& cluster,
                     const std::string& scope = "", const std::string& member = "",
                     WallTime expires = kNow + hours(1)) {
  Declaration d;
  d.id = "d-" + cluster + "-" + scope + "-" + member;
  d.kind = kind;
  d.cluster = cluster;
  d.scope = scope;
  d.member = member;
  d.reason = "building v17 (CHG-1)";
  d.author = "alice";
  d.expires = expires;
  return d;
}

// Assesses a round as the scheduler does, then runs every registered suppressor.
Assessment Judge(const ClusterSpec& spec, const std::vector<Observation>& round, bool confirmed,
                 const std::vector<Declaration>& declarations,
                 const std::optional<TransitionEvidence>& transition = std::nullopt) {
  ClusterHistory history;
  for (const auto& obs : round) RecordObservation(history.members[obs.member], obs, kNow);
  history.lineage = ChooseLineage(spec, history);
  Assessment a = Assess(spec, round, history, confirmed);
  ApplySuppressors(SuppressionInput{spec, round, history, declarations, transition, kNow, spec.ttl},
                   a);
  return a;
}

std::vector<ConfigError> DeclarationErrors(const std::string& text, DeclarationRules rules) {
  auto parsed = ParseDeclarationText(text, "d.yml", rules);
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&parsed)) return *errors;
  return {};
}

std::vector<std::string> Strings(const std::vector<ConfigError>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.ToString());
  return out;
}

}  // namespace

TEST_CASE("declarations: RFC 3339 times", "[suppressors]") {
  CHECK(ParseRfc3339("2026-11-30T06:00:00Z") == std::chrono::system_clock::from_time_t(1796018400));
  CHECK(ParseRfc3339("2026-11-30T08:00:00+02:00") == ParseRfc3339("2026-11-30T06:00:00Z"));
  CHECK(ParseRfc3339("2026-11-30T06:00:00.250Z") ==
        *ParseRfc3339("2026-11-30T06:00:00Z") + std::chrono::milliseconds(250));
  CHECK(FormatRfc3339(*ParseRfc3339("2026-11-30T06:00:00Z")) == "2026-11-30T06:00:00Z");
  for (const char* bad : {"", "2026-11-30", "2026-11-30 06:00:00Z", "2026-02-31T00:00:00Z",
                          "2026-11-30T06:00:00", "2026-11-30T06:00:00Zjunk", "tomorrow"}) {
    INFO(bad);
    CHECK_FALSE(ParseRfc3339(bad).has_value());
  }
}

TEST_CASE("declarations: every problem with line, column and key", "[suppressors]") {
  DeclarationRules rules;
  rules.now = *ParseRfc3339("2026-11-30T00:00:00Z");

  auto ok = ParseDeclarationText(
      "kind: rebuilding\ncluster: orders\nscope: orders-v17\nreason: rebuild after upgrade\n"
      "expires: 2026-11-30T06:00:00Z\n",
      "d.yml", rules);
  REQUIRE(std::holds_alternative<Declaration>(ok));
  const Declaration& d = std::get<Declaration>(ok);
  CHECK(d.kind == DeclarationKind::kRebuilding);
  CHECK(d.scope == "orders-v17");
  CHECK(d.expires == *ParseRfc3339("2026-11-30T06:00:00Z"));

  CHECK(Strings(DeclarationErrors("kind: holiday\ncluster: orders\nreason: r\n"
                                  "expires: 2026-11-30T06:00:00Z\ncolour: red\n",
                                  rules)) ==
        std::vector<std::string>{
            "d.yml:5:1: colour: unknown key",
            "d.yml:1:7: kind: expected provisioning, rebuilding, cutover or decommissioning"});
  // The expiry is mandatory, bounded, and cannot already be past.
  CHECK(Strings(DeclarationErrors("kind: provisioning\ncluster: orders\nreason: r\n", rules)) ==
        std::vector<std::string>{"d.yml:1:1: expires: required"});
  CHECK(Strings(DeclarationErrors(
            "kind: provisioning\ncluster: orders\nreason: r\nexpires: 2026-12-01T01:00:00Z\n",
            rules)) ==
        std::vector<std::string>{"d.yml:4:10: expires: more than the maximum 1d ahead; a "
                                 "declaration must expire (suppressions.max_duration)"});
  CHECK(Strings(DeclarationErrors(
            "kind: provisioning\ncluster: orders\nreason: r\nexpires: 2026-11-29T01:00:00Z\n",
            rules)) ==
        std::vector<std::string>{"d.yml:4:10: expires: already expired (2026-11-29T01:00:00Z)"});
  CHECK(Strings(DeclarationErrors("kind: provisioning\ncluster: orders\nreason: r\n"
                                  "expires: next week\n",
                                  rules)) ==
        std::vector<std::string>{
            "d.yml:4:10: expires: expected an RFC 3339 time between 1970 and 2262, like "
            "2026-11-30T06:00:00Z"});
  // Malformed YAML: where the parser stopped.
  const auto malformed = DeclarationErrors("kind: provisioning\ncluster: [orders\n", rules);
  REQUIRE(malformed.size() == 1);
  CHECK(malformed[0].line >= 2);
  CHECK(malformed[0].column >= 1);
  // Files may not use a relative duration: re-reading would extend it.
  CHECK(
      Strings(DeclarationErrors("kind: provisioning\ncluster: orders\nreason: r\nduration: 6h\n",
                                rules)) ==
      std::vector<std::string>{"d.yml:4:1: duration: unknown key", "d.yml:1:1: expires: required"});
  // The API may, and must name its author.
  rules.allow_duration = true;
  auto api = ParseDeclarationText(
      R"({"kind": "cutover", "cluster": "orders", "reason": "r", "author": "bob", "duration": "6h"})",
      "body", rules);
  REQUIRE(std::holds_alternative<Declaration>(api));
  CHECK(std::get<Declaration>(api).expires == rules.now + hours(6));
  CHECK(Strings(DeclarationErrors(R"({"kind": "cutover", "cluster": "orders", "reason": "r"})",
                                  rules)) ==
        std::vector<std::string>{"d.yml:1:1: author: required",
                                 "d.yml:1:1: expires: required (or duration)"});
}

TEST_CASE("provisioning: a declared split brain is suppressed, and still warns", "[suppressors]") {
  const ClusterSpec spec = Cluster({"a", "b"});
  const std::vector<Observation> round = {Read("a", true), Read("b", true, kLineage, 2)};

  const Assessment undeclared = Judge(spec, round, true, {});
  CHECK(undeclared.verdict == Verdict::kSplitBrain);
  CHECK(undeclared.suppressions.empty());

  const Assessment declared =
      Judge(spec, round, true, {Declared(DeclarationKind::kProvisioning, "orders")});
  CHECK(declared.verdict == Verdict::kSuppressed);
  CHECK(declared.raw_verdict == Verdict::kSplitBrain);
  CHECK(declared.suppressed_split_brain);
  REQUIRE(declared.suppressions.size() == 1);
  CHECK(declared.suppressions[0].suppressor == "provisioning");
  CHECK(declared.suppressions[0].kind == "provisioning");
  CHECK(declared.suppressions[0].hidden == "split_brain");
  CHECK(declared.suppressions[0].reason == "building v17 (CHG-1)");
  CHECK(declared.suppressions[0].expires == kNow + hours(1));

  // Another cluster's declaration, an expired one, one for a single member: the page stands.
  CHECK(Judge(spec, round, true, {Declared(DeclarationKind::kProvisioning, "billing")}).verdict ==
        Verdict::kSplitBrain);
  CHECK(Judge(spec, round, true,
              {Declared(DeclarationKind::kProvisioning, "orders", "", "", kNow - seconds(1))})
            .verdict == Verdict::kSplitBrain);
  CHECK(Judge(spec, round, true, {Declared(DeclarationKind::kProvisioning, "orders", "", "b")})
            .verdict == Verdict::kSplitBrain);
  // Both members declared one by one: suppressed, both declarations listed.
  const Assessment both = Judge(spec, round, true,
                                {Declared(DeclarationKind::kRebuilding, "orders", "", "a"),
                                 Declared(DeclarationKind::kRebuilding, "orders", "", "b")});
  CHECK(both.verdict == Verdict::kSuppressed);
  CHECK(both.suppressions.size() == 2);
}

TEST_CASE("provisioning: a declaration for one scope never hides another", "[suppressors]") {
  const ClusterSpec spec = Cluster({"a1", "a2", "b1"}, "orders");
  // b1 is a new cluster's primary (scope orders-v17), grouped here by label: drift.
  const std::vector<Observation> round = {Claiming(Read("a1", true), "orders"),
                                          Claiming(Read("a2", false), "orders"),
                                          Claiming(Read("b1", true, kOther), "orders-v17")};
  const Assessment undeclared = Judge(spec, round, false, {});
  CHECK(undeclared.verdict == Verdict::kDrift);
  REQUIRE(undeclared.suppressions.size() == 1);  // label_regrouping records what it kept out
  CHECK(undeclared.suppressions[0].suppressor == "label_regrouping");
  CHECK(undeclared.suppressions[0].members == std::vector<std::string>{"b1"});

  const Assessment declared =
      Judge(spec, round, false, {Declared(DeclarationKind::kProvisioning, "orders", "orders-v17")});
  CHECK(declared.verdict == Verdict::kSuppressed);
  CHECK(declared.raw_verdict == Verdict::kDrift);

  // The same declaration while the old scope itself has two writable: the page stands.
  const std::vector<Observation> split = {Claiming(Read("a1", true), "orders"),
                                          Claiming(Read("a2", true, kLineage, 2), "orders"),
                                          Claiming(Read("b1", true, kOther), "orders-v17")};
  const Assessment real =
      Judge(spec, split, true, {Declared(DeclarationKind::kProvisioning, "orders", "orders-v17")});
  CHECK(real.verdict == Verdict::kSplitBrain);
  CHECK_FALSE(real.suppressed_split_brain);
}

TEST_CASE("transition: a demoted candidate is a transition, a timeout is not", "[suppressors]") {
  const std::vector<Observation> first = {Read("a", true), Read("b", true, kLineage, 2)};
  auto demoted = DescribeTransition(first, {Read("a", false), Read("b", true, kLineage, 2)});
  REQUIRE(demoted);
  CHECK(demoted->members == std::vector<std::string>{"a", "b"});
  CHECK(demoted->summary ==
        "a demoted (in recovery on timeline 1); b still writable on timeline 2");

  auto restarting = DescribeTransition(
      first, {Fail("a", ProbeFailureReason::kRefused), Read("b", true, kLineage, 2)});
  REQUIRE(restarting);
  CHECK(restarting->summary.find("a going down (refused)") != std::string::npos);

  auto restarted =
      DescribeTransition(first, {Read("a", true, kLineage, 1, "t1"), Read("b", true, kLineage, 2)});
  REQUIRE(restarted);
  CHECK(restarted->summary.find("a restarted") == 0);

  // Unexplained: a frozen zombie times out; two still writable did not overlap.
  CHECK_FALSE(DescribeTransition(
      first, {Fail("a", ProbeFailureReason::kTimeout), Read("b", true, kLineage, 2)}));
  CHECK_FALSE(DescribeTransition(first, first));

  // A completed move between rounds is a transition too (counted, nothing to suppress).
  auto moved = DescribePrimaryMove("a", 1, {"b"}, {Read("a", false), Read("b", true, kLineage, 2)});
  REQUIRE(moved);
  CHECK_FALSE(moved->from_candidate);
  CHECK(moved->summary ==
        "primary moved from a (timeline 1) to b (timeline 2); a is a replica now");
  CHECK_FALSE(DescribePrimaryMove("a", 1, {"a"}, {Read("a", true)}));
  CHECK_FALSE(DescribePrimaryMove("", 0, {"a"}, {Read("a", true)}));
  CHECK_FALSE(DescribePrimaryMove("a", 1, {}, {Fail("a", ProbeFailureReason::kRefused)}));
  CHECK(
      Judge(Cluster({"a", "b"}), {Read("a", false), Read("b", true, kLineage, 2)}, false, {}, moved)
          .suppressions.empty());

  // Recorded, with its evidence, and nothing else changes.
  const ClusterSpec spec = Cluster({"a", "b"});
  const Assessment a =
      Judge(spec, {Read("a", false), Read("b", true, kLineage, 2)}, false, {}, demoted);
  CHECK(a.verdict == Verdict::kHealthy);
  REQUIRE(a.suppressions.size() == 1);
  CHECK(a.suppressions[0].suppressor == "transition");
  CHECK(a.suppressions[0].expires == kNow + spec.ttl);
}

TEST_CASE("lineage forks: one lineage writable in two clusters or scopes", "[suppressors]") {
  const std::vector<LineageSighting> sightings = {{"blue", "blue", "blue", kLineage, "blue-1"},
                                                  {"green", "green", "green", kLineage, "green-1"},
                                                  {"other", "other", "other", kOther, "other-1"}};
  auto forks = FindLineageForks(sightings, {}, kNow);
  REQUIRE(forks.count("blue") == 1);
  REQUIRE(forks.count("green") == 1);
  CHECK(forks.count("other") == 0);
  CHECK(forks["blue"][0].with == std::vector<std::string>{"green"});
  CHECK(forks["green"][0].members == std::vector<std::string>{"green-1"});
  CHECK_FALSE(forks["blue"][0].declared_by);

  // A cutover declaration on either side covers the fork; a provisioning one does not.
  auto declared = FindLineageForks(sightings, {Declared(DeclarationKind::kCutover, "green")}, kNow);
  REQUIRE(declared["blue"][0].declared_by);
  CHECK(declared["blue"][0].declared_by->cluster == "green");
  CHECK_FALSE(FindLineageForks(sightings, {Declared(DeclarationKind::kProvisioning, "green")},
                               kNow)["blue"][0]
                  .declared_by);

  // Inside one cluster: a member of another scope with the same lineage.
  auto inside = FindLineageForks({{"orders", "orders", "orders", kLineage, "a1"},
                                  {"orders", "orders-standby", "orders", kLineage, "s1"}},
                                 {}, kNow);
  REQUIRE(inside["orders"].size() == 1);
  CHECK(inside["orders"][0].with == std::vector<std::string>{"orders-standby"});
  CHECK(inside["orders"][0].with_total == 1);
}

TEST_CASE("lineage forks: a fleet sharing one lineage names a few partners, counts the rest",
          "[suppressors]") {
  // Clusters cloned from one base backup share a system identifier: 2,000 of them writable
  // at once are each forked with 1,999 others, named only by the first few.
  std::vector<LineageSighting> sightings;
  for (int i = 0; i < 2000; ++i) {
    const std::string name = "c" + std::to_string(i);
    sightings.push_back({name, name, name, kLineage, name + "-1"});
  }
  auto forks = FindLineageForks(sightings, {}, kNow);
  REQUIRE(forks.size() == 2000);
  const LineageFork& fork = forks["c0"].at(0);
  CHECK(fork.with_total == 1999);
  CHECK(fork.with.size() == kMaxForkPartners);
  CHECK(fork.with.front() == "c1");  // sorted; never the cluster itself
  CHECK(std::find(fork.with.begin(), fork.with.end(), "c0") == fork.with.end());
  CHECK(forks["c1999"].at(0).with.front() == "c0");
}

TEST_CASE("file_sd: JSON and YAML target files, errors with file, line and column",
          "[suppressors]") {
  testing::TempDir dir("sbd-filesd-");
  {
    std::ofstream(dir.path() + "/pg.json")
        << R"([{"targets": ["10.0.0.1:5432", "10.0.0.2:5432"], "labels": {"cluster": "orders"}},
 {"targets": ["10.0.0.9:9187"], "labels": {"cluster": "billing", "member": "b1"}}])";
    std::ofstream(dir.path() + "/old.yml")
        << "- targets: ['10.0.0.3:5432']\n  labels:\n    cluster: orders\n";
    std::ofstream(dir.path() + "/broken.yaml")
        << "- targets: ['10.0.0.4:5432']\n  labels: {cluster: orders\n";
  }
  FileSdTargets found = ReadFileSdTargets({dir.path() + "/*.json", dir.path() + "/*.y*ml"});
  REQUIRE(found.targets.size() == 4);
  CHECK(found.targets[2].address == "10.0.0.9:9187");
  CHECK(found.targets[2].labels.at("member") == "b1");
  CHECK(found.targets[3].address == "10.0.0.3:5432");
  REQUIRE(found.errors.size() == 1);
  CHECK(found.errors[0].file == dir.path() + "/broken.yaml");
  CHECK(found.errors[0].line >= 2);

  // A cluster takes the targets its label selects.
  const std::string yaml = "clusters:\n  - name: orders\n    file_sd:\n      files: [" +
                           dir.path() + "/pg.json, " + dir.path() +
                           "/old.yml]\n      group_by: cluster\n"
                           "      dsn: \"user=splitbrain dbname=postgres\"\n"
                           "  - name: billing\n    file_sd:\n      files: [" +
                           dir.path() +
                           "/pg.json]\n      group_by: cluster\n      name_label: member\n"
                           "      port: 5433\n      dsn: \"user=splitbrain\"\n";
  auto config = ParseConfig(yaml, "c.yml");
  REQUIRE(std::holds_alternative<ValidatedConfig>(config));
  const auto& clusters = std::get<ValidatedConfig>(config).clusters();
  REQUIRE(clusters[0].members.size() == 3);
  CHECK(clusters[0].members[2].name == "10.0.0.3:5432");
  CHECK(clusters[0].members[2].dsn ==
        "host='10.0.0.3' port='5432' user='splitbrain' dbname='postgres'");
  REQUIRE(clusters[1].members.size() == 1);
  CHECK(clusters[1].members[0].name == "b1");
  CHECK(clusters[1].members[0].address == "10.0.0.9:5433");

  // A broken target file is a config error naming that file, line and column.
  auto broken =
      ParseConfig("clusters:\n  - name: orders\n    file_sd:\n      files: [" + dir.path() +
                      "/broken.yaml]\n      group_by: cluster\n"
                      "      dsn: \"user=splitbrain\"\n",
                  "c.yml");
  REQUIRE(std::holds_alternative<std::vector<ConfigError>>(broken));
  const auto errors = Strings(std::get<std::vector<ConfigError>>(broken));
  CHECK(errors.front().rfind(dir.path() + "/broken.yaml:3:", 0) == 0);
}

TEST_CASE("declaration store: drop-ins, the API, and a restart", "[suppressors]") {
  testing::TempDir dir("sbd-decl-");
  const std::string dropins = dir.path() + "/d";
  REQUIRE(mkdir(dropins.c_str(), 0755) == 0);
  SuppressionsSpec spec;
  spec.dropin_dir = dropins;
  spec.state_file = dir.path() + "/state.json";
  const auto now = std::chrono::system_clock::now();
  const std::string expires = FormatRfc3339(now + hours(2));
  std::ofstream(dropins + "/v17.yml") << "kind: provisioning\ncluster: orders\nreason: v17\n"
                                      << "expires: " << expires << "\n";
  std::ofstream(dropins + "/bad.yml") << "kind: provisioning\ncluster: orders\nreason: [x\n";
  std::ofstream(dropins + "/notes.txt") << "not a declaration\n";

  DeclarationStore store(spec);
  auto active = store.Active(now);
  REQUIRE(active.size() == 1);
  CHECK(active[0].id == "v17.yml");
  CHECK(active[0].source == "file");
  auto errors = store.FileErrors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].file == dropins + "/bad.yml");
  CHECK(errors[0].line >= 3);

  // API: added, persisted, listed after a restart, removed.
  auto added = store.Add(
      R"({"kind":"cutover","cluster":"green","reason":"CHG-2","author":"bob","duration":"30m"})",
      now);
  REQUIRE(std::holds_alternative<Declaration>(added));
  const std::string id = std::get<Declaration>(added).id;
  CHECK(std::holds_alternative<std::vector<ConfigError>>(store.Add(
      R"({"kind":"cutover","cluster":"green","reason":"r","author":"b","duration":"2d"})", now)));
  {
    DeclarationStore restarted(spec);
    auto all = restarted.Active(now);
    REQUIRE(all.size() == 2);
    CHECK(all[1].id == id);
    CHECK(all[1].author == "bob");
    bool not_found = false;
    CHECK(restarted.Remove("v17.yml", &not_found).find("delete that file") != std::string::npos);
    CHECK(restarted.Remove("nope", &not_found) == "no declaration nope");
    CHECK(not_found);
    CHECK(restarted.Remove(id, &not_found).empty());
  }
  CHECK(DeclarationStore(spec).Active(now).size() == 1);

  // A fixed file is picked up without a restart; a removed one is gone.
  std::ofstream(dropins + "/bad.yml") << "kind: decommissioning\ncluster: orders\nmember: old\n"
                                      << "reason: retiring\nexpires: " << expires << "\n";
  unlink((dropins + "/v17.yml").c_str());
  store.Refresh();
  active = store.Active(now);
  REQUIRE(active.size() == 2);  // the file, and this instance's API declaration
  CHECK(active[0].id == "bad.yml");
  CHECK(active[0].member == "old");
  CHECK(store.FileErrors().empty());
}

}  // namespace sbd
