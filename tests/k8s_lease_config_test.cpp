// The k8s_lease block of the config: the API server or a kubeconfig, the Lease, the claim.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "detector/config/config.h"
#include "tests/support/config_errors.h"

namespace {

sbd::ConfigResult Parse(const std::string& block) {
  return sbd::ParseConfig(
      "clusters:\n  - name: orders\n    kind: k8s_lease\n" + block +
          "    members:\n      - name: a\n        metrics_url: http://127.0.0.1:9101/metrics\n"
          "        identity: pod-a\n",
      "k8s.yml");
}

using sbd::testing::ConfigErrorLines;

}  // namespace

TEST_CASE("config: a k8s_lease cluster reads its API server, Lease and client-go's claim",
          "[config][k8s]") {
  const auto result = Parse("    k8s_lease:\n      api_server: https://10.0.0.1:6443/\n");
  INFO(ConfigErrorLines(result).size());
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(result));
  const sbd::ClusterSpec& c = std::get<sbd::ValidatedConfig>(result).clusters().at(0);
  CHECK(c.kind == "k8s_lease");
  CHECK(c.k8s_lease.api_server == "https://10.0.0.1:6443");
  CHECK(c.k8s_lease.lease_namespace == "default");
  CHECK(c.k8s_lease.lease == "orders");
  CHECK(c.k8s_lease.token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token");
  CHECK(c.k8s_lease.ca_file == "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
  CHECK(c.k8s_lease.claim_metric == "leader_election_master_status");
  CHECK(c.k8s_lease.lock_label == "name");
  CHECK(c.k8s_lease.lock == "orders");
  CHECK(c.k8s_lease.token_label.empty());
  CHECK(c.members.at(0).lease_identity == "pod-a");

  const auto named = Parse(
      "    k8s_lease:\n      kubeconfig: /etc/kube/config\n      namespace: jobs\n"
      "      lease: orders-leader\n");
  REQUIRE(std::holds_alternative<sbd::ValidatedConfig>(named));
  const sbd::ClusterSpec& k = std::get<sbd::ValidatedConfig>(named).clusters().at(0);
  CHECK(k.k8s_lease.kubeconfig == "/etc/kube/config");
  CHECK(k.k8s_lease.api_server.empty());
  CHECK(k.k8s_lease.lease_namespace == "jobs");
  CHECK(k.k8s_lease.lock == "orders-leader");  // the claim names the Lease by default
}

TEST_CASE("config: a k8s_lease block reports each mistake at its key", "[config][k8s]") {
  CHECK(ConfigErrorLines(Parse("")) ==
        std::vector<std::string>{"k8s.yml:2:5: clusters[0].k8s_lease: required"});
  CHECK(ConfigErrorLines(Parse("    k8s_lease:\n      namespace: x\n")) ==
        std::vector<std::string>{
            "k8s.yml:5:7: clusters[0].k8s_lease.api_server: required (or kubeconfig)"});
  CHECK(ConfigErrorLines(Parse("    k8s_lease:\n      api_server: http://10.0.0.1\n")) ==
        std::vector<std::string>{
            "k8s.yml:5:19: clusters[0].k8s_lease.api_server: expected an https:// URL"});
  CHECK(ConfigErrorLines(Parse("    k8s_lease:\n      kubeconfig: /k\n      token_file: /t\n")) ==
        std::vector<std::string>{"k8s.yml:6:7: clusters[0].k8s_lease.token_file: not valid "
                                 "with kubeconfig (it names its own)"});
}
