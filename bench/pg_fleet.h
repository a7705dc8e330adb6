// The PostgreSQL side of the benchmarks: a real primary and its streaming replica, and
// pgbouncer in front of them so that thousands of member endpoints cost a few server
// connections (parts scale and frozen-rest).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd::bench {

/// A child process that dies with the bench (and runs as postgres when asked).
testing::BackgroundOptions DieWithParent(bool as_postgres);

/// A PostgreSQL 15 primary and its streaming replica, in one sandbox.
struct PgPair {
  testing::PgSandbox sandbox;
  testing::PgInstance* primary = nullptr;
  testing::PgInstance* replica = nullptr;
  PgPair();
};

/// pgbouncer in transaction pooling mode in front of the two real servers: every client
/// connection is one member endpoint, multiplexed onto a few server connections per alias.
class Bouncer {
 public:
  /// `aliases`: database name -> the PostgreSQL port it stands for. `auth`: pgbouncer's
  /// auth_type towards the detector. Waits until the monitor user can log in; throws with the
  /// log's tail when it cannot.
  Bouncer(const std::string& dir, const std::map<std::string, int>& aliases,
          const std::string& auth);
  ~Bouncer();
  Bouncer(const Bouncer&) = delete;
  Bouncer& operator=(const Bouncer&) = delete;
  /// The monitor user's DSN of one alias (no password: the member's password_file has it).
  std::string Dsn(const std::string& alias) const;
  pid_t pid() const { return pid_; }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
  std::string log_;
};

}  // namespace sbd::bench
