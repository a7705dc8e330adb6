#include "detector/common/alertmanager_url.h"

#include <algorithm>
#include <cctype>

#include "detector/common/network_text.h"

namespace sbd {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  return std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
}

std::string PercentDecode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

AlertmanagerEndpoint SplitAlertmanagerUrl(const std::string& url) {
  AlertmanagerEndpoint ep;
  const auto scheme_end = url.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string rest = scheme_end == std::string::npos ? url : url.substr(scheme_end + 3);
  const auto authority_end = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, authority_end);
  std::string path = authority_end == std::string::npos ? "" : rest.substr(authority_end);
  path = path.substr(0, path.find_first_of("?#"));
  if (const auto at = authority.rfind('@'); at != std::string::npos) {
    const std::string userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    ep.has_auth = true;
    ep.user = PercentDecode(userinfo.substr(0, colon));
    ep.password = colon == std::string::npos ? "" : PercentDecode(userinfo.substr(colon + 1));
  }
  while (!path.empty() && path.back() == '/') path.pop_back();
  // Shown as every other URL is (RedactedUrl), with the scheme in lower case and no trailing '/'.
  std::string shown = RedactedUrl(rest);
  while (!shown.empty() && shown.back() == '/') shown.pop_back();
  ep.redacted = (scheme.empty() ? "" : scheme + "://") + shown;
  if (scheme != "http" && scheme != "https") {
    ep.error = "Alertmanager URL \"" + ep.redacted + "\" does not start with http:// or https://";
  } else if (authority.empty() || authority.front() == ':') {
    ep.error = "Alertmanager URL \"" + ep.redacted + "\" has no host";
  }
  ep.scheme_host_port = scheme + "://" + authority;
  ep.base_path = path;
  return ep;
}

}  // namespace sbd
