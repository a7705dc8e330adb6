// The zookeeper_lock store on the shared ZooKeeper session: a read lists the lock path's
// children and reads the holder's node; the watch is on the children (or on the path's
// creation while it is missing).
#include <memory>

#include "probes/http_loop.h"
#include "probes/resource_witness.h"
#include "probes/zookeeper_lock.h"
#include "probes/zookeeper_session.h"

namespace sbd {
namespace {

constexpr int kMaxHolderAttempts = 3;  // the holder may leave between the list and its read

}  // namespace

/// The lock path's reads and watch on one cluster's session. Loop thread only.
class ZooKeeperLockReader : public ZooKeeperSession {
 public:
  ZooKeeperLockReader(EventLoop& loop, ZooKeeperLockSpec spec, std::vector<MemberSpec> members)
      : ZooKeeperSession(loop, std::move(spec)), members_(std::move(members)) {}

 private:
  void SendRead() override {
    attempts_ = 0;
    ListChildren();
  }
  void ArmWatch() override;
  void ListChildren();
  static void ChildrenDone(int rc, const String_vector* children, const Stat* stat,
                           const void* data);
  void OnChildren(int rc, const String_vector* children, const Stat* stat);
  static void HolderDone(int rc, const char* value, int length, const Stat* stat, const void* data);
  void OnHolder(int rc, const char* value, int length, const Stat* stat);
  static void WatchArmed(int rc, const String_vector*, const Stat*, const void* data);
  static void ExistsArmed(int rc, const Stat*, const void* data);
  static std::shared_ptr<ZooKeeperLockReader> Armer(const void* data);

  const std::vector<MemberSpec> members_;
  LockRecord view_;
  std::vector<LockChild> candidates_;
  int attempts_ = 0;
};

void ZooKeeperLockReader::ArmWatch() {
  if (!watch_state_ || zh_ == nullptr || !connected_ || watch_armed_) return;
  watch_armed_ = true;
  auto* weak = new std::weak_ptr<ZooKeeperSession>(weak_from_this());
  const int rc = zoo_awget_children2(zh_, spec_.path.c_str(), OnWatchEvent,
                                     static_cast<ZooKeeperSession*>(this), WatchArmed, weak);
  if (rc != ZOK) {  // no completion will free it
    delete weak;
    watch_armed_ = false;
  }
}

// A watch request's context, freed here: the reader, when it is still there and watching.
std::shared_ptr<ZooKeeperLockReader> ZooKeeperLockReader::Armer(const void* data) {
  std::unique_ptr<const std::weak_ptr<ZooKeeperSession>> weak(
      static_cast<const std::weak_ptr<ZooKeeperSession>*>(data));
  auto reader = std::static_pointer_cast<ZooKeeperLockReader>(weak->lock());
  if (!reader || !reader->watch_state_ || reader->zh_ == nullptr) return nullptr;
  return reader;
}

void ZooKeeperLockReader::WatchArmed(int rc, const String_vector*, const Stat*, const void* data) {
  auto reader = Armer(data);
  if (!reader) return;
  if (rc == ZOK) {
    reader->watch_state_->up = true;
    return;
  }
  if (rc != ZNONODE) {
    reader->watch_armed_ = false;  // armed again at the next session
    return;
  }
  // No lock path yet: a children watch cannot be set on it, an exists watch can.
  auto* again = new std::weak_ptr<ZooKeeperSession>(reader);
  const int sent = zoo_awexists(reader->zh_, reader->spec_.path.c_str(), OnWatchEvent,
                                static_cast<ZooKeeperSession*>(reader.get()), ExistsArmed, again);
  if (sent != ZOK) {
    delete again;
    reader->watch_armed_ = false;
  }
}

void ZooKeeperLockReader::ExistsArmed(int rc, const Stat*, const void* data) {
  auto reader = Armer(data);
  if (!reader) return;
  if (rc == ZOK) {
    // Created between the two calls: the children watch is what it needs now.
    reader->watch_armed_ = false;
    reader->watch_state_->Fire();
    reader->ArmWatch();
  } else if (rc == ZNONODE) {
    reader->watch_state_->up = true;
  } else {
    reader->watch_armed_ = false;
  }
}

void ZooKeeperLockReader::ListChildren() {
  view_ = LockRecord{};
  view_.endpoint = ZooKeeperHostList(spec_.hosts);
  if (new_session_) {
    // A new session may land on a follower behind the one read before: a sync first (the
    // server answers this session's requests in order), so that the lock path's pzxid, the
    // store's revision, never seems to go back. A live session's reconnects cannot go back.
    new_session_ = false;
    zoo_async(
        zh_, "/", [](int, const char*, const void*) {}, nullptr);
  }
  const void* request = NewRequest();
  const int rc = zoo_aget_children2(zh_, spec_.path.c_str(), 0, ChildrenDone, request);
  if (rc != ZOK) {
    Forget(request);
    Fail(ZooKeeperReason(rc), std::string("listing the lock path: ") + zerror(rc));
  }
}

void ZooKeeperLockReader::ChildrenDone(int rc, const String_vector* children, const Stat* stat,
                                       const void* data) {
  std::shared_ptr<ZooKeeperLockReader> hold;
  if (ZooKeeperLockReader* reader = Owner(data, hold)) reader->OnChildren(rc, children, stat);
}

void ZooKeeperLockReader::OnChildren(int rc, const String_vector* children, const Stat* stat) {
  if (rc == ZNONODE) return Finish(std::move(view_));  // no lock path: nobody holds
  if (rc != ZOK) {
    return Fail(ZooKeeperReason(rc), std::string("listing the lock path: ") + zerror(rc));
  }
  // The zxid of the children's last change: every candidate's czxid is at most that, so a
  // resource witness's token above it was never issued (see the fencing verdict).
  if (stat != nullptr) view_.store_revision = stat->pzxid;
  const int count = children == nullptr ? 0 : children->count;
  if (count > spec_.max_children) {
    return Fail(ProbeFailureReason::kProtocol,
                std::to_string(count) + " children under the lock path, above max_children " +
                    std::to_string(spec_.max_children) + ": the holder cannot be told");
  }
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) names.emplace_back(children->data[i]);
  candidates_ = OrderCandidates(names, view_);
  if (candidates_.empty()) return Finish(std::move(view_));
  const std::string holder = spec_.path + "/" + candidates_.front().name;
  const void* request = NewRequest();
  const int sent = zoo_aget(zh_, holder.c_str(), 0, HolderDone, request);
  if (sent != ZOK) {
    Forget(request);
    Fail(ZooKeeperReason(sent), std::string("reading the holder's node: ") + zerror(sent));
  }
}

void ZooKeeperLockReader::HolderDone(int rc, const char* value, int length, const Stat* stat,
                                     const void* data) {
  std::shared_ptr<ZooKeeperLockReader> hold;
  if (ZooKeeperLockReader* reader = Owner(data, hold)) reader->OnHolder(rc, value, length, stat);
}

void ZooKeeperLockReader::OnHolder(int rc, const char* value, int length, const Stat* stat) {
  if (rc == ZNONODE && ++attempts_ < kMaxHolderAttempts) return ListChildren();
  if (rc == ZNONODE) {
    return Fail(ProbeFailureReason::kQuery, "the holder's node left during every read");
  }
  if (rc != ZOK || stat == nullptr) {
    return Fail(ZooKeeperReason(rc), std::string("reading the holder's node: ") + zerror(rc));
  }
  LockHolderNode node;
  node.czxid = stat->czxid;
  node.ephemeral_owner = stat->ephemeralOwner;
  node.data_length = stat->dataLength;
  if (value != nullptr && length > 0 && length <= spec_.max_data_bytes) {
    node.data.assign(value, length);
  }
  FillHolder(candidates_.front(), node, spec_.max_data_bytes, members_, view_);
  Finish(std::move(view_));
}

/// The resource witness's own HTTP client, on the same loop. Loop thread only once made.
struct ZooKeeperWitness {
  ZooKeeperWitness(EventLoop& loop, ResourceWitnessSpec spec)
      : client(loop), spec(std::move(spec)) {}
  LoopHttpClient client;
  const ResourceWitnessSpec spec;
};

ZooKeeperLockStore::ZooKeeperLockStore(const ClusterSpec& spec, EventLoop& loop)
    : loop_(loop),
      reader_(std::make_shared<ZooKeeperLockReader>(loop, spec.zookeeper_lock, spec.members)) {
  if (spec.zookeeper_lock.resource_witness) {
    witness_ = std::make_shared<ZooKeeperWitness>(loop, *spec.zookeeper_lock.resource_witness);
  }
}

ZooKeeperLockStore::~ZooKeeperLockStore() {
  // Both own loop handles: closed and freed there (dropping what is in flight).
  loop_.Post([reader = std::move(reader_), witness = std::move(witness_)] { reader->Close(); });
}

void ZooKeeperLockStore::Start(SteadyClock::time_point deadline, Done done) {
  if (!witness_) return reader_->StartRead(deadline, std::move(done));
  std::weak_ptr<ZooKeeperWitness> weak = witness_;
  reader_->StartRead(deadline, [weak, deadline, done = std::move(done)](auto read) {
    auto witness = weak.lock();
    auto* view = std::get_if<LockRecord>(&read);
    if (!witness || view == nullptr) return done(std::move(read));
    // The answer holds no reference to the witness: a store dropped meanwhile frees its client
    // on the loop, dropping the request.
    ReadResourceWitness(witness->client, witness->spec, deadline, std::move(*view),
                        [done](LockRecord view) { done(std::move(view)); });
  });
}

std::unique_ptr<LockWatch> ZooKeeperLockStore::Watch(LockWatch::Changed on_change) {
  auto state = std::make_shared<ZooKeeperWatchState>();
  state->on_change = std::move(on_change);
  loop_.Post([reader = reader_, state] { reader->StartWatch(state); });
  return MakeZooKeeperWatch(state);
}

}  // namespace sbd
