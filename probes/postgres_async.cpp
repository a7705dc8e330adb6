#include "probes/postgres_async.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>

#include "probes/postgres.h"

namespace sbd {
namespace {

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

// A column's text, nullopt for SQL NULL.
std::optional<std::string> Text(const PGresult* result, int column) {
  if (PQgetisnull(result, 0, column)) return std::nullopt;
  return std::string(PQgetvalue(result, 0, column), PQgetlength(result, 0, column));
}

// The conversions the reading needs, with the same defaults for NULL; false when the
// text is not of the type (another server answers on this port).
bool AsBool(const PGresult* result, int column, bool* out) {
  auto text = Text(result, column);
  if (!text || (*text != "t" && *text != "f")) return false;
  *out = *text == "t";
  return true;
}

bool AsInt64(const PGresult* result, int column, std::int64_t* out) {
  auto text = Text(result, column);
  if (!text) return true;  // keeps the default
  if (text->empty() || text->size() > 20) return false;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text->c_str(), &end, 10);
  if (errno != 0 || end != text->c_str() + text->size()) return false;
  *out = value;
  return true;
}

std::string AsText(const PGresult* result, int column) { return Text(result, column).value_or(""); }

// Columns 9-15: the WAL receiver, as the reading query selects them.
bool ReadWalReceiver(const PGresult* result, PostgresReading& reading) {
  bool present = false;
  if (Text(result, 9) && !AsBool(result, 9, &present)) return false;
  if (!present) return true;
  WalReceiverReading upstream;
  if (!Text(result, 10)) {
    upstream.hidden = true;
    reading.upstream = upstream;
    return true;
  }
  std::int64_t port = 0;
  upstream.status = AsText(result, 10);
  upstream.sender_host = AsText(result, 11);
  if (!AsInt64(result, 12, &port) || !AsInt64(result, 13, &upstream.received_tli)) return false;
  if (port < 0 || port > 65535) return false;
  upstream.sender_port = static_cast<int>(port);
  upstream.flushed_lsn = AsText(result, 14);
  upstream.latest_end_time = AsText(result, 15);
  reading.upstream = upstream;
  return true;
}

ProbeFailure Unexpected(bool* drop_connection, const char* what) {
  *drop_connection = true;
  return ProbeFailure{ProbeFailureReason::kProtocol, what};
}

}  // namespace

std::variant<PostgresReading, ProbeFailure> ParseReadingResult(const PGresult* result,
                                                               bool* drop_connection) {
  if (PQntuples(result) != 1 || PQnfields(result) != 16) {
    return Unexpected(drop_connection, "unexpected result shape");
  }
  PostgresReading reading;
  std::int64_t wal_bytes = 0;
  std::int64_t version = 0;
  std::int64_t pid = 0;
  if (!AsBool(result, 0, &reading.in_recovery) || !AsBool(result, 1, &reading.read_only) ||
      !AsInt64(result, 3, &reading.timeline) || !AsInt64(result, 5, &wal_bytes) ||
      !AsInt64(result, 6, &version) || !AsInt64(result, 8, &pid) ||
      !ReadWalReceiver(result, reading)) {
    return Unexpected(drop_connection, "unexpected value in the reading");
  }
  if (version < 0 || version > 10000000 || pid < 0 || pid > 0x7FFFFFFF) {
    return Unexpected(drop_connection, "unexpected value in the reading");
  }
  reading.system_identifier = AsText(result, 2);
  reading.wal_lsn = AsText(result, 4);
  reading.wal_bytes = static_cast<std::uint64_t>(wal_bytes);
  reading.server_version = static_cast<int>(version);
  reading.postmaster_start = AsText(result, 7);
  reading.backend_pid = static_cast<int>(pid);
  if (reading.system_identifier.empty()) {
    return ProbeFailure{ProbeFailureReason::kProtocol, "no system identifier in the reading"};
  }
  return reading;
}

/// The connection and the reading in flight; lives on the loop thread only (its owner posts
/// its Close() there), every callback holding a weak reference.
struct PostgresAsyncProbe::Session : std::enable_shared_from_this<Session> {
  enum class Phase { kClosed, kConnecting, kIdle, kBusy };
  enum class Query { kReading, kHistory };

  /// The Start() in flight.
  struct Round {
    SteadyClock::time_point deadline;
    std::shared_ptr<LoopGate> gate;
    bool at_gate = false;  // arrived or left
    bool sent = false;
    Done done;
    Observation obs;
    std::optional<PostgresReading> reading;  // waiting for its timeline history
  };

  struct History {
    std::vector<TimelineSwitch> switches;
    std::string error;
    SteadyClock::time_point failed_at{};
  };

  Session(EventLoop& loop, MemberSpec member, Millis timeout)
      : loop(loop), member(std::move(member)), timeout(timeout) {}
  ~Session() { DropConnection(); }

  void Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate, Done done);
  void Close();

  void Advance();
  void Connect();
  void PollConnect();
  void Connected();
  void ConnectFailed(ProbeFailure failure);
  void ArriveOrSend();
  void SendReading();
  void SendQuery(const std::string& sql, Query kind);
  void Flush();
  void OnSocket();
  void OnIdleInput();
  void QueryDone();
  void HandleReading(ResultPtr result);
  void HandleHistory(ResultPtr result);
  void OnDeadline();
  void OnPatience();
  void Broken(ProbeFailureReason reason, const std::string& message);
  void DropConnection();
  void Finish(std::variant<PostgresReading, ProbeFailure> result);
  void Watch(bool read, bool write);
  void ArmPatience();
  bool WantsHistory(const PostgresReading& reading);
  void FillHistory(PostgresReading& reading);

  EventLoop& loop;
  MemberSpec member;
  Millis timeout;
  PGconn* conn = nullptr;
  std::unique_ptr<SocketWatch> watch;
  Phase phase = Phase::kClosed;
  Query query = Query::kReading;
  std::int64_t history_timeline = 0;
  std::string history_lineage;
  ResultPtr first_result;
  std::unique_ptr<LoopTimer> deadline_timer;
  std::unique_ptr<LoopTimer> patience_timer;
  std::optional<Round> round;
  int connect_failures = 0;
  SteadyClock::time_point retry_at{};
  ProbeFailure last_failure;
  std::map<std::pair<std::string, std::int64_t>, History> histories;
};

namespace {

// How long a connection may stay busy (connecting, or waiting for an answer) before it is
// given up: long enough for a late answer to keep the session, short enough that a frozen
// server is reconnected to within a few rounds.
Millis Patience(Millis timeout) { return std::max<Millis>(Millis(2000), 4 * timeout); }

}  // namespace

void PostgresAsyncProbe::Session::Start(SteadyClock::time_point deadline,
                                        std::shared_ptr<LoopGate> gate, Done done) {
  if (!deadline_timer) {
    deadline_timer = std::make_unique<LoopTimer>(loop);
    patience_timer = std::make_unique<LoopTimer>(loop);
  }
  if (round) Finish(ProbeFailure{ProbeFailureReason::kInternal, "superseded by a new probe"});
  round = Round{};
  round->deadline = deadline;
  round->gate = std::move(gate);
  round->done = std::move(done);
  round->obs.member = member.name;
  round->obs.window.sent_wall = WallClock::now();
  round->obs.window.sent = SteadyClock::now();
  if (deadline <= round->obs.window.sent) {
    return Finish(ProbeFailure{ProbeFailureReason::kTimeout, "no time left"});
  }
  std::weak_ptr<Session> weak = shared_from_this();
  deadline_timer->Arm(deadline, [weak] {
    if (auto self = weak.lock()) self->OnDeadline();
  });
  Advance();
}

void PostgresAsyncProbe::Session::Close() {
  if (round) Finish(ProbeFailure{ProbeFailureReason::kInternal, "the probe was removed"});
  DropConnection();
  deadline_timer.reset();
  patience_timer.reset();
}

void PostgresAsyncProbe::Session::Advance() {
  if (!round || round->sent) return;
  switch (phase) {
    case Phase::kClosed:
      if (SteadyClock::now() < retry_at) {
        return Finish(ProbeFailure{last_failure.reason, last_failure.message +
                                                            " (next connection attempt after a "
                                                            "backoff)"});
      }
      return Connect();
    case Phase::kIdle:
      return ArriveOrSend();
    case Phase::kConnecting:  // a connection from an earlier round is on its way
    case Phase::kBusy:        // an earlier round's late answer is still to come
      return;
  }
}

void PostgresAsyncProbe::Session::Connect() {
  auto conninfo = PostgresConninfo(member, timeout, round->deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&conninfo)) return Finish(*failure);
  // libpq resolves host names here, blocking the loop; addresses and localhost do not wait.
  conn = PQconnectStart(std::get<std::string>(conninfo).c_str());
  if (conn == nullptr) {
    return Finish(ProbeFailure{ProbeFailureReason::kInternal, "connect: out of memory"});
  }
  if (PQstatus(conn) == CONNECTION_BAD) {
    const std::string message = PQerrorMessage(conn);
    return ConnectFailed(ProbeFailure{ClassifyConnectError(message), "connect: " + message});
  }
  phase = Phase::kConnecting;
  ArmPatience();
  // As the libpq manual says: start as if PQconnectPoll had answered PGRES_POLLING_WRITING.
  Watch(false, true);
}

void PostgresAsyncProbe::Session::PollConnect() {
  switch (PQconnectPoll(conn)) {
    case PGRES_POLLING_READING:
      return Watch(true, false);
    case PGRES_POLLING_WRITING:
      return Watch(false, true);
    case PGRES_POLLING_OK:
      return Connected();
    default: {
      const std::string message = PQerrorMessage(conn);
      return ConnectFailed(ProbeFailure{ClassifyConnectError(message), "connect: " + message});
    }
  }
}

void PostgresAsyncProbe::Session::Connected() {
  if (PQsetnonblocking(conn, 1) != 0) {
    return Broken(ProbeFailureReason::kInternal, "could not make the connection non-blocking");
  }
  phase = Phase::kIdle;
  connect_failures = 0;
  retry_at = {};
  patience_timer->Stop();
  // Readable while idle too: a server that closes the session is noticed before the next
  // round, and the socket's interest stays the same from query to query (no epoll_ctl).
  Watch(true, false);
  Advance();
}

void PostgresAsyncProbe::Session::ConnectFailed(ProbeFailure failure) {
  DropConnection();
  failure.message = Trim(failure.message);
  last_failure = failure;
  if (!RulesOutWrites(failure.reason)) {
    // Nothing answers usefully: wait before the next attempt, so that thousands of members
    // behind one dead network do not reconnect all at once every round.
    ++connect_failures;
    const int shift = std::min(connect_failures - 1, 4);
    retry_at = SteadyClock::now() + std::chrono::milliseconds(250 << shift);
  }
  if (round && !round->sent) Finish(failure);
}

void PostgresAsyncProbe::Session::ArriveOrSend() {
  if (!round->gate || round->at_gate) return SendReading();
  round->at_gate = true;
  std::weak_ptr<Session> weak = shared_from_this();
  round->gate->Arrive([weak] {
    auto self = weak.lock();
    // Only the round that arrived, still waiting on an idle connection, sends.
    if (self && self->round && self->round->at_gate && !self->round->sent &&
        self->phase == Phase::kIdle) {
      self->SendReading();
    }
  });
}

void PostgresAsyncProbe::Session::SendReading() {
  // The reading's window starts when the query is sent, not when we began connecting.
  round->obs.window.sent_wall = WallClock::now();
  round->obs.window.sent = SteadyClock::now();
  round->sent = true;
  SendQuery(PostgresReadingQuery(), Query::kReading);
}

void PostgresAsyncProbe::Session::SendQuery(const std::string& sql, Query kind) {
  if (PQsendQuery(conn, sql.c_str()) != 1) {
    return Broken(ProbeFailureReason::kConnectionLost, PQerrorMessage(conn));
  }
  phase = Phase::kBusy;
  query = kind;
  first_result.reset();
  ArmPatience();
  Flush();
}

void PostgresAsyncProbe::Session::Flush() {
  const int pending = PQflush(conn);
  if (pending < 0) return Broken(ProbeFailureReason::kConnectionLost, PQerrorMessage(conn));
  Watch(true, pending == 1);
}

void PostgresAsyncProbe::Session::OnSocket() {
  if (phase == Phase::kConnecting) return PollConnect();
  if (phase == Phase::kIdle) return OnIdleInput();
  if (phase != Phase::kBusy) return;
  if (PQflush(conn) < 0 || PQconsumeInput(conn) != 1) {
    return Broken(ProbeFailureReason::kConnectionLost, PQerrorMessage(conn));
  }
  while (!PQisBusy(conn)) {
    PGresult* next = PQgetResult(conn);
    if (next == nullptr) return QueryDone();
    // One statement gives one result; keep the first of anything else a server sends.
    if (!first_result) {
      first_result.reset(next);
    } else {
      PQclear(next);
    }
  }
  Flush();
}

void PostgresAsyncProbe::Session::OnIdleInput() {
  // Nothing was asked: a notice, or the server closing the session (then start afresh).
  if (PQconsumeInput(conn) == 1) {
    while (!PQisBusy(conn)) {
      PGresult* unasked = PQgetResult(conn);
      if (unasked == nullptr) return;
      PQclear(unasked);
    }
    return;
  }
  const std::string message = PQerrorMessage(conn);
  // A round waiting at the gate on this connection fails now; otherwise the next reconnects.
  if (round && !round->sent) return Broken(ProbeFailureReason::kConnectionLost, message);
  DropConnection();
}

void PostgresAsyncProbe::Session::QueryDone() {
  phase = Phase::kIdle;
  patience_timer->Stop();
  Watch(true, false);
  ResultPtr result = std::move(first_result);
  if (result == nullptr) return Broken(ProbeFailureReason::kProtocol, "no result");
  if (query == Query::kHistory) return HandleHistory(std::move(result));
  if (round && round->sent && !round->reading) return HandleReading(std::move(result));
  // The late answer of a round already over: the connection is free for this round's reading.
  Advance();
}

void PostgresAsyncProbe::Session::HandleReading(ResultPtr result) {
  if (PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
    const char* state = PQresultErrorField(result.get(), PG_DIAG_SQLSTATE);
    const ProbeFailureReason reason = ClassifySqlState(state != nullptr ? state : "");
    const std::string message = PQresultErrorMessage(result.get());
    const bool keep = reason == ProbeFailureReason::kQuery && PQstatus(conn) == CONNECTION_OK;
    if (!keep) DropConnection();
    return Finish(ProbeFailure{reason, message});
  }
  bool drop = false;
  auto parsed = ParseReadingResult(result.get(), &drop);
  if (drop) DropConnection();
  auto* reading = std::get_if<PostgresReading>(&parsed);
  if (reading == nullptr || !WantsHistory(*reading)) {
    if (reading != nullptr) FillHistory(*reading);
    return Finish(std::move(parsed));
  }
  history_timeline = reading->timeline;
  history_lineage = reading->system_identifier;
  round->reading = std::move(*reading);
  SendQuery(TimelineHistoryQuery(history_timeline), Query::kHistory);
}

bool PostgresAsyncProbe::Session::WantsHistory(const PostgresReading& reading) {
  if (!reading.writable() || reading.timeline <= 1 || reading.timeline > 0xFFFFFFFFLL) {
    return false;
  }
  constexpr auto kRetryAfterFailure = std::chrono::seconds(60);
  auto it = histories.find({reading.system_identifier, reading.timeline});
  if (it == histories.end()) return phase == Phase::kIdle;
  return it->second.switches.empty() &&
         SteadyClock::now() - it->second.failed_at >= kRetryAfterFailure && phase == Phase::kIdle;
}

void PostgresAsyncProbe::Session::FillHistory(PostgresReading& reading) {
  if (!reading.writable() || reading.timeline <= 1) return;
  auto it = histories.find({reading.system_identifier, reading.timeline});
  if (it == histories.end()) {
    reading.timeline_history_error = "not read yet: the connection was busy";
    return;
  }
  reading.timeline_history = it->second.switches;
  reading.timeline_history_error = it->second.error;
}

void PostgresAsyncProbe::Session::HandleHistory(ResultPtr result) {
  const std::string file = TimelineHistoryFile(history_timeline);
  History entry;
  if (PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
    const char* state = PQresultErrorField(result.get(), PG_DIAG_SQLSTATE);
    const std::string message = Trim(PQresultErrorMessage(result.get()));
    // Against PostgreSQL 15 the sqlstate check alone missed it; the server's text says it too.
    entry.error = (state != nullptr && std::string(state) == "42501") ||
                          message.find("permission denied for function") != std::string::npos
                      ? "permission denied for function pg_read_file; grant EXECUTE ON FUNCTION "
                        "pg_read_file(text) to the detector's role"
                      : file + ": " + message;
  } else if (PQntuples(result.get()) != 1 || PQnfields(result.get()) != 1 ||
             PQgetisnull(result.get(), 0, 0)) {
    entry.error = file + ": unexpected result shape";
  } else {
    auto parsed = ParseTimelineHistory(AsText(result.get(), 0), history_timeline);
    if (auto* error = std::get_if<std::string>(&parsed)) {
      entry.error = file + ": " + *error;
    } else {
      entry.switches = std::move(std::get<std::vector<TimelineSwitch>>(parsed));
    }
  }
  if (!entry.error.empty()) entry.failed_at = SteadyClock::now();
  if (histories.size() >= 8) histories.clear();
  histories.insert_or_assign({history_lineage, history_timeline}, std::move(entry));
  if (round && round->reading) {
    PostgresReading reading = std::move(*round->reading);
    round->reading.reset();
    FillHistory(reading);
    return Finish(std::move(reading));
  }
  Advance();
}

void PostgresAsyncProbe::Session::OnDeadline() {
  if (!round) return;
  if (round->reading) {
    // The reading is in; only its history is late (it is cached when it comes).
    PostgresReading reading = std::move(*round->reading);
    round->reading.reset();
    reading.timeline_history_error = "no answer before the deadline";
    return Finish(std::move(reading));
  }
  const char* why = round->sent                   ? "no answer before the deadline"
                    : phase == Phase::kBusy       ? "previous probe still running"
                    : phase == Phase::kConnecting ? "connect: no answer before the deadline"
                                                  : "not sent before the deadline";
  Finish(ProbeFailure{ProbeFailureReason::kTimeout, why});
}

void PostgresAsyncProbe::Session::OnPatience() {
  if (phase != Phase::kConnecting && phase != Phase::kBusy) return;
  const std::string message = std::string(phase == Phase::kConnecting ? "connect" : "query") +
                              ": given up after " + std::to_string(Patience(timeout).count()) +
                              " ms without an answer";
  if (phase == Phase::kConnecting) {
    return ConnectFailed(ProbeFailure{ProbeFailureReason::kTimeout, message});
  }
  Broken(ProbeFailureReason::kTimeout, message);
}

void PostgresAsyncProbe::Session::Broken(ProbeFailureReason reason, const std::string& message) {
  DropConnection();
  if (!round) return;
  if (round->reading) {
    PostgresReading reading = std::move(*round->reading);
    round->reading.reset();
    reading.timeline_history_error = "the connection broke while reading the history";
    return Finish(std::move(reading));
  }
  Finish(ProbeFailure{reason, message});
}

void PostgresAsyncProbe::Session::DropConnection() {
  watch.reset();
  if (conn != nullptr) PQfinish(conn);
  conn = nullptr;
  first_result.reset();
  phase = Phase::kClosed;
  if (patience_timer) patience_timer->Stop();
}

void PostgresAsyncProbe::Session::Finish(std::variant<PostgresReading, ProbeFailure> result) {
  Round done = std::move(*round);
  round.reset();
  deadline_timer->Stop();
  if (done.gate && !done.at_gate) done.gate->Leave();
  done.obs.window.received = SteadyClock::now();
  if (auto* failure = std::get_if<ProbeFailure>(&result)) {
    failure->message = Trim(failure->message);
    done.obs.result = std::move(*failure);
  } else {
    done.obs.result = std::move(std::get<PostgresReading>(result));
  }
  done.done(std::move(done.obs));
}

void PostgresAsyncProbe::Session::Watch(bool read, bool write) {
  const int fd = PQsocket(conn);
  // While connecting, libpq may close the socket and open another, possibly under the same
  // number (the next address of a host, SSL retried without): watch afresh at every step.
  if (!watch || watch->fd() != fd || phase == Phase::kConnecting) {
    watch.reset();
    if (fd < 0) return Broken(ProbeFailureReason::kConnectionLost, "no socket");
    watch = std::make_unique<SocketWatch>(loop, fd);
  }
  std::weak_ptr<Session> weak = shared_from_this();
  if (!watch->Watch(read, write, [weak] {
        if (auto self = weak.lock()) self->OnSocket();
      })) {
    Broken(ProbeFailureReason::kInternal, "the event loop refused the socket");
  }
}

void PostgresAsyncProbe::Session::ArmPatience() {
  std::weak_ptr<Session> weak = shared_from_this();
  patience_timer->Arm(SteadyClock::now() + Patience(timeout), [weak] {
    if (auto self = weak.lock()) self->OnPatience();
  });
}

PostgresAsyncProbe::PostgresAsyncProbe(MemberSpec member, Millis timeout, EventLoop& loop)
    : loop_(loop), session_(std::make_shared<Session>(loop, std::move(member), timeout)) {}

PostgresAsyncProbe::~PostgresAsyncProbe() {
  // The session's handles belong to the loop: close them there.
  loop_.Post([session = std::move(session_)] { session->Close(); });
}

void PostgresAsyncProbe::Start(SteadyClock::time_point deadline, std::shared_ptr<LoopGate> gate,
                               Done done) {
  session_->Start(deadline, std::move(gate), std::move(done));
}

std::unique_ptr<MemberProbe> PostgresMemberProbe(const ClusterSpec& spec,
                                                 const MemberSpec& member) {
  return std::make_unique<PostgresAsyncProbe>(member, spec.probe_timeout);
}

}  // namespace sbd
