#include "detector/config/config.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/support/config_errors.h"

using sbd::ConfigError;
using sbd::Millis;

namespace {

const std::string kDir = SBD_TESTDATA_DIR "/config/";

sbd::ValidatedConfig Valid(const sbd::ConfigResult& result) {
  if (const auto* errors = std::get_if<std::vector<ConfigError>>(&result)) {
    for (const ConfigError& e : *errors) UNSCOPED_INFO(e.ToString());
    FAIL("config unexpectedly invalid");
  }
  return std::get<sbd::ValidatedConfig>(result);
}

using sbd::testing::ConfigErrorLines;

std::vector<std::string> LoadErrors(const std::string& name) {
  return ConfigErrorLines(sbd::LoadConfig(kDir + name));
}

// The options libpq reads back from a connection string, so DSNs compare by meaning.
std::map<std::string, std::string> DsnOptions(const std::string& dsn) {
  std::map<std::string, std::string> out;
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  REQUIRE(options != nullptr);
  for (PQconninfoOption* o = options; o->keyword; ++o) {
    if (o->val && *o->val) out[o->keyword] = o->val;
  }
  PQconninfoFree(options);
  return out;
}

std::string Password(const sbd::MemberSpec& member) {
  auto result = sbd::ResolvePassword(member);
  REQUIRE(result.index() == 0);
  REQUIRE(std::get<0>(result).has_value());
  return *std::get<0>(result);
}

std::string PasswordError(const sbd::MemberSpec& member) {
  auto result = sbd::ResolvePassword(member);
  REQUIRE(result.index() == 1);
  return std::get<1>(result);
}

std::string WriteTempFile(const std::string& content) {
  char path[] = "/tmp/sbd-config-test-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  close(fd);
  return path;
}

}  // namespace

TEST_CASE("config: a valid file parses with defaults applied", "[config]") {
  const std::string path = kDir + "valid-full.yml";
  const sbd::ValidatedConfig config = Valid(sbd::LoadConfig(path));
  CHECK(config.source() == path);
  const auto& clusters = config.clusters();
  REQUIRE(clusters.size() == 3);

  const sbd::ClusterSpec& orders = clusters[0];
  CHECK(orders.name == "orders");
  CHECK(orders.ttl == Millis(30000));
  CHECK(orders.probe_interval == Millis(3000));
  CHECK(orders.probe_timeout == Millis(2000));
  CHECK(orders.system_identifier == "7312345678901234567");
  REQUIRE(orders.members.size() == 2);

  const sbd::ClusterSpec& billing = clusters[1];
  CHECK(billing.name == "billing.eu-1");
  CHECK(billing.ttl == Millis(10000));
  CHECK(billing.probe_interval == Millis(1000));
  CHECK(billing.probe_timeout == Millis(1000));
  CHECK(billing.system_identifier == "7398765432109876543");  // given as a YAML integer

  const sbd::ClusterSpec& inventory = clusters[2];
  CHECK(inventory.ttl == Millis(60000));
  CHECK(inventory.probe_interval == Millis(15000));
  CHECK(inventory.probe_timeout == Millis(500));
  CHECK(inventory.system_identifier.empty());
}

TEST_CASE("config: an inline dsn password moves to inline_password", "[config]") {
  const auto members = Valid(sbd::LoadConfig(kDir + "valid-full.yml")).clusters()[0].members;

  const sbd::MemberSpec& pg1 = members[0];
  CHECK(pg1.name == "pg1");
  CHECK(pg1.inline_password == "s3cr'et");
  CHECK(pg1.dsn.find("s3cr") == std::string::npos);
  CHECK(pg1.dsn == "user='splitbrain' dbname='postgres' host='127.0.0.1' port='5433'");
  CHECK(pg1.address == "127.0.0.1:5433");
  CHECK_FALSE(pg1.password_file);
  CHECK_FALSE(pg1.password_env);

  const sbd::MemberSpec& pg2 = members[1];  // URI form, password in user:password@
  CHECK(pg2.inline_password == "hunter2");
  CHECK(pg2.dsn.find("hunter2") == std::string::npos);
  CHECK(pg2.address == "db2.example.com:5434");
  CHECK(DsnOptions(pg2.dsn) == std::map<std::string, std::string>{{"user", "splitbrain"},
                                                                  {"dbname", "postgres"},
                                                                  {"host", "db2.example.com"},
                                                                  {"port", "5434"},
                                                                  {"sslmode", "require"}});
}

TEST_CASE("config: password sources and addresses are kept per member", "[config]") {
  const auto clusters = Valid(sbd::LoadConfig(kDir + "valid-full.yml")).clusters();
  const sbd::MemberSpec& socket = clusters[1].members[0];
  CHECK(socket.address == "/var/run/postgresql:5432");
  CHECK(socket.password_file == "/etc/splitbrain/a.pass");
  CHECK_FALSE(socket.inline_password);

  const sbd::MemberSpec& by_hostaddr = clusters[1].members[1];
  CHECK(by_hostaddr.address == "10.0.0.2:5432");
  CHECK(by_hostaddr.password_env == "BILLING_PG_PASSWORD");

  CHECK(clusters[2].members[0].address == "pg1:5432,pg2:5433");
}

TEST_CASE("config: rebuilt dsn quotes values so libpq reads them back unchanged", "[config]") {
  const std::string yaml = R"(clusters:
  - name: c
    members:
      - name: m
        dsn: "host=::1 application_name='it\\'s a \\\\ test' password='p w'"
      - name: n
        dsn: ""
)";
  const auto members = Valid(sbd::ParseConfig(yaml, "inline.yml")).clusters()[0].members;
  CHECK(members[0].inline_password == "p w");
  CHECK(members[0].address == "[::1]:5432");
  CHECK(DsnOptions(members[0].dsn) == std::map<std::string, std::string>{
                                          {"host", "::1"}, {"application_name", "it's a \\ test"}});
  CHECK(members[1].dsn.empty());
  CHECK(members[1].address == "localhost:5432");
}

TEST_CASE("config: a file without alerting gets the alerting defaults", "[config]") {
  const sbd::ValidatedConfig config = Valid(sbd::LoadConfig(kDir + "valid-full.yml"));
  const sbd::AlertingSpec& alerting = config.alerting();
  CHECK(alerting.alertmanager_urls.empty());
  CHECK(alerting.resend_interval == Millis(30000));
  CHECK(alerting.timeout == Millis(2000));
  CHECK(alerting.external_url.empty());
  CHECK(alerting.runbook_base_url.empty());
  CHECK(alerting.external_labels.empty());
  for (const sbd::ClusterSpec& cluster : config.clusters()) {
    INFO(cluster.name);
    CHECK(cluster.kind == "postgres");
    CHECK(cluster.scope.empty());
    CHECK(cluster.etcd_endpoints.empty());
    CHECK_FALSE(cluster.ttl_from_dcs);
    CHECK_FALSE(cluster.discovery.enabled);
    for (const sbd::MemberSpec& member : cluster.members) {
      CHECK(member.patroni_url.empty());
      CHECK_FALSE(member.discovered);
    }
  }
}

TEST_CASE("config: alerting settings are read, base URLs without a trailing slash", "[config]") {
  const sbd::AlertingSpec alerting = Valid(sbd::LoadConfig(kDir + "valid-patroni.yml")).alerting();
  CHECK(alerting.alertmanager_urls ==
        std::vector<std::string>{"http://127.0.0.1:9093", "https://am.example:9093/prefix"});
  CHECK(alerting.resend_interval == Millis(60000));
  CHECK(alerting.timeout == Millis(500));
  CHECK(alerting.external_url == "http://detector.example:10259");
  CHECK(alerting.runbook_base_url == "https://wiki.example/runbooks/");  // kept as written
  CHECK(alerting.external_labels ==
        std::vector<std::pair<std::string, std::string>>{{"env", "prod"}, {"region", "eu-1"}});
}

TEST_CASE("config: a discovering patroni cluster follows the DCS ttl", "[config]") {
  const auto clusters = Valid(sbd::LoadConfig(kDir + "valid-patroni.yml")).clusters();
  REQUIRE(clusters.size() == 3);
  const sbd::ClusterSpec& main = clusters[0];
  CHECK(main.kind == "patroni");
  CHECK(main.scope == "main");              // defaults to the cluster name
  CHECK(main.dcs_namespace == "/service");  // trailing '/' trimmed
  CHECK(main.etcd_endpoints ==
        std::vector<std::string>{"http://127.0.0.1:2379", "https://etcd2.example:2379"});
  CHECK(main.ttl_from_dcs);  // ttl absent: the defaults below are computed from 30s
  CHECK(main.ttl == Millis(30000));
  CHECK(main.probe_interval == Millis(3000));
  CHECK(main.probe_timeout == Millis(2000));
  CHECK(main.members.empty());
  CHECK(main.discovery.enabled);
  CHECK(DsnOptions(main.discovery.dsn) ==
        std::map<std::string, std::string>{
            {"user", "splitbrain"}, {"dbname", "postgres"}, {"sslmode", "prefer"}});
  CHECK(main.discovery.password_env == "PGPASSWORD_MAIN");
  CHECK_FALSE(main.discovery.password_file);
}

TEST_CASE("config: incident_log defaults to memory only, 7d and 10000 events", "[config]") {
  const sbd::IncidentLogSpec defaults =
      Valid(sbd::LoadConfig(kDir + "valid-full.yml")).incident_log();
  CHECK(defaults.file.empty());
  CHECK(defaults.retention == Millis(7LL * 24 * 3600 * 1000));
  CHECK(defaults.max_events == 10000);
  const std::string yaml =
      "incident_log:\n  file: /var/lib/sbd/incidents.jsonl\n  retention: 36h\n"
      "  max_events: 500\nclusters:\n  - name: a\n    members:\n"
      "      - {name: m, dsn: \"host=127.0.0.1\"}\n";
  const sbd::IncidentLogSpec given = Valid(sbd::ParseConfig(yaml, "inline.yml")).incident_log();
  CHECK(given.file == "/var/lib/sbd/incidents.jsonl");
  CHECK(given.retention == Millis(36LL * 3600 * 1000));
  CHECK(given.max_events == 500);
}

TEST_CASE("config: a patroni cluster with members and its own ttl", "[config]") {
  const auto clusters = Valid(sbd::LoadConfig(kDir + "valid-patroni.yml")).clusters();
  const sbd::ClusterSpec& billing = clusters[1];
  CHECK(billing.kind == "patroni");
  CHECK(billing.scope == "billing-eu");
  CHECK(billing.dcs_namespace.empty());  // "/" without its trailing '/': keys are /<scope>/...
  CHECK(billing.etcd_endpoints == std::vector<std::string>{"http://127.0.0.1:2379"});
  CHECK_FALSE(billing.ttl_from_dcs);
  CHECK(billing.ttl == Millis(10000));
  CHECK(billing.probe_interval == Millis(1000));
  CHECK_FALSE(billing.discovery.enabled);  // discover defaults to false
  CHECK(billing.discovery.dsn.empty());
  CHECK(billing.discovery.password_file == "/etc/splitbrain/billing.pass");
  REQUIRE(billing.members.size() == 2);
  CHECK(billing.members[0].patroni_url == "http://10.0.0.1:8008");
  CHECK(billing.members[0].address == "10.0.0.1:5432");
  CHECK_FALSE(billing.members[0].discovered);
  CHECK(billing.members[1].patroni_url.empty());

  const sbd::ClusterSpec& legacy = clusters[2];  // kind: postgres, spelled out
  CHECK(legacy.kind == "postgres");
  CHECK(legacy.scope.empty());
  CHECK(legacy.dcs_namespace == "/service");
  CHECK_FALSE(legacy.ttl_from_dcs);
}

TEST_CASE("config: a redis cluster reads its members by address and its Sentinel block",
          "[config]") {
  const auto clusters = Valid(sbd::LoadConfig(kDir + "valid-redis.yml")).clusters();
  REQUIRE(clusters.size() == 1);
  const sbd::ClusterSpec& c = clusters[0];
  CHECK(c.kind == "redis");
  CHECK(c.scope.empty());
  CHECK(c.redis.master_name == "cache-main");
  CHECK(c.redis.sentinels ==
        std::vector<std::string>{"127.0.0.1:26379", "127.0.0.1:26380", "127.0.0.1:26381"});
  CHECK(c.redis.username == "splitbrain");
  CHECK(c.redis.sentinel_username == "watcher");
  CHECK(c.redis.sentinel_password_file ==
        std::optional<std::string>("/etc/splitbrain/sentinel.pass"));
  CHECK_FALSE(c.redis.sentinel_password_env);
  REQUIRE(c.redis.tls);
  CHECK(c.redis.tls->ca_file == "/etc/splitbrain/redis-ca.pem");
  CHECK(c.redis.tls->cert_file == "/etc/splitbrain/redis-client.pem");
  CHECK(c.redis.tls->key_file == "/etc/splitbrain/redis-client.key");
  CHECK(c.redis.tls->server_name == "redis.internal");
  CHECK_FALSE(c.members[0].password_file);  // the sentinels' password is theirs alone
  REQUIRE(c.members.size() == 2);
  CHECK(c.members[1].address == "127.0.0.1:6380");
  CHECK(c.members[1].dsn.empty());
  CHECK(c.members[1].password_env == std::optional<std::string>("SBD_REDIS_PASSWORD"));
}

TEST_CASE("config: a redis_lease cluster reads its key, login, claim query and candidates",
          "[config]") {
  const auto clusters = Valid(sbd::LoadConfig(kDir + "valid-redis-lease.yml")).clusters();
  REQUIRE(clusters.size() == 2);
  const sbd::ClusterSpec& c = clusters[0];
  CHECK(c.kind == "redis_lease");
  CHECK(c.scope.empty());
  CHECK(c.redis_lease.address == "127.0.0.1:6379");
  CHECK(c.redis_lease.username == "splitbrain");
  CHECK(c.redis_lease.password_env == std::optional<std::string>("SBD_LEASE_PASSWORD"));
  CHECK(c.redis_lease.key == "lease:orders");
  CHECK(c.redis_lease.pattern.empty());
  CHECK(c.redis_lease.claim_metric == "leader_election_master_status");
  CHECK(c.redis_lease.lock_label == "name");
  CHECK(c.redis_lease.lock == "orders");
  CHECK(c.redis_lease.token_label == "token");
  REQUIRE(c.members.size() == 2);
  CHECK(c.members[0].claim_url == "http://127.0.0.1:9101/metrics");
  CHECK(c.members[0].lease_identity.empty());
  CHECK(c.members[1].lease_identity == "worker-b");
  // No password reaches the candidates: theirs is an HTTP endpoint.
  CHECK_FALSE(c.members[1].password_env.has_value());

  const sbd::ClusterSpec& jobs = clusters[1];
  CHECK(jobs.redis_lease.key.empty());
  CHECK(jobs.redis_lease.pattern == "locks:jobs:*");
  CHECK(jobs.redis_lease.max_keys == 50);
  CHECK(jobs.redis_lease.max_scan_iterations == 10);
  CHECK(jobs.redis_lease.claim_metric == "app:lock_held");
  CHECK(jobs.redis_lease.lock_label == "lock");
  CHECK(jobs.redis_lease.lock == "jobs");  // the cluster's name by default
  CHECK(jobs.redis_lease.token_label.empty());
}

TEST_CASE("config: an etcd_election cluster reads its gateway, prefix, claim query and candidates",
          "[config]") {
  const auto clusters = Valid(sbd::LoadConfig(kDir + "valid-etcd-election.yml")).clusters();
  REQUIRE(clusters.size() == 1);
  const sbd::ClusterSpec& c = clusters[0];
  CHECK(c.kind == "etcd_election");
  CHECK(c.etcd_election.endpoints ==
        std::vector<std::string>{"http://127.0.0.1:2379", "http://127.0.0.2:2379"});
  CHECK(c.etcd_election.prefix == "/election/orders");
  CHECK(c.etcd_election.claim_metric == "leader_election_master_status");
  CHECK(c.etcd_election.lock == "orders");
  CHECK(c.etcd_election.token_label == "revision");
  CHECK(c.etcd_endpoints.empty());  // Patroni's, not this kind's
  REQUIRE(c.etcd_election.resource_witness.has_value());
  CHECK(c.etcd_election.resource_witness->url == "http://127.0.0.1:9200/metrics");
  CHECK(c.etcd_election.resource_witness->metric == "fencing_token_highest_accepted");
  CHECK(c.etcd_election.resource_witness->lock_label == "lock");
  CHECK(c.etcd_election.resource_witness->lock == "orders");
  REQUIRE(c.members.size() == 2);
  CHECK(c.members[0].claim_url == "http://127.0.0.1:9101/metrics");
  CHECK(c.members[1].lease_identity == "worker-b");
}

TEST_CASE("config: each invalid file reports exactly its errors", "[config]") {
  // Every error carries file:line:column, the key path and a message, sorted by position.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"invalid-unknown-top-key.yml", {"6:1: foo: unknown key"}},
      {"invalid-unknown-member-key.yml", {"6:9: clusters[0].members[0].passwrd: unknown key"}},
      {"invalid-wrong-type-ttl.yml",
       {"3:10: clusters[0].ttl: expected a duration like 500ms, 30s or 1m"}},
      {"invalid-bad-duration.yml",
       {"3:10: clusters[0].ttl: expected a duration like 500ms, 30s or 1m",
        "4:21: clusters[0].probe_interval: expected a duration like 500ms, 30s or 1m",
        "5:20: clusters[0].probe_timeout: expected a duration like 500ms, 30s or 1m"}},
      {"invalid-duplicate-cluster.yml",
       {"6:11: clusters[1].name: duplicate cluster name \"orders\" (first at line 2)"}},
      {"invalid-duplicate-member.yml",
       {"6:15: clusters[0].members[1].name: duplicate member name \"pg1\" (first at line 4)"}},
      {"invalid-duplicate-key.yml", {"4:5: clusters[0].ttl: duplicate key (first at line 3)"}},
      {"invalid-missing-members.yml", {"2:5: clusters[0].members: required"}},
      {"invalid-interval-above-ttl-third.yml",
       {"4:21: clusters[0].probe_interval: probe_interval 15s is above ttl/3 (10s)"}},
      {"invalid-timeout-above-interval.yml",
       {"4:20: clusters[0].probe_timeout: probe_timeout 5s is above probe_interval 3s",
        "10:20: clusters[1].probe_timeout: probe_timeout 2s is above probe_interval 1s "
        "(the default, ttl/10)"}},
      {"invalid-below-minimums.yml",
       {"3:10: clusters[0].ttl: ttl 500ms is below the minimum 1s",
        "8:21: clusters[1].probe_interval: probe_interval 50ms is below the minimum 100ms",
        "9:20: clusters[1].probe_timeout: probe_timeout 0s is below the minimum 1ms"}},
      {"invalid-bad-dsn.yml",
       {"6:14: clusters[0].members[0].dsn: missing \"=\" after \"...\" in connection info string",
        "8:14: clusters[0].members[1].dsn: invalid connection option \"colour\"",
        "10:14: clusters[0].members[2].dsn: end of string reached when looking for matching "
        "\"]\" in IPv6 host address in URI: \"...\"",
        "12:14: clusters[0].members[3].dsn: missing \"=\" after \"password\" in connection info "
        "string"}},
      {"invalid-password-twice.yml",
       {"6:24: clusters[0].members[0].password_file: password given both inline in dsn and in "
        "password_file",
        "10:23: clusters[0].members[1].password_env: only one of password_file and password_env "
        "may be set"}},
      {"invalid-system-identifier.yml",
       {"3:24: clusters[0].system_identifier: expected a system identifier: an unsigned 64-bit "
        "decimal number",
        "8:24: clusters[1].system_identifier: expected a system identifier: an unsigned 64-bit "
        "decimal number"}},
      {"invalid-wrong-types.yml",
       {"2:5: clusters[0].name: expected a string", "4:7: clusters[0].members: expected a sequence",
        "5:11: clusters[1].name: expected a string",
        "7:9: clusters[1].members[0]: expected a mapping",
        "9:14: clusters[1].members[1].dsn: expected a string",
        "10:23: clusters[1].members[1].password_env: expected an environment variable name"}},
      {"invalid-yaml-syntax.yml", {"5:1: end of sequence flow not found"}},
      {"invalid-empty-clusters.yml", {"1:11: clusters: must list at least one cluster"}},
      {"invalid-empty-file.yml", {"1:1: clusters: required"}},
      {"invalid-not-a-mapping.yml", {"1:1: expected a mapping"}},
      {"invalid-two-documents.yml", {"7:1: expected a single YAML document"}},
      {"invalid-several-errors.yml",
       {"4:21: clusters[0].probe_interval: probe_interval 5s is above ttl/3 (3s333ms)",
        "8:9: clusters[0].members[0].verbose: unknown key",
        "9:9: clusters[0].members[1].name: required",
        "10:11: clusters[1].name: expected a name of letters, digits, '_', '.' and '-'",
        "11:14: clusters[1].members: expected a sequence", "12:1: extra: unknown key"}},
      {"invalid-kind.yml",
       {"3:11: clusters[0].kind: expected postgres, patroni, redis, redis_lease, k8s_lease, "
        "etcd_election, zookeeper_lock, pg_auto_failover or repmgr",
        "8:11: clusters[1].kind: expected postgres, patroni, redis, redis_lease, k8s_lease, "
        "etcd_election, zookeeper_lock, pg_auto_failover or repmgr"}},
      {"invalid-etcd-election.yml",
       {"5:19: clusters[0].etcd_election.endpoints[0]: expected an http:// or https:// URL",
        "6:15: clusters[0].etcd_election.prefix: expected 1 to 1024 bytes",
        "8:17: clusters[0].etcd_election.claim.metric: expected a metric name "
        "([a-zA-Z_:][a-zA-Z0-9_:]*)",
        "9:7: clusters[0].etcd_election.extra: unknown key",
        "11:9: clusters[0].etcd_election.resource_witness.url: required",
        "11:17: clusters[0].etcd_election.resource_witness.metric: expected a metric name "
        "([a-zA-Z_:][a-zA-Z0-9_:]*)",
        "12:5: clusters[0].file_sd: not supported for kind: etcd_election yet",
        "18:5: clusters[1].etcd_election: required",
        "28:5: clusters[2].etcd_election: only valid for kind: etcd_election"}},
      {"invalid-redis-lease.yml",
       {"4:5: clusters[0].scope: only valid for kind: patroni",
        "6:16: clusters[0].redis_lease.address: expected host:port",
        "8:7: clusters[0].redis_lease.pattern: only one of key and pattern may be set",
        "9:17: clusters[0].redis_lease.max_keys: expected a whole number from 1 to 100000",
        "11:21: clusters[0].redis_lease.password_env: only one of password_file and "
        "password_env may be set",
        "13:17: clusters[0].redis_lease.claim.metric: expected a metric name "
        "([a-zA-Z_:][a-zA-Z0-9_:]*)",
        "14:21: clusters[0].redis_lease.claim.lock_label: expected a label name "
        "([a-zA-Z_][a-zA-Z0-9_]*)",
        "16:15: clusters[0].redis_lease.claim.lock: must not be empty",
        "17:9: clusters[0].redis_lease.claim.extra: unknown key",
        "20:22: clusters[0].members[0].metrics_url: expected an http:// or https:// URL",
        "21:9: clusters[0].members[1].metrics_url: required",
        "22:9: clusters[0].members[1].address: unknown key", "23:5: clusters[1].members: required",
        "26:7: clusters[1].redis_lease.key: required (or pattern)",
        "27:7: clusters[1].redis_lease.max_scan_iterations: only valid with pattern",
        "30:22: clusters[1].redis_lease.claim.token_label: must differ from lock_label",
        "31:5: clusters[2].redis_lease: required", "31:5: clusters[2].members: required",
        "37:5: clusters[3].redis_lease: only valid for kind: redis_lease"}},
      {"invalid-redis.yml",
       {"4:5: clusters[0].scope: only valid for kind: patroni",
        "7:18: clusters[0].members[0].address: expected host:port",
        "8:9: clusters[0].members[1].address: required",
        "9:9: clusters[0].members[1].dsn: unknown key",
        "11:7: clusters[0].redis.tls_ca_file: required",
        "11:20: clusters[0].redis.master_name: expected a name of letters, digits, '_', '.' and "
        "'-'",
        "12:19: clusters[0].redis.sentinels[0]: expected host:port",
        "12:32: clusters[0].redis.sentinels[1]: expected host:port",
        "14:21: clusters[0].redis.password_env: only one of password_file and password_env may be "
        "set",
        "16:30: clusters[0].redis.sentinel_password_env: only one of sentinel_password_file and "
        "sentinel_password_env may be set",
        "18:7: clusters[0].redis.tls_cert_file: tls_cert_file and tls_key_file go together",
        "19:5: clusters[1].redis: required",
        "32:7: clusters[2].redis.tls_ca_file: only valid with tls: true",
        "37:5: clusters[3].redis: only valid for kind: redis"}},
      {"invalid-patroni-key-on-postgres.yml",
       {"4:5: clusters[0].scope: only valid for kind: patroni",
        "5:5: clusters[0].namespace: only valid for kind: patroni",
        "6:5: clusters[0].etcd: only valid for kind: patroni",
        "8:5: clusters[0].discover: only valid for kind: patroni, pg_auto_failover or repmgr",
        "9:5: clusters[0].discovery: only valid for kind: patroni, pg_auto_failover or repmgr",
        "14:9: clusters[0].members[0].patroni_url: only valid for kind: patroni",
        "17:5: clusters[1].discover: only valid for kind: patroni, pg_auto_failover or repmgr"}},
      {"invalid-patroni-no-etcd.yml",
       {"2:5: clusters[0].etcd: required (or zookeeper)",
        "9:5: clusters[1].etcd: expected a mapping",
        "14:18: clusters[2].etcd.endpoints: must list at least one endpoint"}},
      {"invalid-patroni-no-members.yml",
       {"2:5: clusters[0].members: must list at least one member or set discover: true",
        "11:14: clusters[1].members: must list at least one member or set discover: true"}},
      {"invalid-patroni-values.yml",
       {"4:12: clusters[0].scope: expected a name of letters, digits, '_', '.' and '-'",
        "5:16: clusters[0].namespace: expected a path starting with '/'",
        "7:19: clusters[0].etcd.endpoints[0]: expected an http:// or https:// URL",
        "7:35: clusters[0].etcd.endpoints[1]: expected an http:// or https:// URL",
        "8:7: clusters[0].etcd.tls: unknown key",
        "9:15: clusters[0].discover: expected true or false",
        "13:22: clusters[0].members[0].patroni_url: expected an http:// or https:// URL"}},
      {"invalid-alerting-url.yml",
       {"3:12: alerting.alertmanagers[0].url: expected an http:// or https:// URL",
        "5:12: alerting.alertmanagers[2].url: duplicate url (first at line 4)",
        "6:7: alerting.alertmanagers[3].address: unknown key",
        "6:7: alerting.alertmanagers[3].url: required",
        "7:17: alerting.external_url: expected an http:// or https:// URL",
        "8:21: alerting.runbook_base_url: expected an http:// or https:// URL"}},
      {"invalid-alerting-timings.yml",
       {"2:18: alerting.alertmanagers: expected a sequence",
        "3:20: alerting.resend_interval: resend_interval 500ms is below the minimum 1s",
        "4:12: alerting.timeout: timeout 0s is below the minimum 1ms"}},
      {"invalid-alertmanager-silences.yml",
       {"3:14: suppressions.alertmanager_silences.enabled: expected true or false",
        "4:23: suppressions.alertmanager_silences.refresh_interval: refresh_interval 500ms is "
        "below the minimum 1s",
        "5:14: suppressions.alertmanager_silences.timeout: expected a duration like 500ms, 30s or "
        "1m",
        "7:14: suppressions.alertmanager_silences.alertmanagers[0].url: expected an http:// or "
        "https:// URL",
        "8:9: suppressions.alertmanager_silences.alertmanagers[1].url: required",
        "9:5: suppressions.alertmanager_silences.cache: unknown key"}},
      {"invalid-remediation.yml",
       {"2:15: remediation.max_fences: expected a whole number from 0 to 100",
        "3:11: remediation.window: window 10s is below the minimum 1m",
        "4:3: remediation.per: unknown key",
        "8:13: clusters[0].remediation.mode: kind: postgres has no lock store to name the holder, "
        "so no member can be told to be the zombie; remediation needs one",
        "18:7: clusters[1].remediation.user: required for mode: fence (a role of its own; the "
        "probe's stays read-only)",
        "20:21: clusters[1].remediation.password_env: only one of password_file and password_env "
        "may be set",
        "21:16: clusters[1].remediation.timeout: timeout 1m is above the maximum 30s",
        "31:7: clusters[2].remediation.hook: required for mode: fence on kind: redis_lease (a "
        "process cannot be fenced from outside: the hook is asked to stop it)",
        "41:13: clusters[3].remediation.mode: expected dry_run or fence"}},
      {"invalid-incident-log.yml",
       {"2:9: incident_log.file: expected a path",
        "3:14: incident_log.retention: retention 10s is below the minimum 1m",
        "4:15: incident_log.max_events: expected a whole number from 1 to 1000000",
        "5:3: incident_log.keep: unknown key"}},
      {"invalid-alertmanager-silences-nowhere.yml",
       {"3:5: suppressions.alertmanager_silences: no Alertmanager to read silences from: list "
        "alertmanagers here or under alerting.alertmanagers",
        "4:14: suppressions.alertmanager_silences.timeout: timeout 3s is above refresh_interval "
        "2s"}},
      {"invalid-external-label.yml",
       {"6:5: alerting.external_labels.severity: reserved: the detector sets alertname, "
        "severity, cluster and scope itself",
        "7:5: alerting.external_labels.cluster: reserved: the detector sets alertname, severity, "
        "cluster and scope itself",
        "8:5: alerting.external_labels.bad-name: expected a label name matching "
        "[a-zA-Z_][a-zA-Z0-9_]*",
        "9:5: alerting.external_labels.__meta: reserved: names starting with __ are for internal "
        "use",
        "10:5: alerting.external_labels.env: duplicate key (first at line 5)",
        "11:12: alerting.external_labels.empty: expected a non-empty string",
        "12:13: alerting.external_labels.nested: expected a string"}},
      {"invalid-discovery-host.yml",
       {"8:12: clusters[0].discovery.dsn: must not set host and port: discovered members take "
        "host and port from the DCS",
        "15:12: clusters[1].discovery.dsn: must not set host: discovered members take host and "
        "port from the DCS",
        "22:12: clusters[2].discovery.dsn: must not set hostaddr: discovered members take host "
        "and port from the DCS"}},
      {"invalid-discovery-password.yml",
       {"9:12: clusters[0].discovery.dsn: must not hold a password: use password_file or "
        "password_env",
        "16:12: clusters[1].discovery.dsn: must not hold a password: use password_file or "
        "password_env",
        "18:21: clusters[1].discovery.password_env: only one of password_file and password_env "
        "may be set",
        "25:12: clusters[2].discovery.dsn: missing \"=\" after \"...\" in connection info "
        "string"}},
  };
  for (const auto& [name, expected_suffixes] : cases) {
    INFO(name);
    std::vector<std::string> expected;
    for (const std::string& suffix : expected_suffixes)
      expected.push_back(kDir + name + ":" + suffix);
    CHECK(LoadErrors(name) == expected);
  }
}

TEST_CASE("config: dsn errors never echo password fragments", "[config]") {
  std::vector<std::string> fixture = LoadErrors("invalid-bad-dsn.yml");
  const std::vector<std::string> discovery = LoadErrors("invalid-discovery-password.yml");
  REQUIRE(discovery.size() == 4);
  fixture.insert(fixture.end(), discovery.begin(), discovery.end());
  // A quote inside the password must not end the redacted piece early.
  const std::string yaml = R"(clusters:
  - name: c
    members:
      - name: m
        dsn: 'postgresql://u:qx"zk@[::1'
)";
  std::vector<std::string> lines = ConfigErrorLines(sbd::ParseConfig(yaml, "inline.yml"));
  REQUIRE(lines.size() == 1);
  lines.insert(lines.end(), fixture.begin(), fixture.end());
  for (const std::string& line : lines) {
    INFO(line);
    CHECK(line.find("hunter2") == std::string::npos);
    CHECK(line.find("tail") == std::string::npos);
    CHECK(line.find("qx") == std::string::npos);
    CHECK(line.find("zk") == std::string::npos);
  }
}

TEST_CASE("config: an unreadable file is one error at line 0", "[config]") {
  const std::string path = kDir + "does-not-exist.yml";
  CHECK(LoadErrors("does-not-exist.yml") ==
        std::vector<std::string>{path + ":0:0: cannot read file: No such file or directory"});
  const auto result = sbd::LoadConfig(kDir);
  REQUIRE(ConfigErrorLines(result) ==
          std::vector<std::string>{kDir + ":0:0: cannot read file: Is a directory"});
  const ConfigError& error = std::get<std::vector<ConfigError>>(result)[0];
  CHECK(error.line == 0);
  CHECK(error.column == 0);
  CHECK(error.key.empty());
}

TEST_CASE("config: ToString omits the key part when the key is empty", "[config]") {
  CHECK(ConfigError{"f.yml", 3, 7, "clusters[0].ttl", "bad"}.ToString() ==
        "f.yml:3:7: clusters[0].ttl: bad");
  CHECK(ConfigError{"f.yml", 3, 7, "", "bad"}.ToString() == "f.yml:3:7: bad");
}

TEST_CASE("config: durations round trip through their canonical form", "[config]") {
  const std::vector<std::pair<std::string, Millis>> cases = {
      {"1ms", Millis(1)},       {"250ms", Millis(250)},
      {"1s", Millis(1000)},     {"1s500ms", Millis(1500)},
      {"30s", Millis(30000)},   {"1m", Millis(60000)},
      {"1m30s", Millis(90000)}, {"2h", Millis(7200000)},
      {"1d", Millis(86400000)}, {"1d1h1m1s1ms", Millis(90061001)},
  };
  for (const auto& [text, value] : cases) {
    INFO(text);
    CHECK(sbd::ParseDuration(text) == value);
    CHECK(sbd::FormatDuration(value) == text);
  }
  CHECK(sbd::FormatDuration(Millis(0)) == "0s");
  // Non-canonical spellings parse to the same value.
  CHECK(sbd::ParseDuration("90s") == Millis(90000));
  CHECK(sbd::ParseDuration("1500ms") == Millis(1500));
  CHECK(sbd::ParseDuration("1m0s") == Millis(60000));
}

TEST_CASE("config: malformed or zero durations are rejected", "[config]") {
  for (const char* text : {"",
                           "0s",
                           "0ms",
                           "0m0s",
                           "30",
                           "s",
                           "ms",
                           "1.5s",
                           "-1s",
                           "+1s",
                           " 1s",
                           "1s ",
                           "1 s",
                           "1x",
                           "1S",
                           "1sec",
                           "1s1m",
                           "1m1m",
                           "1ms1s",
                           "1w",
                           "99999999999999999999ms",
                           "9999999999999999d"}) {
    INFO('"' << text << '"');
    CHECK_FALSE(sbd::ParseDuration(text));
  }
}

TEST_CASE("config: ResolvePassword reads a file without its trailing newline", "[config]") {
  sbd::MemberSpec member;
  for (const char* content : {"file-secret\n", "file-secret\r\n", "file-secret"}) {
    member.password_file = WriteTempFile(content);
    CHECK(Password(member) == "file-secret");
    std::remove(member.password_file->c_str());
  }
  member.password_file = WriteTempFile("two\n\n");  // only one newline is stripped
  CHECK(Password(member) == "two\n");
  std::remove(member.password_file->c_str());
}

TEST_CASE("config: ResolvePassword reads an environment variable", "[config]") {
  sbd::MemberSpec member;
  member.password_env = "SBD_CONFIG_TEST_PASSWORD";
  REQUIRE(setenv("SBD_CONFIG_TEST_PASSWORD", "env-secret", 1) == 0);
  CHECK(Password(member) == "env-secret");
  unsetenv("SBD_CONFIG_TEST_PASSWORD");
  CHECK(PasswordError(member) == "environment variable SBD_CONFIG_TEST_PASSWORD is not set");
}

TEST_CASE("config: ResolvePassword falls back to the inline password, or none", "[config]") {
  sbd::MemberSpec member;
  auto none = sbd::ResolvePassword(member);
  REQUIRE(none.index() == 0);
  CHECK_FALSE(std::get<0>(none).has_value());
  member.inline_password = "inline-secret";
  CHECK(Password(member) == "inline-secret");
}

TEST_CASE("config: ResolvePassword errors name the source but not the secret", "[config]") {
  sbd::MemberSpec member;
  member.inline_password = "inline-secret";
  member.password_file = kDir + "no-such.pass";
  const std::string missing = PasswordError(member);
  CHECK(missing == "cannot read password_file " + kDir + "no-such.pass: No such file or directory");
  member.password_file = kDir;
  const std::string directory = PasswordError(member);
  CHECK(directory == "cannot read password_file " + kDir + ": Is a directory");

  member.password_file.reset();
  member.password_env = "SBD_CONFIG_TEST_UNSET";
  unsetenv("SBD_CONFIG_TEST_UNSET");
  const std::string unset = PasswordError(member);
  for (const std::string& error : {missing, directory, unset}) {
    CHECK(error.find("secret") == std::string::npos);
  }
}

TEST_CASE("config: alertmanager_silences reads alerting's Alertmanagers unless given its own",
          "[config]") {
  const std::string clusters =
      "clusters:\n  - name: orders\n    members:\n      - name: pg1\n        dsn: host=h\n";
  const std::string alerting =
      "alerting:\n  alertmanagers:\n    - url: http://am1:9093\n    - url: http://am2:9093/\n"
      "  external_labels:\n    env: prod\n";
  SECTION("absent: off") {
    const auto spec =
        Valid(sbd::ParseConfig(alerting + clusters, "c.yml")).suppressions().alertmanager_silences;
    CHECK_FALSE(spec.enabled);
  }
  SECTION("the block alone: on, from alerting.alertmanagers, with the defaults") {
    const auto spec =
        Valid(sbd::ParseConfig(alerting + "suppressions:\n  alertmanager_silences: {}\n" + clusters,
                               "c.yml"))
            .suppressions()
            .alertmanager_silences;
    CHECK(spec.enabled);
    CHECK(spec.alertmanager_urls == std::vector<std::string>{"http://am1:9093", "http://am2:9093"});
    CHECK(spec.refresh_interval == Millis(5000));
    CHECK(spec.timeout == Millis(2000));
    REQUIRE(spec.page_labels.size() == 1);
    CHECK(spec.page_labels[0] == std::map<std::string, std::string>{{"alertname", "SplitBrain"},
                                                                    {"severity", "critical"},
                                                                    {"cluster", "orders"},
                                                                    {"env", "prod"}});
  }
  SECTION("its own Alertmanagers and timings; enabled: false keeps them but reads nothing") {
    const std::string text = alerting +
                             "suppressions:\n  alertmanager_silences:\n    enabled: false\n"
                             "    refresh_interval: 10s\n    timeout: 1s\n"
                             "    alertmanagers:\n      - url: https://u:p@am3:9093\n" +
                             clusters;
    const auto spec = Valid(sbd::ParseConfig(text, "c.yml")).suppressions().alertmanager_silences;
    CHECK_FALSE(spec.enabled);
    CHECK(spec.alertmanager_urls == std::vector<std::string>{"https://u:p@am3:9093"});
    CHECK(spec.refresh_interval == Millis(10000));
    CHECK(spec.timeout == Millis(1000));
  }
}

TEST_CASE("config: a kind's block on another kind, and an unknown kind, are reported in place",
          "[config]") {
  // Each kind reads its own block (detector/config/kinds/): another kind's block or key is an
  // error at that key, and an unknown kind names every kind of the table, while the blocks of
  // a cluster of unknown kind are still checked.
  const std::string yaml =
      "clusters:\n"
      "  - name: a\n"
      "    redis_lease: {address: 'r:6379', key: k}\n"
      "    members: [{name: m, dsn: 'host=h'}]\n"
      "  - name: b\n"
      "    kind: redis\n"
      "    redis: {master_name: mymaster, sentinels: ['s:26379']}\n"
      "    k8s_lease: {kubeconfig: /k}\n"
      "    scope: x\n"
      "    members: [{name: r, address: 'r:6379'}]\n"
      "  - name: c\n"
      "    kind: zookeeper\n"
      "    etcd_election: {endpoints: [nope], prefix: p}\n"
      "    members: [{name: m, dsn: 'host=h'}]\n";
  CHECK(ConfigErrorLines(sbd::ParseConfig(yaml, "kinds.yml")) ==
        std::vector<std::string>{
            "kinds.yml:3:5: clusters[0].redis_lease: only valid for kind: redis_lease",
            "kinds.yml:8:5: clusters[1].k8s_lease: only valid for kind: k8s_lease",
            "kinds.yml:9:5: clusters[1].scope: only valid for kind: patroni",
            "kinds.yml:12:11: clusters[2].kind: expected postgres, patroni, redis, redis_lease, "
            "k8s_lease, etcd_election, zookeeper_lock, pg_auto_failover or repmgr",
            "kinds.yml:13:33: clusters[2].etcd_election.endpoints[0]: expected an http:// or "
            "https:// URL"});
}
