#include "detector/output/shard.h"

#include <openssl/evp.h>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace sbd {
namespace {

constexpr const char* kAssignment = "hashmod";

// The flag's value as an error message may quote it: printable, and not endless.
std::string Quoted(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return "\"" + out + (text.size() > 40 ? "...\"" : "\"");
}

// A decimal number of digits only, or nullopt; anything above kMaxShards reads as
// kMaxShards + 1, so that no digit string can overflow.
std::optional<std::uint64_t> Decimal(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value =
        std::min<std::uint64_t>(value * 10 + static_cast<std::uint64_t>(c - '0'), kMaxShards + 1);
  }
  return value;
}

class ShardMetrics : public prometheus::Collectable {
 public:
  ShardMetrics(std::shared_ptr<prometheus::Collectable> inner,
               std::shared_ptr<const ShardStatus> status)
      : inner_(std::move(inner)), status_(std::move(status)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families = inner_->Collect();
    const nlohmann::json view = status_->Json();
    families.push_back(Gauge("splitbrain_shard_info",
                             "This detector's --shard=INDEX/TOTAL: it holds the clusters whose "
                             "hashmod of the name is INDEX.",
                             {{"index", std::to_string(view["index"].get<std::uint64_t>())},
                              {"total", std::to_string(view["total"].get<std::uint64_t>())}},
                             1));
    families.push_back(Gauge("splitbrain_shard_clusters", "Clusters this shard holds.", {},
                             view["clusters"].get<double>()));
    families.push_back(Gauge("splitbrain_config_clusters",
                             "Clusters the config lists, every shard's together.", {},
                             view["configured_clusters"].get<double>()));
    return families;
  }

 private:
  static prometheus::MetricFamily Gauge(std::string name, std::string help,
                                        std::vector<prometheus::ClientMetric::Label> labels,
                                        double value) {
    prometheus::MetricFamily family;
    family.name = std::move(name);
    family.help = std::move(help);
    family.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric metric;
    metric.label = std::move(labels);
    metric.gauge.value = value;
    family.metric.push_back(std::move(metric));
    return family;
  }

  std::shared_ptr<prometheus::Collectable> inner_;
  std::shared_ptr<const ShardStatus> status_;
};

}  // namespace

std::uint64_t HashModValue(const std::string& name) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(name.data(), name.size(), digest, &size, EVP_md5(), nullptr) != 1 || size != 16) {
    throw std::runtime_error("MD5 is unavailable in this OpenSSL (FIPS mode?)");
  }
  std::uint64_t value = 0;
  for (unsigned int i = 8; i < 16; ++i) value = (value << 8) | digest[i];
  return value;
}

std::uint64_t ShardIndexOf(const std::string& name, std::uint64_t total) {
  return total <= 1 ? 0 : HashModValue(name) % total;
}

bool Shard::Holds(const std::string& cluster_name) const {
  return ShardIndexOf(cluster_name, total) == index;
}

std::string Shard::ToString() const { return std::to_string(index) + "/" + std::to_string(total); }

std::variant<Shard, std::string> ParseShard(const std::string& text) {
  const auto slash = text.find('/');
  const auto index = slash == std::string::npos ? std::nullopt : Decimal(text.substr(0, slash));
  const auto total = slash == std::string::npos ? std::nullopt : Decimal(text.substr(slash + 1));
  if (!index || !total) {
    return "--shard must be INDEX/TOTAL, e.g. --shard=0/2, got " + Quoted(text);
  }
  if (*total < 1 || *total > kMaxShards) {
    return "--shard: TOTAL must be 1 to " + std::to_string(kMaxShards) + ", got " + Quoted(text);
  }
  if (*index >= *total) {
    return "--shard: INDEX must be 0 to TOTAL-1, got " + Quoted(text);
  }
  if (*total > 1) {
    try {
      HashModValue("");
    } catch (const std::exception& e) {
      return std::string("--shard: cannot assign clusters: ") + e.what();
    }
  }
  return Shard{*index, *total};
}

ValidatedConfig ShardShare(const ValidatedConfig& config, const Shard& shard) {
  return config.KeepingClusters([&](const ClusterSpec& c) { return shard.Holds(c.name); });
}

void ShardStatus::SetClusters(size_t held, size_t configured) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = held;
  configured_ = configured;
}

nlohmann::json ShardStatus::Json() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {{"index", shard_.index},
          {"total", shard_.total},
          {"clusters", held_},
          {"configured_clusters", configured_},
          {"assignment", kAssignment}};
}

std::string ShardStatus::Text() const {
  if (shard_.total <= 1) return "";
  std::lock_guard<std::mutex> lock(mu_);
  return "Shard " + shard_.ToString() + ": " + std::to_string(held_) + " of " +
         std::to_string(configured_) + " configured clusters (" + kAssignment +
         " of the cluster name)\n\n";
}

std::shared_ptr<prometheus::Collectable> WithShardMetrics(
    std::shared_ptr<prometheus::Collectable> inner, std::shared_ptr<const ShardStatus> status) {
  return std::make_shared<ShardMetrics>(std::move(inner), std::move(status));
}

}  // namespace sbd
