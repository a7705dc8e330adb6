// Part `hostile`, issue 25's first row: a real Patroni leader freezes while, in the same
// detector, other clusters' claim endpoints are black-holed (SYNs dropped) or trickle their
// headers one byte every half second, beside healthy etcd elections with real candidates. Four
// detectors watch the same Patroni cluster in one run, each under its own cluster name: this
// build and an older one (--old-detector), each quiet (the Patroni cluster alone) and hostile
// (with the other clusters). The figures: onset -> page for each, and how often a healthy
// election cluster read anything but healthy in a hostile detector.
//
// The same part is issue 25's fourth row (--parts=frozen-rest): the other clusters are then
// Patroni clusters whose REST endpoints accept connections and never answer, as a frozen
// agent's do, their PostgreSQL members up (through pgbouncer, onto a real replica), and the
// figure besides the page is whether each of them still had its PostgreSQL read every round.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace sbd::bench {

struct HostileOptions {
  std::string detector;      ///< this build's splitbrain-detector
  std::string old_detector;  ///< the build to compare with; empty: this build only
  std::string etcd_candidate;
  int trials = 3;
  int black_holed = 1000;  ///< claim members whose SYNs are dropped
  int trickling = 200;     ///< claim members that trickle their headers
  int healthy = 10;        ///< healthy etcd_election clusters, two real candidates each
  int frozen_rest = 0;     ///< Patroni clusters of two members whose REST never answers
  /// Each build's pair of detectors runs alone, one build after the other (so that neither
  /// build's load weighs on the other's figures); else all four at once.
  bool builds_in_turn = false;
};

/// Runs the part; throws std::runtime_error when the sandbox cannot be built.
nlohmann::json PartHostile(const HostileOptions& options);
/// Its table (Markdown).
void PrintHostileTable(const nlohmann::json& result, std::ostream& out);

}  // namespace sbd::bench
