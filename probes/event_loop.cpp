#include "probes/event_loop.h"

#include <chrono>
#include <stdexcept>

#include "detector/common/internal_errors.h"

namespace sbd {

EventLoop::EventLoop() {
  if (uv_loop_init(&loop_) != 0) throw std::runtime_error("uv_loop_init failed");
  wake_.data = this;
  if (uv_async_init(&loop_, &wake_, &EventLoop::OnWake) != 0) {
    uv_loop_close(&loop_);
    throw std::runtime_error("uv_async_init failed");
  }
  thread_ = std::thread([this] {
    // uv_run returns once stopping closed the wake handle and every other handle is closed.
    uv_run(&loop_, UV_RUN_DEFAULT);
  });
}

EventLoop::~EventLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  uv_async_send(&wake_);
  thread_.join();
  uv_loop_close(&loop_);
}

EventLoop& EventLoop::Shared() {
  static EventLoop* shared = new EventLoop();  // never destroyed: probes may outlive statics
  return *shared;
}

void EventLoop::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    posted_.push_back(std::move(task));
  }
  uv_async_send(&wake_);
}

void EventLoop::OnWake(uv_async_t* handle) { static_cast<EventLoop*>(handle->data)->RunPosted(); }

void EventLoop::RunPosted() {
  std::deque<std::function<void()>> tasks;
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(posted_);
    stopping = stopping_;
  }
  if (stopping) {
    // Close every handle (the owners' close callbacks free them); uv_run then returns.
    uv_walk(
        &loop_,
        [](uv_handle_t* handle, void*) {
          if (!uv_is_closing(handle)) uv_close(handle, handle->close_cb);
        },
        nullptr);
    return;
  }
  for (auto& task : tasks) Guarded("event loop", task);
}

namespace {

uint64_t MillisUntil(std::chrono::steady_clock::time_point at) {
  const auto left = at - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  // Round up: libuv's clock is in whole milliseconds, and firing early would miss the instant.
  return static_cast<uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

}  // namespace

struct LoopTimer::Handle {
  uv_timer_t timer{};
  std::function<void()> fire;
  bool initialized = false;  // uv_timer_init runs at the first Arm, on the loop thread
};

namespace {

// libuv is not thread-safe: a handle made, armed or closed off the loop thread races the loop's
// own lists (the crash of a probe built on one thread while the loop closes another's handles).
// Such a call is a bug; it is counted, so that a test or splitbrain_internal_errors_total shows
// it, and still made, as before.
void CheckLoopThread(EventLoop& loop, const char* what) {
  if (!loop.OnLoopThread()) {
    CountInternalError("event loop", std::string(what) + " off the loop thread");
  }
}

}  // namespace

// Nothing of libuv is touched here: an owner may be built on any thread (the scheduler builds
// probes on the thread that loads the config) while the loop runs.
LoopTimer::LoopTimer(EventLoop& loop) : loop_(loop), handle_(new Handle) {}

LoopTimer::~LoopTimer() {
  if (!handle_->initialized) {
    delete handle_;
    return;
  }
  CheckLoopThread(loop_, "a timer closed");
  handle_->fire = nullptr;
  if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&handle_->timer))) {
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_->timer),
             [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
  }
}

void LoopTimer::Arm(std::chrono::steady_clock::time_point at, std::function<void()> fire) {
  CheckLoopThread(loop_, "a timer armed");
  if (!handle_->initialized) {
    uv_timer_init(loop_.loop(), &handle_->timer);
    handle_->timer.data = handle_;  // after the init, which owns the handle's fields
    // uv_close uses the close callback stored here when the loop shuts down (see RunPosted).
    handle_->timer.close_cb = [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); };
    handle_->initialized = true;
  }
  handle_->fire = std::move(fire);
  uv_update_time(handle_->timer.loop);
  uv_timer_start(
      &handle_->timer,
      [](uv_timer_t* t) {
        auto* handle = static_cast<Handle*>(t->data);
        auto fire = std::move(handle->fire);
        handle->fire = nullptr;
        if (fire) Guarded("event loop timer", fire);
      },
      MillisUntil(at), 0);
}

void LoopTimer::Stop() {
  handle_->fire = nullptr;
  if (!handle_->initialized) return;
  CheckLoopThread(loop_, "a timer stopped");
  uv_timer_stop(&handle_->timer);
}

struct SocketWatch::Handle {
  uv_poll_t poll{};
  std::function<void(Events)> ready;
  bool initialized = false;
};

SocketWatch::SocketWatch(EventLoop& loop, int fd) : handle_(new Handle), fd_(fd) {
  CheckLoopThread(loop, "a socket watched");
  handle_->poll.data = handle_;
  handle_->initialized = uv_poll_init(loop.loop(), &handle_->poll, fd) == 0;
  if (handle_->initialized) {
    handle_->poll.close_cb = [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); };
  }
}

SocketWatch::~SocketWatch() {
  if (!handle_->initialized) {
    delete handle_;
    return;
  }
  handle_->ready = nullptr;
  uv_poll_stop(&handle_->poll);
  if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&handle_->poll))) {
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_->poll),
             [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
  }
}

bool SocketWatch::Watch(bool read, bool write, std::function<void()> ready) {
  if (!ready) return WatchEvents(read, write, nullptr);
  return WatchEvents(read, write, [ready = std::move(ready)](Events) { ready(); });
}

bool SocketWatch::WatchEvents(bool read, bool write, std::function<void(Events)> ready) {
  if (!handle_->initialized) return false;
  handle_->ready = std::move(ready);
  const int events = (read ? UV_READABLE : 0) | (write ? UV_WRITABLE : 0);
  if (events == 0) return uv_poll_stop(&handle_->poll) == 0;
  return uv_poll_start(&handle_->poll, events, [](uv_poll_t* p, int status, int happened) {
           // An error status (a socket reset) is for the socket's reader to read and report.
           auto* handle = static_cast<Handle*>(p->data);
           if (handle->ready) {
             const Events seen{(happened & UV_READABLE) != 0, (happened & UV_WRITABLE) != 0,
                               status < 0};
             auto ready = handle->ready;  // may replace itself
             Guarded("event loop socket", [&] { ready(seen); });
           }
         }) == 0;
}

}  // namespace sbd
