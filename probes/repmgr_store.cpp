#include <algorithm>

#include "probes/postgres.h"
#include "probes/repmgr.h"

namespace sbd {
namespace {

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) {
    text.pop_back();
  }
  return text.substr(0, 300);
}

}  // namespace

// The read in flight: one connection per member's copy, each opened, asked once and closed;
// lives on the loop thread, every callback holding a weak reference and the read's number.
struct RepmgrStore::Session : std::enable_shared_from_this<Session> {
  using Answer = std::variant<RepmgrCopy, ProbeFailure>;
  struct Copy {
    PGconn* conn = nullptr;
    std::unique_ptr<SocketWatch> watch;
    bool connecting = false;
    ResultPtr first;
    std::optional<Answer> answer;
  };

  Session(EventLoop& loop, std::vector<MemberSpec> members, std::string database, Millis timeout,
          RepmgrDiscoverySettings discovery, std::optional<MemberSpec> witness)
      : loop(loop),
        configured(std::move(members)),
        database(std::move(database)),
        timeout(timeout),
        settings(std::move(discovery)),
        witness(std::move(witness)),
        timer(loop) {
    if (this->witness) this->witness->address.clear();  // stands for no node
  }
  ~Session() {
    for (size_t i = 0; i < copies.size(); ++i) Drop(i);
  }

  void Start(SteadyClock::time_point deadline, Done answer);
  void ReadAll(SteadyClock::time_point deadline);
  std::vector<MemberSpec> Readers() const;
  void Reply(std::vector<Answer> all);
  void Open(size_t index, SteadyClock::time_point deadline);
  void OnSocket(size_t index);
  void Query(size_t index);
  void Collect(size_t index);
  void Watch(size_t index, bool read, bool write);
  void Answered(size_t index, Answer answer);
  void Drop(size_t index);
  void Close();

  EventLoop& loop;
  std::vector<MemberSpec> configured;
  std::string database;
  Millis timeout;
  RepmgrDiscoverySettings settings;
  std::optional<MemberSpec> witness;  ///< read last, unless seeding
  std::vector<MemberSpec> found;      ///< the nodes discovered at the last read
  std::vector<MemberSpec> members;    ///< the servers this read asks, copies[i] from members[i]
  bool seeding = false;               ///< this read asks the seeds, whose copies only find nodes
  SteadyClock::time_point deadline;
  LoopTimer timer;
  std::uint64_t read = 0;
  Done done;
  std::vector<Copy> copies;
  size_t outstanding = 0;
  RepmgrLagClock lag;  ///< across reads
};

void RepmgrStore::Session::Start(SteadyClock::time_point until, Done answer) {
  done = std::move(answer);
  ReadAll(until);
}

// The configured members, the nodes found last and the witness; with no node known, and
// discovery on, the seeds.
std::vector<MemberSpec> RepmgrStore::Session::Readers() const {
  std::vector<MemberSpec> readers = configured;
  if (settings.discovery.enabled) readers.insert(readers.end(), found.begin(), found.end());
  if (!readers.empty() || !settings.discovery.enabled) {
    if (witness) readers.push_back(*witness);
    return readers;
  }
  const DiscoverySpec& discovery = settings.discovery;
  for (const std::string& seed : settings.seeds) {
    readers.push_back(MemberAt("seed " + seed, SplitHostPort(seed), discovery.dsn,
                               discovery.password_file, discovery.password_env));
    readers.back().address.clear();  // a seed stands for no node: MemberOf never maps to it
  }
  return readers;
}

void RepmgrStore::Session::ReadAll(SteadyClock::time_point until) {
  ++read;
  for (size_t i = 0; i < copies.size(); ++i) Drop(i);
  deadline = until;
  members = Readers();
  seeding = settings.discovery.enabled && configured.empty() && found.empty();
  copies = std::vector<Copy>(members.size());
  outstanding = members.size();
  if (members.empty()) {
    auto reply = std::move(done);
    done = nullptr;
    return reply(ProbeFailure{ProbeFailureReason::kConfig, "no member to read repmgr from"});
  }
  std::weak_ptr<Session> weak = shared_from_this();
  const std::uint64_t this_read = read;
  timer.Arm(deadline, [weak, this_read] {
    auto self = weak.lock();
    if (!self || self->read != this_read || !self->done) return;
    for (size_t i = 0; i < self->copies.size() && self->done; ++i) {
      if (self->copies[i].answer) continue;
      self->Answered(
          i, ProbeFailure{ProbeFailureReason::kTimeout,
                          self->copies[i].connecting ? "connect: no answer before the deadline"
                                                     : "no answer before the deadline"});
    }
  });
  for (size_t i = 0; i < members.size() && done && read == this_read; ++i) Open(i, deadline);
}

void RepmgrStore::Session::Open(size_t index, SteadyClock::time_point deadline) {
  auto conninfo = PostgresConninfo(members[index], timeout, deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&conninfo)) return Answered(index, *failure);
  // The later dbname wins over the member's own: the metadata database, on the same server.
  const std::string text =
      std::get<std::string>(conninfo) + " dbname=" + QuoteConninfoValue(database);
  Copy& copy = copies[index];
  copy.conn = PQconnectStart(text.c_str());
  if (copy.conn == nullptr) {
    return Answered(index, ProbeFailure{ProbeFailureReason::kInternal, "connect: out of memory"});
  }
  if (PQstatus(copy.conn) == CONNECTION_BAD) {
    const std::string message = PQerrorMessage(copy.conn);
    return Answered(index, ProbeFailure{ClassifyConnectError(message), "connect: " + message});
  }
  copy.connecting = true;
  Watch(index, false, true);
}

void RepmgrStore::Session::OnSocket(size_t index) {
  Copy& copy = copies[index];
  if (copy.answer || copy.conn == nullptr) return;
  if (copy.connecting) {
    switch (PQconnectPoll(copy.conn)) {
      case PGRES_POLLING_READING:
        return Watch(index, true, false);
      case PGRES_POLLING_WRITING:
        return Watch(index, false, true);
      case PGRES_POLLING_OK:
        copy.connecting = false;
        return Query(index);
      default: {
        const std::string message = PQerrorMessage(copy.conn);
        return Answered(index, ProbeFailure{ClassifyConnectError(message), "connect: " + message});
      }
    }
  }
  if (PQflush(copy.conn) < 0 || PQconsumeInput(copy.conn) != 1) {
    return Answered(index,
                    ProbeFailure{ProbeFailureReason::kConnectionLost, PQerrorMessage(copy.conn)});
  }
  Collect(index);
}

void RepmgrStore::Session::Query(size_t index) {
  Copy& copy = copies[index];
  if (PQsetnonblocking(copy.conn, 1) != 0 ||
      PQsendQuery(copy.conn, RepmgrCopyQuery().c_str()) != 1) {
    return Answered(index,
                    ProbeFailure{ProbeFailureReason::kConnectionLost, PQerrorMessage(copy.conn)});
  }
  const int pending = PQflush(copy.conn);
  if (pending < 0) {
    return Answered(index,
                    ProbeFailure{ProbeFailureReason::kConnectionLost, PQerrorMessage(copy.conn)});
  }
  Watch(index, true, pending == 1);
}

void RepmgrStore::Session::Collect(size_t index) {
  Copy& copy = copies[index];
  while (!PQisBusy(copy.conn)) {
    PGresult* next = PQgetResult(copy.conn);
    if (next == nullptr) {
      ResultPtr result = std::move(copy.first);
      if (result == nullptr) {
        return Answered(index, ProbeFailure{ProbeFailureReason::kProtocol, "no result"});
      }
      if (PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
        const char* state = PQresultErrorField(result.get(), PG_DIAG_SQLSTATE);
        return Answered(index, ProbeFailure{ClassifySqlState(state != nullptr ? state : ""),
                                            PQresultErrorMessage(result.get())});
      }
      return Answered(index, ParseRepmgrCopy(result.get()));
    }
    // One statement gives one result; keep the first of anything else a server sends.
    if (!copy.first) {
      copy.first.reset(next);
    } else {
      PQclear(next);
    }
  }
  const int pending = PQflush(copy.conn);
  Watch(index, true, pending == 1);
}

void RepmgrStore::Session::Watch(size_t index, bool read_ready, bool write_ready) {
  Copy& copy = copies[index];
  const int fd = PQsocket(copy.conn);
  // While connecting, libpq may close the socket and open another under the same number.
  if (!copy.watch || copy.watch->fd() != fd || copy.connecting) {
    copy.watch.reset();
    if (fd < 0) {
      return Answered(index, ProbeFailure{ProbeFailureReason::kConnectionLost, "no socket"});
    }
    copy.watch = std::make_unique<SocketWatch>(loop, fd);
  }
  std::weak_ptr<Session> weak = shared_from_this();
  const std::uint64_t this_read = read;
  if (!copy.watch->Watch(read_ready, write_ready, [weak, this_read, index] {
        auto self = weak.lock();
        if (self && self->read == this_read) self->OnSocket(index);
      })) {
    Answered(index,
             ProbeFailure{ProbeFailureReason::kInternal, "the event loop refused the socket"});
  }
}

void RepmgrStore::Session::Answered(size_t index, Answer answer) {
  if (!done || copies[index].answer) return;
  Drop(index);
  if (auto* failure = std::get_if<ProbeFailure>(&answer)) {
    failure->message = Trimmed(failure->message);
  }
  copies[index].answer = std::move(answer);
  if (--outstanding > 0) return;
  timer.Stop();
  std::vector<Answer> all;
  for (Copy& copy : copies) all.push_back(std::move(*copy.answer));
  Reply(std::move(all));
}

void RepmgrStore::Session::Reply(std::vector<Answer> all) {
  std::optional<RepmgrDiscovery> discovery;
  if (settings.discovery.enabled) {
    discovery = DiscoverRepmgrNodes(configured, members, all, settings.discovery);
    // Nothing readable keeps what was found: a cluster down for a moment is still the cluster.
    const bool readable = std::any_of(all.begin(), all.end(), [](const Answer& a) {
      return std::holds_alternative<RepmgrCopy>(a);
    });
    if (readable) found = discovery->copies;
  }
  // The seeds only find nodes: read those now, within the same deadline.
  if (seeding && !found.empty()) return ReadAll(deadline);
  auto reply = std::move(done);
  done = nullptr;
  if (seeding) {
    std::string said;
    for (size_t i = 0; i < all.size(); ++i) {
      const auto* failure = std::get_if<ProbeFailure>(&all[i]);
      said += "; " + members[i].name + ": " + (failure ? failure->message : "no node found");
    }
    return reply(
        ProbeFailure{ProbeFailureReason::kConnectionLost,
                     "discovery found no node in the seeds' copies of repmgr's record" + said});
  }
  // The witness (last) is never promoted: out of recovery, it is no promotion in flight.
  const size_t nodes = members.size() - (witness ? 1 : 0);
  const std::vector<MemberSpec> promotable(members.begin(), members.begin() + nodes);
  const std::vector<Answer> promotable_copies(all.begin(), all.begin() + nodes);
  if (auto held = RepmgrRecordLag(promotable, promotable_copies, lag, WallClock::now())) {
    return reply(*held);
  }
  if (witness) {
    if (auto* copy = std::get_if<RepmgrCopy>(&all.back())) copy->witness = true;
  }
  auto record = FoldRepmgrCopies(members, all);
  if (auto* view = std::get_if<LockRecord>(&record); view && discovery) {
    view->members = std::move(discovery->registered);
    for (std::string& why : discovery->rejected) view->rejected.push_back(std::move(why));
  }
  reply(std::move(record));
}

void RepmgrStore::Session::Drop(size_t index) {
  Copy& copy = copies[index];
  copy.watch.reset();
  copy.first.reset();
  if (copy.conn != nullptr) PQfinish(copy.conn);
  copy.conn = nullptr;
  copy.connecting = false;
}

void RepmgrStore::Session::Close() {
  ++read;
  timer.Stop();
  done = nullptr;
  for (size_t i = 0; i < copies.size(); ++i) Drop(i);
}

RepmgrStore::RepmgrStore(std::vector<MemberSpec> members, std::string database, Millis timeout,
                         EventLoop& loop, RepmgrDiscoverySettings discovery,
                         std::optional<MemberSpec> witness)
    : loop_(loop),
      session_(std::make_shared<Session>(loop, std::move(members), std::move(database), timeout,
                                         std::move(discovery), std::move(witness))) {}

RepmgrStore::~RepmgrStore() {
  // The session's handles belong to the loop: close them there.
  loop_.Post([session = std::move(session_)] { session->Close(); });
}

void RepmgrStore::Start(SteadyClock::time_point deadline, Done done) {
  session_->Start(deadline, std::move(done));
}

}  // namespace sbd
