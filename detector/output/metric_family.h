#pragma once

// One metric family under construction, for the files that build /metrics (metrics.cpp and
// the parts beside it). Internal to detector/output.

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "detector/common/network_text.h"

namespace sbd::metric_family {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

/// One metric family under construction.
class Family {
 public:
  Family(std::string name, std::string help, MetricType type) {
    family_.name = std::move(name);
    family_.help = std::move(help);
    family_.type = type;
  }
  /// Every label value of /metrics passes here: one that is not valid UTF-8 (a name from the
  /// network) would make Prometheus reject the whole scrape, so it is made valid and bounded
  /// first, before repeats are looked for.
  void Add(std::vector<ClientMetric::Label> labels, double value) {
    for (auto& label : labels) {
      if (!IsValidUtf8(label.value, kMaxLabelValueBytes)) {
        label.value = ValidUtf8(label.value, kMaxLabelValueBytes);
      }
    }
    hashes_.push_back({HashOf(labels), family_.metric.size()});
    ClientMetric metric;
    metric.label = std::move(labels);
    if (family_.type == MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    family_.metric.push_back(std::move(metric));
  }
  /// The family, each label set once: a repeated one would make the whole scrape fail, so the
  /// first stands. Checked here, once, by sorting the label sets' hashes: a scrape of 10,000
  /// members adds about 170,000 series, and a set of keys built per series cost more than
  /// the rest of the family.
  MetricFamily Take() {
    std::sort(hashes_.begin(), hashes_.end());
    std::vector<bool> repeated(family_.metric.size(), false);
    for (size_t i = 0; i < hashes_.size(); ++i) {
      if (repeated[hashes_[i].second]) continue;  // its first appearance drops the others
      const auto& first = family_.metric[hashes_[i].second].label;
      for (size_t j = i + 1; j < hashes_.size() && hashes_[j].first == hashes_[i].first; ++j) {
        // Same hash: drop the later series only when its labels really are the same.
        if (SameLabels(first, hashes_[j].second)) repeated[hashes_[j].second] = true;
      }
    }
    if (std::find(repeated.begin(), repeated.end(), true) != repeated.end()) {
      std::vector<ClientMetric> kept;
      for (size_t i = 0; i < family_.metric.size(); ++i) {
        if (!repeated[i]) kept.push_back(std::move(family_.metric[i]));
      }
      family_.metric = std::move(kept);
    }
    hashes_.clear();
    return std::move(family_);
  }

 private:
  static std::uint64_t HashOf(const std::vector<ClientMetric::Label>& labels) {
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a, with a separator after each field
    auto mix = [&hash](const std::string& text) {
      for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
      hash = (hash ^ 0xffu) * 1099511628211ull;
    };
    for (const auto& l : labels) {
      mix(l.name);
      mix(l.value);
    }
    return hash;
  }
  bool SameLabels(const std::vector<ClientMetric::Label>& labels, size_t other) const {
    const auto& theirs = family_.metric[other].label;
    if (labels.size() != theirs.size()) return false;
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i].name != theirs[i].name || labels[i].value != theirs[i].value) return false;
    }
    return true;
  }

  MetricFamily family_;
  /// Each series' label hash and its index in family_.metric.
  std::vector<std::pair<std::uint64_t, size_t>> hashes_;
};

inline std::vector<MetricFamily> TakeAll(std::initializer_list<Family*> families) {
  std::vector<MetricFamily> out;
  for (Family* f : families) out.push_back(f->Take());
  return out;
}

inline void Append(std::vector<MetricFamily>& out, std::vector<MetricFamily> families) {
  for (auto& f : families) out.push_back(std::move(f));
}

}  // namespace sbd::metric_family
