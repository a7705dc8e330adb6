// The k8s_lease parsers: the Lease object as the API server answers it (untrusted), its times,
// the Date header, the view the engine reads, and kubeconfig.
#include "probes/k8s_lease.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "detector/common/base64.h"

namespace {

using sbd::K8sLeaseObject;
using sbd::WallClock;

std::string Testdata(const std::string& name) {
  std::ifstream in(std::string(SBD_TESTDATA_DIR) + "/k8s/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

WallClock::time_point At(std::int64_t seconds, std::int64_t micros = 0) {
  return WallClock::time_point(std::chrono::seconds(seconds) + std::chrono::microseconds(micros));
}

K8sLeaseObject Parsed(const std::string& body, const std::string& name = "orders") {
  auto parsed = sbd::ParseK8sLease(body, name);
  if (auto* error = std::get_if<std::string>(&parsed)) FAIL("not parsed: " << *error);
  return std::get<K8sLeaseObject>(parsed);
}

std::string Error(const std::string& body) {
  auto parsed = sbd::ParseK8sLease(body, "orders");
  REQUIRE(std::holds_alternative<std::string>(parsed));
  return std::get<std::string>(parsed);
}

std::string Lease(const std::string& spec) {
  return R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"orders"},)"
         R"("spec":)" +
         spec + "}";
}

}  // namespace

TEST_CASE("k8s_lease: the documented Lease example parses with its holder and renew time",
          "[k8s]") {
  const K8sLeaseObject lease =
      Parsed(Testdata("lease.json"), "apiserver-07a5ea9b9b072c4a5f3d1c3702");
  CHECK(lease.holder_identity ==
        "apiserver-07a5ea9b9b072c4a5f3d1c3702_0c8914f7-0f35-440e-8676-7844977d3a05");
  CHECK(lease.lease_duration_seconds == std::optional<std::int64_t>(3600));
  // 2023-07-04T21:58:48.065888Z
  CHECK(lease.renew_time == At(1688507928, 65888));
  CHECK_FALSE(lease.lease_transitions.has_value());
  CHECK(lease.rejected.empty());
}

TEST_CASE("k8s_lease: renewTime is read as the API server writes MicroTime", "[k8s]") {
  const auto at = [](const std::string& time) {
    return Parsed(Lease(R"({"renewTime":")" + time + R"("})")).renew_time;
  };
  CHECK(at("2026-12-01T04:41:22.500000Z") == At(1796100082, 500000));
  CHECK(at("2026-12-01T06:41:22+02:00") == At(1796100082));
  for (const char* bad : {"", "2026-12-01", "yesterday", "2026-13-01T04:41:22Z"}) {
    CAPTURE(bad);
    CHECK_FALSE(at(bad).has_value());
  }
}

TEST_CASE("k8s_lease: the HTTP Date header in IMF-fixdate, nothing else", "[k8s]") {
  CHECK(sbd::ParseHttpDate("Tue, 01 Dec 2026 04:41:22 GMT") == At(1796100082));
  for (const char* bad : {"", "Tue, 01 Dec 2026 04:41:22 UTC", "Tue, 01 Foo 2026 04:41:22 GMT",
                          "Tuesday, 01-Dec-26 04:41:22 GMT", "Tue, 01 Dec 2026 04:41:22 GMTx"}) {
    CAPTURE(bad);
    CHECK_FALSE(sbd::ParseHttpDate(bad).has_value());
  }
}

TEST_CASE("k8s_lease: fields of a wrong type are each said in rejected, the rest still read",
          "[k8s]") {
  const K8sLeaseObject lease =
      Parsed(Lease(R"({"holderIdentity":7,"renewTime":"yesterday","leaseDurationSeconds":-5,)"
                   R"("leaseTransitions":3})"));
  CHECK(lease.holder_identity.empty());
  CHECK_FALSE(lease.renew_time.has_value());
  CHECK_FALSE(lease.lease_duration_seconds.has_value());
  CHECK(lease.lease_transitions == std::optional<std::int64_t>(3));
  REQUIRE(lease.rejected.size() == 3);
  CHECK(lease.rejected[0] == "spec.holderIdentity: not a string: the holder is unknown");
  CHECK(lease.rejected[1] == "spec.renewTime: not an RFC 3339 time: the time left is unknown");
  CHECK(lease.rejected[2] == "spec.leaseDurationSeconds: out of range 0..31622400");

  const K8sLeaseObject huge =
      Parsed(Lease(R"({"holderIdentity":")" + std::string(5000, 'h') +
                   R"(","leaseDurationSeconds":18446744073709551615,"leaseTransitions":1.5})"));
  CHECK(huge.holder_identity.empty());
  REQUIRE(huge.rejected.size() == 3);
  CHECK(huge.rejected[0] ==
        "spec.holderIdentity: 5000 bytes, too long to compare: the holder is unknown");
  CHECK(huge.rejected[1] == "spec.leaseDurationSeconds: out of range 0..31622400");
  CHECK(huge.rejected[2] == "spec.leaseTransitions: not an integer");
}

TEST_CASE("k8s_lease: an answer that is not this Lease is an error, never a view", "[k8s]") {
  CHECK(Error("") == "the answer is not JSON");
  CHECK(Error("{\"kind\":") == "the answer is not JSON");
  CHECK(Error("[]") == "the answer is not a JSON object");
  CHECK(Error(R"({"kind":"Status","metadata":{"name":"orders"},"spec":{}})") ==
        "the answer is not a Lease (kind Status)");
  CHECK(Error(R"({"kind":"Lease","metadata":{"name":"other"},"spec":{}})") ==
        "the answer is not Lease orders (metadata.name differs or is missing)");
  CHECK(Error(R"({"kind":"Lease","metadata":{"name":"orders"},"spec":[]})") ==
        "the Lease has no spec object");
  CHECK(Error(std::string(sbd::kMaxLeaseBodyBytes + 1, ' ')) ==
        "an answer of 262145 bytes, above the limit of 262144");
  // A free lease: no holder, no error.
  CHECK(Parsed(Lease("{}")).holder_identity.empty());
}

TEST_CASE("k8s_lease: a deeply nested answer is refused without walking it", "[k8s]") {
  // ~130,000 levels fit in the 256 KiB limit: printed recursively (as a wrong kind once was),
  // they overflowed the stack.
  const size_t levels = (sbd::kMaxLeaseBodyBytes - 64) / 2;
  const std::string deep = std::string(levels, '[') + std::string(levels, ']');
  CHECK(Error(R"({"kind":)" + deep + R"(,"metadata":{"name":"orders"},"spec":{}})") ==
        "the answer is nested deeper than 64 levels");
  CHECK(Error(R"({"kind":[[1]],"metadata":{"name":"orders"},"spec":{}})") ==
        "the answer is not a Lease (kind of JSON type array)");
}

TEST_CASE("k8s_lease: a renewTime whose lease end would wrap is rejected", "[k8s]") {
  const K8sLeaseObject lease =
      Parsed(Lease(R"({"holderIdentity":"a","renewTime":"2262-04-10T00:00:00.000000Z",)"
                   R"("leaseDurationSeconds":31622400})"));
  CHECK_FALSE(lease.renew_time);
  CHECK(lease.rejected == std::vector<std::string>{"spec.renewTime: too late to add the lease "
                                                   "duration to: the time left is unknown"});
  const sbd::LockRecord view = sbd::K8sLeaseAsView(lease, {}, WallClock::now());
  CHECK(view.lease_ttl_remaining == -1);
}

TEST_CASE("k8s_lease: the view names the member by identity, the epoch and the time left",
          "[k8s]") {
  sbd::MemberSpec a;
  a.name = "a";
  a.lease_identity = "pod-a";
  sbd::MemberSpec b;
  b.name = "b";
  b.lease_identity = "pod-b";
  const K8sLeaseObject lease =
      Parsed(Lease(R"({"holderIdentity":"pod-b","renewTime":"2026-12-01T04:41:22.000000Z",)"
                   R"("leaseDurationSeconds":15,"leaseTransitions":4})"));
  const sbd::LockRecord view = sbd::K8sLeaseAsView(lease, {a, b}, At(1796100082 + 10, 500000));
  CHECK(view.holder == "b");
  CHECK(view.holder_token == "pod-b");
  CHECK(view.mod_revision == 4);
  CHECK(view.lease_granted_ttl == 15);
  CHECK(view.lease_ttl_remaining == 5);  // 4.5 s rounded up
  // Expired: the time left is unknown (-1); the holder stays named.
  const sbd::LockRecord expired = sbd::K8sLeaseAsView(lease, {a, b}, At(1796100082 + 16));
  CHECK(expired.lease_ttl_remaining == -1);
  CHECK(expired.holder == "b");
  // A holder no member is: the token alone, for the engine to match against claims.
  const sbd::LockRecord stranger = sbd::K8sLeaseAsView(lease, {a}, At(1796100082));
  CHECK(stranger.holder.empty());
  CHECK(stranger.holder_token == "pod-b");
}

TEST_CASE("k8s_lease: kubeconfig gives the current context's server, CA and token", "[k8s]") {
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  const std::string text =
      "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
      "clusters:\n"
      "  - name: dev\n    cluster: {server: https://dev:6443, certificate-authority: dev.crt}\n"
      "  - name: prod\n    cluster:\n      server: https://10.0.0.1:6443\n"
      "      certificate-authority-data: " +
      sbd::Base64Encode(pem) +
      "\ncontexts:\n  - name: prod\n    context: {cluster: prod, user: bot}\n"
      "users:\n  - name: bot\n    user: {token: s3cr3t}\n";
  auto parsed = sbd::ParseKubeconfig(text, "/etc/kube");
  REQUIRE(std::holds_alternative<sbd::K8sApiAccess>(parsed));
  const auto& access = std::get<sbd::K8sApiAccess>(parsed);
  CHECK(access.server == "https://10.0.0.1:6443");
  CHECK(access.ca_pem == pem);
  CHECK(access.ca_file.empty());
  CHECK(access.token == "s3cr3t");

  const std::string relative =
      "current-context: dev\nclusters:\n  - name: dev\n    cluster: {server: https://dev:6443, "
      "certificate-authority: dev.crt}\ncontexts:\n  - name: dev\n    context: {cluster: dev, "
      "user: me}\nusers:\n  - name: me\n    user: {tokenFile: tok}\n";
  auto dev = sbd::ParseKubeconfig(relative, "/etc/kube");
  REQUIRE(std::holds_alternative<sbd::K8sApiAccess>(dev));
  CHECK(std::get<sbd::K8sApiAccess>(dev).ca_file == "/etc/kube/dev.crt");
  CHECK(std::get<sbd::K8sApiAccess>(dev).token_file == "/etc/kube/tok");

  auto error = [](const std::string& bad) {
    auto result = sbd::ParseKubeconfig(bad, "");
    REQUIRE(std::holds_alternative<std::string>(result));
    return std::get<std::string>(result);
  };
  CHECK(error("[") == "not YAML (line 1)");
  CHECK(error("- a") == "not a kubeconfig (no mapping)");
  CHECK(error("kind: Config") == "no current-context");
  CHECK(error("current-context: x") == "the current context is not in contexts");
  // A secret in a broken file is never echoed.
  const std::string insecure = relative;
  std::string http = insecure;
  http.replace(http.find("https://dev"), 8, "http://");
  CHECK(error(http) == "the current context's cluster has no https:// server");
  std::string no_user = relative;
  no_user.replace(no_user.find("tokenFile: tok"), 14, "username: x");
  CHECK(error(no_user) == "the current context's user has no token or tokenFile");
}
