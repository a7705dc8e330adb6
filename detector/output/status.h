#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "detector/engine/cluster_state.h"
#include "suppressors/declaration_store.h"

namespace sbd {

/// The status view as JSON: every cluster's verdict with its evidence. Never holds secrets.
/// With `declarations`, also every declaration (active or expired) and every rejected file.
nlohmann::json StatusJson(const std::vector<ClusterSnapshot>& clusters,
                          const DeclarationsView* declarations = nullptr);

/// One declaration as the status view and the HTTP API show it.
nlohmann::json DeclarationJson(const Declaration& d, WallClock::time_point now);

/// The same as a table per cluster, in the spirit of `patronictl list`.
std::string StatusText(const std::vector<ClusterSnapshot>& clusters,
                       const DeclarationsView* declarations = nullptr);

/// ISO-8601 UTC with milliseconds, e.g. 2026-11-29T12:00:00.123Z.
std::string FormatTime(WallClock::time_point t);

}  // namespace sbd
