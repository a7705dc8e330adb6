// label_regrouping: the inventory (configured members, or Prometheus file_sd targets grouped by
// a label) may put a member under a cluster it does not belong to: a leftover node of a rolled
// back upgrade, a new cluster built beside the old one with the same labels. Such a member is
// judged by its identity (system identifier, Patroni scope), reported as drift, and never
// counted towards a split brain. This suppressor records each time that identity check kept a
// label count from paging.
#pragma once

#include "suppressors/suppressor.h"

namespace sbd {

class LabelRegroupingSuppressor : public Suppressor {
 public:
  const char* name() const override { return "label_regrouping"; }
  void Apply(const SuppressionInput& in, Assessment& a) const override;
};

}  // namespace sbd
