#include "probes/probe.h"

namespace sbd {

const char* ReasonName(ProbeFailureReason reason) {
  switch (reason) {
    case ProbeFailureReason::kTimeout:
      return "timeout";
    case ProbeFailureReason::kRefused:
      return "refused";
    case ProbeFailureReason::kUnreachable:
      return "unreachable";
    case ProbeFailureReason::kAuth:
      return "auth";
    case ProbeFailureReason::kProtocol:
      return "protocol";
    case ProbeFailureReason::kQuery:
      return "query";
    case ProbeFailureReason::kConnectionLost:
      return "connection_lost";
    case ProbeFailureReason::kConfig:
      return "config";
    case ProbeFailureReason::kStarting:
      return "starting";
    case ProbeFailureReason::kInternal:
      return "internal";
  }
  return "internal";
}

}  // namespace sbd
