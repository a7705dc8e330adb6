// etcd elections for tests (issue 13): candidate processes (tests/support/etcd_candidate.cpp)
// campaigning on a real etcd 3.4 (EtcdServer, patroni_sandbox.h), each on a free loopback port.
#pragma once

#include <sys/types.h>

#include <string>

namespace sbd::testing {

/// One candidate process campaigning under `prefix` on the gateway at `endpoint`: a key with
/// its lease, elected at the lowest create revision (its token), the lease kept alive every
/// `renew_ms` of its own running time (so a freeze goes unnoticed until then),
/// `leader_election_master_status{name=<lock>,token=<revision>}` on its metrics port. Stopped
/// (SIGTERM, revoking) by the destructor. Throws std::runtime_error when it does not start.
class EtcdCandidate {
 public:
  struct Options {
    std::string endpoint;
    std::string prefix = "/election/orders";
    std::string lock = "orders";
    std::string value;  ///< the key's value, also the log file's name
    long ttl_s = 3;
    long renew_ms = 1000;
    int storage_port = 0;  ///< a TokenStorage to write to while holding; 0 for none
  };
  EtcdCandidate(const std::string& binary, const Options& options, const std::string& log_dir);
  ~EtcdCandidate();
  EtcdCandidate(const EtcdCandidate&) = delete;
  EtcdCandidate& operator=(const EtcdCandidate&) = delete;

  std::string metrics_url() const { return "http://127.0.0.1:" + std::to_string(metrics_port_); }
  pid_t pid() const { return pid_; }
  void Freeze() const;  ///< SIGSTOP
  void Resume() const;  ///< SIGCONT
  void Resign() const;  ///< SIGUSR1: stop claiming, revoke the lease, campaign again
  /// Its /metrics text, or "" when it does not answer within 500 ms.
  std::string Metrics() const;
  /// Its `etcd_candidate_renewals_total`, or -1 when unreadable.
  long Renewals() const;
  /// The token (create revision) it claims with, or "" when it does not claim.
  std::string ClaimedToken() const;
  const std::string& log_file() const { return log_file_; }

 private:
  Options options_;
  std::string log_file_;
  int metrics_port_ = 0;
  pid_t pid_ = -1;
};

/// The protected resource (tests/support/token_storage.cpp): takes writes with a token,
/// rejecting lower ones unless `check` is false, and reports the stored token as
/// fencing_token_highest_accepted{name=<lock>} on http://127.0.0.1:<port>/metrics.
class TokenStorage {
 public:
  TokenStorage(const std::string& binary, const std::string& lock, bool check,
               const std::string& log_dir);
  ~TokenStorage();
  TokenStorage(const TokenStorage&) = delete;
  TokenStorage& operator=(const TokenStorage&) = delete;

  int port() const { return port_; }
  std::string metrics_url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/metrics";
  }
  /// The value of a counter or gauge line starting with `series` on /metrics; -1 if none.
  long long Value(const std::string& series) const;

 private:
  std::string log_file_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace sbd::testing
