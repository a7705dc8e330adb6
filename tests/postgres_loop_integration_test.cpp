// The PostgreSQL member probe on the event loop, against a real PostgreSQL 15: a hung member
// does not hold up the others nor add threads, a late answer keeps its session, and the two
// readings of a confirmation are sent in the same loop iteration.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <future>
#include <sstream>

#include "detector/config/config.h"
#include "detector/engine/scheduler.h"
#include "probes/postgres_async.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"
#include "tests/support/syn_drop.h"

namespace sbd {
namespace {

using sbd::testing::PgInstance;
using sbd::testing::PgSandbox;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A TCP listener on 127.0.0.1 that never accepts: connections complete in the kernel and then
// hear nothing, like a member behind a black-holed network that still answers SYNs.
class HungListener {
 public:
  HungListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(fd_, 512) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("hung listener: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
  }
  ~HungListener() { close(fd_); }
  HungListener(const HungListener&) = delete;
  HungListener& operator=(const HungListener&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

size_t ThreadsOfThisProcess() {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++count;
  }
  return count;
}

MemberSpec MemberOn(const PgSandbox& sandbox, const std::string& name, int port) {
  return MemberAt(name, HostPort{"127.0.0.1", std::to_string(port)},
                  "user=splitbrain dbname=postgres", sandbox.PasswordFile(), std::nullopt);
}

// Starts `probe` on its loop with `deadline` (and `gate`); the future has its observation.
std::future<Observation> StartOnLoop(PostgresAsyncProbe& probe, SteadyClock::time_point deadline,
                                     std::shared_ptr<LoopGate> gate = nullptr) {
  auto promise = std::make_shared<std::promise<Observation>>();
  auto answer = promise->get_future();
  probe.loop().Post([&probe, deadline, gate, promise] {
    probe.Start(deadline, gate, [promise](Observation obs) { promise->set_value(std::move(obs)); });
  });
  return answer;
}

std::string ManyMembersYaml(const PgSandbox& sandbox, int real_port, int hung_port, int hung) {
  std::ostringstream out;
  out << "clusters:\n  - name: wide\n    ttl: 3s\n    probe_interval: 500ms\n"
         "    probe_timeout: 400ms\n    members:\n";
  auto member = [&](const std::string& name, int port) {
    out << "      - name: " << name << "\n        dsn: \"host=127.0.0.1 port=" << port
        << " user=splitbrain dbname=postgres\"\n        password_file: " << sandbox.PasswordFile()
        << "\n";
  };
  member("pg-a", real_port);
  for (int i = 0; i < hung; ++i) member("hung-" + std::to_string(i), hung_port);
  return out.str();
}

}  // namespace

TEST_CASE("postgres loop: hung members neither delay a healthy one nor add threads",
          "[postgres-loop][integration]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  HungListener hung;
  PostgresAsyncProbe healthy(MemberOn(sandbox, "pg-a", a.port()), milliseconds(1000));
  // Connected once, so that the reading below is one round trip.
  REQUIRE(StartOnLoop(healthy, SteadyClock::now() + seconds(3)).get().ok());
  const size_t threads_before = ThreadsOfThisProcess();

  std::vector<std::unique_ptr<PostgresAsyncProbe>> hung_probes;
  std::vector<std::future<Observation>> hung_answers;
  const auto deadline = SteadyClock::now() + milliseconds(1500);
  for (int i = 0; i < 200; ++i) {
    hung_probes.push_back(std::make_unique<PostgresAsyncProbe>(
        MemberOn(sandbox, "hung-" + std::to_string(i), hung.port()), milliseconds(1500)));
    hung_answers.push_back(StartOnLoop(*hung_probes.back(), deadline));
  }
  const auto asked = SteadyClock::now();
  Observation reading = StartOnLoop(healthy, deadline).get();
  const auto answered = SteadyClock::now();
  INFO((reading.ok() ? std::string("ok") : reading.failure()->message));
  CHECK(reading.ok());
  // Far inside the 1.5 s the hung members wait for.
  CHECK(answered - asked < milliseconds(500));
  CHECK(ThreadsOfThisProcess() == threads_before);
  for (auto& answer : hung_answers) {
    REQUIRE(answer.wait_until(deadline + milliseconds(200)) == std::future_status::ready);
    const Observation obs = answer.get();
    REQUIRE_FALSE(obs.ok());
    CHECK(obs.failure()->reason == ProbeFailureReason::kTimeout);
  }
  CHECK(ThreadsOfThisProcess() == threads_before);
}

TEST_CASE(
    "postgres loop: members whose SYNs are dropped fail at the deadline, and a healthy one beside "
    "them reads at once",
    "[postgres-loop][integration]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  testing::SynDropListener dropped;
  PostgresAsyncProbe healthy(MemberOn(sandbox, "pg-a", a.port()), milliseconds(1000));
  REQUIRE(StartOnLoop(healthy, SteadyClock::now() + seconds(3)).get().ok());
  const size_t threads_before = ThreadsOfThisProcess();
  std::vector<std::unique_ptr<PostgresAsyncProbe>> lost;
  std::vector<std::future<Observation>> lost_answers;
  const auto started = SteadyClock::now();
  const auto deadline = started + milliseconds(1200);
  for (int i = 0; i < 50; ++i) {
    lost.push_back(std::make_unique<PostgresAsyncProbe>(
        MemberOn(sandbox, "lost-" + std::to_string(i), dropped.port()), milliseconds(1200)));
    lost_answers.push_back(StartOnLoop(*lost.back(), deadline));
  }
  const auto asked = SteadyClock::now();
  Observation reading = StartOnLoop(healthy, deadline).get();
  INFO((reading.ok() ? std::string("ok") : reading.failure()->message));
  CHECK(reading.ok());
  CHECK(SteadyClock::now() - asked < milliseconds(500));
  CHECK(ThreadsOfThisProcess() == threads_before);
  for (auto& answer : lost_answers) {
    REQUIRE(answer.wait_until(deadline + milliseconds(250)) == std::future_status::ready);
    const Observation obs = answer.get();
    REQUIRE_FALSE(obs.ok());
    INFO(obs.failure()->message);
    CHECK(obs.failure()->reason == ProbeFailureReason::kTimeout);
  }
  CHECK(SteadyClock::now() - started >= milliseconds(1150));  // none was refused early
  CHECK(ThreadsOfThisProcess() == threads_before);
}

TEST_CASE("postgres loop: the scheduler's threads stay the same with 1 member or 60",
          "[postgres-loop][integration]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  HungListener hung;
  auto threads_for = [&](int hung_members) {
    ConfigResult parsed =
        ParseConfig(ManyMembersYaml(sandbox, a.port(), hung.port(), hung_members), "wide.yml");
    REQUIRE(std::holds_alternative<ValidatedConfig>(parsed));
    Scheduler scheduler(std::get<ValidatedConfig>(parsed));
    const auto before = SteadyClock::now();
    scheduler.RunOnce();
    const auto took = SteadyClock::now() - before;
    const ClusterSnapshot snapshot = scheduler.Snapshot().front();
    CHECK(snapshot.last_round.front().ok());
    // One deadline (400 ms) plus the collection grace, not one per member.
    CHECK(took < milliseconds(1000));
    return std::make_pair(scheduler.probe_threads(), ThreadsOfThisProcess());
  };
  const auto one = threads_for(0);
  const auto sixty = threads_for(59);
  CHECK(one.first == sixty.first);
  CHECK(one.second == sixty.second);
}

TEST_CASE("postgres loop: an answer late past the deadline keeps the session",
          "[postgres-loop][integration]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PostgresAsyncProbe probe(MemberOn(sandbox, "pg-a", a.port()), milliseconds(300));
  const Observation first = StartOnLoop(probe, SteadyClock::now() + seconds(3)).get();
  REQUIRE(first.ok());
  const int backend = first.reading()->backend_pid;
  REQUIRE(backend > 0);

  // The session's backend stops answering: the reading is late, not lost.
  REQUIRE(kill(backend, SIGSTOP) == 0);
  const Observation late = StartOnLoop(probe, SteadyClock::now() + milliseconds(300)).get();
  REQUIRE(kill(backend, SIGCONT) == 0);
  REQUIRE_FALSE(late.ok());
  CHECK(late.failure()->reason == ProbeFailureReason::kTimeout);

  const Observation next = StartOnLoop(probe, SteadyClock::now() + seconds(3)).get();
  INFO((next.ok() ? std::string("ok") : next.failure()->message));
  REQUIRE(next.ok());
  CHECK(next.reading()->backend_pid == backend);
}

TEST_CASE("postgres loop: a round that finds the late answer still out reads the previous probe",
          "[postgres-loop][integration]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PostgresAsyncProbe probe(MemberOn(sandbox, "pg-a", a.port()), milliseconds(300));
  const Observation first = StartOnLoop(probe, SteadyClock::now() + seconds(3)).get();
  REQUIRE(first.ok());
  const int backend = first.reading()->backend_pid;
  REQUIRE(kill(backend, SIGSTOP) == 0);
  const Observation late = StartOnLoop(probe, SteadyClock::now() + milliseconds(200)).get();
  const Observation still = StartOnLoop(probe, SteadyClock::now() + milliseconds(200)).get();
  REQUIRE(kill(backend, SIGCONT) == 0);
  REQUIRE_FALSE(still.ok());
  CHECK(still.failure()->message == "previous probe still running");
  const Observation next = StartOnLoop(probe, SteadyClock::now() + seconds(3)).get();
  REQUIRE(next.ok());
  CHECK(next.reading()->backend_pid == backend);
}

TEST_CASE("postgres loop: a confirmation's two readings are sent together and overlap",
          "[postgres-loop][integration]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PgInstance& b = sandbox.StartReplica("pg-b", a);
  PostgresAsyncProbe connected(MemberOn(sandbox, "pg-a", a.port()), milliseconds(2000));
  REQUIRE(StartOnLoop(connected, SteadyClock::now() + seconds(3)).get().ok());
  // This one must connect (and authenticate) first; the connected one waits for it.
  PostgresAsyncProbe fresh(MemberOn(sandbox, "pg-b", b.port()), milliseconds(2000));
  auto gate = std::make_shared<LoopGate>(2);
  const auto started = SteadyClock::now();
  const auto deadline = started + seconds(3);
  auto first = StartOnLoop(connected, deadline, gate);
  auto second = StartOnLoop(fresh, deadline, gate);
  const Observation x = first.get();
  const Observation y = second.get();
  REQUIRE(x.ok());
  REQUIRE(y.ok());
  CHECK(x.window.Overlaps(y.window));
  // The connected member waited for the other's connection, then both were sent at once.
  CHECK(x.window.sent - started > milliseconds(1));
  const auto apart =
      x.window.sent > y.window.sent ? x.window.sent - y.window.sent : y.window.sent - x.window.sent;
  CHECK(apart < milliseconds(2));
}

TEST_CASE("postgres loop: a member that cannot connect leaves the gate and the other still reads",
          "[postgres-loop][integration]") {
  PgSandbox sandbox;
  PgInstance& a = sandbox.StartPrimary("pg-a");
  PostgresAsyncProbe healthy(MemberOn(sandbox, "pg-a", a.port()), milliseconds(2000));
  // A port nobody listens on: refused at once.
  HungListener reserved;
  const int closed_port = reserved.port() + 1;
  PostgresAsyncProbe refused(MemberOn(sandbox, "gone", closed_port), milliseconds(2000));
  auto gate = std::make_shared<LoopGate>(2);
  const auto deadline = SteadyClock::now() + seconds(3);
  auto x = StartOnLoop(healthy, deadline, gate);
  auto y = StartOnLoop(refused, deadline, gate);
  const Observation ok = x.get();
  const Observation failed = y.get();
  REQUIRE(ok.ok());
  CHECK(ok.window.received < deadline - seconds(1));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.failure()->message.find(PgSandbox::kMonitorPassword) == std::string::npos);
}

}  // namespace sbd
