// One Alertmanager base URL ("https://user:pass@am.example:9093/prefix"), split into what an
// HTTP client wants and what may be shown. Used by the alert sender and the silence reader.
#pragma once

#include <string>

namespace sbd {

/// The parts of an Alertmanager base URL. Plain value; thread-safe to share.
struct AlertmanagerEndpoint {
  std::string scheme_host_port;  ///< "http://127.0.0.1:9093", for httplib::Client
  std::string base_path;         ///< "/prefix" without a trailing slash ("" for none)
  std::string redacted;          ///< the URL without credentials, for stats, logs and status
  bool has_auth = false;         ///< userinfo present: sent as basic auth
  std::string user;              ///< percent-decoded
  std::string password;          ///< percent-decoded; never logged
  std::string error;             ///< why the URL is unusable (not http(s), no host); "" if fine
};

/// Splits `url`; never throws. A query or fragment is dropped.
AlertmanagerEndpoint SplitAlertmanagerUrl(const std::string& url);

}  // namespace sbd
