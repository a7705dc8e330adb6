// The ZooKeeper stores' shared session: the handle, its socket and timer on the loop, the read's
// deadline and the session's events. See zookeeper_session.h.
#include "probes/zookeeper_session.h"

#include <poll.h>

#include <algorithm>

namespace sbd {
namespace {

// The C client logs to stderr by default; its words are not ours to show (and name hosts).
void SilenceClientLog() {
  static std::once_flag once;
  std::call_once(once, [] { zoo_set_debug_level(static_cast<ZooLogLevel>(0)); });
}

// The watch's handle for the scheduler: its counters, and on destruction no more callbacks.
class ZooKeeperStoreWatch : public LockWatch {
 public:
  explicit ZooKeeperStoreWatch(std::shared_ptr<ZooKeeperWatchState> state)
      : state_(std::move(state)) {}
  ~ZooKeeperStoreWatch() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->on_change = nullptr;
  }
  LockWatchStatus Status() const override {
    return LockWatchStatus{state_->up.load(), state_->breaks.load(), state_->changes.load()};
  }

 private:
  std::shared_ptr<ZooKeeperWatchState> state_;
};

}  // namespace

ProbeFailureReason ZooKeeperReason(int rc) {
  if (rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZSESSIONMOVED || rc == ZCLOSING) {
    return ProbeFailureReason::kConnectionLost;
  }
  if (rc == ZOPERATIONTIMEOUT) return ProbeFailureReason::kTimeout;
  if (rc == ZNOAUTH || rc == ZAUTHFAILED) return ProbeFailureReason::kAuth;
  if (rc == ZMARSHALLINGERROR) return ProbeFailureReason::kProtocol;
  return ProbeFailureReason::kQuery;
}

std::string ZooKeeperHostList(const std::vector<std::string>& hosts) {
  std::string out;
  for (const std::string& host : hosts) out += (out.empty() ? "" : ",") + host;
  return out;
}

void ZooKeeperWatchState::Fire() {
  changes.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu);
  if (on_change) on_change();
}

void ZooKeeperWatchState::Down() {
  if (up.exchange(false)) breaks.fetch_add(1);
}

std::unique_ptr<LockWatch> MakeZooKeeperWatch(std::shared_ptr<ZooKeeperWatchState> state) {
  return std::make_unique<ZooKeeperStoreWatch>(std::move(state));
}

ZooKeeperSession::~ZooKeeperSession() { Close(); }

std::optional<ProbeFailure> ZooKeeperSession::EnsureHandle() {
  if (zh_ != nullptr) {
    const int state = zoo_state(zh_);
    if (state != ZOO_EXPIRED_SESSION_STATE && state != ZOO_AUTH_FAILED_STATE) return std::nullopt;
    // An expired session is over for good: a new handle starts a new session.
    watch_.reset();
    zookeeper_close(zh_);
    zh_ = nullptr;
  }
  SilenceClientLog();
  std::string secret;
  if (!spec_.username.empty()) {
    MemberSpec login;
    login.password_file = spec_.password_file;
    login.password_env = spec_.password_env;
    auto password = ResolvePassword(login);
    if (const std::string* error = std::get_if<std::string>(&password)) {
      return ProbeFailure{ProbeFailureReason::kConfig, *error};
    }
    secret = spec_.username + ":" + std::get<std::optional<std::string>>(password).value_or("");
  }
  const int timeout_ms = static_cast<int>(spec_.session_timeout.count());
  const std::string hosts = ZooKeeperHostList(spec_.hosts);
  zh_ = zookeeper_init(hosts.c_str(), OnSessionEvent, timeout_ms, nullptr, this, 0);
  if (zh_ == nullptr) {
    return ProbeFailure{ProbeFailureReason::kUnreachable, "ZooKeeper hosts " + hosts + " unusable"};
  }
  connected_ = false;
  watch_armed_ = false;
  new_session_ = true;
  session_problem_ = "connecting";
  if (!secret.empty()) {
    zoo_add_auth(zh_, "digest", secret.data(), static_cast<int>(secret.size()), nullptr, nullptr);
    std::fill(secret.begin(), secret.end(), '\0');
  }
  return std::nullopt;
}

void ZooKeeperSession::StartRead(SteadyClock::time_point deadline, Done done) {
  if (read_) {
    loop_.Post([done] {
      done(ProbeFailure{ProbeFailureReason::kInternal, "previous ZooKeeper read still running"});
    });
    return;
  }
  read_ = PendingRead{next_read_id_++, std::move(done), false};
  if (auto failure = EnsureHandle()) return Finish(*failure);
  if (!deadline_timer_) deadline_timer_ = std::make_unique<LoopTimer>(loop_);
  deadline_timer_->Arm(deadline, [this] {
    if (!read_) return;
    if (read_->sent) return Fail(ProbeFailureReason::kTimeout, "no ZooKeeper answer in time");
    Fail(connected_ ? ProbeFailureReason::kTimeout : ProbeFailureReason::kUnreachable,
         "no ZooKeeper session (" + session_problem_ + ") with " + ZooKeeperHostList(spec_.hosts));
  });
  if (connected_) Send();
  Pump();
}

void ZooKeeperSession::Send() {
  read_->sent = true;
  SendRead();
}

void ZooKeeperSession::Close() {
  watch_.reset();
  if (process_timer_) process_timer_->Stop();
  // Before the handle closes: a watcher called while it closes must not set watches again
  // (and, from the destructor, must not reach the derived store).
  if (watch_state_) watch_state_->Down();
  watch_state_.reset();
  if (zh_ != nullptr) {
    zhandle_t* closing = zh_;
    zh_ = nullptr;
    zookeeper_close(closing);  // pending completions run with ZCLOSING
  }
  connected_ = false;
  if (read_) Fail(ProbeFailureReason::kInternal, "ZooKeeper store closed");
}

void ZooKeeperSession::StartWatch(std::shared_ptr<ZooKeeperWatchState> state) {
  watch_state_ = std::move(state);
  if (zh_ == nullptr || !connected_) {
    if (auto failure = EnsureHandle()) return;  // the next read says why
  }
  if (connected_ && !watch_armed_) ArmWatch();
  Pump();
}

// Called inside zookeeper_process, so the store (whose handle it is) is alive.
void ZooKeeperSession::OnWatchEvent(zhandle_t*, int type, int, const char*, void* context) {
  auto* session = static_cast<ZooKeeperSession*>(context);
  if (type == ZOO_SESSION_EVENT || !session->watch_state_) return;
  session->watch_armed_ = false;
  session->watch_state_->Fire();
  if (session->zh_ != nullptr && session->connected_) session->ArmWatch();
}

void ZooKeeperSession::Pump() {
  if (zh_ == nullptr) return;
  int fd = -1, interest = 0;
  timeval tv{};
  const int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
  const int state = zoo_state(zh_);
  if (rc == ZINVALIDSTATE) {
    watch_.reset();
    connected_ = false;
    if (read_) Fail(ProbeFailureReason::kConnectionLost, "ZooKeeper session " + session_problem_);
    return;
  }
  // A reconnect can reuse the fd number for a new socket: watch afresh at each change.
  if (fd != watched_fd_ || state != watched_state_) {
    watch_.reset();
    if (fd >= 0) watch_ = std::make_unique<SocketWatch>(loop_, fd);
    watched_fd_ = fd;
    watched_state_ = state;
  }
  if (watch_) {
    watch_->Watch(interest & ZOOKEEPER_READ, interest & ZOOKEEPER_WRITE, [this] { OnSocket(); });
  }
  if (!process_timer_) process_timer_ = std::make_unique<LoopTimer>(loop_);
  const long ms = std::max(1L, tv.tv_sec * 1000L + tv.tv_usec / 1000L);
  process_timer_->Arm(SteadyClock::now() + std::chrono::milliseconds(ms), [this] { Process(0); });
}

void ZooKeeperSession::OnSocket() {
  pollfd ready{watched_fd_, POLLIN | POLLOUT, 0};
  if (::poll(&ready, 1, 0) < 0) ready.revents = 0;
  int events = 0;
  if (ready.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
  if (ready.revents & POLLOUT) events |= ZOOKEEPER_WRITE;
  Process(events);
}

void ZooKeeperSession::Process(int events) {
  if (zh_ == nullptr) return;
  zookeeper_process(zh_, events);  // errors show in the session's state and the completions
  Pump();
}

void ZooKeeperSession::OnSessionEvent(zhandle_t*, int type, int state, const char*, void* context) {
  if (type == ZOO_SESSION_EVENT) static_cast<ZooKeeperSession*>(context)->SessionEvent(state);
}

void ZooKeeperSession::SessionEvent(int state) {
  connected_ = state == ZOO_CONNECTED_STATE;
  if (connected_) {
    session_problem_.clear();
    if (read_ && !read_->sent) Send();
    if (watch_state_ && !watch_armed_) ArmWatch();
    return;
  }
  if (watch_state_) watch_state_->Down();
  // The client sets a live session's watches again on reconnect; a new session has none.
  if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) watch_armed_ = false;
  if (state == ZOO_EXPIRED_SESSION_STATE)
    session_problem_ = "expired";
  else if (state == ZOO_AUTH_FAILED_STATE)
    session_problem_ = "refused the digest credentials";
  else
    session_problem_ = "connection lost, reconnecting";
  if (read_ && read_->sent) {
    Fail(state == ZOO_AUTH_FAILED_STATE ? ProbeFailureReason::kAuth
                                        : ProbeFailureReason::kConnectionLost,
         "ZooKeeper session " + session_problem_ + " during the read");
  }
}

const void* ZooKeeperSession::NewRequest(std::string name) {
  return new Request{weak_from_this(), read_->id, std::move(name)};
}

void ZooKeeperSession::Fail(ProbeFailureReason reason, const std::string& message) {
  Finish(ProbeFailure{reason, message});
}

// The callback runs from a posted task, never inside the client's own call stack.
void ZooKeeperSession::Finish(Result result) {
  if (!read_) return;
  if (deadline_timer_) deadline_timer_->Stop();
  Done done = std::move(read_->done);
  read_.reset();
  loop_.Post(
      [done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
}

}  // namespace sbd
