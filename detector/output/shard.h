// Sharding (--shard=INDEX/TOTAL): TOTAL detectors run with the same config, and each holds
// the clusters whose hashmod of the cluster name is its INDEX, the way Prometheus shards
// targets with the `hashmod` relabel action.
#pragma once

#include <prometheus/collectable.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "detector/config/config.h"

namespace sbd {

/// One detector's share of the configured clusters. Plain value type; thread-safe to share.
struct Shard {
  std::uint64_t index = 0;
  std::uint64_t total = 1;

  /// True when this shard holds the cluster named `cluster_name`; every cluster when total
  /// is 1. Throws std::runtime_error only if MD5 is unavailable (ParseShard checks first).
  bool Holds(const std::string& cluster_name) const;
  /// "INDEX/TOTAL", as the flag takes it.
  std::string ToString() const;
};

/// The largest TOTAL --shard accepts.
constexpr std::uint64_t kMaxShards = 1000;

/// Parses the value of --shard: INDEX/TOTAL, two decimal numbers with 0 <= INDEX < TOTAL <=
/// kMaxShards and nothing else (no sign, space or suffix). The error names the flag.
/// Thread-safe.
std::variant<Shard, std::string> ParseShard(const std::string& text);

/// Prometheus' hashmod value of `name` (model/relabel: the last 8 bytes of MD5(name), read
/// big-endian), so a `hashmod` relabel of a `cluster` label with modulus TOTAL assigns the
/// same shard. Throws std::runtime_error if OpenSSL refuses MD5 (e.g. FIPS mode). Thread-safe.
std::uint64_t HashModValue(const std::string& name);

/// The shard among `total` (>= 1) that holds the cluster `name`: HashModValue(name) % total.
std::uint64_t ShardIndexOf(const std::string& name, std::uint64_t total);

/// `config` with only the clusters `shard` holds, in their configured order. Thread-safe.
ValidatedConfig ShardShare(const ValidatedConfig& config, const Shard& shard);

/// What /status and /metrics say about this detector's shard: the clusters it holds out of
/// those configured, set at start and at every reload. Thread-safe.
class ShardStatus {
 public:
  explicit ShardStatus(Shard shard) : shard_(shard) {}
  const Shard& shard() const { return shard_; }
  /// Records the clusters this shard holds and the clusters the config lists (all shards).
  void SetClusters(size_t held, size_t configured);
  /// {"index", "total", "clusters", "configured_clusters", "assignment"}.
  nlohmann::json Json() const;
  /// One line for the text status ("Shard 0/2: 2 of 5 configured clusters ..."), or ""
  /// when there is a single shard.
  std::string Text() const;

 private:
  const Shard shard_;
  mutable std::mutex mu_;
  size_t held_ = 0;
  size_t configured_ = 0;
};

/// `inner`'s metric families plus splitbrain_shard_info{index,total} 1,
/// splitbrain_shard_clusters and splitbrain_config_clusters from `status`.
std::shared_ptr<prometheus::Collectable> WithShardMetrics(
    std::shared_ptr<prometheus::Collectable> inner, std::shared_ptr<const ShardStatus> status);

}  // namespace sbd
