// A narrated walk-through for an SRE (scripts/demo patroni): the integration sandbox of
// tests/support/patroni_environment.h (etcd 3.4, a 3-member Patroni 3.0 cluster, Alertmanager 0.25
// routing to a webhook receiver that timestamps deliveries, and the real detector binary), then
// the "frozen leader" scenario: the leader's Patroni is SIGSTOPped while its PostgreSQL keeps
// running, Patroni promotes a replica one TTL later (a real double primary), and we measure how
// long the page takes to reach the webhook and how long the resolve takes once Patroni is thawed.
//
// Exit status: 0 when the page arrived within one TTL of the second writable member and the
// resolve arrived; 1 otherwise; 128+N when interrupted by signal N (SIGINT, SIGTERM). Everything
// is cleaned up in every case: the Environment's destructor always runs.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <exception>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/patroni_environment.h"

namespace {

using sbd::testing::Environment;
using sbd::testing::kSandboxTtlSeconds;
using sbd::testing::WebhookReceiver;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// --- Signals --------------------------------------------------------------------------------
// SIGINT and SIGTERM are blocked in every thread (the mask is set before any thread starts and
// inherited) and taken synchronously by one watcher thread, which only records them. The demo
// checks the flag in each of its waits and then returns normally, so the Environment's
// destructor stops every process and removes the sandbox. The children reset their signal mask
// (the sandbox does that when it spawns them), except the detector, which blocks and sigwaits
// these signals itself anyway. Bring-up (step 1) cannot be interrupted half-way: a signal that
// arrives then is acted on as soon as it finishes (its own deadlines bound it).
std::atomic<int> g_signal{0};
std::atomic<bool> g_bringing_up{false};  // step 1 runs: a signal waits until it is done

void StartSignalWatcher() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      int expected = 0;
      if (g_signal.compare_exchange_strong(expected, sig)) {
        std::cerr << "\n!! " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << " received: "
                  << (g_bringing_up ? "cleaning up as soon as bring-up is done (it cannot "
                                      "be interrupted half-way)"
                                    : "stopping at the next wait and cleaning up")
                  << std::endl;
      } else {
        std::cerr << "\n!! already cleaning up, please wait (SIGQUIT aborts without cleanup)"
                  << std::endl;
      }
    }
  }).detach();  // blocked in sigwait until the process exits
}

bool Interrupted() { return g_signal.load() != 0; }

// --- Output ---------------------------------------------------------------------------------
void Heading(const std::string& text) { std::cout << "\n== " << text << std::endl; }

// Each line of `text`, indented.
void Say(const std::string& text, const std::string& indent = "   ") {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) std::cout << indent << line << '\n';
  std::cout << std::flush;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string Fixed(double v, int precision = 2) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision) << v;
  return out.str();
}

std::string WallClock(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  const auto ms = std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, "%H:%M:%S") << '.' << std::setw(3) << std::setfill('0') << ms << " UTC";
  return out.str();
}

std::string LastLines(const std::string& text, size_t lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (size_t n = 0; n < lines && pos > 0; ++n) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return pos == 0 ? text : text.substr(pos + 1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// --- Waiting ----------------------------------------------------------------------------------
// Like sbd::testing::WaitFor, but gives up (false) as soon as a signal has been received.
bool WaitUntil(const std::function<bool()>& cond, milliseconds deadline) {
  return sbd::testing::WaitFor([&] { return Interrupted() || cond(); }, deadline) && !Interrupted();
}

// Like WebhookReceiver::WaitFor (past or future deliveries), in slices so that a signal is
// noticed within a quarter of a second.
bool WaitForDelivery(const WebhookReceiver& webhook,
                     const std::function<bool(const WebhookReceiver::Delivery&)>& pred,
                     Clock::time_point until) {
  for (;;) {
    const auto now = Clock::now();
    if (Interrupted()) return false;
    const auto left = std::chrono::duration_cast<milliseconds>(until - now);
    if (webhook.WaitFor(pred, std::clamp(left, milliseconds(0), milliseconds(250)))) return true;
    if (now >= until) return false;
  }
}

// The alert named `name` with `status` ("firing"/"resolved") in a webhook delivery, if any.
std::optional<nlohmann::json> FindAlert(const WebhookReceiver::Delivery& d, const std::string& name,
                                        const std::string& status) {
  if (!d.body.is_object() || !d.body.contains("alerts")) return std::nullopt;
  for (const auto& a : d.body["alerts"]) {
    if (a.contains("labels") && a["labels"].value("alertname", "") == name &&
        a.value("status", "") == status) {
      return a;
    }
  }
  return std::nullopt;
}

// The first delivery at or after `since` carrying `name` with `status`.
std::optional<WebhookReceiver::Delivery> FirstDelivery(const WebhookReceiver& webhook,
                                                       const std::string& name,
                                                       const std::string& status,
                                                       Clock::time_point since) {
  for (const auto& d : webhook.Deliveries()) {
    if (d.at >= since && FindAlert(d, name, status)) return d;
  }
  return std::nullopt;
}

// --- Views ----------------------------------------------------------------------------------
void ShowStatusText(const Environment& env) {
  const std::string text = sbd::testing::HttpGet(env.port, "/status?format=text");
  Say(text.empty() ? "(the detector did not answer /status?format=text)" : text);
}

void ShowAlert(const WebhookReceiver::Delivery& d, const nlohmann::json& alert) {
  Say("delivered to the webhook at " + WallClock(d.wall) + " (receiver \"" +
      d.body.value("receiver", "") + "\", group status " + d.body.value("status", "") + ")");
  std::vector<std::string> others;
  for (const auto& a : d.body["alerts"]) {
    const std::string name = a["labels"].value("alertname", "");
    if (name != alert["labels"].value("alertname", "")) {
      others.push_back(name + " (" + a.value("status", "") + ")");
    }
  }
  std::string labels;
  for (const auto& [key, value] : alert["labels"].items()) {
    labels += "\n  " + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  Say("status:      " + alert.value("status", ""));
  Say("labels:" + labels);
  const nlohmann::json annotations = alert.value("annotations", nlohmann::json::object());
  Say("summary:     " + annotations.value("summary", ""));
  Say("description:");
  Say(annotations.value("description", ""), "     | ");
  Say("runbook_url: " + annotations.value("runbook_url", ""));
  Say("startsAt:    " + alert.value("startsAt", ""));
  if (alert.value("status", "") == "resolved") Say("endsAt:      " + alert.value("endsAt", ""));
  Say("generatorURL: " + alert.value("generatorURL", ""));
  for (const auto& o : others) Say("(same delivery also carries " + o + ")");
}

void ShowFailureContext(const Environment& env) {
  std::cout << "\n--- detector status ---\n";
  ShowStatusText(env);
  std::cout << "--- last 40 lines of the detector log (" << env.root.path()
            << "/detector.log) ---\n"
            << LastLines(env.detector->Log(), 40) << std::endl;
}

int InterruptedExit() {
  std::cout << "\n== interrupted: cleaning up" << std::endl;
  return 128 + g_signal.load();
}

// --- The walk-through -------------------------------------------------------------------------
int Scenario(Environment& env) {
  const auto ttl = seconds(kSandboxTtlSeconds);
  auto& cluster = *env.cluster;

  // 2 ---------------------------------------------------------------------------------------------
  Heading("2. Wait until the detector calls the cluster healthy");
  const auto healthy_start = Clock::now();
  if (!WaitUntil([&] { return env.Verdict() == "healthy"; }, seconds(30))) {
    if (Interrupted()) return InterruptedExit();
    std::cout << "the detector did not call the cluster healthy within 30 s" << std::endl;
    ShowFailureContext(env);
    return 1;
  }
  Say("verdict healthy after " + Fixed(Seconds(Clock::now() - healthy_start)) + " s");
  Say("GET /status?format=text:");
  ShowStatusText(env);
  const nlohmann::json status = env.Status();
  const nlohmann::json lock = status.value("lock", nlohmann::json::object());
  const std::string old_leader = lock.value("holder", "");
  Say("lock holder (etcd key " + cluster.KeyPrefix() + "leader): " + old_leader +
      ", lease granted for " + lock.value("lease_granted_ttl_seconds", nlohmann::json()).dump() +
      " s, TTL read from Patroni's config in etcd: " + status["ttl_seconds"].dump() + " s");
  Say("Patroni's own view (GET /cluster): leader " + cluster.Leader());
  if (old_leader.empty()) {
    std::cout << "the detector names no lock holder" << std::endl;
    ShowFailureContext(env);
    return 1;
  }

  // 3 ---------------------------------------------------------------------------------------------
  Heading("3. Freeze the leader's Patroni (kill -STOP); its PostgreSQL keeps running");
  sbd::testing::WritablePoller poller(cluster.members());
  Say("an independent poller (libpqxx, not the detector) asks every member");
  Say("SELECT pg_is_in_recovery() every 50 ms and notes when two are writable at once");
  cluster.FreezePatroni(old_leader);
  const auto frozen_at = Clock::now();
  Say("patroni of " + old_leader + " (pid " +
      std::to_string(cluster.member(old_leader).patroni_pid) +
      ") is stopped; its PostgreSQL on 127.0.0.1:" +
      std::to_string(cluster.member(old_leader).pg_port) + " still accepts writes.");
  Say("Patroni keeps the leader key alive by renewing its etcd lease every loop (1 s). Frozen,\n"
      "it renews nothing, and it cannot demote its own PostgreSQL either. About one TTL (" +
      std::to_string(kSandboxTtlSeconds) +
      " s)\nfrom now the lease expires, a replica takes the key and promotes itself, and from "
      "then\n"
      "on two members accept writes: a real double primary.");

  // 4 ---------------------------------------------------------------------------------------------
  Heading("4. Wait for the double primary and for the page");
  Say("waiting (at most " + std::to_string(3 * kSandboxTtlSeconds) +
      " s) for the poller to see a second writable member ...");
  if (!WaitUntil([&] { return poller.SecondWritableAt().has_value(); }, 3 * ttl)) {
    if (Interrupted()) return InterruptedExit();
    std::cout << "no second writable member within " << 3 * kSandboxTtlSeconds << " s of the freeze"
              << std::endl;
    ShowFailureContext(env);
    std::cout << cluster.DescribeLogs(20) << std::endl;
    return 1;
  }
  const auto onset = *poller.SecondWritableAt();
  Say("two writable members " + Fixed(Seconds(onset - frozen_at)) + " s after the freeze");
  Say("waiting (at most " + std::to_string(2 * kSandboxTtlSeconds) +
      " s from that onset) for the SplitBrain page at the webhook ...");
  auto page_pred = [&](const WebhookReceiver::Delivery& d) {
    return d.at >= frozen_at && FindAlert(d, "SplitBrain", "firing").has_value();
  };
  if (!WaitForDelivery(*env.webhook, page_pred, onset + 2 * ttl)) {
    if (Interrupted()) return InterruptedExit();
    std::cout << "no SplitBrain page at the webhook within " << 2 * kSandboxTtlSeconds
              << " s of the onset" << std::endl;
    ShowFailureContext(env);
    return 1;
  }
  const auto page = *FirstDelivery(*env.webhook, "SplitBrain", "firing", frozen_at);
  Say("the page, as Alertmanager delivered it:");
  ShowAlert(page, *FindAlert(page, "SplitBrain", "firing"));
  Say("\nGET /status?format=text:");
  ShowStatusText(env);
  const double freeze_to_onset = Seconds(onset - frozen_at);
  const double onset_to_page = Seconds(page.at - onset);
  const bool page_in_time = page.at - onset < ttl;
  Say("measured:");
  Say("  freeze -> second writable (onset):   " + Fixed(freeze_to_onset) + " s");
  Say("  onset  -> page at the webhook:       " + Fixed(onset_to_page) + " s  " +
      (page_in_time ? "WITHIN" : "NOT within") + " one TTL (" + std::to_string(kSandboxTtlSeconds) +
      " s)");

  // 5 ---------------------------------------------------------------------------------------------
  Heading("5. Thaw the old leader's Patroni (kill -CONT) and wait for the resolve");
  const auto thaw_at = Clock::now();
  cluster.ThawPatroni(old_leader);
  Say("Thawed, " + old_leader +
      "'s Patroni runs its loop again. Patroni 3.0.2 may then retake the leader\n"
      "key (its update_leader overwrites the key unconditionally; fixed in 3.0.3) and the member\n"
      "promoted meanwhile is demoted; or it sees the key held by the other member and demotes\n"
      "its own PostgreSQL. Either way one writable member remains and the page resolves.");
  Say("waiting (at most 90 s) for the resolved notification ...");
  auto resolve_pred = [&](const WebhookReceiver::Delivery& d) {
    return d.at >= thaw_at && FindAlert(d, "SplitBrain", "resolved").has_value();
  };
  const bool resolved = WaitForDelivery(*env.webhook, resolve_pred, thaw_at + seconds(90));
  if (!resolved && Interrupted()) return InterruptedExit();
  double thaw_to_resolve = -1;
  if (resolved) {
    const auto done = *FirstDelivery(*env.webhook, "SplitBrain", "resolved", thaw_at);
    thaw_to_resolve = Seconds(done.at - thaw_at);
    Say("the resolve, as Alertmanager delivered it:");
    ShowAlert(done, *FindAlert(done, "SplitBrain", "resolved"));
    Say("thaw -> resolve at the webhook: " + Fixed(thaw_to_resolve) + " s");
  } else {
    Say("no resolved SplitBrain notification within 90 s of the thaw");
  }
  Say("waiting (at most 60 s) for the detector's verdict to settle back to healthy ...");
  const auto settle_start = Clock::now();
  if (WaitUntil([&] { return env.Verdict() == "healthy"; }, seconds(60))) {
    Say("verdict healthy " + Fixed(Seconds(Clock::now() - thaw_at)) + " s after the thaw");
  } else if (Interrupted()) {
    return InterruptedExit();
  } else {
    Say("verdict still " + env.Verdict() + " " + Fixed(Seconds(Clock::now() - settle_start)) +
        " s later (informational; the page has resolved)");
  }
  Say("GET /status?format=text:");
  ShowStatusText(env);
  std::string writable;
  for (const auto& m : cluster.WritableMembers()) writable += (writable.empty() ? "" : ", ") + m;
  Say("writable now (psql, pg_is_in_recovery() = f): " + (writable.empty() ? "none" : writable) +
      "; leader per Patroni: " + cluster.Leader());

  // 6 ---------------------------------------------------------------------------------------------
  Heading("6. Result");
  Say("timeline (seconds after the freeze; webhook = what Alertmanager delivered):");
  std::vector<std::pair<Clock::time_point, std::string>> events = {
      {frozen_at, "patroni of " + old_leader + " frozen"},
      {onset, "poller: two members writable"},
      {thaw_at, "patroni of " + old_leader + " thawed"}};
  for (const auto& d : env.webhook->Deliveries()) {
    if (d.at < frozen_at || !d.body.is_object() || !d.body.contains("alerts")) continue;
    std::string alerts;
    for (const auto& a : d.body["alerts"]) {
      alerts += (alerts.empty() ? "" : ", ") + a["labels"].value("alertname", "") + " " +
                a.value("status", "");
    }
    events.emplace_back(d.at, "webhook: " + alerts);
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [at, what] : events) {
    std::ostringstream line;
    line << std::setw(8) << Fixed(Seconds(at - frozen_at)) << "  " << what;
    Say(line.str(), "     ");
  }
  Say("freeze -> second writable (onset):  " + Fixed(freeze_to_onset) + " s");
  Say("onset  -> page at the webhook:      " + Fixed(onset_to_page) + " s (TTL " +
      std::to_string(kSandboxTtlSeconds) + " s): " + (page_in_time ? "PASS" : "FAIL"));
  Say("thaw   -> resolve at the webhook:   " +
      (resolved ? Fixed(thaw_to_resolve) + " s: PASS" : std::string("none within 90 s: FAIL")));
  if (page_in_time && resolved) return 0;
  ShowFailureContext(env);
  return 1;
}

int RunDemo() {
  int rc = 1;
  {
    Heading("1. Start etcd, a 3-member Patroni cluster, Alertmanager, a webhook and the detector");
    std::cout << "   (scope \"demo\", TTL " << kSandboxTtlSeconds
              << " s; this takes a while: initdb, then two base backups)" << std::endl;
    const auto start = Clock::now();
    g_bringing_up = true;
    Environment env(SBD_BINARY);
    g_bringing_up = false;
    const double bring_up = Seconds(Clock::now() - start);
    Say("sandbox:      " + env.root.path() + " (removed on exit)");
    Say("etcd 3.4:     " + env.etcd->endpoint());
    for (const auto& m : env.cluster->members()) {
      Say("patroni " + m.name + ": PostgreSQL 127.0.0.1:" + std::to_string(m.pg_port) + ", REST " +
          m.RestUrl() + ", log " + m.log_file);
    }
    Say("alertmanager: " + env.alertmanager->url() + " -> webhook " + env.webhook->url());
    Say("detector:     http://127.0.0.1:" + std::to_string(env.port) +
        " (/status, /status?format=text, /metrics, /runbooks/), log " + env.root.path() +
        "/detector.log");
    Say("detector config (" + env.config_file + "):");
    Say(ReadFile(env.config_file), "     | ");
    Say("bring-up took " + Fixed(bring_up, 1) + " s");

    if (Interrupted()) {
      rc = InterruptedExit();
    } else {
      try {
        rc = Scenario(env);
      } catch (const std::exception& e) {
        std::cout << "\n!! error: " << e.what() << std::endl;
        ShowFailureContext(env);
        rc = 1;
      }
    }
    std::cout << "\n== stopping the detector, Alertmanager, Patroni, PostgreSQL and etcd"
              << std::endl;
  }  // ~Environment: detector first, etcd last, then the sandbox directory
  std::cout << "== cleaned up; exit " << rc << std::endl;
  return rc;
}

}  // namespace

int main() {
  StartSignalWatcher();  // before anything else starts a thread
  try {
    return RunDemo();
  } catch (const std::exception& e) {
    std::cout << std::flush;
    std::cerr << "\n!! demo failed: " << e.what() << std::endl;
    return Interrupted() ? 128 + g_signal.load() : 1;
  }
}
