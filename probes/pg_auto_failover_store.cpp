#include <libpq-fe.h>

#include "probes/pg_auto_failover.h"
#include "probes/postgres.h"

namespace sbd {

/// One read in flight: its connection, socket watch and deadline; loop thread only, every
/// callback holding a weak reference.
struct PgAutoFailoverStore::Session : std::enable_shared_from_this<Session> {
  Session(EventLoop& loop, const ClusterSpec& spec)
      : loop(loop),
        spec(spec.pg_auto_failover),
        members(spec.members),
        discover(spec.discovery.enabled),
        timeout(spec.probe_timeout) {}
  ~Session() { Drop(); }

  void Start(SteadyClock::time_point deadline, Done done);
  void Close();
  void OnSocket();
  void PollConnect();
  void Send();
  void Receive();
  void Answer(PGresult* result);
  void Fail(ProbeFailureReason reason, std::string message);
  void Finish(std::variant<LockRecord, ProbeFailure> record);
  void Watch(bool read, bool write);
  void Drop();

  EventLoop& loop;
  PgAutoFailoverSpec spec;
  std::vector<MemberSpec> members;
  bool discover;
  Millis timeout;
  std::unique_ptr<LoopTimer> timer;  // made on the loop thread, at the first read
  PGconn* conn = nullptr;
  bool connecting = false;
  PGresult* first_result = nullptr;
  std::unique_ptr<SocketWatch> watch;
  Done done;
  MonitorHandoverClock clock;
};

void PgAutoFailoverStore::Session::Start(SteadyClock::time_point deadline, Done next) {
  if (done) Fail(ProbeFailureReason::kInternal, "superseded by a new read");
  done = std::move(next);
  if (!timer) timer = std::make_unique<LoopTimer>(loop);
  if (deadline <= SteadyClock::now()) return Fail(ProbeFailureReason::kTimeout, "no time left");
  std::weak_ptr<Session> weak = shared_from_this();
  timer->Arm(deadline, [weak] {
    if (auto self = weak.lock()) {
      self->Fail(ProbeFailureReason::kTimeout, self->connecting
                                                   ? "connect: no answer before the deadline"
                                                   : "no answer before the deadline");
    }
  });
  auto conninfo = PostgresConninfo(spec.monitor, timeout, deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&conninfo)) {
    return Fail(failure->reason, failure->message);
  }
  // libpq resolves host names here, blocking the loop; addresses and localhost do not wait.
  conn = PQconnectStart(std::get<std::string>(conninfo).c_str());
  if (conn == nullptr) return Fail(ProbeFailureReason::kInternal, "connect: out of memory");
  if (PQstatus(conn) == CONNECTION_BAD) {
    const std::string message = PQerrorMessage(conn);
    return Fail(ClassifyConnectError(message), "connect: " + message);
  }
  connecting = true;
  // As the libpq manual says: start as if PQconnectPoll had answered PGRES_POLLING_WRITING.
  Watch(false, true);
}

void PgAutoFailoverStore::Session::OnSocket() {
  if (connecting) return PollConnect();
  Receive();
}

void PgAutoFailoverStore::Session::PollConnect() {
  switch (PQconnectPoll(conn)) {
    case PGRES_POLLING_READING:
      return Watch(true, false);
    case PGRES_POLLING_WRITING:
      return Watch(false, true);
    case PGRES_POLLING_OK:
      connecting = false;
      return Send();
    default: {
      const std::string message = PQerrorMessage(conn);
      return Fail(ClassifyConnectError(message), "connect: " + message);
    }
  }
}

void PgAutoFailoverStore::Session::Send() {
  if (PQsetnonblocking(conn, 1) != 0) {
    return Fail(ProbeFailureReason::kInternal, "could not make the connection non-blocking");
  }
  const std::string group = std::to_string(spec.group);
  const char* values[] = {spec.formation.c_str(), group.c_str()};
  if (PQsendQueryParams(conn, MonitorNodesQuery(), 2, nullptr, values, nullptr, nullptr, 0) != 1) {
    return Fail(ProbeFailureReason::kConnectionLost, PQerrorMessage(conn));
  }
  const int pending = PQflush(conn);
  if (pending < 0) return Fail(ProbeFailureReason::kConnectionLost, PQerrorMessage(conn));
  Watch(true, pending == 1);
}

void PgAutoFailoverStore::Session::Receive() {
  if (PQflush(conn) < 0 || PQconsumeInput(conn) != 1) {
    return Fail(ProbeFailureReason::kConnectionLost, PQerrorMessage(conn));
  }
  while (!PQisBusy(conn)) {
    PGresult* next = PQgetResult(conn);
    if (next == nullptr) {
      PGresult* result = first_result;
      first_result = nullptr;
      Answer(result);
      PQclear(result);
      return;
    }
    // One statement gives one result; keep the first of anything else a server sends.
    if (first_result == nullptr) {
      first_result = next;
    } else {
      PQclear(next);
    }
  }
  const int pending = PQflush(conn);
  if (pending < 0) return Fail(ProbeFailureReason::kConnectionLost, PQerrorMessage(conn));
  Watch(true, pending == 1);
}

void PgAutoFailoverStore::Session::Answer(PGresult* result) {
  if (result == nullptr) return Fail(ProbeFailureReason::kProtocol, "no result");
  if (PQresultStatus(result) != PGRES_TUPLES_OK) {
    const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
    return Fail(ClassifySqlState(state != nullptr ? state : ""),
                std::string("the monitor's nodes: ") + PQresultErrorMessage(result));
  }
  std::vector<MonitorRow> rows;
  const int columns = PQnfields(result);
  const int count = std::min(PQntuples(result), static_cast<int>(kMaxMonitorNodes) + 1);
  for (int i = 0; i < count; ++i) {
    MonitorRow& row = rows.emplace_back();
    for (int c = 0; c < columns && c < 16; ++c) {
      if (PQgetisnull(result, i, c)) {
        row.emplace_back();
      } else {
        row.emplace_back(std::string(PQgetvalue(result, i, c), PQgetlength(result, i, c)));
      }
    }
  }
  auto record = FoldMonitorNodes(rows, members, spec, discover);
  if (auto* view = std::get_if<LockRecord>(&record)) {
    view->endpoint = spec.monitor.address;
    TrackMonitorHandover(*view, clock, WallClock::now());
  }
  Finish(std::move(record));
}

void PgAutoFailoverStore::Session::Fail(ProbeFailureReason reason, std::string message) {
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  Finish(ProbeFailure{reason, std::move(message)});
}

void PgAutoFailoverStore::Session::Finish(std::variant<LockRecord, ProbeFailure> record) {
  Drop();
  if (timer) timer->Stop();
  if (!done) return;
  Done answer = std::move(done);
  done = nullptr;
  answer(std::move(record));
}

void PgAutoFailoverStore::Session::Watch(bool read, bool write) {
  const int fd = PQsocket(conn);
  // While connecting, libpq may close the socket and open another under the same number.
  if (!watch || watch->fd() != fd || connecting) {
    watch.reset();
    if (fd < 0) return Fail(ProbeFailureReason::kConnectionLost, "no socket");
    watch = std::make_unique<SocketWatch>(loop, fd);
  }
  std::weak_ptr<Session> weak = shared_from_this();
  if (!watch->Watch(read, write, [weak] {
        if (auto self = weak.lock()) self->OnSocket();
      })) {
    Fail(ProbeFailureReason::kInternal, "the event loop refused the socket");
  }
}

void PgAutoFailoverStore::Session::Drop() {
  watch.reset();
  if (first_result != nullptr) PQclear(first_result);
  first_result = nullptr;
  if (conn != nullptr) PQfinish(conn);
  conn = nullptr;
  connecting = false;
}

void PgAutoFailoverStore::Session::Close() {
  done = nullptr;
  Drop();
  timer.reset();
}

PgAutoFailoverStore::PgAutoFailoverStore(const ClusterSpec& spec, EventLoop& loop)
    : loop_(loop), session_(std::make_shared<Session>(loop, spec)) {}

PgAutoFailoverStore::~PgAutoFailoverStore() {
  // The session's handles belong to the loop: close them there.
  loop_.Post([session = std::move(session_)] { session->Close(); });
}

void PgAutoFailoverStore::Start(SteadyClock::time_point deadline, Done done) {
  session_->Start(deadline, std::move(done));
}

}  // namespace sbd
