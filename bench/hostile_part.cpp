#include "bench/hostile_part.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "tests/support/alertmanager_sandbox.h"
#include "tests/support/detector_process.h"
#include "tests/support/election_sandbox.h"
#include "tests/support/patroni_environment.h"
#include "tests/support/process.h"
#include "tests/support/syn_drop.h"

namespace sbd::bench {
namespace {

using nlohmann::json;
using sbd::testing::WaitFor;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kMembersPerCluster = 10;

double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A loopback HTTP server that answers every connection with a status line and then one byte of
// a header line every half second, never ending the headers. One thread, poll().
class Trickler {
 public:
  Trickler() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener_, 1024) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("trickler: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Trickler() {
    stop_ = true;
    thread_.join();
    for (const auto& c : conns_) ::close(c.fd);
    ::close(listener_);
  }
  int port() const { return port_; }
  long accepted() const { return accepted_; }

 private:
  struct Conn {
    int fd;
    Clock::time_point next;
  };
  void Run() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const auto& c : conns_) fds.push_back({c.fd, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 50);
      for (int fd; (fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
        static const char kStatus[] = "HTTP/1.1 200 OK\r\n";
        ::send(fd, kStatus, sizeof kStatus - 1, MSG_NOSIGNAL);
        conns_.push_back({fd, Clock::now() + milliseconds(500)});
        ++accepted_;
      }
      const auto now = Clock::now();
      std::vector<Conn> kept;
      for (size_t i = 0; i < conns_.size(); ++i) {
        Conn c = conns_[i];
        bool closed = false;
        if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) {
          char buf[4096];
          closed = ::recv(c.fd, buf, sizeof buf, 0) <= 0;  // the request is read and dropped
        }
        if (!closed && now >= c.next) {
          closed = ::send(c.fd, "X", 1, MSG_NOSIGNAL) != 1;
          c.next = now + milliseconds(500);
        }
        if (closed) {
          ::close(c.fd);
        } else {
          kept.push_back(c);
        }
      }
      conns_ = std::move(kept);
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::vector<Conn> conns_;
  std::atomic<bool> stop_{false};
  std::atomic<long> accepted_{0};
  std::thread thread_;
};

struct Variant {
  std::string name;   // also the Patroni cluster's name in its config
  std::string build;  // "new" or "old"
  bool hostile = false;
  int port = 0;
  std::unique_ptr<testing::DetectorProcess> detector;
  // Filled by the sampler (hostile variants): /status samples of the healthy clusters.
  long samples = 0;
  long not_healthy = 0;
  std::vector<std::string> not_healthy_seen;
  int max_threads = 0;
  std::vector<double> pages;
  int missed = 0;
};

std::string ElectionCluster(const std::string& name, const std::string& etcd,
                            const std::vector<std::string>& urls) {
  std::string yaml = "  - name: " + name +
                     "\n    kind: etcd_election\n    ttl: 10s\n    probe_interval: 1s\n"
                     "    probe_timeout: 800ms\n    etcd_election:\n      endpoints: [" +
                     etcd + "]\n      prefix: /election/" + name +
                     "\n      claim:\n        token_label: token\n    members:\n";
  for (size_t i = 0; i < urls.size(); ++i) {
    yaml += "      - name: m" + std::to_string(i) + "\n        metrics_url: " + urls[i] + "\n";
  }
  return yaml;
}

// The first firing SplitBrain for `cluster` delivered at or after `since`, or nullopt.
std::optional<Clock::time_point> PageAt(const testing::WebhookReceiver& webhook,
                                        const std::string& cluster, Clock::time_point since) {
  for (const auto& d : webhook.Deliveries()) {
    if (d.at < since || !d.body.contains("alerts")) continue;
    for (const auto& a : d.body["alerts"]) {
      if (a["labels"].value("alertname", "") == "SplitBrain" &&
          a["labels"].value("cluster", "") == cluster && a.value("status", "") == "firing") {
        return d.at;
      }
    }
  }
  return std::nullopt;
}

json StatusOf(int port) {
  const TimedGet r = HttpGetTimed(port, "/status", seconds(5));
  if (r.status != 200) return json();
  json status = json::parse(r.body, nullptr, false);
  return status.is_discarded() ? json() : status;
}

// The demo cluster's verdict in a variant, "" when unreadable.
std::string DemoVerdict(const Variant& v) {
  const json status = StatusOf(v.port);
  if (!status.contains("clusters")) return "";
  for (const auto& c : status["clusters"]) {
    if (c.value("name", "") == v.name) return c.value("verdict", "");
  }
  return "";
}

// The first member error of a cluster whose name starts with `prefix`: what bound it broke.
std::string MemberError(const json& status, const std::string& prefix) {
  if (!status.contains("clusters")) return "";
  for (const auto& c : status["clusters"]) {
    if (c.value("name", "").rfind(prefix, 0) != 0) continue;
    for (const auto& m : c["members"]) {
      if (m.contains("error")) return m["error"].value("message", "");
    }
  }
  return "";
}

}  // namespace

json PartHostile(const HostileOptions& o) {
  Log("hostile: starting etcd, 3-member Patroni, Alertmanager and the quiet detector");
  testing::Environment env(o.detector);
  testing::SynDropListener black_hole;
  Trickler trickler;
  Log("hostile: starting " + std::to_string(2 * o.healthy) + " etcd candidates");
  std::vector<std::unique_ptr<testing::EtcdCandidate>> candidates;
  std::string healthy_yaml;
  for (int i = 0; i < o.healthy; ++i) {
    const std::string name = "healthy-" + std::to_string(i);
    std::vector<std::string> urls;
    for (const char* who : {"a", "b"}) {
      testing::EtcdCandidate::Options c;
      c.endpoint = env.etcd->endpoint();
      c.prefix = "/election/" + name;
      c.lock = name;
      c.value = name + "-" + who;
      c.ttl_s = 10;
      candidates.push_back(
          std::make_unique<testing::EtcdCandidate>(o.etcd_candidate, c, env.root.path()));
      urls.push_back(candidates.back()->metrics_url() + "/metrics");
    }
    healthy_yaml += ElectionCluster(name, env.etcd->endpoint(), urls);
  }
  std::string hostile_yaml;
  auto add_hostile = [&](const std::string& prefix, int members, int port) {
    for (int c = 0; c * kMembersPerCluster < members; ++c) {
      std::vector<std::string> urls;
      for (int m = 0; m < kMembersPerCluster && c * kMembersPerCluster + m < members; ++m) {
        urls.push_back("http://127.0.0.1:" + std::to_string(port) + "/m" +
                       std::to_string(c * kMembersPerCluster + m));
      }
      hostile_yaml += ElectionCluster(prefix + std::to_string(c), env.etcd->endpoint(), urls);
    }
  };
  add_hostile("blackholed-", o.black_holed, black_hole.port());
  add_hostile("trickling-", o.trickling, trickler.port());

  std::vector<Variant> variants;
  auto add_variant = [&](const std::string& build, bool hostile) {
    Variant v;
    v.build = build;
    v.hostile = hostile;
    v.name = "demo-" + build + (hostile ? "-hostile" : "-quiet");
    std::string yaml = env.Header();
    const auto at = yaml.find("  - name: demo\n");
    if (at == std::string::npos) throw std::runtime_error("hostile: no demo cluster in config");
    yaml.replace(at, 15, "  - name: " + v.name + "\n");
    yaml += "    members:\n";
    for (const auto& m : env.cluster->members()) {
      yaml += testing::MemberYaml(m, env.cluster->PasswordFile());
    }
    if (hostile) yaml += healthy_yaml + hostile_yaml;
    const std::string file = testing::WriteFile(env.root.path(), v.name + ".yml", yaml);
    v.port = testing::FreeLoopbackPort();
    v.detector = std::make_unique<testing::DetectorProcess>(
        build == "new" ? o.detector : o.old_detector,
        std::vector<std::string>{"--config.file=" + file,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(v.port)},
        env.root.path() + "/" + v.name + ".log");
    variants.push_back(std::move(v));
  };
  for (const std::string build : {"new", "old"}) {
    if (build == "old" && o.old_detector.empty()) continue;
    add_variant(build, false);
    add_variant(build, true);
  }
  for (const auto& v : variants) {
    if (!WaitFor([&] { return testing::HttpGet(v.port, "/-/ready") == "Ready\n"; }, seconds(60))) {
      throw std::runtime_error("hostile: detector " + v.name + " not ready:\n" + v.detector->Log());
    }
  }
  auto quiet = [&] {
    for (const auto& v : variants) {
      if (DemoVerdict(v) != "healthy") return false;
    }
    return true;
  };
  Log("hostile: waiting for every detector's Patroni cluster to read healthy");
  env.cluster->WaitHealthy(seconds(120));
  if (!WaitFor(quiet, seconds(120), milliseconds(500))) {
    throw std::runtime_error("hostile: the detectors never all read healthy");
  }
  // The healthy elections, sampled in each hostile detector from here to the end.
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::thread sampler([&] {
    while (!stop) {
      for (auto& v : variants) {
        if (!v.hostile) continue;
        const json status = StatusOf(v.port);
        const ProcUsage usage = ReadProcUsage(v.detector->pid());
        std::lock_guard<std::mutex> lock(mu);
        v.max_threads = std::max(v.max_threads, usage.threads);
        if (!status.contains("clusters")) {
          ++v.samples;
          ++v.not_healthy;
          if (v.not_healthy_seen.size() < 3) v.not_healthy_seen.push_back("/status unreadable");
          continue;
        }
        for (const auto& c : status["clusters"]) {
          if (c.value("name", "").rfind("healthy-", 0) != 0) continue;
          ++v.samples;
          if (c.value("verdict", "") == "healthy") continue;
          ++v.not_healthy;
          if (v.not_healthy_seen.size() < 3) {
            v.not_healthy_seen.push_back(c.value("name", "") + ": " + c.value("summary", ""));
          }
        }
      }
      WaitFor([&] { return stop.load(); }, milliseconds(500), milliseconds(50));
    }
  });
  json trials = json::array();
  for (int t = 1; t <= o.trials; ++t) {
    env.cluster->WaitHealthy(seconds(120));
    if (!WaitFor(quiet, seconds(240), milliseconds(500))) {
      stop = true;
      sampler.join();
      throw std::runtime_error("hostile: not healthy before trial " + std::to_string(t));
    }
    const std::string leader = env.cluster->Leader();
    testing::WritablePoller poller(env.cluster->members());
    const auto freeze = Clock::now();
    env.cluster->FreezePatroni(leader);
    Log("hostile: trial " + std::to_string(t) + ": froze the Patroni of " + leader);
    if (!WaitFor([&] { return poller.SecondWritableAt().has_value(); },
                 seconds(3 * testing::kSandboxTtlSeconds))) {
      env.cluster->ThawPatroni(leader);
      throw std::runtime_error("hostile: no second writable member after the freeze");
    }
    const auto onset = *poller.SecondWritableAt();
    WaitFor(
        [&] {
          for (const auto& v : variants) {
            if (!PageAt(*env.webhook, v.name, freeze)) return false;
          }
          return true;
        },
        seconds(60), milliseconds(100));
    json trial = {{"trial", t}, {"frozen_leader", leader}, {"loadavg", LoadAvg()}};
    for (auto& v : variants) {
      const auto at = PageAt(*env.webhook, v.name, freeze);
      if (at) {
        v.pages.push_back(Secs(*at - onset));
        trial[v.name] = Secs(*at - onset);
      } else {
        ++v.missed;
        trial[v.name] = nullptr;
      }
    }
    Log("hostile: trial " + std::to_string(t) + ": " + trial.dump());
    trials.push_back(trial);
    env.cluster->ThawPatroni(leader);
    env.cluster->Heal();
  }
  stop = true;
  sampler.join();
  json out = {{"trials", trials},
              {"black_holed", o.black_holed},
              {"trickling", o.trickling},
              {"healthy_clusters", o.healthy},
              {"trickler_connections", trickler.accepted()},
              {"variants", json::array()}};
  for (const auto& v : variants) {
    const json status = v.hostile ? StatusOf(v.port) : json();
    out["variants"].push_back({{"name", v.name},
                               {"build", v.build},
                               {"hostile", v.hostile},
                               {"median_s", Median(v.pages)},
                               {"max_s", Max(v.pages)},
                               {"pages", v.pages},
                               {"missed", v.missed},
                               {"healthy_samples", v.samples},
                               {"healthy_samples_not_healthy", v.not_healthy},
                               {"not_healthy_seen", v.not_healthy_seen},
                               {"max_threads", v.max_threads},
                               {"black_holed_error", MemberError(status, "blackholed-")},
                               {"trickling_error", MemberError(status, "trickling-")}});
  }
  return out;
}

void PrintHostileTable(const json& r, std::ostream& t) {
  t << "Hostile endpoints beside a frozen Patroni leader: " << r["black_holed"]
    << " black-holed and " << r["trickling"] << " trickling claim members in other clusters, "
    << r["healthy_clusters"] << " healthy elections, " << r["trials"].size() << " trials\n\n"
    << "| detector | onset -> page median (max) | vs quiet, same build | healthy elections' "
       "samples not healthy | threads (max) | a black-holed member's error | a trickling "
       "member's error |\n|---|---|---|---|---|---|---|\n";
  std::map<std::string, double> quiet;
  for (const auto& v : r["variants"]) {
    if (!v["hostile"].get<bool>()) quiet[v["build"]] = v["median_s"].get<double>();
  }
  for (const auto& v : r["variants"]) {
    const double median = v["median_s"].get<double>();
    const bool hostile = v["hostile"].get<bool>();
    const double base = quiet.count(v["build"]) ? quiet[v["build"]] : -1;
    t << "| " << v["name"].get<std::string>() << " | " << Fixed(median) << " s ("
      << Fixed(v["max_s"].get<double>()) << ")"
      << (v["missed"].get<int>() > 0 ? ", " + std::to_string(v["missed"].get<int>()) + " missed"
                                     : "")
      << " | " << (hostile && base > 0 ? Fixed(median / base) + "x" : "-") << " | "
      << (hostile ? std::to_string(v["healthy_samples_not_healthy"].get<long>()) + " of " +
                        std::to_string(v["healthy_samples"].get<long>())
                  : "-")
      << " | " << (hostile ? std::to_string(v["max_threads"].get<int>()) : "-") << " | "
      << v["black_holed_error"].get<std::string>() << " | "
      << v["trickling_error"].get<std::string>() << " |\n";
  }
  for (const auto& v : r["variants"]) {
    for (const auto& seen : v["not_healthy_seen"]) {
      t << "- " << v["name"].get<std::string>() << ", not healthy: " << seen.get<std::string>()
        << "\n";
    }
  }
}

}  // namespace sbd::bench
