// A candidate's Prometheus text exposition, as its metrics endpoint (or anything on that port)
// could serve it. The first byte picks the claim query, so token labels and a custom metric are
// fuzzed too.
#include <cstdint>
#include <string>

#include "probes/metrics_claim.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  sbd::ClaimQuery query;
  query.lock = "demo";
  if ((data[0] & 1) != 0) query.token_label = "token";
  if ((data[0] & 2) != 0) {
    query.metric = "m";
    query.lock_label = "lock";
  }
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  sbd::FindClaim(text, query);
  return 0;
}
