#include "probes/metrics_claim.h"

#include <cmath>

#include "probes/exposition.h"
#include "probes/http_json.h"

namespace sbd {

namespace {

ProbeFailure Malformed(std::string message) {
  return ProbeFailure{ProbeFailureReason::kProtocol, std::move(message)};
}

std::optional<std::string> TokenOf(const ExpositionSample& sample, const ClaimQuery& query) {
  if (query.token_label.empty()) return std::nullopt;
  const std::string* token = sample.Label(query.token_label);
  if (token == nullptr) return std::nullopt;
  return *token;
}

}  // namespace

std::variant<ClaimReading, ProbeFailure> FindClaim(std::string_view exposition,
                                                   const ClaimQuery& query) {
  auto parsed = ParseExposition(exposition, query.metric);
  if (auto* error = std::get_if<std::string>(&parsed)) return Malformed(*error);
  ClaimReading claim;
  bool claimed = false;
  for (const auto& sample : std::get<std::vector<ExpositionSample>>(parsed)) {
    const std::string* lock = sample.Label(query.lock_label);
    if (lock == nullptr || *lock != query.lock) continue;
    const std::string where = "line " + std::to_string(sample.line) + ": ";
    if (sample.value != 0 && sample.value != 1) {
      return Malformed(where + "the claim's value is neither 0 nor 1");
    }
    auto token = TokenOf(sample, query);
    if (sample.value == 1) {
      if (claimed && claim.token != token) {
        return Malformed(where + "the lock is claimed under two different tokens");
      }
      claimed = true;
      claim.state = ClaimReading::State::kClaims;
      claim.token = std::move(token);
    } else if (!claimed) {
      claim.state = ClaimReading::State::kDoesNotClaim;
      claim.token = std::move(token);
    }
  }
  return claim;
}

HttpRequest ClaimRequest(const ClaimTarget& target) {
  HttpRequest request;
  const auto scheme_end = target.url.find("://");
  const size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const bool has_path = target.url.find('/', host_start) != std::string::npos;
  request.url = has_path ? target.url : target.url + "/metrics";
  request.headers.push_back("Accept: text/plain;version=0.0.4");
  request.bounds.max_body_bytes = target.max_body_bytes;
  return request;
}

std::variant<std::string, ProbeFailure> ClaimText(HttpAnswer answer) {
  const std::string http = "GET: HTTP " + std::to_string(answer.status);
  if (answer.status == 401 || answer.status == 403) {
    return ProbeFailure{ProbeFailureReason::kAuth, http};
  }
  if (answer.status != 200) return Malformed(http);
  return std::move(answer.body);
}

}  // namespace sbd
