#include "bench/watch_variants.h"

#include <map>
#include <stdexcept>

#include "bench/bench_util.h"
#include "tests/support/process.h"

namespace sbd::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Shape {
  std::string name;
  const char* interval;
  bool watch;
};
const std::vector<Shape> kShapes = {{"poll-1s", "1s", false},
                                    {"watch-1s", "1s", true},
                                    {"poll-5s", "5s", false},
                                    {"watch-5s", "5s", true}};

// The first delivery at or after `since` carrying `alertname` firing for `cluster`, and its
// alert; nullopt when none.
std::optional<std::pair<testing::WebhookReceiver::Delivery, json>> FirstFiring(
    const testing::WebhookReceiver& webhook, const std::string& alertname,
    const std::string& cluster, Clock::time_point since) {
  for (const auto& d : webhook.Deliveries()) {
    if (d.at < since || !d.body.contains("alerts")) continue;
    for (const auto& a : d.body["alerts"]) {
      if (a["labels"].value("alertname", "") == alertname &&
          a["labels"].value("cluster", "") == cluster && a.value("status", "") == "firing") {
        return std::make_pair(d, a);
      }
    }
  }
  return std::nullopt;
}

int ActiveAlerts(const testing::AlertmanagerServer& am) {
  try {
    return static_cast<int>(am.Alerts().size());
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

const std::vector<std::string>& WatchVariants::Names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& s : kShapes) out.push_back(s.name);
    return out;
  }();
  return names;
}

WatchVariants::WatchVariants(const std::string& binary, testing::Environment& env) : env_(env) {
  webhook0_ = std::make_unique<testing::WebhookReceiver>();
  am0_ = std::make_unique<testing::AlertmanagerServer>(env.root.path() + "/am-gw0",
                                                       webhook0_->url(), "0s", "1s");
  for (const auto& shape : kShapes) {
    std::string yaml = env.Header();
    auto replace = [&](const std::string& from, const std::string& to) {
      const auto at = yaml.find(from);
      if (at == std::string::npos) throw std::runtime_error("bench: no '" + from + "' in config");
      yaml.replace(at, from.size(), to);
    };
    replace("    - url: " + env.alertmanager->url() + "\n",
            "    - url: " + env.alertmanager->url() + "\n    - url: " + am0_->url() + "\n");
    replace("  - name: demo\n", "  - name: " + shape.name + "\n");
    // The interval is never above a third of the ttl: Patroni's 10 s would hold it at 1 s, so
    // the 5 s shapes declare a 15 s lease (the page still has to beat Patroni's 10 s).
    replace("probe_interval: 1s",
            std::string("probe_interval: ") + shape.interval +
                (std::string(shape.interval) == "5s" ? "\n    ttl: 15s" : ""));
    yaml += std::string("    watch: ") + (shape.watch ? "true" : "false") + "\n    members:\n";
    for (const auto& m : env.cluster->members()) {
      yaml += testing::MemberYaml(m, env.cluster->PasswordFile());
    }
    const std::string file = testing::WriteFile(env.root.path(), shape.name + ".yml", yaml);
    Variant v;
    v.name = shape.name;
    v.port = testing::FreeLoopbackPort();
    v.detector = std::make_unique<testing::DetectorProcess>(
        binary,
        std::vector<std::string>{"--config.file=" + file,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(v.port)},
        env.root.path() + "/" + shape.name + ".log");
    variants_.push_back(std::move(v));
  }
  for (const auto& v : variants_) {
    if (!testing::WaitFor([&] { return testing::HttpGet(v.port, "/-/ready") == "Ready\n"; },
                          std::chrono::seconds(30))) {
      throw std::runtime_error("bench: detector " + v.name + " not ready:\n" + v.detector->Log());
    }
  }
}

bool WatchVariants::Quiet() const {
  if (ActiveAlerts(*am0_) != 0) return false;
  for (const auto& v : variants_) {
    const std::string body = testing::HttpGet(v.port, "/status");
    if (body.empty()) return false;
    const json status = json::parse(body, nullptr, false);
    if (status.is_discarded() || !status.contains("clusters") ||
        status["clusters"][0].value("verdict", "") != "healthy") {
      return false;
    }
  }
  return true;
}

json WatchVariants::Trial(Clock::time_point freeze, Clock::time_point onset, double onset_wall,
                          std::chrono::seconds deadline) const {
  const std::vector<std::pair<std::string, const testing::WebhookReceiver*>> webhooks = {
      {"gw0", webhook0_.get()}, {"gw1", env_.webhook.get()}};
  testing::WaitFor(
      [&] {
        for (const auto& v : variants_) {
          for (const auto& [key, webhook] : webhooks) {
            if (!FirstFiring(*webhook, "SplitBrain", v.name, freeze)) return false;
          }
        }
        return true;
      },
      deadline, std::chrono::milliseconds(50));
  json out;
  for (const auto& v : variants_) {
    json row = {{"verdict_s", nullptr}, {"page_gw0_s", nullptr}, {"page_gw1_s", nullptr}};
    for (const auto& [key, webhook] : webhooks) {
      const auto first = FirstFiring(*webhook, "SplitBrain", v.name, freeze);
      if (!first) continue;
      row["page_" + key + "_s"] = std::chrono::duration<double>(first->first.at - onset).count();
      // startsAt is when the detector confirmed the split brain (the incident's opening).
      const double starts = ParseRfc3339(first->second.value("startsAt", ""));
      if (starts > 0) row["verdict_s"] = starts - onset_wall;
    }
    out[v.name] = row;
  }
  return out;
}

json WatchVariants::WarningsSince(Clock::time_point since) const {
  json out = json::object();
  std::vector<std::string> clusters = Names();
  clusters.push_back("demo");
  for (const auto& cluster : clusters) {
    int n = 0;
    for (const char* alert : {"SplitBrain", "SplitBrainSuspected"}) {
      if (FirstFiring(*env_.webhook, alert, cluster, since)) ++n;
      if (cluster != "demo" && FirstFiring(*webhook0_, alert, cluster, since)) ++n;
    }
    out[cluster] = n;
  }
  return out;
}

json WatchVariants::Summary(const json& trials) {
  json out;
  for (const auto& name : Names()) {
    for (const char* row : {"verdict_s", "page_gw0_s", "page_gw1_s"}) {
      std::vector<double> values;
      int missed = 0;
      for (const auto& t : trials) {
        const json& x = t["watch"][name][row];
        if (x.is_number()) {
          values.push_back(x.get<double>());
        } else {
          ++missed;
        }
      }
      out[name][row] = {{"median", Median(values)}, {"max", Max(values)}, {"missed", missed}};
    }
  }
  return out;
}

}  // namespace sbd::bench
