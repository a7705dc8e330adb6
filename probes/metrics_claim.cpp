#include "probes/metrics_claim.h"

#include <httplib.h>

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

ProbeFailure SendFailure(httplib::Error error, SteadyClock::time_point deadline) {
  const std::string what = "GET: " + httplib::to_string(error);
  if (SteadyClock::now() >= deadline || error == httplib::Error::Read ||
      error == httplib::Error::ConnectionTimeout) {
    return ProbeFailure{ProbeFailureReason::kTimeout, what};
  }
  if (error == httplib::Error::Connection) return ProbeFailure{ProbeFailureReason::kRefused, what};
  return ProbeFailure{ProbeFailureReason::kInternal, what};
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

MetricsClaimProbe::MetricsClaimProbe(ClaimTarget target) : target_(std::move(target)) {
  base_ = UrlBase(target_.url);
  const auto scheme_end = target_.url.find("://");
  const size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto path_start = target_.url.find('/', host_start);
  path_ = path_start == std::string::npos ? "/metrics" : target_.url.substr(path_start);
}

MetricsClaimProbe::~MetricsClaimProbe() = default;

std::variant<std::string, ProbeFailure> MetricsClaimProbe::Fetch(SteadyClock::time_point deadline) {
  const auto remaining = deadline - SteadyClock::now();
  if (remaining <= SteadyClock::duration::zero()) {
    return ProbeFailure{ProbeFailureReason::kTimeout, "no time left"};
  }
  client_->set_connection_timeout(remaining);
  client_->set_read_timeout(remaining);
  client_->set_write_timeout(remaining);
  httplib::Request request;
  request.method = "GET";
  request.path = path_;
  request.set_header("Accept", "text/plain;version=0.0.4");
  std::string body;
  bool too_big = false;
  bool too_late = false;
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (body.size() + length > target_.max_body_bytes) {
      too_big = true;
      return false;
    }
    // The read timeout bounds each read, not the body: a trickle must not outlast the deadline.
    if (SteadyClock::now() >= deadline) {
      too_late = true;
      return false;
    }
    body.append(data, length);
    return true;
  };
  httplib::Result result = client_->send(request);
  if (too_big) {
    return Malformed("answer larger than " + std::to_string(target_.max_body_bytes) + " bytes");
  }
  if (too_late)
    return ProbeFailure{ProbeFailureReason::kTimeout, "the answer outlasted the deadline"};
  if (!result) return SendFailure(result.error(), deadline);
  const std::string http = "GET " + path_ + ": HTTP " + std::to_string(result->status);
  if (result->status == 401 || result->status == 403) {
    return ProbeFailure{ProbeFailureReason::kAuth, http};
  }
  if (result->status != 200) return Malformed(http);
  return body;
}

ClaimObservation MetricsClaimProbe::Probe(SteadyClock::time_point deadline, StartGate* gate) {
  // Arrive at the gate on every path that fails before sending.
  struct Arrival {
    StartGate* gate;
    ~Arrival() {
      if (gate != nullptr) gate->Arrive();
    }
  } arrival{gate};
  ClaimObservation obs;
  obs.member = target_.member;
  obs.window.sent_wall = WallClock::now();
  obs.window.sent = SteadyClock::now();
  auto fail = [&](ProbeFailure failure) {
    obs.window.received = SteadyClock::now();
    obs.result = std::move(failure);
    client_.reset();  // a half-read answer must not meet the next request
    return obs;
  };
  if (deadline <= obs.window.sent) return fail({ProbeFailureReason::kTimeout, "no time left"});
  try {
    if (!client_) {
      if (base_.rfind("http://", 0) != 0 && base_.rfind("https://", 0) != 0) {
        return fail({ProbeFailureReason::kConfig, "the URL's scheme is neither http nor https"});
      }
      client_ = std::make_unique<httplib::Client>(base_);
      client_->set_keep_alive(true);
    }
    if (gate != nullptr) {
      arrival.gate = nullptr;
      gate->ArriveAndWait(deadline);
    }
    obs.window.sent_wall = WallClock::now();
    obs.window.sent = SteadyClock::now();
    auto body = Fetch(deadline);
    if (auto* failure = std::get_if<ProbeFailure>(&body)) return fail(std::move(*failure));
    obs.window.received = SteadyClock::now();
    obs.result = FindClaim(std::get<std::string>(body), target_.query);
  } catch (const std::exception& e) {
    // httplib::Client throws on a port that is no number; nothing else is expected to.
    return fail({ProbeFailureReason::kConfig, std::string("claim URL: ") + e.what()});
  }
  return obs;
}

std::variant<std::string, ProbeFailure> MetricsClaimProbe::ReadText(
    SteadyClock::time_point deadline) {
  if (deadline <= SteadyClock::now())
    return ProbeFailure{ProbeFailureReason::kTimeout, "no time left"};
  try {
    if (!client_) {
      if (base_.rfind("http://", 0) != 0 && base_.rfind("https://", 0) != 0) {
        return ProbeFailure{ProbeFailureReason::kConfig,
                            "the URL's scheme is neither http nor https"};
      }
      client_ = std::make_unique<httplib::Client>(base_);
      client_->set_keep_alive(true);
    }
    auto body = Fetch(deadline);
    if (std::holds_alternative<ProbeFailure>(body)) client_.reset();
    return body;
  } catch (const std::exception& e) {
    client_.reset();
    return ProbeFailure{ProbeFailureReason::kConfig, std::string("URL: ") + e.what()};
  }
}

}  // namespace sbd
