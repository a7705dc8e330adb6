// The claim probe (LeaseClaimProbe, on the event loop, through its blocking adapter) against
// real loopback listeners: a claim read, refused, hung, oversized and non-200 targets, and two
// probes sent together through one start gate.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "probes/lease_adapters.h"
#include "tests/support/process.h"

namespace sbd {
namespace {

using std::chrono::milliseconds;

/// An httplib server on a free loopback port, serving on a background thread.
class ClaimServer {
 public:
  ClaimServer() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ClaimServer() {
    server_.stop();
    thread_.join();
  }
  httplib::Server& server() { return server_; }
  std::string url(const std::string& path = "/metrics") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

/// A candidate that claims the lock "demo" with token "tk" in every answer, counting them.
struct ClaimingServer {
  ClaimingServer() {
    server.server().Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      ++requests;
      res.set_content("leader_election_master_status{name=\"demo\",token=\"tk\"} 1\n",
                      "text/plain");
    });
  }
  std::string url() const { return server.url(); }
  std::atomic<int> requests{0};
  ClaimServer server;  // after `requests`: stopped before it goes
};

/// Listens but never accepts or answers: a frozen process.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/metrics"; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

MemberSpec Member(const std::string& url) {
  MemberSpec member;
  member.name = "worker-1";
  member.claim_url = url;
  return member;
}

ClaimQuery Query() {
  ClaimQuery query;
  query.lock = "demo";
  query.token_label = "token";
  return query;
}

bool Claims(const Observation& obs) {
  return obs.lock_claim() != nullptr && obs.lock_claim()->claims;
}

/// Two claims read through one gate: both claim, the server saw two requests, and both were
/// sent after `late`, when the second party arrived.
void CheckSentTogether(const Observation& mine, const Observation& theirs, int requests,
                       SteadyClock::time_point late) {
  REQUIRE(Claims(mine));
  REQUIRE(Claims(theirs));
  CHECK(requests == 2);
  CHECK(theirs.window.sent >= late);
  CHECK(mine.window.sent >= late);
}

SteadyClock::time_point In(int millis) { return SteadyClock::now() + milliseconds(millis); }

ProbeFailureReason ReasonOf(const Observation& obs) {
  REQUIRE(obs.failure() != nullptr);
  return obs.failure()->reason;
}

}  // namespace

TEST_CASE("LeaseClaimProbe: reads the claim and its token, again on the kept connection") {
  ClaimServer server;
  int value = 1;
  server.server().Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "leader_election_master_status{name=\"demo\",token=\"tk\"} " + std::to_string(value) + "\n",
        "text/plain; version=0.0.4");
  });
  LeaseClaimProbe probe(Member(server.url()), Query());
  auto obs = probe.Probe(In(2000), nullptr);
  CHECK(obs.member == "worker-1");
  REQUIRE(obs.lock_claim() != nullptr);
  CHECK(obs.lock_claim()->claims);
  CHECK(obs.lock_claim()->token == "tk");
  CHECK(obs.window.sent <= obs.window.received);
  value = 0;
  auto again = probe.Probe(In(2000), nullptr);
  REQUIRE(again.lock_claim() != nullptr);
  CHECK(again.lock_claim()->competes);
  CHECK_FALSE(again.lock_claim()->claims);
}

TEST_CASE("LeaseClaimProbe: hung, oversized, non-200 and malformed are failures") {
  SilentListener silent;
  LeaseClaimProbe hung(Member(silent.url()), Query());
  const auto started = SteadyClock::now();
  CHECK(ReasonOf(hung.Probe(In(300), nullptr)) == ProbeFailureReason::kTimeout);
  CHECK(SteadyClock::now() - started < milliseconds(800));

  ClaimServer server;
  server.server().Get("/big", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(5 << 20, '#'), "text/plain");
  });
  server.server().Get("/denied",
                      [](const httplib::Request&, httplib::Response& res) { res.status = 403; });
  server.server().Get("/bad", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("leader_election_master_status{name=\"demo\"} 0.5\n", "text/plain");
  });
  LeaseClaimProbe big(Member(server.url("/big")), Query());
  CHECK(ReasonOf(big.Probe(In(2000), nullptr)) == ProbeFailureReason::kProtocol);
  LeaseClaimProbe denied(Member(server.url("/denied")), Query());
  CHECK(ReasonOf(denied.Probe(In(2000), nullptr)) == ProbeFailureReason::kAuth);
  LeaseClaimProbe missing(Member(server.url("/nothing-here")), Query());
  CHECK(ReasonOf(missing.Probe(In(2000), nullptr)) == ProbeFailureReason::kProtocol);
  LeaseClaimProbe bad(Member(server.url("/bad")), Query());
  CHECK(ReasonOf(bad.Probe(In(2000), nullptr)) == ProbeFailureReason::kProtocol);
  LeaseClaimProbe scheme(Member("ftp://127.0.0.1:1/metrics"), Query());
  CHECK(ReasonOf(scheme.Probe(In(2000), nullptr)) == ProbeFailureReason::kConfig);
}

TEST_CASE("LeaseClaimProbe: an answer trickling in past the deadline is a timeout") {
  ClaimServer server;
  server.server().Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/plain", [](size_t offset, httplib::DataSink& sink) {
      std::this_thread::sleep_for(milliseconds(50));  // the server's pace
      const std::string line = "# padding\n";
      sink.write(line.data(), line.size());
      if (offset > 4000) sink.done();
      return true;
    });
  });
  LeaseClaimProbe probe(Member(server.url()), Query());
  const auto started = SteadyClock::now();
  CHECK(ReasonOf(probe.Probe(In(400), nullptr)) == ProbeFailureReason::kTimeout);
  CHECK(SteadyClock::now() - started < milliseconds(900));
}

TEST_CASE("LeaseClaimProbe: nothing listening is refused") {
  const int port = testing::FreeLoopbackPort();
  LeaseClaimProbe probe(Member("http://127.0.0.1:" + std::to_string(port) + "/metrics"), Query());
  CHECK(ReasonOf(probe.Probe(In(2000), nullptr)) == ProbeFailureReason::kRefused);
}

TEST_CASE("LeaseClaimProbe: two probes through one gate send together; a failed one arrives") {
  ClaimingServer server;
  std::atomic<int>& requests = server.requests;
  LeaseClaimProbe first(Member(server.url()), Query());
  LeaseClaimProbe second(Member(server.url()), Query());
  StartGate gate(2);
  // The other probe is ready first; this one comes late on purpose. The gate must hold the
  // other's request until this one arrives: nothing reaches the server before, and both
  // requests are sent after this probe started. (Whether the two answers then overlap is the
  // scheduler's luck on a loaded machine, not the gate's promise.)
  auto other = std::async(std::launch::async, [&] { return second.Probe(In(5000), &gate); });
  std::this_thread::sleep_for(milliseconds(300));
  CHECK(requests.load() == 0);
  const auto late = SteadyClock::now();
  auto mine = first.Probe(In(5000), &gate);
  auto theirs = other.get();
  CheckSentTogether(mine, theirs, requests.load(), late);

  // A probe that fails before sending still arrives, so its partner does not wait it out.
  LeaseClaimProbe broken(Member("ftp://127.0.0.1:1/metrics"), Query());
  StartGate gate2(2);
  auto failing = std::async(std::launch::async, [&] { return broken.Probe(In(5000), &gate2); });
  const auto started = SteadyClock::now();
  auto ok = first.Probe(In(5000), &gate2);
  CHECK(SteadyClock::now() - started < milliseconds(2000));
  CHECK(Claims(ok));
  CHECK(failing.get().failure() != nullptr);
}

TEST_CASE(
    "LeaseClaimProbe: on the loop, two starts through one LoopGate send together; one that "
    "fails leaves") {
  ClaimingServer server;
  std::atomic<int>& requests = server.requests;
  LeaseClaimProbe first(Member(server.url()), Query());
  LeaseClaimProbe second(Member(server.url()), Query());
  EventLoop& loop = EventLoop::Shared();
  const auto wait = [](std::future<Observation>& answer) {
    REQUIRE(answer.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    return answer.get();
  };

  // The scheduler's confirmation path: Start() on the loop with a shared LoopGate. The party
  // that starts first is ready at once; its request must wait for the other's arrival.
  auto gate = std::make_shared<LoopGate>(2);
  std::promise<Observation> theirs_promise;
  std::promise<Observation> mine_promise;
  auto theirs_answer = theirs_promise.get_future();
  auto mine_answer = mine_promise.get_future();
  loop.Post([&] {
    second.Start(In(5000), gate,
                 [&](Observation obs) { theirs_promise.set_value(std::move(obs)); });
  });
  std::this_thread::sleep_for(milliseconds(300));  // long enough for a request not held back
  CHECK(requests.load() == 0);
  const auto late = SteadyClock::now();
  loop.Post([&] {
    first.Start(In(5000), gate, [&](Observation obs) { mine_promise.set_value(std::move(obs)); });
  });
  const Observation theirs = wait(theirs_answer);
  const Observation mine = wait(mine_answer);
  CheckSentTogether(mine, theirs, requests.load(), late);

  // A party that fails before sending leaves the gate: its partner sends without waiting it out.
  LeaseClaimProbe broken(Member("ftp://127.0.0.1:1/metrics"), Query());
  auto gate2 = std::make_shared<LoopGate>(2);
  std::promise<Observation> failed_promise;
  std::promise<Observation> ok_promise;
  auto failed_answer = failed_promise.get_future();
  auto ok_answer = ok_promise.get_future();
  const auto started = SteadyClock::now();
  loop.Post([&] {
    broken.Start(In(5000), gate2,
                 [&](Observation obs) { failed_promise.set_value(std::move(obs)); });
    first.Start(In(5000), gate2, [&](Observation obs) { ok_promise.set_value(std::move(obs)); });
  });
  const Observation ok = wait(ok_answer);
  CHECK(SteadyClock::now() - started < milliseconds(2000));
  CHECK(Claims(ok));
  const Observation failed = wait(failed_answer);
  REQUIRE(failed.failure() != nullptr);
  CHECK(failed.failure()->reason == ProbeFailureReason::kConfig);
}

}  // namespace sbd
