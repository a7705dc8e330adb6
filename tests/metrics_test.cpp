// The /metrics families built from scheduler snapshots, rendered as Prometheus text.
#include "detector/output/metrics.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace sbd {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

ClusterSnapshot Cluster(const std::string& name, std::uint64_t rounds) {
  ClusterSnapshot c;
  c.spec.name = name;
  c.rounds = rounds;
  return c;
}

TEST_CASE("metrics: a repeated label set is exported once, the first standing", "[metrics]") {
  // Two snapshots under one name (which a valid config never gives) would otherwise repeat
  // every series of the cluster, and Prometheus rejects the whole scrape for one repeat.
  const std::vector<ClusterSnapshot> clusters = {Cluster("orders", 3), Cluster("billing", 5),
                                                 Cluster("orders", 7)};
  const std::string text = RenderMetrics(DetectorCollector([&] { return clusters; }, nullptr));
  CHECK(Count(text, "splitbrain_rounds_total{cluster=\"orders\"}") == 1);
  CHECK(text.find("splitbrain_rounds_total{cluster=\"orders\"} 3\n") != std::string::npos);
  CHECK(text.find("splitbrain_rounds_total{cluster=\"billing\"} 5\n") != std::string::npos);
  CHECK(Count(text, "splitbrain_cluster_info{cluster=\"orders\"") == 1);
  // The order of the first appearances is kept.
  CHECK(text.find("splitbrain_rounds_total{cluster=\"orders\"}") <
        text.find("splitbrain_rounds_total{cluster=\"billing\"}"));
}

}  // namespace
}  // namespace sbd
