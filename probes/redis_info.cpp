#include "probes/redis_info.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>

#include "detector/common/network_text.h"

namespace sbd {
namespace {

// A short printable excerpt of an untrusted value for an error message.
std::string Excerpt(const std::string& value, size_t max = 32) {
  std::string out;
  for (char c : value.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return value.size() > max ? out + "..." : out;
}

std::optional<std::int64_t> Decimal(const std::string& text, std::int64_t min, std::int64_t max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  const size_t digits_from = text[0] == '-' ? 1 : 0;
  if (digits_from == text.size() || !std::all_of(text.begin() + digits_from, text.end(),
                                                 [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  errno = 0;
  const long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE || value < min || value > max) return std::nullopt;
  return value;
}

bool IsReplid(const std::string& text) {
  return text.size() == 40 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// key -> value of every "key:value" line; the first of a repeated key wins.
std::variant<std::map<std::string, std::string>, std::string> Lines(const std::string& text) {
  std::map<std::string, std::string> fields;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) {
      return "INFO line without key:value: \"" + Excerpt(line) + "\"";
    }
    fields.emplace(line.substr(0, colon), line.substr(colon + 1));
  }
  return fields;
}

}  // namespace

std::variant<RedisReading, std::string> ParseRedisInfo(const std::string& text) {
  if (text.size() > kMaxRedisInfoBytes) return std::string("INFO answer too long");
  auto lines = Lines(text);
  if (auto* error = std::get_if<std::string>(&lines)) return *error;
  const auto& f = std::get<std::map<std::string, std::string>>(lines);
  auto get = [&f](const char* key) {
    auto it = f.find(key);
    return it == f.end() ? std::optional<std::string>() : it->second;
  };
  RedisReading r;
  const auto role = get("role");
  if (!role || (*role != "master" && *role != "slave")) {
    return "INFO role is not master or slave: \"" + Excerpt(role.value_or("")) + "\"";
  }
  r.role = *role;
  const auto replid = get("master_replid");
  if (!replid || !IsReplid(*replid)) {
    return "INFO master_replid is not 40 hex digits: \"" + Excerpt(replid.value_or("")) + "\"";
  }
  r.master_replid = *replid;
  if (const auto replid2 = get("master_replid2")) {
    if (!IsReplid(*replid2)) return "INFO master_replid2 is not 40 hex digits";
    if (*replid2 != std::string(40, '0')) r.master_replid2 = *replid2;
  }
  struct Number {
    const char* key;
    std::int64_t min;
    std::int64_t max;
    std::int64_t* into;
  };
  std::int64_t connected = 0, good = -1, port = 0;
  const Number numbers[] = {{"master_repl_offset", 0, INT64_MAX, &r.master_repl_offset},
                            {"second_repl_offset", -1, INT64_MAX, &r.second_repl_offset},
                            {"connected_slaves", 0, 1000000, &connected},
                            {"min_slaves_good_slaves", 0, 1000000, &good},
                            {"master_port", 0, 65535, &port}};
  for (const Number& n : numbers) {
    const auto text_value = get(n.key);
    if (!text_value) continue;
    const auto value = Decimal(*text_value, n.min, n.max);
    if (!value) return std::string("INFO ") + n.key + " is not a number in range";
    *n.into = *value;
  }
  if (r.master_replid2.empty()) r.second_repl_offset = -1;
  r.connected_replicas = static_cast<int>(connected);
  if (get("min_slaves_good_slaves")) r.good_replicas = static_cast<int>(good);
  r.master_port = static_cast<int>(port);
  r.master_host = Excerpt(get("master_host").value_or(""));
  r.master_link_status = Excerpt(get("master_link_status").value_or(""));
  r.redis_version = Excerpt(get("redis_version").value_or(""));
  const std::string run_id = get("run_id").value_or("");
  if (!run_id.empty() && !IsReplid(run_id)) return std::string("INFO run_id is not 40 hex digits");
  r.run_id = run_id;
  return r;
}

bool ParseMinReplicasToWrite(const std::string& value, RedisReading& reading) {
  const auto n = Decimal(value, 0, 1000000);
  if (!n) return false;
  reading.min_replicas_to_write = static_cast<int>(*n);
  return true;
}

std::variant<SentinelView, std::string> ParseSentinelMaster(const std::vector<std::string>& fields,
                                                            const std::vector<std::string>& addr) {
  if (addr.size() != 2) return std::string("get-master-addr-by-name: expected ip and port");
  const auto port = Decimal(addr[1], 1, 65535);
  if (addr[0].empty() || addr[0].size() > 255 || !port ||
      addr[0].find_first_of(" \t\r\n/") != std::string::npos) {
    return "get-master-addr-by-name: not an address: \"" + Excerpt(addr[0]) + "\"";
  }
  SentinelView view;
  view.address = NetworkName(addr[0]) + ":" + std::to_string(*port);
  if (fields.size() % 2 != 0) return std::string("SENTINEL master: odd field list");
  bool have_epoch = false;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& key = fields[i];
    const std::string& value = fields[i + 1];
    if (key == "config-epoch") {
      const auto epoch = Decimal(value, 0, INT64_MAX);
      // Sentinel prints its unsigned epoch signed: 2^64-1 arrives as -1.
      const size_t from = value.rfind('-', 0) == 0 ? 1 : 0;
      const bool digits = value.size() > from && value.size() <= 21 &&
                          value.find_first_not_of("0123456789", from) == std::string::npos;
      if (!epoch && !digits)
        return "SENTINEL master: config-epoch is not a number: \"" + Excerpt(value) + "\"";
      // Above the range, a wrapped or forged epoch would outrank every real failover.
      if (!epoch || *epoch > kMaxSentinelEpoch) {
        return "SENTINEL master: config-epoch " + Excerpt(value) + " is out of range (0 to " +
               std::to_string(kMaxSentinelEpoch) + ")";
      }
      view.config_epoch = *epoch;
      have_epoch = true;
    } else if (key == "quorum") {
      const auto quorum = Decimal(value, 1, 1000);
      if (!quorum) return std::string("SENTINEL master: quorum is not a number in range");
      view.quorum = static_cast<int>(*quorum);
    } else if (key == "flags") {
      view.flags = Excerpt(value, 128);
      view.failover_in_progress = value.find("failover_in_progress") != std::string::npos;
    }
  }
  if (!have_epoch) return std::string("SENTINEL master: no config-epoch");
  return view;
}

}  // namespace sbd
