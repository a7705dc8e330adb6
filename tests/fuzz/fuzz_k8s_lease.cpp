// What an API server (or anything answering on its address with the CA's blessing) says about a
// Lease, and the Date header beside it, and a kubeconfig file's text.
#include <cstdint>
#include <string>

#include "probes/k8s_lease.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = sbd::ParseK8sLease(text, "x");
  if (auto* lease = std::get_if<sbd::K8sLeaseObject>(&parsed)) {
    sbd::MemberSpec member;
    member.name = "a";
    member.lease_identity = lease->holder_identity;
    sbd::K8sLeaseAsView(*lease, {member}, sbd::WallClock::now());
  }
  sbd::ParseHttpDate(text);
  sbd::ParseKubeconfig(text, "/nonexistent");
  return 0;
}
