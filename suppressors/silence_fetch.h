// Reading Alertmanagers' silences over HTTP on the event loop: one deadline for the whole
// request, a bounded answer, credentials taken from the URL and never shown.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/event_loop.h"

namespace sbd {

/// The body of a 200 answer (index 0), or why there is none (index 1, without credentials).
using SilencesFetch = std::variant<std::string, std::string>;

/// GET <url>/api/v2/silences of every URL at once, on `loop` (LoopHttpClient: connect, send,
/// status, headers and body bounded together by `timeout`, the status line and headers capped,
/// the body at most `max_bytes`; basic auth from the URL's user:password@, never shown), so no
/// thread is held by a slow Alertmanager. Returns one result per URL, in order, once every one
/// has answered or failed (each by its deadline). Never throws. Thread-safe, but never call it
/// on the loop's own thread (it then fails every read at once rather than wait on itself).
std::vector<SilencesFetch> FetchAllSilences(const std::vector<std::string>& urls, Millis timeout,
                                            size_t max_bytes,
                                            EventLoop& loop = EventLoop::Shared());

/// FetchAllSilences of one URL.
SilencesFetch FetchSilences(const std::string& url, Millis timeout, size_t max_bytes);

/// "scheme://host:port/path" of an Alertmanager URL without any user:password@. Pure.
std::string RedactUrl(const std::string& url);

}  // namespace sbd
