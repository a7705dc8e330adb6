// The k8s_lease store's side that talks: kubeconfig, credentials, and the HTTPS GET.
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "detector/common/base64.h"
#include "probes/k8s_lease.h"

namespace sbd {

namespace {

// A missing key gives an invalid node, whose type may not be asked: IsDefined() first.
std::string ScalarOf(const YAML::Node& map, const char* key) {
  if (!map.IsDefined() || !map.IsMap()) return "";
  const YAML::Node value = map[key];
  return value.IsDefined() && value.IsScalar() ? value.Scalar() : "";
}

// The first entry of `list` (clusters, users, contexts) named `name`, its `field` mapping.
YAML::Node Named(const YAML::Node& root, const char* list, const std::string& name,
                 const char* field) {
  const YAML::Node entries = root[list];
  if (!entries.IsDefined() || !entries.IsSequence()) return YAML::Node();
  for (const YAML::Node& entry : entries) {
    if (!entry.IsMap()) continue;
    const YAML::Node value = entry[field];
    if (ScalarOf(entry, "name") == name && value.IsDefined() && value.IsMap()) return value;
  }
  return YAML::Node();
}

std::string Relative(const std::string& path, const std::string& dir) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return dir + "/" + path;
}

std::variant<K8sApiAccess, std::string> KubeconfigOf(const YAML::Node& root,
                                                     const std::string& dir) {
  if (!root.IsDefined() || !root.IsMap()) return std::string("not a kubeconfig (no mapping)");
  const std::string current = ScalarOf(root, "current-context");
  if (current.empty()) return std::string("no current-context");
  const YAML::Node context = Named(root, "contexts", current, "context");
  if (!context.IsDefined() || context.IsNull()) {
    return std::string("the current context is not in contexts");
  }
  const YAML::Node cluster = Named(root, "clusters", ScalarOf(context, "cluster"), "cluster");
  if (!cluster.IsDefined() || cluster.IsNull())
    return std::string("the current context's cluster is not in clusters");
  K8sApiAccess access;
  access.server = ScalarOf(cluster, "server");
  if (access.server.rfind("https://", 0) != 0) {
    return std::string("the current context's cluster has no https:// server");
  }
  access.ca_file = Relative(ScalarOf(cluster, "certificate-authority"), dir);
  if (const std::string data = ScalarOf(cluster, "certificate-authority-data"); !data.empty()) {
    std::optional<std::string> pem = Base64Decode(data);
    if (!pem) return std::string("certificate-authority-data is not base64");
    access.ca_pem = std::move(*pem);
    access.ca_file.clear();
  }
  if (access.ca_file.empty() && access.ca_pem.empty()) {
    return std::string("the current context's cluster names no certificate authority");
  }
  const YAML::Node user = Named(root, "users", ScalarOf(context, "user"), "user");
  if (user.IsDefined() && user.IsMap()) {
    access.token = ScalarOf(user, "token");
    access.token_file = Relative(ScalarOf(user, "tokenFile"), dir);
  }
  if (access.token.empty() && access.token_file.empty()) {
    return std::string("the current context's user has no token or tokenFile");
  }
  return access;
}

}  // namespace

std::variant<K8sApiAccess, std::string> ParseKubeconfig(const std::string& text,
                                                        const std::string& dir) {
  try {
    return KubeconfigOf(YAML::Load(text), dir);
  } catch (const YAML::Exception& e) {
    // The message could quote the file (and a token in it): only the line is said.
    return "not YAML (line " + std::to_string(e.mark.line + 1) + ")";
  }
}

namespace {

constexpr size_t kMaxCredentialFileBytes = 1 << 20;

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxCredentialFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxCredentialFileBytes) return std::nullopt;
  return text;
}

// A token as a header value: trailing whitespace dropped; empty when it holds bytes a header
// may not carry (it is never shown, so only the fact is said).
std::string HeaderToken(std::string token) {
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  for (const char c : token) {
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) return "";
  }
  return token;
}

// A PEM bundle as a certificate store httplib takes over; null when it holds no certificate.
X509_STORE* StoreOf(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return nullptr;
  X509_STORE* store = X509_STORE_new();
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    added += X509_STORE_add_cert(store, cert) == 1 ? 1 : 0;
    X509_free(cert);
  }
  BIO_free(bio);
  if (added == 0) {
    X509_STORE_free(store);
    return nullptr;
  }
  return store;
}

ProbeFailure Failure(ProbeFailureReason reason, const std::string& message) {
  return ProbeFailure{reason, message};
}

}  // namespace

K8sLeaseStore::K8sLeaseStore(const ClusterSpec& spec)
    : spec_(spec.k8s_lease), members_(spec.members) {}

std::variant<K8sApiAccess, ProbeFailure> K8sLeaseStore::Access() const {
  K8sApiAccess access;
  if (!spec_.kubeconfig.empty()) {
    const std::optional<std::string> text = ReadSmallFile(spec_.kubeconfig);
    if (!text) return Failure(ProbeFailureReason::kConfig, "kubeconfig unreadable");
    const size_t slash = spec_.kubeconfig.rfind('/');
    auto parsed =
        ParseKubeconfig(*text, slash == std::string::npos ? "" : spec_.kubeconfig.substr(0, slash));
    if (auto* error = std::get_if<std::string>(&parsed)) {
      return Failure(ProbeFailureReason::kConfig, "kubeconfig: " + *error);
    }
    access = std::get<K8sApiAccess>(std::move(parsed));
  } else {
    access.server = spec_.api_server;
    access.ca_file = spec_.ca_file;
    access.token_file = spec_.token_file;
  }
  if (access.token.empty()) {
    const std::optional<std::string> token = ReadSmallFile(access.token_file);
    if (!token) return Failure(ProbeFailureReason::kConfig, "token file unreadable");
    access.token = *token;
  }
  access.token = HeaderToken(std::move(access.token));
  if (access.token.empty()) {
    return Failure(ProbeFailureReason::kConfig,
                   "the token is empty or holds bytes a header cannot carry");
  }
  return access;
}

namespace {

ProbeFailure StatusFailure(int status, const std::string& lease) {
  const std::string what = "GET Lease " + lease + ": HTTP " + std::to_string(status);
  if (status == 401) {
    return Failure(ProbeFailureReason::kAuth, what + ": the token was not accepted");
  }
  if (status == 403) {
    return Failure(ProbeFailureReason::kAuth, what + ": the token may not get this Lease");
  }
  if (status == 404) return Failure(ProbeFailureReason::kQuery, what + ": no such Lease");
  return Failure(ProbeFailureReason::kProtocol, what);
}

ProbeFailure SendFailure(httplib::Error error, const std::string& lease,
                         SteadyClock::time_point deadline) {
  const std::string what = "GET Lease " + lease + ": ";
  if (error == httplib::Error::SSLServerVerification) {
    return Failure(ProbeFailureReason::kAuth,
                   what +
                       "refused: the API server's certificate does not verify against the "
                       "configured CA (or names another host)");
  }
  if (error == httplib::Error::SSLConnection) {
    return Failure(ProbeFailureReason::kProtocol, what + "the TLS handshake failed");
  }
  if (SteadyClock::now() >= deadline || error == httplib::Error::Read ||
      error == httplib::Error::ConnectionTimeout) {
    return Failure(ProbeFailureReason::kTimeout, what + httplib::to_string(error));
  }
  if (error == httplib::Error::Connection) {
    return Failure(ProbeFailureReason::kRefused, what + httplib::to_string(error));
  }
  return Failure(ProbeFailureReason::kInternal, what + httplib::to_string(error));
}

struct LeaseAnswer {
  std::string body;
  std::string date;
};

std::variant<LeaseAnswer, ProbeFailure> Get(const K8sApiAccess& access, const std::string& path,
                                            const std::string& lease,
                                            SteadyClock::time_point deadline) {
  httplib::Client client(access.server);
  const auto remaining = deadline - SteadyClock::now();
  client.set_connection_timeout(remaining);
  client.set_read_timeout(remaining);
  client.set_write_timeout(remaining);
  client.set_keep_alive(false);
  client.enable_server_certificate_verification(true);
  if (!access.ca_pem.empty()) {
    X509_STORE* store = StoreOf(access.ca_pem);
    if (store == nullptr) {
      return Failure(ProbeFailureReason::kConfig, "the CA data holds no PEM certificate");
    }
    client.set_ca_cert_store(store);  // httplib owns it from here
  } else {
    client.set_ca_cert_path(access.ca_file);
  }
  LeaseAnswer answer;
  bool too_big = false;
  httplib::Headers headers = {{"Authorization", "Bearer " + access.token},
                              {"Accept", "application/json"}};
  httplib::Result result = client.Get(path.c_str(), headers, [&](const char* data, size_t length) {
    if (answer.body.size() + length > kMaxLeaseBodyBytes || SteadyClock::now() >= deadline) {
      too_big = answer.body.size() + length > kMaxLeaseBodyBytes;
      return false;
    }
    answer.body.append(data, length);
    return true;
  });
  if (too_big) {
    return Failure(ProbeFailureReason::kProtocol, "GET Lease " + lease + ": answer larger than " +
                                                      std::to_string(kMaxLeaseBodyBytes) +
                                                      " bytes");
  }
  if (!result) return SendFailure(result.error(), lease, deadline);
  if (result->status != 200) return StatusFailure(result->status, lease);
  answer.date = result->get_header_value("Date");
  return answer;
}

}  // namespace

std::variant<DcsView, ProbeFailure> K8sLeaseStore::Read(SteadyClock::time_point deadline) {
  const std::string lease = spec_.lease_namespace + "/" + spec_.lease;
  if (deadline - SteadyClock::now() <= SteadyClock::duration::zero()) {
    return Failure(ProbeFailureReason::kTimeout, "GET Lease " + lease + ": no time left");
  }
  auto access = Access();
  if (auto* failure = std::get_if<ProbeFailure>(&access)) return *failure;
  const K8sApiAccess& api = std::get<K8sApiAccess>(access);
  const std::string path =
      "/apis/coordination.k8s.io/v1/namespaces/" + spec_.lease_namespace + "/leases/" + spec_.lease;
  std::variant<LeaseAnswer, ProbeFailure> answer;
  try {
    answer = Get(api, path, lease, deadline);
  } catch (const std::exception&) {
    // httplib throws on a URL it cannot use; the message could echo it, so it is not shown.
    return Failure(ProbeFailureReason::kConfig, "GET Lease " + lease + ": unusable server URL");
  }
  if (auto* failure = std::get_if<ProbeFailure>(&answer)) return *failure;
  const LeaseAnswer& got = std::get<LeaseAnswer>(answer);
  auto parsed = ParseK8sLease(got.body, spec_.lease);
  if (auto* error = std::get_if<std::string>(&parsed)) {
    return Failure(ProbeFailureReason::kProtocol, "Lease " + lease + ": " + *error);
  }
  // The API server's clock, so that skew between it and the detector does not move the time
  // left; the detector's own only when the answer has no usable Date.
  const WallClock::time_point now = ParseHttpDate(got.date).value_or(WallClock::now());
  DcsView view = K8sLeaseAsView(std::get<K8sLeaseObject>(parsed), members_, now);
  view.endpoint = api.server;
  return view;
}

}  // namespace sbd
