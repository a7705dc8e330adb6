#include "probes/sentinel.h"

#include <algorithm>
#include <map>

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

}  // namespace

SentinelStore::SentinelStore(std::vector<std::string> sentinels, std::string master_name,
                             std::vector<MemberSpec> members, SentinelAuth auth)
    : sentinels_(std::move(sentinels)),
      master_name_(std::move(master_name)),
      members_(std::move(members)),
      auth_(std::move(auth)),
      clients_(sentinels_.size()) {}

std::variant<SentinelView, ProbeFailure> SentinelStore::Ask(size_t index,
                                                            SteadyClock::time_point deadline) {
  std::unique_ptr<RedisClient>& client = clients_[index];
  if (!client) {
    MemberSpec source;  // the one password resolver, for the sentinels' own sources
    source.password_file = auth_.password_file;
    source.password_env = auth_.password_env;
    auto password = ResolvePassword(source);
    if (auto* error = std::get_if<std::string>(&password)) {
      return ProbeFailure{ProbeFailureReason::kConfig, *error};
    }
    client = std::make_unique<RedisClient>(
        sentinels_[index], auth_.username,
        std::get<std::optional<std::string>>(std::move(password)), auth_.tls);
  }
  if (auto failure = client->Connect(deadline)) {
    client.reset();  // a password file may change: read it again at the next connect
    return *failure;
  }
  RedisClient& sentinel = *client;
  auto replies = sentinel.Pipeline(
      {{"SENTINEL", "get-master-addr-by-name", master_name_}, {"SENTINEL", "master", master_name_}},
      deadline);
  if (auto* failure = std::get_if<ProbeFailure>(&replies)) return *failure;
  const auto& values = std::get<std::vector<RedisValue>>(replies);
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

std::variant<DcsView, ProbeFailure> SentinelStore::Read(SteadyClock::time_point deadline) {
  std::vector<std::variant<SentinelView, ProbeFailure>> answers;
  for (size_t i = 0; i < clients_.size(); ++i) {
    // An equal share of what is left, so one hung sentinel cannot starve the others.
    const auto now = SteadyClock::now();
    const auto share = deadline > now ? (deadline - now) / static_cast<int>(clients_.size() - i)
                                      : SteadyClock::duration::zero();
    answers.push_back(Ask(i, now + share));
  }
  int minority_votes = 0;
  auto record = Vote(sentinels_, answers, members_, &minority_votes);
  if (auto* view = std::get_if<DcsView>(&record)) {
    RememberHolder(*view);
    BoundHandover(*view, minority_votes, handover_clock_, WallClock::now());
  }
  return record;
}

void SentinelStore::RememberHolder(DcsView& view) {
  if (!view.holder.empty() && view.holder != holder_) {
    if (!holder_.empty()) {
      previous_holder_ = holder_;
      holder_changed_at_ = WallClock::now();
    }
    holder_ = view.holder;
  }
  view.previous_holder = previous_holder_;
  view.holder_changed_at = holder_changed_at_;
  view.handover_bound = kSentinelHandoverBound;
}

void SentinelStore::BoundHandover(DcsView& view, int minority_votes, HandoverClock& clock,
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

std::variant<DcsView, ProbeFailure> SentinelStore::Vote(
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
  DcsView record;
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
