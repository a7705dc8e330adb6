// The zookeeper_lock store's asynchronous core: one single-threaded C client handle per
// cluster, driven by the event loop (zookeeper_interest -> SocketWatch/LoopTimer ->
// zookeeper_process), and the blocking Read() adapter over it.
#include <poll.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>

#include "probes/zookeeper_lock.h"

namespace sbd {
namespace {

using Result = std::variant<DcsView, ProbeFailure>;
constexpr int kMaxHolderAttempts = 3;  // the holder may leave between the list and its read

ProbeFailureReason ReasonOf(int rc) {
  if (rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZSESSIONMOVED || rc == ZCLOSING) {
    return ProbeFailureReason::kConnectionLost;
  }
  if (rc == ZOPERATIONTIMEOUT) return ProbeFailureReason::kTimeout;
  if (rc == ZNOAUTH || rc == ZAUTHFAILED) return ProbeFailureReason::kAuth;
  if (rc == ZMARSHALLINGERROR) return ProbeFailureReason::kProtocol;
  return ProbeFailureReason::kQuery;
}

std::string HostList(const std::vector<std::string>& hosts) {
  std::string out;
  for (const std::string& host : hosts) out += (out.empty() ? "" : ",") + host;
  return out;
}

// The C client logs to stderr by default; its words are not ours to show (and name hosts).
void SilenceClientLog() {
  static std::once_flag once;
  std::call_once(once, [] { zoo_set_debug_level(static_cast<ZooLogLevel>(0)); });
}

}  // namespace

/// What the watch and the loop share: the callback (cleared when the watch goes, under `mu`,
/// so that it is never called after) and the counters. Thread-safe.
struct ZooKeeperWatchState {
  std::mutex mu;
  LockWatch::Changed on_change;  // guarded by mu
  std::atomic<bool> up{false};
  std::atomic<std::uint64_t> breaks{0};
  std::atomic<std::uint64_t> changes{0};
  void Fire() {
    changes.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu);
    if (on_change) on_change();
  }
  void Down() {
    if (up.exchange(false)) breaks.fetch_add(1);
  }
};

/// One cluster's ZooKeeper session and its reads, on the loop thread only (constructed and
/// destroyed anywhere, used only from posted tasks and its own callbacks).
class ZooKeeperLockReader : public std::enable_shared_from_this<ZooKeeperLockReader> {
 public:
  ZooKeeperLockReader(EventLoop& loop, ZooKeeperLockSpec spec, std::vector<MemberSpec> members)
      : loop_(loop), spec_(std::move(spec)), members_(std::move(members)) {}
  ~ZooKeeperLockReader() { Close(); }

  void StartRead(SteadyClock::time_point deadline, ZooKeeperLockStore::Done done);
  void StartWatch(std::shared_ptr<ZooKeeperWatchState> state);
  void Close();

 private:
  // A request's completion context: the read it belongs to, which may be gone.
  struct Request {
    std::weak_ptr<ZooKeeperLockReader> reader;
    std::uint64_t read_id;
  };
  struct PendingRead {
    std::uint64_t id = 0;
    ZooKeeperLockStore::Done done;
    DcsView view;
    std::vector<LockChild> candidates;
    int attempts = 0;
    bool sent = false;
  };

  std::optional<ProbeFailure> EnsureHandle();
  void Pump();
  void Process(int events);
  void OnSocket();
  static void OnSessionEvent(zhandle_t*, int type, int state, const char*, void* context);
  void SessionEvent(int state);
  const void* NewRequest() { return new Request{weak_from_this(), read_->id}; }
  static ZooKeeperLockReader* Owner(const void* data, std::shared_ptr<ZooKeeperLockReader>& hold);
  void ListChildren();
  static void ChildrenDone(int rc, const String_vector* children, const Stat*, const void* data);
  void OnChildren(int rc, const String_vector* children);
  static void HolderDone(int rc, const char* value, int length, const Stat* stat, const void* data);
  void OnHolder(int rc, const char* value, int length, const Stat* stat);
  void Fail(ProbeFailureReason reason, const std::string& message);
  void Finish(Result result);
  void ArmWatch();
  static void OnWatchEvent(zhandle_t*, int type, int state, const char*, void* context);
  static void WatchArmed(int rc, const String_vector*, const Stat*, const void* data);
  static void ExistsArmed(int rc, const Stat*, const void* data);

  EventLoop& loop_;
  const ZooKeeperLockSpec spec_;
  const std::vector<MemberSpec> members_;
  zhandle_t* zh_ = nullptr;
  bool connected_ = false;
  std::string session_problem_;  // why there is no session now, for the failure's message
  std::unique_ptr<SocketWatch> watch_;
  int watched_fd_ = -1;
  int watched_state_ = 0;
  std::unique_ptr<LoopTimer> process_timer_;
  std::unique_ptr<LoopTimer> deadline_timer_;
  std::optional<PendingRead> read_;
  std::uint64_t next_read_id_ = 1;
  std::shared_ptr<ZooKeeperWatchState> watch_state_;
  bool watch_armed_ = false;  // a children (or exists) watch is set on this session
};

std::optional<ProbeFailure> ZooKeeperLockReader::EnsureHandle() {
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
  zh_ = zookeeper_init(HostList(spec_.hosts).c_str(), OnSessionEvent, timeout_ms, nullptr, this, 0);
  if (zh_ == nullptr) {
    return ProbeFailure{ProbeFailureReason::kUnreachable,
                        "ZooKeeper hosts " + HostList(spec_.hosts) + " unusable"};
  }
  connected_ = false;
  watch_armed_ = false;
  session_problem_ = "connecting";
  if (!secret.empty()) {
    zoo_add_auth(zh_, "digest", secret.data(), static_cast<int>(secret.size()), nullptr, nullptr);
    std::fill(secret.begin(), secret.end(), '\0');
  }
  return std::nullopt;
}

void ZooKeeperLockReader::StartRead(SteadyClock::time_point deadline,
                                    ZooKeeperLockStore::Done done) {
  if (read_) {
    loop_.Post([done] {
      done(ProbeFailure{ProbeFailureReason::kInternal, "previous ZooKeeper read still running"});
    });
    return;
  }
  read_ = PendingRead{next_read_id_++, std::move(done), {}, {}, 0, false};
  if (auto failure = EnsureHandle()) return Finish(*failure);
  if (!deadline_timer_) deadline_timer_ = std::make_unique<LoopTimer>(loop_);
  deadline_timer_->Arm(deadline, [this] {
    if (!read_) return;
    if (read_->sent) return Fail(ProbeFailureReason::kTimeout, "no ZooKeeper answer in time");
    Fail(connected_ ? ProbeFailureReason::kTimeout : ProbeFailureReason::kUnreachable,
         "no ZooKeeper session (" + session_problem_ + ") with " + HostList(spec_.hosts));
  });
  if (connected_) ListChildren();
  Pump();
}

void ZooKeeperLockReader::Close() {
  watch_.reset();
  if (process_timer_) process_timer_->Stop();
  if (zh_ != nullptr) {
    zhandle_t* closing = zh_;
    zh_ = nullptr;
    zookeeper_close(closing);  // pending completions run with ZCLOSING
  }
  connected_ = false;
  if (watch_state_) watch_state_->Down();
  watch_state_.reset();
  if (read_) Fail(ProbeFailureReason::kInternal, "ZooKeeper store closed");
}

void ZooKeeperLockReader::StartWatch(std::shared_ptr<ZooKeeperWatchState> state) {
  watch_state_ = std::move(state);
  if (zh_ == nullptr || !connected_) {
    if (auto failure = EnsureHandle()) return;  // the next read says why
  }
  ArmWatch();
  Pump();
}

void ZooKeeperLockReader::ArmWatch() {
  if (!watch_state_ || zh_ == nullptr || !connected_ || watch_armed_) return;
  watch_armed_ = true;
  auto* weak = new std::weak_ptr<ZooKeeperLockReader>(weak_from_this());
  const int rc = zoo_awget_children2(zh_, spec_.path.c_str(), OnWatchEvent, this, WatchArmed, weak);
  if (rc != ZOK) {  // no completion will free it
    delete weak;
    watch_armed_ = false;
  }
}

// Called inside zookeeper_process, so the reader (whose handle it is) is alive.
void ZooKeeperLockReader::OnWatchEvent(zhandle_t*, int type, int, const char*, void* context) {
  auto* reader = static_cast<ZooKeeperLockReader*>(context);
  if (type == ZOO_SESSION_EVENT || !reader->watch_state_) return;
  reader->watch_armed_ = false;
  reader->watch_state_->Fire();
  reader->ArmWatch();
}

void ZooKeeperLockReader::WatchArmed(int rc, const String_vector*, const Stat*, const void* data) {
  std::unique_ptr<const std::weak_ptr<ZooKeeperLockReader>> weak(
      static_cast<const std::weak_ptr<ZooKeeperLockReader>*>(data));
  auto reader = weak->lock();
  if (!reader || !reader->watch_state_ || reader->zh_ == nullptr) return;
  if (rc == ZOK) {
    reader->watch_state_->up = true;
    return;
  }
  if (rc != ZNONODE) {
    reader->watch_armed_ = false;  // armed again at the next session
    return;
  }
  // No lock path yet: a children watch cannot be set on it, an exists watch can.
  auto* again = new std::weak_ptr<ZooKeeperLockReader>(reader);
  const int sent = zoo_awexists(reader->zh_, reader->spec_.path.c_str(), OnWatchEvent, reader.get(),
                                ExistsArmed, again);
  if (sent != ZOK) {
    delete again;
    reader->watch_armed_ = false;
  }
}

void ZooKeeperLockReader::ExistsArmed(int rc, const Stat*, const void* data) {
  std::unique_ptr<const std::weak_ptr<ZooKeeperLockReader>> weak(
      static_cast<const std::weak_ptr<ZooKeeperLockReader>*>(data));
  auto reader = weak->lock();
  if (!reader || !reader->watch_state_) return;
  if (rc == ZOK) {
    // Created between the two calls: the children watch is what it needs now.
    reader->watch_armed_ = false;
    reader->watch_state_->Fire();
    reader->ArmWatch();
  } else if (rc == ZNONODE) {
    reader->watch_state_->up = true;
  } else {
    reader->watch_armed_ = false;
  }
}

void ZooKeeperLockReader::Pump() {
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

void ZooKeeperLockReader::OnSocket() {
  pollfd ready{watched_fd_, POLLIN | POLLOUT, 0};
  if (::poll(&ready, 1, 0) < 0) ready.revents = 0;
  int events = 0;
  if (ready.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
  if (ready.revents & POLLOUT) events |= ZOOKEEPER_WRITE;
  Process(events);
}

void ZooKeeperLockReader::Process(int events) {
  if (zh_ == nullptr) return;
  zookeeper_process(zh_, events);  // errors show in the session's state and the completions
  Pump();
}

void ZooKeeperLockReader::OnSessionEvent(zhandle_t*, int type, int state, const char*,
                                         void* context) {
  if (type == ZOO_SESSION_EVENT) static_cast<ZooKeeperLockReader*>(context)->SessionEvent(state);
}

void ZooKeeperLockReader::SessionEvent(int state) {
  connected_ = state == ZOO_CONNECTED_STATE;
  if (connected_) {
    session_problem_.clear();
    if (read_ && !read_->sent) ListChildren();
    ArmWatch();
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

ZooKeeperLockReader* ZooKeeperLockReader::Owner(const void* data,
                                                std::shared_ptr<ZooKeeperLockReader>& hold) {
  std::unique_ptr<const Request> request(static_cast<const Request*>(data));
  hold = request->reader.lock();
  if (!hold || !hold->read_ || hold->read_->id != request->read_id) return nullptr;
  return hold.get();
}

void ZooKeeperLockReader::ListChildren() {
  read_->sent = true;
  read_->view = DcsView{};
  read_->view.endpoint = HostList(spec_.hosts);
  const void* request = NewRequest();
  const int rc = zoo_aget_children2(zh_, spec_.path.c_str(), 0, ChildrenDone, request);
  if (rc != ZOK) {
    delete static_cast<const Request*>(request);
    Fail(ReasonOf(rc), std::string("listing the lock path: ") + zerror(rc));
  }
}

void ZooKeeperLockReader::ChildrenDone(int rc, const String_vector* children, const Stat*,
                                       const void* data) {
  std::shared_ptr<ZooKeeperLockReader> hold;
  if (ZooKeeperLockReader* reader = Owner(data, hold)) reader->OnChildren(rc, children);
}

void ZooKeeperLockReader::OnChildren(int rc, const String_vector* children) {
  if (rc == ZNONODE) return Finish(std::move(read_->view));  // no lock path: nobody holds
  if (rc != ZOK) return Fail(ReasonOf(rc), std::string("listing the lock path: ") + zerror(rc));
  const int count = children == nullptr ? 0 : children->count;
  if (count > spec_.max_children) {
    return Fail(ProbeFailureReason::kProtocol,
                std::to_string(count) + " children under the lock path, above max_children " +
                    std::to_string(spec_.max_children) + ": the holder cannot be told");
  }
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) names.emplace_back(children->data[i]);
  read_->candidates = OrderCandidates(names, read_->view);
  if (read_->candidates.empty()) return Finish(std::move(read_->view));
  const std::string holder = spec_.path + "/" + read_->candidates.front().name;
  const void* request = NewRequest();
  const int sent = zoo_aget(zh_, holder.c_str(), 0, HolderDone, request);
  if (sent != ZOK) {
    delete static_cast<const Request*>(request);
    Fail(ReasonOf(sent), std::string("reading the holder's node: ") + zerror(sent));
  }
}

void ZooKeeperLockReader::HolderDone(int rc, const char* value, int length, const Stat* stat,
                                     const void* data) {
  std::shared_ptr<ZooKeeperLockReader> hold;
  if (ZooKeeperLockReader* reader = Owner(data, hold)) reader->OnHolder(rc, value, length, stat);
}

void ZooKeeperLockReader::OnHolder(int rc, const char* value, int length, const Stat* stat) {
  if (rc == ZNONODE && ++read_->attempts < kMaxHolderAttempts) return ListChildren();
  if (rc == ZNONODE) {
    return Fail(ProbeFailureReason::kQuery, "the holder's node left during every read");
  }
  if (rc != ZOK || stat == nullptr) {
    return Fail(ReasonOf(rc), std::string("reading the holder's node: ") + zerror(rc));
  }
  LockHolderNode node;
  node.czxid = stat->czxid;
  node.ephemeral_owner = stat->ephemeralOwner;
  node.data_length = stat->dataLength;
  if (value != nullptr && length > 0 && length <= spec_.max_data_bytes)
    node.data.assign(value, length);
  FillHolder(read_->candidates.front(), node, spec_.max_data_bytes, members_, read_->view);
  Finish(std::move(read_->view));
}

void ZooKeeperLockReader::Fail(ProbeFailureReason reason, const std::string& message) {
  Finish(ProbeFailure{reason, message});
}

// The callback runs from a posted task, never inside the client's own call stack.
void ZooKeeperLockReader::Finish(Result result) {
  if (!read_) return;
  if (deadline_timer_) deadline_timer_->Stop();
  ZooKeeperLockStore::Done done = std::move(read_->done);
  read_.reset();
  loop_.Post(
      [done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
}

ZooKeeperLockStore::ZooKeeperLockStore(const ClusterSpec& spec, EventLoop& loop)
    : loop_(loop),
      reader_(std::make_shared<ZooKeeperLockReader>(loop, spec.zookeeper_lock, spec.members)) {}

ZooKeeperLockStore::~ZooKeeperLockStore() {
  loop_.Post([reader = std::move(reader_)] { reader->Close(); });
}

void ZooKeeperLockStore::Start(SteadyClock::time_point deadline, Done done) {
  reader_->StartRead(deadline, std::move(done));
}

namespace {

// The watch's handle for the scheduler: its counters, and on destruction no more callbacks.
class ZooKeeperLockWatch : public LockWatch {
 public:
  explicit ZooKeeperLockWatch(std::shared_ptr<ZooKeeperWatchState> state)
      : state_(std::move(state)) {}
  ~ZooKeeperLockWatch() override {
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

std::unique_ptr<LockWatch> ZooKeeperLockStore::Watch(LockWatch::Changed on_change) {
  auto state = std::make_shared<ZooKeeperWatchState>();
  state->on_change = std::move(on_change);
  loop_.Post([reader = reader_, state] { reader->StartWatch(state); });
  return std::make_unique<ZooKeeperLockWatch>(state);
}

}  // namespace sbd
