#include "probes/resource_witness.h"

#include <utility>
#include <vector>

#include "detector/common/logfmt.h"
#include "probes/exposition.h"
#include "probes/metrics_claim.h"

namespace sbd {

std::variant<std::int64_t, std::string> WitnessToken(const std::string& text,
                                                     const ResourceWitnessSpec& witness) {
  auto parsed = ParseExposition(text, witness.metric);
  if (auto* error = std::get_if<std::string>(&parsed)) return *error;
  const auto& samples = std::get<std::vector<ExpositionSample>>(parsed);
  std::vector<const ExpositionSample*> of_lock, unlabelled;
  for (const ExpositionSample& sample : samples) {
    const std::string* lock = sample.Label(witness.lock_label);
    if (lock == nullptr) unlabelled.push_back(&sample);
    if (lock != nullptr && *lock == witness.lock) of_lock.push_back(&sample);
  }
  const auto& chosen = of_lock.empty() ? unlabelled : of_lock;
  if (chosen.empty())
    return "no " + witness.metric + " sample for lock " + LogfmtEscape(witness.lock);
  if (chosen.size() > 1) return "several " + witness.metric + " samples for one lock";
  const double value = chosen.front()->value;
  // Tokens are whole numbers; a double holds them exactly up to 2^53.
  if (!(value >= 0 && value <= 9007199254740992.0) ||
      value != static_cast<double>(static_cast<std::int64_t>(value))) {
    return witness.metric + " is not a whole number from 0 to 2^53";
  }
  return static_cast<std::int64_t>(value);
}

namespace {

// The witness's answer applied to `view`: its token, else the reason in `rejected`.
void ApplyWitness(HttpResult result, const ResourceWitnessSpec& witness, LockRecord& view) {
  std::variant<std::string, ProbeFailure> text = ProbeFailure{ProbeFailureReason::kInternal, ""};
  if (auto* failure = std::get_if<ProbeFailure>(&result)) {
    text = std::move(*failure);
  } else {
    text = ClaimText(std::move(std::get<HttpAnswer>(result)));
  }
  if (auto* failure = std::get_if<ProbeFailure>(&text)) {
    view.rejected.push_back("resource witness: " + failure->message);
    return;
  }
  auto token = WitnessToken(std::get<std::string>(text), witness);
  if (auto* error = std::get_if<std::string>(&token)) {
    view.rejected.push_back("resource witness: " + *error);
  } else {
    view.resource_token = std::get<std::int64_t>(token);
  }
}

}  // namespace

void ReadResourceWitness(LoopHttpClient& client, const ResourceWitnessSpec& witness,
                         SteadyClock::time_point deadline, LockRecord view,
                         std::function<void(LockRecord)> done) {
  ClaimTarget target;
  target.member = "resource witness";
  target.url = witness.url;
  client.Start(
      ClaimRequest(target), deadline,
      [witness, view = std::move(view), done = std::move(done)](HttpResult result) mutable {
        ApplyWitness(std::move(result), witness, view);
        done(std::move(view));
      });
}

}  // namespace sbd
