#pragma once

#include <uv.h>

#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace sbd {

/// One libuv loop on one thread: the member probes that support it (PostgreSQL) do all their
/// I/O here, so the number of threads does not grow with the number of members. Work is
/// handed in with Post(); everything posted runs on the loop thread, in order. It lives in
/// probes/ (not the engine) because the probes that run on it must be able to name it.
/// Thread-safe: Post() from any thread; the rest only on the loop thread.
class EventLoop {
 public:
  EventLoop();
  /// Stops the loop and joins its thread; work still queued is dropped, open handles closed.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  /// The process's loop, started on first use.
  static EventLoop& Shared();

  /// Runs `task` on the loop thread soon; an exception it throws is counted, never propagated.
  void Post(std::function<void()> task);

  /// The libuv loop; use only on the loop thread (inside a posted task or a callback).
  uv_loop_t* loop() { return &loop_; }

  /// True on the loop thread.
  bool OnLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  static void OnWake(uv_async_t* handle);
  void RunPosted();

  uv_loop_t loop_{};
  uv_async_t wake_{};
  std::mutex mu_;
  std::deque<std::function<void()>> posted_;  // guarded by mu_
  bool stopping_ = false;                     // guarded by mu_
  std::thread thread_;
};

/// A one-shot timer on the loop thread that calls `fire` at a steady-clock instant; re-armed
/// by Arm(), stopped by Stop() or destruction. Made on any thread (its libuv handle is made at
/// the first Arm); Arm, Stop, and the destruction of one that was armed, on the loop thread
/// only (a call elsewhere is counted as an internal error).
class LoopTimer {
 public:
  explicit LoopTimer(EventLoop& loop);
  ~LoopTimer();
  LoopTimer(const LoopTimer&) = delete;
  LoopTimer& operator=(const LoopTimer&) = delete;

  /// Calls `fire` once `at` is reached (at once when it has passed); replaces any earlier arm.
  void Arm(std::chrono::steady_clock::time_point at, std::function<void()> fire);
  void Stop();

 private:
  struct Handle;
  EventLoop& loop_;
  Handle* handle_;  // closed (and freed) by libuv after destruction
};

/// Watches one socket for readability and/or writability on the loop thread. Loop thread only.
class SocketWatch {
 public:
  SocketWatch(EventLoop& loop, int fd);
  ~SocketWatch();
  SocketWatch(const SocketWatch&) = delete;
  SocketWatch& operator=(const SocketWatch&) = delete;

  /// Calls `ready` whenever the socket is readable (`read`) or writable (`write`); false if
  /// libuv refuses the socket.
  bool Watch(bool read, bool write, std::function<void()> ready);
  /// What a socket turned out to be when `ready` runs: readable, writable, or in error.
  struct Events {
    bool readable = false;
    bool writable = false;
    bool error = false;
  };
  /// As Watch, telling `ready` which of them happened (libcurl wants to know, or it polls).
  bool WatchEvents(bool read, bool write, std::function<void(Events)> ready);
  int fd() const { return fd_; }

 private:
  struct Handle;
  Handle* handle_;  // closed (and freed) by libuv after destruction
  int fd_;
};

}  // namespace sbd
