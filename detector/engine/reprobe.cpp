// The scheduler's side of confirmation: a round whose readings raise candidates (two or more
// writable in the lineage, ConfirmationCandidates) re-probes them together, again while every
// candidate stays writable with no overlap (ReprobeAgain), and hands the re-probe to
// ConfirmRound (confirmation.h), which decides. Scheduler member functions, on the loop thread.
#include "detector/common/internal_errors.h"
#include "detector/engine/confirmation.h"
#include "detector/engine/scheduler.h"
#include "detector/engine/scheduler_state.h"

namespace sbd {

void Scheduler::AfterReadings(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work) {
  work->lineage = PreviewLineage(cluster, work->readings, work->times.start_wall);
  work->again = ConfirmationCandidates(cluster.state.spec, work->readings.members, work->lineage);
  if (work->again.size() < 2) {
    FinishRound(cluster, work);
    return;
  }
  work->confirmation.candidate = true;
  Reprobe(cluster, work);
}

void Scheduler::Reprobe(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work) {
  ProbeRound(cluster, work->again, true, [this, &cluster, work](RoundReadings reprobe) {
    if (work->ended) return;
    const bool ok = Guarded("round", [&] { AfterReprobe(cluster, work, std::move(reprobe)); });
    if (!ok) EndRound(cluster, *work);
  });
}

std::string Scheduler::PreviewLineage(ClusterRuntime& cluster, const RoundReadings& readings,
                                      WallClock::time_point at) {
  // Judge the candidate against the lineage the history would give after this round.
  ClusterHistory preview;
  {
    std::lock_guard<std::mutex> lock(mu_);
    preview = cluster.state.history;
  }
  for (const auto& obs : readings.members) {
    RecordObservation(preview.members[obs.member], obs, at);
  }
  return ChooseLineage(cluster.state.spec, preview, readings.dcs ? &*readings.dcs : nullptr);
}

void Scheduler::AfterReprobe(ClusterRuntime& cluster, std::shared_ptr<RoundWork> work,
                             RoundReadings reprobe) {
  const std::vector<std::string> confirmed =
      ConfirmedWritable(reprobe.members, work->lineage, &work->readings.members);
  if (ReprobeAgain(work->retries, confirmed, reprobe.members)) {
    ++work->retries;
    Reprobe(cluster, work);
    return;
  }
  const auto history = [this, &cluster] {
    std::lock_guard<std::mutex> lock(mu_);
    return cluster.state.history;
  };
  work->confirmation = ConfirmRound(work->readings, work->again, std::move(reprobe), confirmed,
                                    history, WallClock::now(), cluster.state.timing().ttl);
  FinishRound(cluster, work);
}

}  // namespace sbd
