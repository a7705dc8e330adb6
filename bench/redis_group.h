// The bench's Redis side: a replication group (a master and replicas, redis-server from Debian)
// under three redis-sentinel processes, on the tests' RedisSandbox; a small hiredis client; and
// an independent writer that records when two members first accept a write at once.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/redis_sandbox.h"

struct redisContext;

namespace sbd::bench {

/// One reply, flattened: a status or bulk string in `text`, an integer, the strings of an
/// array (nested arrays skipped), or an error (transport or server) in `error`.
struct RedisReply {
  bool ok = false;  ///< a reply came and it was not an error
  std::string text;
  long long integer = 0;
  std::vector<std::string> elements;
  std::string error;
};

/// A kept hiredis connection to 127.0.0.1:port with a timeout on connect and on every call;
/// reconnects on the next call after a transport error. Not thread-safe.
class RedisConn {
 public:
  RedisConn(int port, std::chrono::milliseconds timeout);
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;
  RedisReply Call(const std::vector<std::string>& args);

 private:
  int port_;
  std::chrono::milliseconds timeout_;
  redisContext* ctx_ = nullptr;
};

/// One command on a fresh connection (timeout 2 s).
RedisReply RedisCall(int port, const std::vector<std::string>& args);
/// "key value key value ..." replies (SENTINEL master, INFO lines) as a map.
std::map<std::string, std::string> PairsOf(const std::vector<std::string>& elements);
/// The "field:value" lines of an INFO reply.
std::map<std::string, std::string> InfoFields(const std::string& info);

/// A master, `replicas` replicas and three sentinels (quorum 2) monitoring it as
/// `master_name`, started with the integration tests' RedisSandbox. The constructor waits
/// (deadlines) until every replica's link is up and every sentinel sees the replicas and the
/// other sentinels, and throws otherwise. The destructor stops everything. Not thread-safe.
class RedisGroup {
 public:
  struct Process {
    std::string name;
    int port = 0;
    pid_t pid = -1;
  };

  RedisGroup(const std::string& master_name, int replicas, std::chrono::milliseconds down_after);
  ~RedisGroup();
  RedisGroup(const RedisGroup&) = delete;
  RedisGroup& operator=(const RedisGroup&) = delete;

  /// r1 (the first master), r2, ...
  const std::vector<Process>& members() const { return members_; }
  const std::vector<Process>& sentinels() const { return sentinels_; }
  const std::string& master_name() const { return master_name_; }
  /// "master" or "slave" from INFO replication; "" when it does not answer.
  std::string Role(const Process& p) const;
  /// The master every sentinel names, by member name; "" when they disagree or one is mute.
  std::string SentinelMaster() const;
  /// True when every member answers, exactly the sentinels' master is a master, every other
  /// member is its replica with the link up, and every sentinel agrees.
  bool Healthy() const;
  const Process& Member(const std::string& name) const;

 private:
  testing::RedisSandbox sandbox_;
  std::string master_name_;
  std::vector<Process> members_;
  std::vector<Process> sentinels_;
};

/// Writes to every member every 50 ms over kept connections (timeout 300 ms) and records the
/// first and the last round in which two or more of them accepted the write. Independent of
/// the detector's code.
class DualWriter {
 public:
  explicit DualWriter(const std::vector<int>& ports);
  ~DualWriter();
  DualWriter(const DualWriter&) = delete;
  DualWriter& operator=(const DualWriter&) = delete;
  std::optional<std::chrono::steady_clock::time_point> FirstBoth() const;
  std::optional<std::chrono::steady_clock::time_point> LastBoth() const;
  /// Rounds since start in which at least two members accepted.
  long BothRounds() const;

 private:
  void Run();

  std::vector<int> ports_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::optional<std::chrono::steady_clock::time_point> first_, last_;
  long both_rounds_ = 0;
  std::thread thread_;
};

}  // namespace sbd::bench
