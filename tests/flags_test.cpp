#include "detector/app/flags.h"

#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

struct Parsed {
  bool ok = false;
  sbd::Flags flags;
  std::string error;
};

// ParseFlags over {"splitbrain-detector", args...}, as main() passes argv.
Parsed Parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"splitbrain-detector"};
  for (const auto& arg : args) argv.push_back(arg.c_str());
  Parsed parsed;
  parsed.ok =
      sbd::ParseFlags(static_cast<int>(argv.size()), argv.data(), &parsed.flags, &parsed.error);
  return parsed;
}

// The error of a command line that must be refused.
std::string Refusal(const std::vector<std::string>& args) {
  const Parsed parsed = Parse(args);
  INFO("args: " << Catch::Detail::stringify(args));
  CHECK_FALSE(parsed.ok);
  return parsed.error;
}

}  // namespace

TEST_CASE("flags: no flags give the documented defaults", "[flags]") {
  const Parsed parsed = Parse({});
  REQUIRE(parsed.ok);
  const sbd::Flags& f = parsed.flags;
  CHECK(f.command == "run");
  CHECK(f.config_file == "splitbrain.yml");
  CHECK(f.listen_address == ":10259");
  CHECK(f.web_config_file.empty());
  CHECK(f.runbooks_dir.empty());
  CHECK(f.log_level == "info");
  CHECK(f.log_format == "logfmt");
  CHECK(f.shard.index == 0);
  CHECK(f.shard.total == 1);
  CHECK_FALSE(f.check_config);
  CHECK_FALSE(f.allow_unauthenticated_changes);
  CHECK_FALSE(f.log_level_given);
}

TEST_CASE("flags: every documented flag is parsed in the --name=value form", "[flags]") {
  const Parsed parsed = Parse({"--config.file=/etc/sb.yml", "--web.listen-address=127.0.0.1:0",
                               "--web.config.file=web.yml", "--web.allow-unauthenticated-changes",
                               "--web.runbooks-dir=/srv/runbooks", "--log.level=debug",
                               "--log.format=json", "--shard=2/3", "--check-config"});
  REQUIRE(parsed.ok);
  const sbd::Flags& f = parsed.flags;
  CHECK(f.command == "run");
  CHECK(f.config_file == "/etc/sb.yml");
  CHECK(f.listen_address == "127.0.0.1:0");
  CHECK(f.web_config_file == "web.yml");
  CHECK(f.allow_unauthenticated_changes);
  CHECK(f.runbooks_dir == "/srv/runbooks");
  CHECK(f.log_level == "debug");
  CHECK(f.log_level_given);
  CHECK(f.log_format == "json");
  CHECK(f.shard_text == "2/3");
  CHECK(f.shard.index == 2);
  CHECK(f.shard.total == 3);
  CHECK(f.check_config);
}

TEST_CASE("flags: every valued flag takes the next argument as its value", "[flags]") {
  const Parsed parsed = Parse({"--config.file", "a.yml", "--web.listen-address", ":9000",
                               "--web.config.file", "w.yml", "--web.runbooks-dir", "rb",
                               "--log.level", "warn", "--log.format", "json", "--shard", "1/2"});
  REQUIRE(parsed.ok);
  const sbd::Flags& f = parsed.flags;
  CHECK(f.config_file == "a.yml");
  CHECK(f.listen_address == ":9000");
  CHECK(f.web_config_file == "w.yml");
  CHECK(f.runbooks_dir == "rb");
  CHECK(f.log_level == "warn");
  CHECK(f.log_level_given);
  CHECK(f.log_format == "json");
  CHECK(f.shard.index == 1);
  CHECK(f.shard.total == 2);
}

TEST_CASE("flags: a value may hold '=' and start with dashes", "[flags]") {
  const Parsed with_equals = Parse({"--config.file=dir/a=b.yml"});
  REQUIRE(with_equals.ok);
  CHECK(with_equals.flags.config_file == "dir/a=b.yml");
  const Parsed dashed = Parse({"--config.file", "--odd.yml"});
  REQUIRE(dashed.ok);
  CHECK(dashed.flags.config_file == "--odd.yml");
}

TEST_CASE("flags: an unknown flag is refused with a message naming it", "[flags]") {
  CHECK(Refusal({"--config.fil=x.yml"}) == "unknown flag --config.fil");
  CHECK(Refusal({"--config.file=a.yml", "--verbose"}) == "unknown flag --verbose");
  CHECK(Refusal({"run"}) == "unknown flag run");
}

TEST_CASE("flags: a valued flag at the end without a value is refused, naming it", "[flags]") {
  CHECK(Refusal({"--config.file"}) == "flag --config.file needs a value");
  CHECK(Refusal({"check", "--shard"}) == "flag --shard needs a value");
}

TEST_CASE("flags: check is a command only as the first argument", "[flags]") {
  const Parsed parsed = Parse({"check", "--config.file=c.yml", "--shard=0/2"});
  REQUIRE(parsed.ok);
  CHECK(parsed.flags.command == "check");
  CHECK(parsed.flags.config_file == "c.yml");
  CHECK(parsed.flags.shard.total == 2);
  CHECK_FALSE(parsed.flags.log_level_given);

  CHECK(Refusal({"--config.file=c.yml", "check"}) == "unknown flag check");
}

TEST_CASE("flags: --help, -h and --version choose their commands", "[flags]") {
  for (const std::string help : {"--help", "-h"}) {
    const Parsed parsed = Parse({help});
    REQUIRE(parsed.ok);
    CHECK(parsed.flags.command == "help");
  }
  const Parsed version = Parse({"--version"});
  REQUIRE(version.ok);
  CHECK(version.flags.command == "version");
  // After `check`, --help still wins: main() prints the usage instead of probing.
  const Parsed check_help = Parse({"check", "--help"});
  REQUIRE(check_help.ok);
  CHECK(check_help.flags.command == "help");
}

TEST_CASE("flags: invalid values of --log.format, --log.level and --shard are refused", "[flags]") {
  CHECK(Refusal({"--log.format=text"}) == "--log.format must be logfmt or json");
  CHECK(Refusal({"--log.level=loud"}) == "--log.level must be debug, info, warn or error");
  CHECK(Refusal({"--shard=3/3"}).find("--shard") != std::string::npos);
  CHECK(Refusal({"--shard", "1/0"}).find("--shard") != std::string::npos);
  CHECK(Parse({"--log.level=off"}).ok);
}

TEST_CASE("flags: the usage text and the parser agree on the flags", "[flags]") {
  const std::string usage = sbd::kUsage;
  CHECK(usage.rfind("usage:\n", 0) == 0);
  std::set<std::string> documented;
  const std::regex flag(R"(--[a-z][a-z.-]*[a-z])");
  for (auto it = std::sregex_iterator(usage.begin(), usage.end(), flag);
       it != std::sregex_iterator(); ++it) {
    documented.insert(it->str());
  }
  const std::set<std::string> expected = {
      "--config.file",      "--web.listen-address",
      "--web.config.file",  "--web.allow-unauthenticated-changes",
      "--web.runbooks-dir", "--log.level",
      "--log.format",       "--shard",
      "--version",          "--check-config"};
  CHECK(documented == expected);
  // Every flag the text names is one the parser knows (alone it parses, or asks for a value).
  for (const auto& name : documented) {
    const Parsed parsed = Parse({name});
    INFO(name << ": " << parsed.error);
    CHECK((parsed.ok || parsed.error == "flag " + name + " needs a value"));
  }
}
