// The children names a ZooKeeper lock path lists (anyone who can write under it chooses them),
// one per line, and the holder's data: ordered, refused or ignored, never a crash.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "probes/zookeeper_lock.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size() && names.size() < 100000) {
    const size_t end = std::min(text.find('\n', start), text.size());
    names.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  sbd::LockRecord view;
  const std::vector<sbd::LockChild> order = sbd::OrderCandidates(names, view);
  if (!order.empty()) {
    sbd::MemberSpec member;
    member.name = "a";
    member.lease_identity = names.front();
    sbd::LockHolderNode node;
    node.czxid = static_cast<std::int64_t>(size);
    node.data = text;
    node.data_length = static_cast<std::int64_t>(text.size());
    sbd::FillHolder(order.front(), node, 1024, {member}, view);
  }
  return 0;
}
