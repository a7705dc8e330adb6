// The ZooKeeper stores' shared core (issue 27): one single-threaded C client session per
// cluster, driven by the event loop (zookeeper_interest -> SocketWatch/LoopTimer ->
// zookeeper_process), one read at a time bounded by its deadline, digest auth, session expiry
// and reconnection, and the watch handle the scheduler holds. The zookeeper_lock store and the
// Patroni-on-ZooKeeper scope store derive from it and say only what they read and watch.
#pragma once

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "detector/config/config.h"
#include "probes/async_probe.h"
#include "probes/event_loop.h"
#include "probes/lock_watch.h"
#include "probes/probe.h"

namespace sbd {

/// The failure reason of a ZooKeeper return code. Pure; thread-safe.
ProbeFailureReason ZooKeeperReason(int rc);
/// The C client's host list ("h1:p1,h2:p2"). Pure; thread-safe.
std::string ZooKeeperHostList(const std::vector<std::string>& hosts);

/// What a store's watch and the loop share: the callback (cleared when the watch goes, under
/// `mu`, so that it is never called after) and the counters. Thread-safe.
struct ZooKeeperWatchState {
  std::mutex mu;
  LockWatch::Changed on_change;  // guarded by mu
  std::atomic<bool> up{false};
  std::atomic<std::uint64_t> breaks{0};
  std::atomic<std::uint64_t> changes{0};
  void Fire();
  void Down();
};

/// The scheduler's handle on a ZooKeeper watch: its counters, and no callback after it goes.
std::unique_ptr<LockWatch> MakeZooKeeperWatch(std::shared_ptr<ZooKeeperWatchState> state);

/// One cluster's ZooKeeper session and its reads. Constructed and destroyed anywhere, used only
/// on the loop thread (posted tasks and its own callbacks). Derived stores send a read's
/// requests (SendRead) and set their watches (ArmWatch); this class owns everything else.
class ZooKeeperSession : public std::enable_shared_from_this<ZooKeeperSession> {
 public:
  using Result = std::variant<LockRecord, ProbeFailure>;
  using Done = AsyncLockStore::Done;

  /// `spec` gives the ensemble, the session timeout and the digest login.
  ZooKeeperSession(EventLoop& loop, ZooKeeperLockSpec spec) : loop_(loop), spec_(std::move(spec)) {}
  virtual ~ZooKeeperSession();
  ZooKeeperSession(const ZooKeeperSession&) = delete;
  ZooKeeperSession& operator=(const ZooKeeperSession&) = delete;

  /// Starts a read; `done` runs on the loop thread, from a posted task, by `deadline`.
  void StartRead(SteadyClock::time_point deadline, Done done);
  /// Keeps the store's watches set on this session and each new one, firing `state`.
  void StartWatch(std::shared_ptr<ZooKeeperWatchState> state);
  /// Closes the session; a read in flight fails.
  void Close();

 protected:
  /// A request's completion context: the read it belongs to (which may be gone) and what it
  /// asked for.
  struct Request {
    std::weak_ptr<ZooKeeperSession> session;
    std::uint64_t read_id;
    std::string name;
  };

  /// Connected, with a read pending: sends its requests (NewRequest per request).
  virtual void SendRead() = 0;
  /// Connected, with watch_state_ set and watch_armed_ false: sets the watches (OnWatchEvent
  /// as their watcher, this as its context) and sets watch_armed_.
  virtual void ArmWatch() = 0;

  /// A completion context for the current read; freed by Owner() in the completion.
  const void* NewRequest(std::string name = {});
  /// Frees a NewRequest() whose call was refused (no completion will run).
  static void Forget(const void* request) { delete static_cast<const Request*>(request); }
  /// The store whose current read a completion belongs to, kept alive in `hold`; nullptr when
  /// the store or that read is gone. Frees the context. `name`: what the request asked for.
  template <typename Store>
  static Store* Owner(const void* data, std::shared_ptr<Store>& hold, std::string* name = nullptr) {
    std::unique_ptr<const Request> request(static_cast<const Request*>(data));
    std::shared_ptr<ZooKeeperSession> session = request->session.lock();
    if (!session || !session->read_ || session->read_->id != request->read_id) return nullptr;
    if (name != nullptr) *name = request->name;
    hold = std::static_pointer_cast<Store>(session);
    return hold.get();
  }
  /// The watcher of every store watch: fires the watch and sets the watches again.
  static void OnWatchEvent(zhandle_t*, int type, int state, const char*, void* context);

  void Fail(ProbeFailureReason reason, const std::string& message);
  void Finish(Result result);
  bool reading() const { return read_.has_value(); }

  EventLoop& loop_;
  const ZooKeeperLockSpec spec_;
  zhandle_t* zh_ = nullptr;
  bool connected_ = false;
  std::shared_ptr<ZooKeeperWatchState> watch_state_;
  bool watch_armed_ = false;  // the store's watches are set on this session
  bool new_session_ = true;   // no read sent on this handle yet

 private:
  struct PendingRead {
    std::uint64_t id = 0;
    Done done;
    bool sent = false;
  };

  std::optional<ProbeFailure> EnsureHandle();
  void Send();
  void Pump();
  void Process(int events);
  void OnSocket();
  static void OnSessionEvent(zhandle_t*, int type, int state, const char*, void* context);
  void SessionEvent(int state);

  std::string session_problem_;  // why there is no session now, for the failure's message
  std::unique_ptr<SocketWatch> watch_;
  int watched_fd_ = -1;
  int watched_state_ = 0;
  std::unique_ptr<LoopTimer> process_timer_;
  std::unique_ptr<LoopTimer> deadline_timer_;
  std::optional<PendingRead> read_;
  std::uint64_t next_read_id_ = 1;
};

}  // namespace sbd
