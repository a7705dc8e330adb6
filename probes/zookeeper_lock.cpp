#include "probes/zookeeper_lock.h"

#include <algorithm>
#include <cstdio>

#include "detector/common/logfmt.h"
#include "detector/common/network_text.h"
#include "probes/etcd_election.h"

namespace sbd {
namespace {

constexpr size_t kSequenceDigits = 10;  // ZooKeeper writes the sequence as %010d

bool IsDigits(const std::string& text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsHexOrDash(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
  });
}

ChildName Refused(const std::string& name, const std::string& why) {
  ChildName out;
  out.kind = ChildName::Kind::kRefused;
  out.reason =
      "child " + LogfmtEscape(name.substr(0, 64)) + (name.size() > 64 ? "..." : "") + ": " + why;
  return out;
}

// The sequence after a recipe's marker: ten digits to the end of the name. ZooKeeper's counter
// is a signed 32-bit int, so an overflowed one is written negative.
ChildName WithSequence(const std::string& name, size_t at, LockRecipe recipe) {
  const std::string digits = name.substr(at);
  if (!digits.empty() && digits.front() == '-') {
    return Refused(name, "negative sequence: the parent's counter overflowed");
  }
  if (digits.size() != kSequenceDigits || !IsDigits(digits)) {
    return Refused(name, "the recipe's form without a 10-digit sequence");
  }
  const long long sequence = std::stoll(digits);
  if (sequence > 2147483647LL) return Refused(name, "sequence above 2^31-1");
  ChildName out;
  out.kind = ChildName::Kind::kCandidate;
  out.child = LockChild{name, recipe, sequence};
  return out;
}

// Curator: an optional protection prefix "_c_<uuid>-", then "lock-" or "latch-".
std::optional<ChildName> AsCurator(const std::string& name) {
  std::string rest = name;
  if (rest.rfind("_c_", 0) == 0) {
    // "_c_", a 36-character UUID, '-'.
    if (rest.size() < 40 || rest[39] != '-' || !IsHexOrDash(rest.substr(3, 36))) {
      return std::nullopt;
    }
    rest = rest.substr(40);
  }
  for (const std::string marker : {"lock-", "latch-"}) {
    if (rest.rfind(marker, 0) == 0) {
      return WithSequence(name, name.size() - rest.size() + marker.size(), LockRecipe::kCurator);
    }
  }
  return std::nullopt;
}

// kazoo: "<uuid4 hex>__lock__<seq>" (Lock, and Election through it); "__rlock__" is a read
// lock, shared, which this kind's one-holder rule cannot read.
std::optional<ChildName> AsKazoo(const std::string& name) {
  if (name.find("__rlock__") != std::string::npos) {
    return Refused(name, "a kazoo read lock: shared, not an exclusive holder");
  }
  for (const std::string marker : {"__lock__", "__election__"}) {
    const size_t at = name.find(marker);
    if (at == std::string::npos) continue;
    if (!IsHexOrDash(name.substr(0, at))) return Refused(name, "the recipe's form, a bad prefix");
    return WithSequence(name, at + marker.size(), LockRecipe::kKazoo);
  }
  return std::nullopt;
}

std::string Shown(const LockChild& child) {
  return LogfmtEscape(child.name) + " (sequence " + std::to_string(child.sequence) + ")";
}

}  // namespace

ChildName ParseLockChildName(const std::string& name) {
  if (name.size() > kMaxLockChildNameBytes) {
    return Refused(name, std::to_string(name.size()) + " bytes, above " +
                             std::to_string(kMaxLockChildNameBytes));
  }
  if (!IsValidUtf8(name, kMaxLockChildNameBytes)) return Refused(name, "not UTF-8");
  if (std::any_of(name.begin(), name.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return Refused(name, "a control character");
  }
  if (auto curator = AsCurator(name)) return *curator;
  if (auto kazoo = AsKazoo(name)) return *kazoo;
  return ChildName{};
}

std::vector<LockChild> OrderCandidates(const std::vector<std::string>& names, LockRecord& view) {
  std::vector<LockChild> candidates;
  size_t foreign = 0;
  for (const std::string& name : names) {
    ChildName parsed = ParseLockChildName(name);
    if (parsed.kind == ChildName::Kind::kCandidate) candidates.push_back(std::move(parsed.child));
    if (parsed.kind == ChildName::Kind::kForeign) ++foreign;
    // A capped list of refusals: a hostile writer must not grow the view without bound.
    if (parsed.kind == ChildName::Kind::kRefused && view.rejected.size() < kMaxShownWaiting) {
      view.rejected.push_back(parsed.reason);
    }
  }
  if (foreign > 0) {
    view.rejected.push_back(std::to_string(foreign) +
                            " children of no lock recipe's form: ignored, as the recipes do");
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const LockChild& a, const LockChild& b) { return a.sequence < b.sequence; });
  for (size_t i = 1; i < candidates.size() && i <= kMaxShownWaiting; ++i) {
    view.waiting.push_back(Shown(candidates[i]));
  }
  if (candidates.size() > kMaxShownWaiting + 1) {
    view.waiting.push_back("and " + std::to_string(candidates.size() - kMaxShownWaiting - 1) +
                           " more");
  }
  return candidates;
}

void FillHolder(const LockChild& child, const LockHolderNode& node, int max_data_bytes,
                const std::vector<MemberSpec>& members, LockRecord& view) {
  view.holder_token = std::to_string(node.czxid);
  view.mod_revision = node.czxid;
  char session[32];
  std::snprintf(session, sizeof session, "0x%llx",
                static_cast<unsigned long long>(node.ephemeral_owner));
  view.lease_id = node.ephemeral_owner == 0 ? "0" : session;
  if (node.ephemeral_owner == 0) {
    view.rejected.push_back(LogfmtEscape(child.name) +
                            ": not ephemeral: the holder's node never expires");
  }
  if (node.data_length > max_data_bytes) {
    view.rejected.push_back(LogfmtEscape(child.name) + ": data of " +
                            std::to_string(node.data_length) + " bytes, above " +
                            std::to_string(max_data_bytes) + ": not read as an identity");
    return;
  }
  for (const MemberSpec& member : members) {
    if (!member.lease_identity.empty() && member.lease_identity == node.data) {
      view.holder = member.name;
    }
  }
}

std::string ZooKeeperLockRecord(const ZooKeeperLockSpec& spec) {
  return "ZooKeeper children of " + LogfmtEscape(spec.path) + ", lowest sequence";
}

}  // namespace sbd
