// Text that came from the network (a lock store, a file_sd file, a Sentinel, a Lease) made
// safe to keep and to show: names valid UTF-8 and bounded where they enter, label values valid
// where /metrics is written, and URLs without their secrets wherever one is displayed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sbd {

/// The longest name kept from a lock store, a file_sd file, a Sentinel or a Lease, in bytes.
constexpr size_t kMaxNetworkNameBytes = 1024;
/// The longest label value written on /metrics, in bytes.
constexpr size_t kMaxLabelValueBytes = 1024;

/// True when `text` is valid UTF-8 of at most `max_bytes` bytes (ValidUtf8 would keep it).
bool IsValidUtf8(std::string_view text, size_t max_bytes);

/// `text` as valid UTF-8 of at most `max_bytes` bytes (`max_bytes` >= 8): every byte that
/// starts no valid sequence becomes U+FFFD, and a longer result is cut on a character
/// boundary and ends in "..." (U+2026). Valid text within the bound comes back unchanged.
/// Pure; thread-safe.
std::string ValidUtf8(std::string_view text, size_t max_bytes);

/// A name as it enters from a peer (a member's key in the lock store, a holder, a Sentinel's
/// master address, a Lease's holder, a file_sd target or label): unchanged when it is valid
/// UTF-8 without control characters and at most kMaxNetworkNameBytes long. Otherwise invalid
/// bytes and control characters become U+FFFD, the result is cut to the bound, and "~" and 8
/// hex digits of a hash of the raw bytes follow, so that two raw names that differ stay two
/// names (one registration cannot hide another). The same raw name always gives the same
/// result, so a holder still matches its member. Pure; thread-safe.
std::string NetworkName(std::string_view raw);

/// `url` as it may be shown (status, status page, labels, alerts, logs): without userinfo
/// ("user:pass@") and without query or fragment, where tokens often live:
/// "https://u:p@etcd:2379/x?token=t#f" -> "https://etcd:2379/x". A bare "host:port" comes back
/// unchanged (a "user@" before it is dropped). Pure; thread-safe.
std::string RedactedUrl(std::string_view url);

/// `text` with every occurrence of `secret` replaced by "<redacted>" (unchanged without one):
/// for a failure that might quote back what was sent. Pure; thread-safe.
std::string ScrubSecret(std::string text, const std::optional<std::string>& secret);

}  // namespace sbd
