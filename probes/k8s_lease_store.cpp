// The k8s_lease store's side that talks: kubeconfig, credentials, and the HTTPS GET.
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

// Whether a PEM bundle holds at least one certificate (the CA data of a kubeconfig).
bool HoldsCertificate(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return false;
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  const bool found = cert != nullptr;
  X509_free(cert);
  BIO_free(bio);
  return found;
}

ProbeFailure Failure(ProbeFailureReason reason, const std::string& message) {
  return ProbeFailure{reason, message};
}

}  // namespace

/// What a read needs, shared with the requests in flight. Loop thread only (the client is
/// made and closed there).
struct K8sLeaseStore::Session {
  K8sLeaseSpec spec;
  std::vector<MemberSpec> members;
  std::unique_ptr<LoopHttpClient> client;

  std::variant<K8sApiAccess, ProbeFailure> Access() const;
  std::variant<LockRecord, ProbeFailure> Answered(HttpResult result, const std::string& server,
                                                  const std::string& path) const;
};

K8sLeaseStore::K8sLeaseStore(const ClusterSpec& spec, EventLoop& loop)
    : loop_(loop), session_(std::make_shared<Session>()) {
  session_->spec = spec.k8s_lease;
  session_->members = spec.members;
}

K8sLeaseStore::~K8sLeaseStore() {
  // The client's handles belong to the loop: close them there (dropping what is in flight).
  loop_.Post([session = std::move(session_)] { session->client.reset(); });
}

std::variant<K8sApiAccess, ProbeFailure> K8sLeaseStore::Session::Access() const {
  K8sApiAccess access;
  if (!spec.kubeconfig.empty()) {
    const std::optional<std::string> text = ReadSmallFile(spec.kubeconfig);
    if (!text) return Failure(ProbeFailureReason::kConfig, "kubeconfig unreadable");
    const size_t slash = spec.kubeconfig.rfind('/');
    auto parsed =
        ParseKubeconfig(*text, slash == std::string::npos ? "" : spec.kubeconfig.substr(0, slash));
    if (auto* error = std::get_if<std::string>(&parsed)) {
      return Failure(ProbeFailureReason::kConfig, "kubeconfig: " + *error);
    }
    access = std::get<K8sApiAccess>(std::move(parsed));
  } else {
    access.server = spec.api_server;
    access.ca_file = spec.ca_file;
    access.token_file = spec.token_file;
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

// A failure of the GET said as the Lease's: the client's own naming of the request (its path)
// dropped, a certificate that does not verify said as a refusal.
ProbeFailure SendFailure(ProbeFailure failure, const std::string& path, const std::string& lease) {
  const std::string request = "GET " + path + ": ";
  if (failure.message.rfind(request, 0) == 0) failure.message.erase(0, request.size());
  const std::string what = "GET Lease " + lease + ": ";
  if (failure.reason == ProbeFailureReason::kAuth) {
    failure.message = what +
                      "refused: the API server's certificate does not verify against the "
                      "configured CA (or names another host): " +
                      failure.message;
  } else {
    failure.message = what + failure.message;
  }
  return failure;
}

}  // namespace

std::variant<LockRecord, ProbeFailure> K8sLeaseStore::Session::Answered(
    HttpResult result, const std::string& server, const std::string& path) const {
  const std::string lease = spec.lease_namespace + "/" + spec.lease;
  if (auto* failure = std::get_if<ProbeFailure>(&result)) {
    return SendFailure(std::move(*failure), path, lease);
  }
  const HttpAnswer& answer = std::get<HttpAnswer>(result);
  if (answer.status != 200) return StatusFailure(static_cast<int>(answer.status), lease);
  auto parsed = ParseK8sLease(answer.body, spec.lease);
  if (auto* error = std::get_if<std::string>(&parsed)) {
    return Failure(ProbeFailureReason::kProtocol, "Lease " + lease + ": " + *error);
  }
  // The API server's clock, so that skew between it and the detector does not move the time
  // left; the detector's own only when the answer has no usable Date.
  const WallClock::time_point now = ParseHttpDate(answer.date).value_or(WallClock::now());
  LockRecord view = K8sLeaseAsView(std::get<K8sLeaseObject>(parsed), members, now);
  view.endpoint = server;
  return view;
}

void K8sLeaseStore::Start(SteadyClock::time_point deadline, Done done) {
  Session* session = session_.get();
  const K8sLeaseSpec& spec = session->spec;
  auto access = session->Access();  // a few small files: the token may have been rotated
  if (auto* failure = std::get_if<ProbeFailure>(&access)) {
    // Posted, as an answer over the network would be: never from inside Start().
    return loop_.Post([done = std::move(done), failure = *failure] { done(failure); });
  }
  const K8sApiAccess& api = std::get<K8sApiAccess>(access);
  if (api.ca_file.empty() && !HoldsCertificate(api.ca_pem)) {
    return loop_.Post([done = std::move(done)] {
      done(Failure(ProbeFailureReason::kConfig, "the CA data holds no PEM certificate"));
    });
  }
  const std::string path =
      "/apis/coordination.k8s.io/v1/namespaces/" + spec.lease_namespace + "/leases/" + spec.lease;
  HttpRequest request;
  request.url = api.server + path;
  request.headers = {"Accept: application/json"};
  request.bounds.max_body_bytes = kMaxLeaseBodyBytes;
  request.credentials.ca_file = api.ca_file;
  request.credentials.ca_pem = api.ca_pem;
  request.credentials.bearer_token = api.token;
  if (!session->client) session->client = std::make_unique<LoopHttpClient>(loop_);
  // `session` outlives the callback: the client that holds it is the session's.
  session->client->Start(
      request, deadline,
      [session, server = api.server, path, done = std::move(done)](HttpResult result) {
        done(session->Answered(std::move(result), server, path));
      });
}

}  // namespace sbd
