#include "probes/sentinel.h"

#include <algorithm>
#include <map>

#include "probes/redis_loop.h"
#include "probes/sentinel_watch.h"

namespace sbd {
namespace {

// The member Sentinel's address stands for, else the address itself.
std::string NamedMember(const std::string& address, const std::vector<MemberSpec>& members) {
  for (const MemberSpec& member : members) {
    if (member.address == address) return member.name;
  }
  return address;
}

// One sentinel's answer to SENTINEL get-master-addr-by-name and SENTINEL master.
std::variant<SentinelView, ProbeFailure> AnswerOf(const std::vector<RedisValue>& values) {
  for (const RedisValue& value : values) {
    if (value.error) {
      // Asked without a password, or as a user without the SENTINEL subcommands.
      const bool auth = value.text.rfind("NOAUTH", 0) == 0 || value.text.rfind("NOPERM", 0) == 0;
      return ProbeFailure{auth ? ProbeFailureReason::kAuth : ProbeFailureReason::kQuery,
                          value.text.substr(0, 160)};
    }
  }
  auto view = ParseSentinelMaster(values[1].items, values[0].items);
  if (auto* error = std::get_if<std::string>(&view)) {
    return ProbeFailure{ProbeFailureReason::kProtocol, *error};
  }
  return std::get<SentinelView>(view);
}

}  // namespace

// The sentinels' kept connections, what the store remembers between reads, and the read in
// flight; lives on the loop thread.
struct SentinelStore::Session : std::enable_shared_from_this<Session> {
  using Answer = std::variant<SentinelView, ProbeFailure>;
  Session(EventLoop& loop, std::vector<std::string> sentinels, std::string master_name,
          std::vector<MemberSpec> members, SentinelAuth auth)
      : loop(loop),
        sentinels(std::move(sentinels)),
        master_name(std::move(master_name)),
        members(std::move(members)),
        auth(std::move(auth)),
        connections(this->sentinels.size()),
        timer(loop) {}

  void Start(SteadyClock::time_point deadline, Done answer);
  void Ask(size_t index, SteadyClock::time_point deadline);
  void Answered(std::uint64_t read, size_t index, Answer answer);
  void Complete();
  void RememberHolder(LockRecord& view);
  void Close();

  EventLoop& loop;
  std::vector<std::string> sentinels;
  std::string master_name;
  std::vector<MemberSpec> members;
  SentinelAuth auth;
  /// One per sentinel; null until a password is read, and again after a failure.
  std::vector<std::shared_ptr<LoopRedisConnection>> connections;
  LoopTimer timer;
  std::string holder;
  std::string previous_holder;
  std::optional<WallClock::time_point> holder_changed_at;
  HandoverClock handover_clock;
  // The read in flight.
  std::uint64_t read = 0;
  Done done;
  std::vector<std::optional<Answer>> answers;
  size_t outstanding = 0;
};

void SentinelStore::Session::Start(SteadyClock::time_point deadline, Done answer) {
  ++read;
  done = std::move(answer);
  answers.assign(sentinels.size(), std::nullopt);
  outstanding = sentinels.size();
  if (sentinels.empty()) return Complete();
  std::weak_ptr<Session> weak = shared_from_this();
  const std::uint64_t this_read = read;
  // A backstop: each connection answers by the deadline on its own.
  const auto bound =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  timer.Arm(deadline, [weak, this_read, bound] {
    auto self = weak.lock();
    if (!self || self->read != this_read || !self->done) return;
    for (size_t i = 0; i < self->answers.size(); ++i) {
      if (self->answers[i]) continue;
      if (self->connections[i]) self->connections[i]->Close();
      self->connections[i].reset();
      self->Answered(this_read, i,
                     ProbeFailure{ProbeFailureReason::kTimeout,
                                  self->sentinels[i] + ": no answer within the deadline of " +
                                      std::to_string(bound.count()) + " ms"});
    }
  });
  for (size_t i = 0; i < sentinels.size() && done && read == this_read; ++i) Ask(i, deadline);
}

void SentinelStore::Session::Ask(size_t index, SteadyClock::time_point deadline) {
  std::shared_ptr<LoopRedisConnection>& connection = connections[index];
  if (!connection) {
    MemberSpec source;  // the one password resolver, for the sentinels' own sources
    source.password_file = auth.password_file;
    source.password_env = auth.password_env;
    auto password = ResolvePassword(source);
    if (auto* error = std::get_if<std::string>(&password)) {
      return Answered(read, index, ProbeFailure{ProbeFailureReason::kConfig, *error});
    }
    connection = LoopRedisConnection::Create(
        loop, sentinels[index], auth.username,
        std::get<std::optional<std::string>>(std::move(password)), auth.tls);
  }
  std::weak_ptr<Session> weak = shared_from_this();
  const std::uint64_t this_read = read;
  std::vector<std::vector<std::string>> commands = {
      {"SENTINEL", "get-master-addr-by-name", master_name}, {"SENTINEL", "master", master_name}};
  connection->Connect(deadline, [weak, this_read, index, deadline,
                                 commands](std::optional<ProbeFailure> failure) {
    auto self = weak.lock();
    if (!self || self->read != this_read || !self->done) return;
    if (failure) return self->Answered(this_read, index, std::move(*failure));
    if (!self->connections[index]) return;
    self->connections[index]->Pipeline(
        commands, deadline, [weak, this_read, index](LoopRedisConnection::Replies replies) {
          auto again = weak.lock();
          if (!again || again->read != this_read) return;
          if (auto* failure = std::get_if<ProbeFailure>(&replies)) {
            return again->Answered(this_read, index, std::move(*failure));
          }
          again->Answered(this_read, index,
                          AnswerOf(RedisValuesOf(std::get<std::vector<RedisReplyPtr>>(replies))));
        });
  });
}

void SentinelStore::Session::Answered(std::uint64_t of_read, size_t index, Answer answer) {
  if (of_read != read || !done || answers[index]) return;
  // A failed connection is dialed again (and its password read again) at the next read.
  if (std::holds_alternative<ProbeFailure>(answer)) connections[index].reset();
  answers[index] = std::move(answer);
  if (--outstanding == 0) Complete();
}

void SentinelStore::Session::Complete() {
  timer.Stop();
  std::vector<Answer> all;
  for (auto& answer : answers) all.push_back(std::move(*answer));
  answers.clear();
  int minority_votes = 0;
  auto record = Vote(sentinels, all, members, &minority_votes);
  if (auto* view = std::get_if<LockRecord>(&record)) {
    RememberHolder(*view);
    BoundHandover(*view, minority_votes, handover_clock, WallClock::now());
  }
  auto answer = std::move(done);
  done = nullptr;
  answer(std::move(record));
}

void SentinelStore::Session::RememberHolder(LockRecord& view) {
  if (!view.holder.empty() && view.holder != holder) {
    if (!holder.empty()) {
      previous_holder = holder;
      holder_changed_at = WallClock::now();
    }
    holder = view.holder;
  }
  view.previous_holder = previous_holder;
  view.holder_changed_at = holder_changed_at;
  view.handover_bound = kSentinelHandoverBound;
}

void SentinelStore::Session::Close() {
  ++read;
  timer.Stop();
  done = nullptr;
  for (auto& connection : connections) {
    if (connection) connection->Close();
    connection.reset();
  }
}

SentinelStore::SentinelStore(std::vector<std::string> sentinels, std::string master_name,
                             std::vector<MemberSpec> members, SentinelAuth auth, EventLoop& loop)
    : sentinels_(sentinels),
      master_name_(master_name),
      auth_(auth),
      loop_(loop),
      session_(std::make_shared<Session>(loop, std::move(sentinels), std::move(master_name),
                                         std::move(members), std::move(auth))) {}

SentinelStore::~SentinelStore() {
  // The session is the loop's: close it there, after anything in flight.
  loop_.Post([session = std::move(session_)] { session->Close(); });
}

void SentinelStore::Start(SteadyClock::time_point deadline, Done done) {
  session_->Start(deadline, std::move(done));
}

void SentinelStore::BoundHandover(LockRecord& view, int minority_votes, HandoverClock& clock,
                                  WallClock::time_point now) {
  using std::chrono::milliseconds;
  auto held = [&](const WallClock::time_point since) {
    return std::chrono::duration_cast<milliseconds>(now - since).count();
  };
  if (!view.handover_in_progress) clock.majority_since.reset();
  if (view.handover_in_progress || minority_votes <= 0) clock.minority_since.reset();
  if (view.handover_in_progress) {
    if (!clock.majority_since) clock.majority_since = now;
    // Sentinel's failover-timeout (3 min by default) is no bound: a failover that keeps the
    // lock moving for longer than a handover takes has failed, or is a lie.
    if (now - *clock.majority_since <= kSentinelHandoverBound) return;
    view.handover_in_progress = false;
    view.dissent.push_back("a majority of sentinels has reported a failover in progress for " +
                           std::to_string(held(*clock.majority_since)) +
                           " ms, past the handover bound of " +
                           std::to_string(kSentinelHandoverBound.count()) + " ms: not trusted");
    return;
  }
  if (minority_votes <= 0) return;
  if (!clock.minority_since) clock.minority_since = now;
  const bool fresh = now - *clock.minority_since <= kSentinelAgreementBound;
  view.handover_in_progress = fresh;
  view.dissent.push_back(
      "the minority's failover report, read for " + std::to_string(held(*clock.minority_since)) +
      " ms, is " + (fresh ? "believed" : "not trusted") + ": a minority is believed for " +
      std::to_string(kSentinelAgreementBound.count()) + " ms at most, while the others hear of it");
}

std::variant<LockRecord, ProbeFailure> SentinelStore::Vote(
    const std::vector<std::string>& sentinels,
    const std::vector<std::variant<SentinelView, ProbeFailure>>& answers,
    const std::vector<MemberSpec>& members, int* minority_votes) {
  std::map<std::string, int> votes;
  std::string failures;
  for (const auto& answer : answers) {
    if (const auto* view = std::get_if<SentinelView>(&answer)) ++votes[view->address];
  }
  std::string majority;
  for (const auto& [address, count] : votes) {
    if (2 * count > static_cast<int>(sentinels.size())) majority = address;
  }
  LockRecord record;
  record.lease_id = "0";
  for (const auto& answer : answers) {
    const auto* view = std::get_if<SentinelView>(&answer);
    if (view != nullptr && view->address == majority) {
      record.mod_revision = std::max(record.mod_revision, view->config_epoch);
    }
  }
  // Sentinels that say a failover is under way: moving the lock now, or naming another master
  // at a newer epoch than the majority's (a configuration the others have not heard of yet).
  int failover_votes = 0;
  for (size_t i = 0; i < answers.size() && i < sentinels.size(); ++i) {
    const std::string& who = sentinels[i];
    if (const auto* failure = std::get_if<ProbeFailure>(&answers[i])) {
      record.dissent.push_back("sentinel " + who + ": no answer (" + ReasonName(failure->reason) +
                               "): " + failure->message);
      if (!failures.empty()) failures += "; ";
      failures += failure->message;
      continue;
    }
    const SentinelView& view = std::get<SentinelView>(answers[i]);
    if (!record.endpoint.empty()) record.endpoint += ",";
    record.endpoint += who;
    if (view.address != majority) {
      record.dissent.push_back("sentinel " + who + " names " + view.address + " at epoch " +
                               std::to_string(view.config_epoch) + " (flags " + view.flags + ")");
      if (!majority.empty() && view.config_epoch > record.mod_revision) ++failover_votes;
      continue;
    }
    if (view.failover_in_progress) {
      ++failover_votes;
      record.dissent.push_back("sentinel " + who + ": failover in progress at epoch " +
                               std::to_string(view.config_epoch));
    }
  }
  if (record.endpoint.empty()) {
    return ProbeFailure{answers.empty() ? ProbeFailureReason::kConfig
                                        : std::get<ProbeFailure>(answers.front()).reason,
                        "no sentinel answered: " + failures};
  }
  if (!majority.empty()) record.holder = NamedMember(majority, members);
  // A failover moves the lock only when a strict majority of the configured sentinels say so:
  // one sentinel (misconfigured, or anyone's) must not excuse a master nobody elected.
  const bool agreed = 2 * failover_votes > static_cast<int>(sentinels.size());
  record.handover_in_progress = !majority.empty() && agreed;
  if (failover_votes > 0 && !record.handover_in_progress) {
    record.dissent.push_back("a failover is reported by " + std::to_string(failover_votes) +
                             " of " + std::to_string(sentinels.size()) +
                             " sentinels, not a majority");
    if (minority_votes != nullptr && !majority.empty()) *minority_votes = failover_votes;
  }
  return record;
}

std::unique_ptr<LockWatch> SentinelStore::Watch(LockWatch::Changed on_change) {
  return std::make_unique<SentinelWatch>(sentinels_, master_name_, std::move(on_change), auth_);
}

}  // namespace sbd
