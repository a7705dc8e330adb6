// A Patroni scope's znodes on ZooKeeper (anyone who can write under the scope chooses them): the
// first line names the znode ("leader", "members/<m>", "config", "initialize", anything), the
// rest is its data, applied to one view at a small and a large cap: refused, ignored or read,
// never a crash.
#include <algorithm>
#include <cstdint>
#include <string>

#include "probes/zookeeper_scope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t newline = std::min(text.find('\n'), text.size());
  sbd::ScopeZnode node;
  node.data = newline < text.size() ? text.substr(newline + 1) : std::string();
  node.data_length = static_cast<std::int64_t>(node.data.size());
  node.czxid = static_cast<std::int64_t>(size);
  node.ephemeral_owner = size % 2 == 0 ? 0 : static_cast<std::int64_t>(size) << 20;
  for (const int cap : {16, 16384}) {
    sbd::LockRecord view;
    if (!sbd::ApplyScopeZnode(text.substr(0, newline), node, cap, view)) {
      sbd::ApplyScopeZnode("members/" + text.substr(0, newline), node, cap, view);
    }
  }
  return 0;
}
