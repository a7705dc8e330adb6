#include "detector/verdicts/witnesses.h"

namespace sbd {

std::string SenderAddress(const WalReceiverReading& upstream) {
  if (upstream.hidden || upstream.sender_host.empty()) return "";
  std::string host = upstream.sender_host;
  if (host[0] != '/' && host.find(':') != std::string::npos) host = "[" + host + "]";
  return host + ":" + std::to_string(upstream.sender_port > 0 ? upstream.sender_port : 5432);
}

std::string SenderMember(const WalReceiverReading& upstream,
                         const std::vector<MemberSpec>& members) {
  const std::string sender = SenderAddress(upstream);
  if (sender.empty()) return "";
  for (const auto& member : members) {
    // A multi-host DSN's address lists every host:port, comma-separated.
    size_t start = 0;
    while (start <= member.address.size()) {
      size_t end = member.address.find(',', start);
      if (end == std::string::npos) end = member.address.size();
      if (member.address.compare(start, end - start, sender) == 0) return member.name;
      start = end + 1;
    }
  }
  return "";
}

std::vector<Witness> Witnesses(const std::vector<MemberSpec>& members,
                               const std::vector<Observation>& round,
                               const std::vector<std::string>& writable) {
  std::vector<Witness> out;
  for (const auto& primary : writable) out.push_back(Witness{primary, {}});
  for (const auto& obs : round) {
    const PostgresReading* reading = obs.reading();
    if (reading == nullptr || !reading->upstream || reading->upstream->status != "streaming") {
      continue;
    }
    const std::string sender = SenderMember(*reading->upstream, members);
    for (auto& witness : out) {
      if (!sender.empty() && witness.primary == sender) witness.streamers.push_back(obs.member);
    }
  }
  return out;
}

std::string WitnessText(const std::vector<Witness>& witnesses, const std::string& alone) {
  std::string out;
  for (const auto& witness : witnesses) {
    if (!out.empty()) out += "; ";
    if (witness.streamers.empty()) {
      out += "nobody streams from " + witness.primary + alone;
      continue;
    }
    for (size_t i = 0; i < witness.streamers.size(); ++i) {
      out += (i == 0 ? "" : ", ") + witness.streamers[i];
    }
    out += (witness.streamers.size() == 1 ? " streams from " : " stream from ") + witness.primary;
  }
  return out;
}

}  // namespace sbd
