#include "detector/output/shard.h"

#include <prometheus/metric_family.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "detector/output/metrics.h"

namespace {

// Names of the kinds the config allows: letters, digits, dashes, dots, underscores.
std::vector<std::string> GeneratedNames(int count) {
  const std::vector<std::string> stems = {"pg", "orders-db", "payments", "eu-west-1.billing",
                                          "Inventory_EU"};
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    names.push_back(stems[i % stems.size()] + "-" + std::to_string(i));
  }
  return names;
}

sbd::Shard MustParse(const std::string& text) {
  auto parsed = sbd::ParseShard(text);
  if (const auto* error = std::get_if<std::string>(&parsed)) FAIL(text << ": " << *error);
  return std::get<sbd::Shard>(parsed);
}

std::string ErrorOf(const std::string& text) {
  auto parsed = sbd::ParseShard(text);
  const auto* error = std::get_if<std::string>(&parsed);
  return error == nullptr ? std::string() : *error;
}

sbd::ValidatedConfig ConfigWith(const std::vector<std::string>& names) {
  std::string yaml = "clusters:\n";
  for (const auto& name : names) {
    yaml += "  - name: " + name + "\n    members:\n      - name: m\n        dsn: \"\"\n";
  }
  auto parsed = sbd::ParseConfig(yaml, "shard.yml");
  if (const auto* errors = std::get_if<std::vector<sbd::ConfigError>>(&parsed)) {
    FAIL(errors->front().ToString());
  }
  return std::get<sbd::ValidatedConfig>(parsed);
}

}  // namespace

TEST_CASE("shard: the hashmod value is Prometheus' (last 8 bytes of MD5, big-endian)", "[shard]") {
  // RFC 1321 test vectors: MD5("") = d41d8cd98f00b204e9800998ecf8427e and
  // MD5("abc") = 900150983cd24fb0d6963f7d28e17f72; the value is their second half.
  CHECK(sbd::HashModValue("") == 0xe9800998ecf8427eULL);
  CHECK(sbd::HashModValue("abc") == 0xd6963f7d28e17f72ULL);
  // Golden assignments of this hash: a change of hash (or of byte order) moves them. The
  // same as Prometheus 2.42 gives with `action: hashmod` on a `cluster` label (checked once
  // by hand against a running Prometheus's /api/v1/targets).
  CHECK(sbd::ShardIndexOf("abc", 3) == 0xd6963f7d28e17f72ULL % 3);
  CHECK(sbd::ShardIndexOf("abc", 3) == 2);
  CHECK(sbd::ShardIndexOf("orders", 2) == 1);
  CHECK(sbd::ShardIndexOf("payments", 2) == 0);
  CHECK(sbd::ShardIndexOf("orders", 7) == 6);
  CHECK(sbd::ShardIndexOf("payments", 7) == 3);
  CHECK(sbd::ShardIndexOf("inventory", 7) == 5);
  CHECK(sbd::ShardIndexOf("abc", 7) == 0);
}

TEST_CASE("shard: every cluster lands in exactly one shard, the same one every time", "[shard]") {
  const auto names = GeneratedNames(300);
  for (std::uint64_t total : {1, 2, 3, 7}) {
    std::map<std::uint64_t, int> per_shard;
    for (const auto& name : names) {
      int holders = 0;
      for (std::uint64_t index = 0; index < total; ++index) {
        if (sbd::Shard{index, total}.Holds(name)) {
          ++holders;
          ++per_shard[index];
          CHECK(sbd::ShardIndexOf(name, total) == index);
        }
      }
      INFO(name << " among " << total);
      CHECK(holders == 1);
      CHECK(sbd::ShardIndexOf(name, total) == sbd::ShardIndexOf(std::string(name), total));
    }
    // 300 names spread over every shard, none left empty and none holding nearly all.
    CHECK(per_shard.size() == total);
    for (const auto& [index, count] : per_shard) CHECK(count < 300 / static_cast<int>(total) * 2);
  }
}

TEST_CASE("shard: one shard of one holds every cluster", "[shard]") {
  for (const auto& name : GeneratedNames(20)) CHECK(sbd::Shard{}.Holds(name));
}

TEST_CASE("shard: --shard accepts INDEX/TOTAL with INDEX below TOTAL", "[shard]") {
  CHECK(MustParse("0/1").total == 1);
  const sbd::Shard second = MustParse("1/2");
  CHECK(second.index == 1);
  CHECK(second.total == 2);
  CHECK(second.ToString() == "1/2");
  CHECK(MustParse("6/7").index == 6);
  CHECK(MustParse("999/1000").total == 1000);
}

TEST_CASE("shard: --shard rejects anything else, naming the flag", "[shard]") {
  for (const std::string& bad : std::vector<std::string>{"3/2",
                                                         "2/2",
                                                         "-1/2",
                                                         "0/0",
                                                         "a/b",
                                                         "1",
                                                         "",
                                                         "/",
                                                         "0/",
                                                         "/2",
                                                         "0/2x",
                                                         "0/2 ",
                                                         " 0/2",
                                                         "+0/2",
                                                         "0/+2",
                                                         "0/2/3",
                                                         "0x1/2",
                                                         "1.0/2",
                                                         "0/1001",
                                                         "99999999999999999999999/2",
                                                         "0/99999999999999999999999",
                                                         "0/18446744073709551617",
                                                         std::string("0/2\0", 4)}) {
    const std::string error = ErrorOf(bad);
    INFO("--shard=" << bad << " gave: " << error);
    CHECK(error.rfind("--shard", 0) == 0);
  }
  CHECK(ErrorOf("3/2").find("\"3/2\"") != std::string::npos);
  CHECK(ErrorOf("0/0").find("TOTAL must be 1 to 1000") != std::string::npos);
  // A control character is never echoed back as such.
  CHECK(ErrorOf("0/2\n\x1b[31m").find('\x1b') == std::string::npos);
}

TEST_CASE("shard: a shard's share keeps its own clusters in order and nothing else", "[shard]") {
  const auto names = GeneratedNames(12);
  const sbd::ValidatedConfig config = ConfigWith(names);
  std::set<std::string> seen;
  for (std::uint64_t index = 0; index < 3; ++index) {
    const sbd::Shard shard{index, 3};
    std::vector<std::string> expected;
    for (const auto& name : names) {
      if (sbd::ShardIndexOf(name, 3) == index) expected.push_back(name);
    }
    std::vector<std::string> held;
    const sbd::ValidatedConfig share = sbd::ShardShare(config, shard);
    for (const auto& c : share.clusters()) {
      held.push_back(c.name);
      CHECK(seen.insert(c.name).second);
    }
    CHECK(held == expected);
  }
  CHECK(seen.size() == names.size());
  CHECK(sbd::ShardShare(config, sbd::Shard{}).clusters().size() == names.size());
}

TEST_CASE("shard: the status says which shard and how many clusters of how many", "[shard]") {
  sbd::ShardStatus status(sbd::Shard{1, 3});
  status.SetClusters(4, 11);
  const nlohmann::json json = status.Json();
  CHECK(json["index"] == 1);
  CHECK(json["total"] == 3);
  CHECK(json["clusters"] == 4);
  CHECK(json["configured_clusters"] == 11);
  CHECK(json["assignment"] == "hashmod");
  CHECK(status.Text().rfind("Shard 1/3: 4 of 11 configured clusters", 0) == 0);
  CHECK(sbd::ShardStatus(sbd::Shard{}).Text().empty());
}

TEST_CASE("shard: /metrics gains the shard's info and cluster counts", "[shard]") {
  class Nothing : public prometheus::Collectable {
   public:
    std::vector<prometheus::MetricFamily> Collect() const override { return {}; }
  };
  auto status = std::make_shared<sbd::ShardStatus>(sbd::Shard{0, 2});
  status->SetClusters(2, 3);
  const auto metrics = sbd::WithShardMetrics(std::make_shared<Nothing>(), status);
  const std::string body = sbd::RenderMetrics(*metrics);
  INFO(body);
  CHECK(body.find("\nsplitbrain_shard_info{index=\"0\",total=\"2\"} 1\n") != std::string::npos);
  CHECK(body.find("\nsplitbrain_shard_clusters 2\n") != std::string::npos);
  CHECK(body.find("\nsplitbrain_config_clusters 3\n") != std::string::npos);
  status->SetClusters(1, 3);
  CHECK(sbd::RenderMetrics(*metrics).find("\nsplitbrain_shard_clusters 1\n") != std::string::npos);
}
