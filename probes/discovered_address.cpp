#include "probes/discovered_address.h"

#include <algorithm>
#include <cctype>

#include "detector/common/logfmt.h"
#include "detector/config/config_reader.h"

namespace sbd {
namespace {

bool HostLabel(const std::string& label) {
  return !label.empty() && label.size() <= 63 && label.front() != '-' &&
         std::all_of(label.begin(), label.end(), [](char c) {
           return cfg::IsLetter(c) || cfg::IsDigit(c) || c == '_' || c == '-';
         });
}

bool HostName(const std::string& host) {
  if (host.empty() || host.size() > kMaxDiscoveredHostBytes) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = host.find('.', start);
    if (!HostLabel(host.substr(start, dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// An IPv6 literal as libpq takes it: hex digits and colons (two at least), an IPv4 tail allowed.
bool Ipv6(const std::string& host) {
  return host.size() >= 2 && host.size() <= 45 && std::count(host.begin(), host.end(), ':') >= 2 &&
         std::all_of(host.begin(), host.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
         });
}

}  // namespace

DiscoveredAddress DiscoverableAddress(const std::string& name, const std::string& host,
                                      const std::string& port) {
  DiscoveredAddress out;
  if (name.empty() || name.size() > kMaxDiscoveredNameBytes || !cfg::IsName(name)) {
    out.why = "name \"" + ShownToken(name) + "\" is not 1 to " +
              std::to_string(kMaxDiscoveredNameBytes) +
              " letters, digits, '_', '.' or '-': not discovered";
    return out;
  }
  const bool v6 = Ipv6(host);
  if (!v6 && !HostName(host)) {
    out.why = name + ": host \"" + ShownToken(host) +
              "\""
              " is not a host name or an IP address: not discovered";
    return out;
  }
  const bool digits =
      !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), cfg::IsDigit);
  if (!digits || std::stol(port) < 1 || std::stol(port) > 65535) {
    out.why = name + ": port \"" + ShownToken(port) + "\" is not 1 to 65535: not discovered";
    return out;
  }
  out.conn_url =
      "postgres://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(std::stol(port));
  return out;
}

}  // namespace sbd
