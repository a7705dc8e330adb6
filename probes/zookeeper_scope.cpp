// Patroni on ZooKeeper: the scope's znodes applied to a view, and the store reading them on the
// shared ZooKeeper session. See zookeeper_scope.h.
#include "probes/zookeeper_scope.h"

#include <algorithm>
#include <cstdio>

#include "detector/common/logfmt.h"
#include "detector/common/network_text.h"
#include "probes/etcd.h"
#include "probes/zookeeper_session.h"

namespace sbd {
namespace {

std::string TooBig(const std::string& name, std::int64_t length, int max_data_bytes) {
  return LogfmtEscape(name.substr(0, 80)) + ": data of " + std::to_string(length) +
         " bytes, above max_data_bytes " + std::to_string(max_data_bytes);
}

std::string SessionHex(std::int64_t session) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(session));
  return session == 0 ? "0" : text;
}

void ApplyLeader(const ScopeZnode& node, LockRecord& view) {
  view.holder = NetworkName(node.data);
  view.mod_revision = node.czxid;
  view.lease_id = SessionHex(node.ephemeral_owner);
  if (node.ephemeral_owner == 0) {
    view.rejected.push_back("leader: not ephemeral: no session of Patroni's owns it");
  }
  if (node.data.empty()) view.rejected.push_back("leader: no member name in its data");
}

}  // namespace

std::optional<ProbeFailure> ApplyScopeZnode(const std::string& name, const ScopeZnode& node,
                                            int max_data_bytes, LockRecord& view) {
  const bool member = name.rfind("members/", 0) == 0;
  if (name != "leader" && name != "initialize" && name != "config" && !member) return std::nullopt;
  if (node.data_length > max_data_bytes || node.data.size() > static_cast<size_t>(max_data_bytes)) {
    const std::string why =
        TooBig(name, std::max<std::int64_t>(node.data_length, node.data.size()), max_data_bytes);
    if (name == "leader") {
      return ProbeFailure{ProbeFailureReason::kProtocol, why + ": the leader cannot be told"};
    }
    view.rejected.push_back(why + ": not read");
    return std::nullopt;
  }
  if (name == "leader") {
    ApplyLeader(node, view);
  } else if (name == "initialize") {
    view.initialize = NetworkName(node.data);
  } else if (name == "config") {
    ReadPatroniConfig(node.data, view);
  } else {
    ReadPatroniMember(name.substr(8), node.data, view);
  }
  return std::nullopt;
}

std::string PatroniScopePath(const ClusterSpec& spec) {
  return spec.dcs_namespace + "/" + spec.scope;
}

/// One Patroni scope's reads and watches on one cluster's session. Loop thread only.
class ZooKeeperScopeReader : public ZooKeeperSession {
 public:
  using ZooKeeperSession::ZooKeeperSession;

 private:
  void SendRead() override;
  void ArmWatch() override;
  void Get(const std::string& name);
  static void NodeDone(int rc, const char* value, int length, const Stat* stat, const void* data);
  void OnNode(const std::string& name, int rc, const char* value, int length, const Stat* stat);
  static void MembersDone(int rc, const String_vector* children, const Stat*, const void* data);
  void OnMembers(int rc, const String_vector* children);
  void Answered();
  static void LeaderArmed(int rc, const Stat*, const void* data);
  static void MembersArmed(int rc, const String_vector*, const Stat*, const void* data);
  static std::shared_ptr<ZooKeeperScopeReader> Armer(const void* data);

  std::string Path(const std::string& name) const { return spec_.path + "/" + name; }

  LockRecord view_;
  int outstanding_ = 0;  // requests of the current read not answered yet
};

void ZooKeeperScopeReader::SendRead() {
  view_ = LockRecord{};
  view_.endpoint = ZooKeeperHostList(spec_.hosts);
  outstanding_ = 0;
  for (const char* name : {"leader", "initialize", "config"}) Get(name);
  if (!reading()) return;
  const void* request = NewRequest("members");
  ++outstanding_;
  const int rc = zoo_aget_children2(zh_, Path("members").c_str(), 0, MembersDone, request);
  if (rc != ZOK) {
    Forget(request);
    Fail(ZooKeeperReason(rc), std::string("listing the scope's members: ") + zerror(rc));
  }
}

void ZooKeeperScopeReader::Get(const std::string& name) {
  if (!reading()) return;  // an earlier request of this read failed it
  const void* request = NewRequest(name);
  ++outstanding_;
  const int rc = zoo_aget(zh_, Path(name).c_str(), 0, NodeDone, request);
  if (rc != ZOK) {
    Forget(request);
    Fail(ZooKeeperReason(rc), "reading " + LogfmtEscape(name) + ": " + zerror(rc));
  }
}

void ZooKeeperScopeReader::NodeDone(int rc, const char* value, int length, const Stat* stat,
                                    const void* data) {
  std::shared_ptr<ZooKeeperScopeReader> hold;
  std::string name;
  if (ZooKeeperScopeReader* reader = Owner(data, hold, &name)) {
    reader->OnNode(name, rc, value, length, stat);
  }
}

void ZooKeeperScopeReader::OnNode(const std::string& name, int rc, const char* value, int length,
                                  const Stat* stat) {
  --outstanding_;
  // A missing znode is no leader, no lineage yet, no config, or a member that left after the list.
  if (rc == ZNONODE) return Answered();
  if (rc != ZOK || stat == nullptr) {
    return Fail(ZooKeeperReason(rc), "reading " + LogfmtEscape(name) + ": " + zerror(rc));
  }
  ScopeZnode node;
  node.data_length = stat->dataLength;
  node.czxid = stat->czxid;
  node.ephemeral_owner = stat->ephemeralOwner;
  if (value != nullptr && length > 0 && length <= spec_.max_data_bytes)
    node.data.assign(value, length);
  if (auto failure = ApplyScopeZnode(name, node, spec_.max_data_bytes, view_)) {
    return Fail(failure->reason, failure->message);
  }
  Answered();
}

void ZooKeeperScopeReader::MembersDone(int rc, const String_vector* children, const Stat*,
                                       const void* data) {
  std::shared_ptr<ZooKeeperScopeReader> hold;
  if (ZooKeeperScopeReader* reader = Owner(data, hold)) reader->OnMembers(rc, children);
}

void ZooKeeperScopeReader::OnMembers(int rc, const String_vector* children) {
  --outstanding_;
  if (rc == ZNONODE) return Answered();
  if (rc != ZOK) {
    return Fail(ZooKeeperReason(rc), std::string("listing the scope's members: ") + zerror(rc));
  }
  const int count = children == nullptr ? 0 : children->count;
  if (count > spec_.max_children) {
    return Fail(ProbeFailureReason::kProtocol, std::to_string(count) +
                                                   " members under the scope, above max_children " +
                                                   std::to_string(spec_.max_children));
  }
  for (int i = 0; i < count && reading(); ++i) {
    Get(std::string("members/") + children->data[i]);
  }
  if (reading()) Answered();
}

void ZooKeeperScopeReader::Answered() {
  if (outstanding_ > 0 || !reading()) return;
  std::sort(view_.members.begin(), view_.members.end(),
            [](const DcsMember& a, const DcsMember& b) { return a.name < b.name; });
  Finish(std::move(view_));
}

void ZooKeeperScopeReader::ArmWatch() {
  if (!watch_state_ || zh_ == nullptr || !connected_ || watch_armed_) return;
  watch_armed_ = true;
  auto* leader = new std::weak_ptr<ZooKeeperSession>(weak_from_this());
  // exists (not get): it is set whether or not there is a leader, and fires on its creation.
  int rc = zoo_awexists(zh_, Path("leader").c_str(), OnWatchEvent,
                        static_cast<ZooKeeperSession*>(this), LeaderArmed, leader);
  if (rc != ZOK) {
    delete leader;
    watch_armed_ = false;
    return;
  }
  auto* members = new std::weak_ptr<ZooKeeperSession>(weak_from_this());
  rc = zoo_awget_children2(zh_, Path("members").c_str(), OnWatchEvent,
                           static_cast<ZooKeeperSession*>(this), MembersArmed, members);
  if (rc != ZOK) delete members;  // the leader's watch stands; the next event sets both
}

std::shared_ptr<ZooKeeperScopeReader> ZooKeeperScopeReader::Armer(const void* data) {
  std::unique_ptr<const std::weak_ptr<ZooKeeperSession>> weak(
      static_cast<const std::weak_ptr<ZooKeeperSession>*>(data));
  auto reader = std::static_pointer_cast<ZooKeeperScopeReader>(weak->lock());
  if (!reader || !reader->watch_state_ || reader->zh_ == nullptr) return nullptr;
  return reader;
}

void ZooKeeperScopeReader::LeaderArmed(int rc, const Stat*, const void* data) {
  auto reader = Armer(data);
  if (!reader) return;
  if (rc == ZOK || rc == ZNONODE) {
    reader->watch_state_->up = true;
  } else {
    reader->watch_armed_ = false;  // set again at the next session
  }
}

// A scope without members/ yet has no children watch: the leader's watch stands meanwhile.
void ZooKeeperScopeReader::MembersArmed(int, const String_vector*, const Stat*, const void* data) {
  Armer(data);
}

ZooKeeperScopeStore::ZooKeeperScopeStore(const ClusterSpec& spec, EventLoop& loop) : loop_(loop) {
  ZooKeeperLockSpec session = spec.patroni_zookeeper.value_or(ZooKeeperLockSpec{});
  session.path = PatroniScopePath(spec);
  reader_ = std::make_shared<ZooKeeperScopeReader>(loop, std::move(session));
}

ZooKeeperScopeStore::~ZooKeeperScopeStore() {
  loop_.Post([reader = std::move(reader_)] { reader->Close(); });
}

void ZooKeeperScopeStore::Start(SteadyClock::time_point deadline, Done done) {
  reader_->StartRead(deadline, std::move(done));
}

std::unique_ptr<LockWatch> ZooKeeperScopeStore::Watch(LockWatch::Changed on_change) {
  auto state = std::make_shared<ZooKeeperWatchState>();
  state->on_change = std::move(on_change);
  loop_.Post([reader = reader_, state] { reader->StartWatch(state); });
  return MakeZooKeeperWatch(state);
}

}  // namespace sbd
