// The bench's "redis" part: time from a real double master in a Redis replication group under
// Sentinel (a replica promoted by hand) to the page at the webhook, for the detector and for
// prometheus-redis-exporter + Prometheus + `count(redis_instance_info{role="master"}) > 1`.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace sbd::bench {

/// What the redis part needs from the command line.
struct RedisPartOptions {
  int trials = 3;
  int down_after_ms = 5000;  ///< Sentinel's down-after-milliseconds, also the detector's ttl
  std::string detector;      ///< the splitbrain-detector binary
};

/// Runs the part (a few minutes) and returns its figures; throws when a component does not
/// start or a trial cannot be set up (no onset, the group does not heal).
nlohmann::json PartRedis(const RedisPartOptions& o);

/// The part's table, in the format of the page part's.
void PrintRedisTable(const nlohmann::json& part, std::ostream& out);

/// The alert name of the rule in the Prometheus stack.
constexpr const char* kRedisRuleAlert = "RedisMultipleMasters";

}  // namespace sbd::bench
