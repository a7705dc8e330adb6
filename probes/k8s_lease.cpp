#include "probes/k8s_lease.h"

#include <nlohmann/json.hpp>

#include "detector/common/logfmt.h"
#include "detector/config/declaration.h"
#include "probes/json_fields.h"

namespace sbd {

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// `count` decimal digits at `at`, or -1.
int Digits(std::string_view text, size_t at, size_t count) {
  if (at + count > text.size()) return -1;
  int value = 0;
  for (size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

bool Char(std::string_view text, size_t at, char c) { return at < text.size() && text[at] == c; }

std::optional<WallClock::time_point> TimeOf(int year, int month, int day, int hour, int minute,
                                            int second) {
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1970 || month < 1 || month > 12 || day < 1 || day > kDays[month - 1] || hour > 23 ||
      minute > 59 || second > 60) {
    return std::nullopt;
  }
  const std::int64_t seconds =
      DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 +
      hour * 3600 + minute * 60 + second;
  return WallClock::time_point(std::chrono::seconds(seconds));
}

}  // namespace

std::optional<WallClock::time_point> ParseHttpDate(std::string_view text) {
  // "Tue, 01 Dec 2026 04:41:22 GMT": the weekday is not checked against the date.
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (text.size() != 29 || text.substr(3, 2) != ", " || text.substr(25) != " GMT" ||
      !Char(text, 7, ' ') || !Char(text, 11, ' ') || !Char(text, 16, ' ') || !Char(text, 19, ':') ||
      !Char(text, 22, ':')) {
    return std::nullopt;
  }
  int month = 0;
  for (int i = 0; i < 12; ++i) {
    if (text.substr(8, 3) == kMonths[i]) month = i + 1;
  }
  return TimeOf(Digits(text, 12, 4), month, Digits(text, 5, 2), Digits(text, 17, 2),
                Digits(text, 20, 2), Digits(text, 23, 2));
}

namespace {

using nlohmann::json;

// A non-negative integer field of spec, or unset with the reason in `rejected`.
std::optional<std::int64_t> Count(const json& spec, const char* key, std::int64_t max,
                                  std::vector<std::string>& rejected) {
  const auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) {
    rejected.push_back(std::string("spec.") + key + ": not an integer");
    return std::nullopt;
  }
  const bool negative = it->is_number_unsigned() ? false : it->get<std::int64_t>() < 0;
  if (negative || (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(max)) ||
      (!it->is_number_unsigned() && it->get<std::int64_t>() > max)) {
    rejected.push_back(std::string("spec.") + key + ": out of range 0.." + std::to_string(max));
    return std::nullopt;
  }
  return it->get<std::int64_t>();
}

void ReadSpec(const json& spec, K8sLeaseObject& lease) {
  if (const auto it = spec.find("holderIdentity"); it != spec.end() && !it->is_null()) {
    if (!it->is_string()) {
      lease.rejected.push_back("spec.holderIdentity: not a string: the holder is unknown");
    } else if (it->get_ref<const std::string&>().size() > kMaxHolderIdentityBytes) {
      lease.rejected.push_back(
          "spec.holderIdentity: " + std::to_string(it->get_ref<const std::string&>().size()) +
          " bytes, too long to compare: the holder is unknown");
    } else {
      lease.holder_identity = it->get<std::string>();
    }
  }
  if (const auto it = spec.find("renewTime"); it != spec.end() && !it->is_null()) {
    if (it->is_string()) lease.renew_time = ParseRfc3339(it->get<std::string>());
    if (!lease.renew_time) {
      lease.rejected.push_back("spec.renewTime: not an RFC 3339 time: the time left is unknown");
    }
  }
  // A year of seconds is far beyond any leader election; more is not a lease worth trusting.
  lease.lease_duration_seconds = Count(spec, "leaseDurationSeconds", 366 * 86400, lease.rejected);
  lease.lease_transitions =
      Count(spec, "leaseTransitions", std::numeric_limits<std::int32_t>::max(), lease.rejected);
  // The lease ends at renewTime + leaseDurationSeconds: near the end of what a time point
  // holds (year 2262), the sum would wrap into the past.
  if (lease.renew_time && lease.lease_duration_seconds &&
      *lease.renew_time >
          WallClock::time_point::max() - std::chrono::seconds(*lease.lease_duration_seconds)) {
    lease.renew_time.reset();
    lease.rejected.push_back(
        "spec.renewTime: too late to add the lease duration to: the time "
        "left is unknown");
  }
}

}  // namespace

std::variant<K8sLeaseObject, std::string> ParseK8sLease(std::string_view body,
                                                        const std::string& name) {
  if (body.size() > kMaxLeaseBodyBytes) {
    return "an answer of " + std::to_string(body.size()) + " bytes, above the limit of " +
           std::to_string(kMaxLeaseBodyBytes);
  }
  auto parsed = ParseUntrustedJson(body);
  if (auto* problem = std::get_if<std::string>(&parsed)) return "the answer is " + *problem;
  const json& object = std::get<json>(parsed);
  if (!object.is_object()) return std::string("the answer is not a JSON object");
  const auto kind = object.find("kind");
  if (kind != object.end() &&
      (!kind->is_string() || kind->get_ref<const std::string&>() != "Lease")) {
    // Only the type of a kind that is not a string: its value is the peer's structure, and
    // dump() would walk it recursively.
    return "the answer is not a Lease (kind " +
           (kind->is_string() ? LogfmtEscape(kind->get_ref<const std::string&>().substr(0, 64))
                              : std::string("of JSON type ") + kind->type_name()) +
           ")";
  }
  const auto metadata = object.find("metadata");
  const json* meta_name = nullptr;
  if (metadata != object.end() && metadata->is_object()) {
    const auto it = metadata->find("name");
    if (it != metadata->end()) meta_name = &*it;
  }
  if (meta_name == nullptr || !meta_name->is_string() ||
      meta_name->get_ref<const std::string&>() != name) {
    return "the answer is not Lease " + name + " (metadata.name differs or is missing)";
  }
  const auto spec = object.find("spec");
  if (spec == object.end() || !spec->is_object()) {
    return std::string("the Lease has no spec object");
  }
  K8sLeaseObject lease;
  ReadSpec(*spec, lease);
  return lease;
}

LockRecord K8sLeaseAsView(const K8sLeaseObject& lease, const std::vector<MemberSpec>& members,
                          WallClock::time_point now) {
  LockRecord view;
  view.lease_id = "0";
  view.rejected = lease.rejected;
  view.holder_token = lease.holder_identity;
  view.mod_revision = lease.lease_transitions.value_or(0);
  view.lease_granted_ttl = lease.lease_duration_seconds.value_or(-1);
  if (lease.renew_time && lease.lease_duration_seconds) {
    const auto end = *lease.renew_time + std::chrono::seconds(*lease.lease_duration_seconds);
    if (end > now) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - now).count();
      view.lease_ttl_remaining = (left + 999) / 1000;
    }
  }
  if (lease.holder_identity.empty()) return view;
  for (const MemberSpec& member : members) {
    if (!member.lease_identity.empty() && member.lease_identity == lease.holder_identity) {
      view.holder = member.name;
    }
  }
  return view;
}

std::string K8sLeaseRecord(const K8sLeaseSpec& spec) {
  const std::string server =
      spec.api_server.empty() ? "kubeconfig " + spec.kubeconfig : spec.api_server;
  return "Lease " + spec.lease_namespace + "/" + spec.lease + " on " + server +
         " (revision: leaseTransitions, the epoch)";
}

}  // namespace sbd
