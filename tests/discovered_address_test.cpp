// The checks a member found in a record (repmgr.nodes' conninfo, the pg_auto_failover
// monitor's nodes) passes before discovery takes its host and port: hostile names, hosts and
// ports are skipped with a reason, never used, never a crash.
#include "probes/discovered_address.h"

#include <catch2/catch.hpp>
#include <string>

namespace sbd {

TEST_CASE("discovered address: host names, IPv4 and IPv6 become a postgres:// conn_url",
          "[discovery]") {
  CHECK(DiscoverableAddress("node1", "db-1.example.com", "5432").conn_url ==
        "postgres://db-1.example.com:5432");
  CHECK(DiscoverableAddress("node_2", "10.0.0.2", "6432").conn_url == "postgres://10.0.0.2:6432");
  CHECK(DiscoverableAddress("n3", "fe80::1", "5432").conn_url == "postgres://[fe80::1]:5432");
  CHECK(DiscoverableAddress("n4", "h", "00065").conn_url == "postgres://h:65");
  CHECK(DiscoverableAddress("n5", std::string(63, 'a') + "." + std::string(63, 'b'), "1")
            .why.empty());
}

TEST_CASE("discovered address: hostile names, hosts and ports are skipped with a reason",
          "[discovery]") {
  struct Case {
    std::string name, host, port, why;
  };
  const Case cases[] = {
      {"node1", "/var/run/postgresql", "5432",
       "node1: host \"/var/run/postgresql\" is not a host name or an IP address: not discovered"},
      {"node1", "evil host", "5432",
       "node1: host \"evil host\" is not a host name or an IP address: not discovered"},
      {"node1", "a'b", "5432",
       "node1: host \"a'b\" is not a host name or an IP address: not "
       "discovered"},
      {"node1", "", "5432", "node1: host \"\" is not a host name or an IP address: not discovered"},
      {"node1", "a..b", "5432",
       "node1: host \"a..b\" is not a host name or an IP address: not "
       "discovered"},
      {"node1", "-a", "5432",
       "node1: host \"-a\" is not a host name or an IP address: not discovered"},
      {"node1", "h", "0", "node1: port \"0\" is not 1 to 65535: not discovered"},
      {"node1", "h", "65536", "node1: port \"65536\" is not 1 to 65535: not discovered"},
      {"node1", "h", "54x", "node1: port \"54x\" is not 1 to 65535: not discovered"},
      {"node1", "h", "-1", "node1: port \"-1\" is not 1 to 65535: not discovered"},
      {"node1", "h", "", "node1: port \"\" is not 1 to 65535: not discovered"},
      {"ev\nil", "h", "5432",
       "name \"ev\\nil\" is not 1 to 63 letters, digits, '_', '.' or '-': not discovered"},
  };
  for (const Case& c : cases) {
    const DiscoveredAddress found = DiscoverableAddress(c.name, c.host, c.port);
    INFO(c.host << " " << c.port);
    CHECK(found.conn_url.empty());
    CHECK(found.why == c.why);
  }
  // Too long: a 254-byte host, a 64-byte label, a 64-byte name; each shown cut, never whole.
  const std::string long_host =
      std::string(100, 'a') + "." + std::string(100, 'b') + "." + std::string(53, 'c');
  for (const std::string& host : {long_host, std::string(64, 'x')}) {
    const DiscoveredAddress found = DiscoverableAddress("n", host, "5432");
    CHECK(found.conn_url.empty());
    CHECK(found.why.find("is not a host name") != std::string::npos);
    CHECK(found.why.size() < 200);
  }
  CHECK(DiscoverableAddress(std::string(64, 'n'), "h", "5432").conn_url.empty());
  CHECK(DiscoverableAddress("n", std::string(10000, ':'), "5432").conn_url.empty());
}

}  // namespace sbd
