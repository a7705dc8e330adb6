// Reading an Alertmanager's silences over HTTP: a deadline, a bounded answer, credentials
// taken from the URL and never shown.
#pragma once

#include <string>
#include <variant>

#include "detector/config/config.h"

namespace sbd {

/// GET <url>/api/v2/silences (basic auth from the URL's user:password@, never shown), at most
/// `max_bytes`, all within `timeout`. Returns the body on 200, else why not (without
/// credentials). Never throws. Thread-safe.
std::variant<std::string, std::string> FetchSilences(const std::string& url, Millis timeout,
                                                     size_t max_bytes);

/// "scheme://host:port/path" of an Alertmanager URL without any user:password@. Pure.
std::string RedactUrl(const std::string& url);

}  // namespace sbd
