#pragma once

// The checks a member found in a record (repmgr.nodes' conninfo, the pg_auto_failover monitor's
// nodes) passes before it is offered to discovery: whoever can write the record chooses its
// name, host and port, so each is checked, and only host and port are ever taken.

#include <string>

namespace sbd {

/// The longest discovered member name and host name accepted.
constexpr size_t kMaxDiscoveredNameBytes = 63;
constexpr size_t kMaxDiscoveredHostBytes = 253;

/// A record's member as discovery takes it: `conn_url` is "postgres://host:port" (an IPv6
/// address in brackets), the form the scheduler's discovery reads host and port from; empty
/// when the member is skipped, and then `why` says why (a shown value is escaped and cut).
struct DiscoveredAddress {
  std::string conn_url;
  std::string why;
};

/// Pure: `name`, `host` and `port` as read from a record. The name must be 1 to
/// kMaxDiscoveredNameBytes of letters, digits, '_', '.' and '-'; the host a DNS name (labels of
/// letters, digits, '_' and '-', at most kMaxDiscoveredHostBytes), an IPv4 or an IPv6 address
/// (never a socket directory); the port decimal, 1 to 65535.
DiscoveredAddress DiscoverableAddress(const std::string& name, const std::string& host,
                                      const std::string& port);

}  // namespace sbd
