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

}  // namespace sbd::testing
