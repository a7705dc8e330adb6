// The hook fence: one bounded POST of the evidence to the operator's hook, on a loop of its own
// (LoopHttpClient, the client the probes use: one deadline for connect, TLS and the answer, caps
// on every part of the answer, no redirects, no proxy), from the remediator's worker thread.
#include "detector/remediation/hook_fence.h"

#include <cctype>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "detector/common/network_text.h"
#include "probes/event_loop.h"
#include "probes/http_loop.h"

namespace sbd {
namespace {

/// Beyond the call's own deadline: the loop thread itself stuck (never expected).
constexpr std::chrono::seconds kLoopBound{2};
constexpr size_t kMaxAnswerBytes = 64 * 1024;
constexpr size_t kMaxUndoBytes = 200;
constexpr size_t kMaxTokenBytes = 4096;

FenceOutcome Failed(std::string detail) {
  return FenceOutcome{"failed", std::move(detail), 0, false, ""};
}

std::string Rfc3339(WallClock::time_point t) {
  const std::time_t seconds = WallClock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

bool HasControl(const std::string& text) {
  for (char c : text) {
    if (std::iscntrl(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

/// The answer's "undo", if it is a short printable string; empty otherwise.
std::string UndoOf(const std::string& body) {
  const nlohmann::json answer = nlohmann::json::parse(body, nullptr, false);
  if (!answer.is_object() || !answer.contains("undo") || !answer["undo"].is_string()) return "";
  std::string undo = answer["undo"].get<std::string>();
  return undo.size() > kMaxUndoBytes || HasControl(undo) ? "" : undo;
}

FenceOutcome Call(const HookFenceTarget& target) {
  HttpRequest request;
  request.url = target.url;
  request.post_body = target.body;
  request.headers = {"Content-Type: application/json"};
  request.bounds.max_body_bytes = kMaxAnswerBytes;
  request.credentials.ca_file = target.ca_file;
  if (target.token) request.credentials.bearer_token = *target.token;
  const std::chrono::milliseconds timeout =
      target.timeout.count() < 1 ? std::chrono::milliseconds(1) : target.timeout;

  EventLoop loop;  // before the call, which hands its client back to it
  const SteadyClock::time_point start = SteadyClock::now();
  HttpResult result = BlockingHttpCall(loop, request, start + timeout, kLoopBound).Wait();
  const long ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count();
  if (const ProbeFailure* failure = std::get_if<ProbeFailure>(&result)) {
    return Failed("the hook failed after " + std::to_string(ms) + " ms: " + failure->message);
  }
  const HttpAnswer& got = std::get<HttpAnswer>(result);
  if (got.status < 200 || got.status > 299) {
    return Failed("the hook answered HTTP " + std::to_string(got.status) + " after " +
                  std::to_string(ms) + " ms: nothing is claimed done");
  }
  return FenceOutcome{"fenced",
                      "the hook answered HTTP " + std::to_string(got.status) + " in " +
                          std::to_string(ms) +
                          " ms (not verified: the next rounds show whether the claim ends)",
                      0, false, UndoOf(got.body)};
}

}  // namespace

FenceOutcome FenceByHook(const HookFenceTarget& target) {
  FenceOutcome outcome;
  try {
    outcome = Call(target);
  } catch (const std::exception& e) {
    outcome = Failed(std::string("internal error: ") + e.what());
  } catch (...) {
    outcome = Failed("internal error");
  }
  outcome.detail = ScrubSecret(RedactedUrl(target.url) + ": " + outcome.detail, target.token);
  outcome.undo = ScrubSecret(outcome.undo, target.token);
  return outcome;
}

std::string HookEvidenceJson(const HookEvidence& e) {
  const auto member = [](const std::string& name, const std::string& token) {
    nlohmann::json m = {{"name", name}};
    if (!token.empty()) m["token"] = token;
    return m;
  };
  nlohmann::json zombie = member(e.zombie, e.zombie_token);
  if (!e.zombie_address.empty()) zombie["claim_url"] = e.zombie_address;
  const nlohmann::json body = {{"version", 1},
                               {"action", "stop"},
                               {"cluster", e.cluster},
                               {"kind", e.kind},
                               {"zombie", zombie},
                               {"holder", member(e.holder, e.holder_token)},
                               {"incident_opened", Rfc3339(e.incident_opened)},
                               {"requested", Rfc3339(e.requested)},
                               {"sender", "splitbrain-detector"}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::variant<std::optional<std::string>, std::string> ResolveHookToken(
    const std::optional<std::string>& token_file, const std::optional<std::string>& token_env) {
  using Result = std::variant<std::optional<std::string>, std::string>;
  if (token_file) {
    std::ifstream in(*token_file, std::ios::binary);
    std::string token;
    if (!in || !std::getline(in, token)) {
      return Result(std::in_place_index<1>, "cannot read token_file " + *token_file);
    }
    if (!token.empty() && token.back() == '\r') token.pop_back();
    if (token.empty() || token.size() > kMaxTokenBytes || HasControl(token)) {
      return Result(std::in_place_index<1>, "token_file " + *token_file +
                                                ": expected one line of 1 to 4096 printable bytes");
    }
    return Result(std::in_place_index<0>, std::move(token));
  }
  if (token_env) {
    const char* value = std::getenv(token_env->c_str());
    if (value == nullptr || *value == '\0') {
      return Result(std::in_place_index<1>, "environment variable " + *token_env + " is not set");
    }
    if (HasControl(value) || std::string(value).size() > kMaxTokenBytes) {
      return Result(std::in_place_index<1>,
                    "environment variable " + *token_env + ": expected 1 to 4096 printable bytes");
    }
    return Result(std::in_place_index<0>, std::string(value));
  }
  return Result(std::in_place_index<0>, std::nullopt);
}

}  // namespace sbd
