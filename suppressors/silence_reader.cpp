#include "suppressors/silence_reader.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "detector/common/logfmt.h"
#include "suppressors/silence_fetch.h"

namespace sbd {
namespace {

// An Alertmanager keeps expired silences for days: room for thousands of them.
constexpr size_t kMaxSilencesBytes = 8 << 20;

}  // namespace

SilenceDeclarations AlertmanagerSilenceReader::Read(const AlertmanagerSilencesSpec& spec,
                                                    Millis max_duration, WallTime now) {
  // Every Alertmanager at once, on the event loop: no thread per Alertmanager.
  std::vector<SilencesFetch> fetches =
      FetchAllSilences(spec.alertmanager_urls, spec.timeout, kMaxSilencesBytes);
  std::map<std::string, SilenceReadout> last;
  std::vector<SilenceReadout> readouts;
  std::vector<SilenceSourceStatus> sources;
  for (size_t i = 0; i < fetches.size(); ++i) {
    const std::string& url = spec.alertmanager_urls[i];
    SilenceSourceStatus status = status_[url];
    status.alertmanager = RedactUrl(url);
    SilencesFetch& fetched = fetches[i];
    std::variant<SilenceReadout, std::string> parsed =
        fetched.index() == 0
            ? ParseSilences(std::get<0>(fetched), status.alertmanager, now, max_duration, spec)
            : std::variant<SilenceReadout, std::string>(std::in_place_index<1>,
                                                        std::get<1>(fetched));
    if (auto* readout = std::get_if<SilenceReadout>(&parsed)) {
      if (!status.error.empty()) {
        spdlog::info("msg=\"reading silences again\" alertmanager=\"{}\"", status.alertmanager);
      }
      status = {status.alertmanager, true,
                std::chrono::duration<double>(now.time_since_epoch()).count(), ""};
      last[url] = std::move(*readout);
    } else {
      const std::string error = std::get<std::string>(parsed);
      // Once per failure, not at every refresh while it lasts.
      if (status.up || status.error != error) {
        spdlog::warn(
            "msg=\"cannot read silences; declarations last read from it stay until they "
            "expire\" alertmanager=\"{}\" error=\"{}\"",
            status.alertmanager, LogfmtEscape(error));
      }
      status.up = false;
      status.error = error;
      if (last_.count(url)) last[url] = std::move(last_[url]);
    }
    if (last.count(url)) readouts.push_back(last[url]);
    sources.push_back(status);
    status_[url] = status;
  }
  last_ = std::move(last);  // Alertmanagers no longer configured are forgotten
  for (auto it = status_.begin(); it != status_.end();) {
    const auto& urls = spec.alertmanager_urls;
    it = std::find(urls.begin(), urls.end(), it->first) == urls.end() ? status_.erase(it)
                                                                      : std::next(it);
  }
  SilenceDeclarations out = MergeSilences(readouts, now);
  out.sources = std::move(sources);
  LogChanges(out);
  return out;
}

void AlertmanagerSilenceReader::LogChanges(const SilenceDeclarations& next) {
  std::set<std::string> now_present;
  for (const auto& d : next.declarations) {
    const std::string key = "declaration " + d.id + " " + FormatRfc3339(d.expires);
    now_present.insert(key);
    if (logged_.count(key)) continue;
    spdlog::info("msg=\"declaration loaded from an Alertmanager silence\" declaration=\"{}\"",
                 LogfmtEscape(d.Describe()));
  }
  for (const auto& f : next.rejected) {
    const std::string key = "rejected " + f.ToString();
    now_present.insert(key);
    if (logged_.count(key)) continue;
    spdlog::error("msg=\"declaration silence rejected; it declares nothing\" error=\"{}\"",
                  LogfmtEscape(f.ToString()));
  }
  for (const auto& f : next.page_silences) {
    const std::string key = "page " + f.ToString();
    now_present.insert(key);
    if (logged_.count(key)) continue;
    spdlog::warn(
        "msg=\"the split-brain page is being silenced in Alertmanager: a real split brain "
        "would page nobody\" silence=\"{}\"",
        LogfmtEscape(f.ToString()));
  }
  logged_ = std::move(now_present);
}

}  // namespace sbd
