#include "tests/support/patroni_sandbox.h"

#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "probes/http_json.h"
#include "tests/support/files.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"
#include "tests/support/zookeeper_sandbox.h"

namespace sbd::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

const milliseconds kEtcdReadyDeadline{30000};
const milliseconds kEtcdStopDeadline{15000};
const milliseconds kFirstLeaderDeadline{90000};
const milliseconds kPatroniStopDeadline{60000};
const milliseconds kSignalDeadline{5000};
constexpr int kLogTailLines = 30;

// The smallest key greater than every key starting with `prefix` (etcd's range_end for a prefix).
std::string PrefixRangeEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char last = static_cast<unsigned char>(prefix.back());
    if (last < 0xFF) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// Where Patroni and etcd are installed: searched before $PATH, so that a program of the same
// name earlier in $PATH (a virtualenv, say) does not replace the packaged one.
const char* kSystemDirs = "/usr/bin:/bin:/usr/local/bin:/usr/sbin:/sbin";

// `name` found in kSystemDirs or $PATH; `name` itself when not found.
std::string SystemProgram(const std::string& name) {
  const std::string path = FindExecutable(name, kSystemDirs);
  return path.empty() ? name : path;
}

// Patroni's own programs: $SBD_PATRONI_BINDIR/<tool> when set, else SystemProgram(tool).
std::string PatroniBin(const std::string& tool) {
  if (const char* env = std::getenv("SBD_PATRONI_BINDIR"); env != nullptr && *env != '\0') {
    return std::string(env) + "/" + tool;
  }
  return SystemProgram(tool);
}

// Options for etcd (as the current user) and patroni (as postgres): a minimal environment, and
// SIGTERM when the thread that started them dies.
BackgroundOptions DaemonOptions(bool as_postgres, const std::string& workdir) {
  BackgroundOptions options;
  options.as_postgres = as_postgres;
  options.workdir = workdir;
  options.minimal_environment = true;
  options.die_with_parent = true;
  return options;
}

std::unique_ptr<httplib::Client> LoopbackClient(int port, int read_timeout_ms = 3000) {
  auto cli = std::make_unique<httplib::Client>("127.0.0.1", port);
  cli->set_connection_timeout(0, 1000 * 1000);
  cli->set_read_timeout(read_timeout_ms / 1000, (read_timeout_ms % 1000) * 1000);
  cli->set_write_timeout(3, 0);
  cli->set_keep_alive(false);
  return cli;
}

std::string Quoted(const std::string& s) {  // YAML single-quoted scalar
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// EtcdServer

EtcdServer::EtcdServer(const std::string& dir)
    : dir_(dir), data_dir_(dir + "/data"), log_file_(dir + "/etcd.log") {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw std::runtime_error("EtcdServer: cannot create " + dir_ + ": " + ec.message());
  client_port_ = FreeLoopbackPort();
  do {
    peer_port_ = FreeLoopbackPort();
  } while (peer_port_ == client_port_);

  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    const size_t log_offset = ReadFile(log_file_).size();
    std::string how;
    bool exited = false;
    if (SpawnAndWait(&exited, &how)) return;
    const std::string new_log = ReadFile(log_file_).substr(log_offset);
    if (exited && new_log.find("address already in use") != std::string::npos &&
        attempt < kAttempts) {
      fs::remove_all(data_dir_, ec);
      client_port_ = FreeLoopbackPort();
      do {
        peer_port_ = FreeLoopbackPort();
      } while (peer_port_ == client_port_);
      continue;
    }
    throw std::runtime_error("EtcdServer: etcd on 127.0.0.1:" + std::to_string(client_port_) +
                             (exited
                                  ? " " + how
                                  : std::string(" is not ready after ") +
                                        std::to_string(kEtcdReadyDeadline.count() / 1000) + " s") +
                             "\n--- last lines of " + log_file_ + " ---\n" + LogTail());
  }
}

EtcdServer::~EtcdServer() {
  try {
    Stop();
  } catch (...) {
  }
}

std::string EtcdServer::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(client_port_);
}

void EtcdServer::Spawn() {
  const std::string client_url = endpoint();
  const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port_);
  pid_ = SpawnBackgroundProcess({SystemProgram("etcd"),
                                 "--name",
                                 "sbd-etcd",
                                 "--data-dir",
                                 data_dir_,
                                 "--listen-client-urls",
                                 client_url,
                                 "--advertise-client-urls",
                                 client_url,
                                 "--listen-peer-urls",
                                 peer_url,
                                 "--initial-advertise-peer-urls",
                                 peer_url,
                                 "--initial-cluster",
                                 "sbd-etcd=" + peer_url,
                                 "--initial-cluster-state",
                                 "new",
                                 "--initial-cluster-token",
                                 "sbd-test",
                                 "--logger",
                                 "zap",
                                 "--log-outputs",
                                 "stderr"},
                                log_file_, DaemonOptions(/*as_postgres=*/false, dir_));
}

bool EtcdServer::Ready() const {
  try {
    auto cli = LoopbackClient(client_port_, 2000);
    auto res = cli->Get("/health");
    if (!res || res->status != 200) return false;
    json health = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (!health.is_object() || health.value("health", "") != "true") return false;
    PostV3("kv/range", R"({"key":")" + sbd::Base64Encode("/") + R"("})");
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool EtcdServer::SpawnAndWait(bool* exited, std::string* how) {
  Spawn();
  const StartupOutcome outcome = WaitUntilReady(
      pid_, [this] { return Ready(); }, kEtcdReadyDeadline, milliseconds(50), how);
  *exited = outcome == StartupOutcome::kExited;
  if (outcome == StartupOutcome::kReady) return true;
  if (!*exited) StopChildProcess(pid_, SIGTERM, kEtcdStopDeadline);
  pid_ = -1;
  return false;
}

void EtcdServer::Stop() {
  if (pid_ <= 0) return;
  StopChildProcess(pid_, SIGTERM, kEtcdStopDeadline);
  pid_ = -1;
}

void EtcdServer::Start() {
  if (pid_ > 0) {
    if (!ReapIfExited(pid_)) return;
    pid_ = -1;
  }
  std::string how;
  bool exited = false;
  if (SpawnAndWait(&exited, &how)) return;
  throw std::runtime_error("EtcdServer: restart on 127.0.0.1:" + std::to_string(client_port_) +
                           " failed (" + (exited ? how : std::string("not ready")) +
                           ")\n--- last lines of " + log_file_ + " ---\n" + LogTail());
}

std::string EtcdServer::PostV3(const std::string& api, const std::string& json_body) const {
  auto cli = LoopbackClient(client_port_);
  auto res = cli->Post(("/v3/" + api).c_str(), json_body, "application/json");
  if (!res) {
    throw std::runtime_error("etcd POST /v3/" + api + ": " + httplib::to_string(res.error()));
  }
  if (res->status != 200) {
    throw std::runtime_error("etcd POST /v3/" + api + ": HTTP " + std::to_string(res->status) +
                             ": " + res->body);
  }
  return res->body;
}

std::string EtcdServer::Get(const std::string& key) const {
  json body = json::parse(PostV3("kv/range", json{{"key", sbd::Base64Encode(key)}}.dump()));
  if (!body.contains("kvs") || body["kvs"].empty()) return "";
  return sbd::Base64Decode(body["kvs"][0].value("value", "")).value_or("");
}

std::string EtcdServer::LogTail(int lines) const { return Tail(log_file_, lines); }

// ---------------------------------------------------------------------------------------------
// PatroniMember

std::string PatroniMember::RestUrl() const {
  return "http://127.0.0.1:" + std::to_string(rest_port);
}

std::string PatroniMember::MonitorDsn() const {
  return "host=127.0.0.1 port=" + std::to_string(pg_port) +
         " user=" + PatroniCluster::kMonitorUser + " dbname=postgres";
}

std::string PatroniMember::SuperuserDsn() const {
  return "host=127.0.0.1 port=" + std::to_string(pg_port) + " user=postgres dbname=postgres";
}

// ---------------------------------------------------------------------------------------------
// PatroniCluster

PatroniCluster::PatroniCluster(const std::string& root_dir, const std::string& scope,
                               const EtcdServer& etcd, int members, int ttl_seconds,
                               int loop_wait_seconds, int retry_timeout_seconds)
    : PatroniCluster(root_dir, scope, &etcd, {}, members, ttl_seconds, loop_wait_seconds,
                     retry_timeout_seconds) {}

PatroniCluster::PatroniCluster(const std::string& root_dir, const std::string& scope,
                               const ZooKeeperServer& zookeeper, int members, int ttl_seconds,
                               int loop_wait_seconds, int retry_timeout_seconds)
    : PatroniCluster(root_dir, scope, nullptr, {&zookeeper}, members, ttl_seconds,
                     loop_wait_seconds, retry_timeout_seconds) {}

namespace {
std::vector<const ZooKeeperServer*> Servers(ZooKeeperEnsemble& ensemble) {
  std::vector<const ZooKeeperServer*> servers;
  for (size_t i = 0; i < ensemble.size(); ++i) servers.push_back(&ensemble.server(i));
  return servers;
}
}  // namespace

PatroniCluster::PatroniCluster(const std::string& root_dir, const std::string& scope,
                               ZooKeeperEnsemble& ensemble, int members, int ttl_seconds,
                               int loop_wait_seconds, int retry_timeout_seconds)
    : PatroniCluster(root_dir, scope, nullptr, Servers(ensemble), members, ttl_seconds,
                     loop_wait_seconds, retry_timeout_seconds) {}

PatroniCluster::PatroniCluster(const std::string& root_dir, const std::string& scope,
                               const EtcdServer* etcd,
                               std::vector<const ZooKeeperServer*> zookeepers, int members,
                               int ttl_seconds, int loop_wait_seconds, int retry_timeout_seconds)
    : root_dir_(root_dir),
      scope_(scope),
      etcd_(etcd),
      zookeepers_(std::move(zookeepers)),
      ttl_(ttl_seconds),
      loop_wait_(loop_wait_seconds),
      retry_timeout_(retry_timeout_seconds) {
  static const std::regex kValidScope("[A-Za-z0-9_-]{1,40}");
  if (!std::regex_match(scope_, kValidScope)) {
    throw std::invalid_argument("PatroniCluster: invalid scope '" + scope_ +
                                "' (1-40 characters of [A-Za-z0-9_-])");
  }
  if (members < 1 || members > 9) {
    throw std::invalid_argument("PatroniCluster: members must be 1..9");
  }
  if (loop_wait_ < 1 || retry_timeout_ < 1 || loop_wait_ + 2 * retry_timeout_ > ttl_) {
    throw std::invalid_argument(
        "PatroniCluster: Patroni requires loop_wait + 2 * retry_timeout <= ttl (got ttl=" +
        std::to_string(ttl_) + " loop_wait=" + std::to_string(loop_wait_) +
        " retry_timeout=" + std::to_string(retry_timeout_) + ")");
  }
  if (etcd_ && !etcd_->running())
    throw std::invalid_argument("PatroniCluster: etcd is not running");
  if (::access(PatroniBin("patroni").c_str(), X_OK) != 0) {
    throw std::runtime_error("PatroniCluster: patroni not found (PATH or $SBD_PATRONI_BINDIR)");
  }
  if (RunningAsRoot()) PostgresUser();

  try {
    std::error_code ec;
    if (!fs::exists(root_dir_)) {
      fs::create_directories(root_dir_, ec);
      if (ec) throw std::runtime_error("cannot create " + root_dir_ + ": " + ec.message());
      ::chmod(root_dir_.c_str(), 0755);
      GiveToPostgres(root_dir_);
      created_dirs_.push_back(root_dir_);
    }
    password_file_ = root_dir_ + "/" + scope_ + "-monitor.password";
    WriteFile(password_file_, std::string(kMonitorPassword) + "\n", 0600);

    std::set<int> used = {5432, 8008};
    if (etcd_) used.insert({etcd_->client_port(), etcd_->peer_port()});
    for (const ZooKeeperServer* zk : zookeepers_) used.insert(zk->port());
    auto port = [&] {
      for (;;) {
        int p = FreeLoopbackPort();
        if (used.insert(p).second) return p;
      }
    };
    for (int i = 1; i <= members; ++i) {
      PatroniMember m;
      m.name = "node" + std::to_string(i);
      m.pg_port = port();
      m.rest_port = port();
      m.dir = root_dir_ + "/" + scope_ + "-" + m.name;
      m.data_dir = m.dir + "/data";
      m.config_file = m.dir + "/patroni.yml";
      m.log_file = m.dir + "/patroni.log";
      // PostgreSQL's unix socket lives in the member dir: sun_path holds 107 characters.
      if (m.dir.size() + std::strlen("/.s.PGSQL.65535") > 107) {
        throw std::invalid_argument("root_dir too long for a unix socket path: " + m.dir);
      }
      if (fs::exists(m.dir)) {
        throw std::runtime_error("member dir " + m.dir + " already exists");
      }
      MakeDir(m.dir, 0755);
      created_dirs_.push_back(m.dir);
      GiveToPostgres(m.dir);
      members_.push_back(m);
    }
    for (const auto& m : members_) WriteConfig(m);

    // node1 bootstraps the cluster alone, so that it is always the initial leader.
    StartPatroni(members_.front());
    const std::string first = members_.front().name;
    std::string last;
    bool leader = WaitFor(
        [&] {
          std::string how;
          if (ReapIfExited(members_.front().patroni_pid, &how)) {
            members_.front().patroni_pid = -1;
            Fail("patroni " + first + " " + how + " during bootstrap");
          }
          try {
            last = DcsLeader();
            if (last != first) return false;
            std::string out;
            return TryQuery(first, "SELECT pg_is_in_recovery()", &out, seconds(5)) && out == "f";
          } catch (const std::exception& e) {
            last = e.what();
            return false;
          }
        },
        kFirstLeaderDeadline, milliseconds(200));
    if (!leader) {
      Fail(first + " did not become the leader within " +
           std::to_string(kFirstLeaderDeadline.count() / 1000) + " s (DCS leader: '" + last + "')");
    }
    for (size_t i = 1; i < members_.size(); ++i) StartPatroni(members_[i]);
  } catch (...) {
    StopAll();
    throw;
  }
}

PatroniCluster::~PatroniCluster() { StopAll(); }

std::string PatroniCluster::KeyPrefix() const {
  return std::string(kNamespace) + "/" + scope_ + "/";
}

void PatroniCluster::WriteConfig(const PatroniMember& m) const {
  const std::string rest = "127.0.0.1:" + std::to_string(m.rest_port);
  const std::string pg = "127.0.0.1:" + std::to_string(m.pg_port);
  std::ostringstream y;
  y << "# written by the splitbrain-detector test sandbox (tests/support/patroni_sandbox.cpp)\n"
    << "scope: " << Quoted(scope_) << "\n"
    << "namespace: " << kNamespace << "\n"
    << "name: " << Quoted(m.name) << "\n"
    << "log:\n"
    << "  level: INFO\n"
    << "restapi:\n"
    << "  listen: " << rest << "\n"
    << "  connect_address: " << rest << "\n"
    << (etcd_ ? "etcd3:\n  hosts: 127.0.0.1:" + std::to_string(etcd_->client_port()) +
                    "\n  protocol: http\n"
              : "zookeeper:\n  hosts: [" + ZooKeeperHosts() + "]\n")
    << "bootstrap:\n"
    << "  dcs:\n"
    << "    ttl: " << ttl_ << "\n"
    << "    loop_wait: " << loop_wait_ << "\n"
    << "    retry_timeout: " << retry_timeout_ << "\n"
    << "    maximum_lag_on_failover: 1048576\n"
    << "    postgresql:\n"
    << "      use_pg_rewind: true\n"
    << "      parameters:\n"
    << "        wal_level: replica\n"
    << "        hot_standby: 'on'\n"
    << "        max_wal_senders: 10\n"
    << "        max_replication_slots: 10\n"
    << "        wal_log_hints: 'on'\n"
    << "        fsync: 'off'\n"
    << "  initdb:\n"
    << "  - encoding: UTF8\n"
    << "  - data-checksums\n"
    << "postgresql:\n"
    << "  listen: " << pg << "\n"
    << "  connect_address: " << pg << "\n"
    << "  data_dir: " << Quoted(m.data_dir) << "\n"
    << "  bin_dir: " << Quoted(PgBinDir()) << "\n"
    << "  pgpass: " << Quoted(m.dir + "/pgpass") << "\n"
    << "  authentication:\n"
    << "    superuser:\n"
    << "      username: postgres\n"
    << "      password: 'sbd-superuser-secret'\n"
    << "    replication:\n"
    << "      username: replicator\n"
    << "      password: 'sbd-replicator-secret'\n"
    << "  parameters:\n"
    << "    unix_socket_directories: " << Quoted(m.dir) << "\n"
    << "    shared_buffers: 32MB\n"
    << "    min_wal_size: 32MB\n"
    << "    max_wal_size: 64MB\n"
    << "    wal_recycle: 'off'\n"
    << "    log_line_prefix: '%m [%p] %q%u@%d '\n"
    << "  pg_hba:\n"
    << "  - local all all trust\n"
    << "  - host replication replicator 127.0.0.1/32 trust\n"
    << "  - host all postgres 127.0.0.1/32 trust\n"
    << "  - host all replicator 127.0.0.1/32 trust\n"
    << "  - host all all 127.0.0.1/32 scram-sha-256\n"
    << "tags: {}\n";
  WriteFile(m.config_file, y.str(), 0600);
  GiveToPostgres(m.config_file);
}

void PatroniCluster::StartPatroni(PatroniMember& m) {
  if (m.patroni_pid > 0 && !ReapIfExited(m.patroni_pid)) return;
  m.frozen = false;
  m.patroni_pid = SpawnBackgroundProcess({PatroniBin("patroni"), m.config_file}, m.log_file,
                                         DaemonOptions(/*as_postgres=*/true, m.dir));
}

bool PatroniCluster::RestartOnFreshPorts(PatroniMember& m) {
  if (ever_healthy_ || port_moves_[m.name] >= 3 ||
      Tail(m.log_file, 40).find("Address already in use") == std::string::npos) {
    return false;
  }
  ++port_moves_[m.name];
  std::set<int> used = {5432, 8008};
  if (etcd_) used.insert({etcd_->client_port(), etcd_->peer_port()});
  for (const ZooKeeperServer* zk : zookeepers_) used.insert(zk->port());
  for (const auto& other : members_) used.insert({other.pg_port, other.rest_port});
  for (int* port : {&m.pg_port, &m.rest_port}) {
    do {
      *port = FreeLoopbackPort();
    } while (!used.insert(*port).second);
  }
  WriteConfig(m);
  std::fprintf(stderr,
               "[patroni cluster %s] %s lost a port to another process; moved to pg %d, "
               "rest %d\n",
               scope_.c_str(), m.name.c_str(), m.pg_port, m.rest_port);
  StartPatroni(m);
  return true;
}

PatroniMember& PatroniCluster::member(const std::string& name) {
  for (auto& m : members_) {
    if (m.name == name) return m;
  }
  throw std::invalid_argument("PatroniCluster " + scope_ + ": no member '" + name + "'");
}

const PatroniMember& PatroniCluster::member(const std::string& name) const {
  return const_cast<PatroniCluster*>(this)->member(name);
}

std::string PatroniCluster::RestGet(const std::string& name, const std::string& path) const {
  const PatroniMember& m = member(name);
  auto cli = LoopbackClient(m.rest_port);
  const std::string target = "/" + path;
  auto res = cli->Get(target.c_str());
  if (!res) {
    throw std::runtime_error("GET " + m.RestUrl() + target + ": " +
                             httplib::to_string(res.error()));
  }
  return res->body;
}

std::string PatroniCluster::Leader() const {
  std::string leader = RestLeader();
  if (!leader.empty() || !etcd_) return leader;
  try {
    return etcd_->Get(KeyPrefix() + "leader");
  } catch (const std::exception&) {
    return "";
  }
}

std::string PatroniCluster::DcsLeader() const {
  return etcd_ ? etcd_->Get(KeyPrefix() + "leader") : RestLeader();
}

std::string PatroniCluster::RestLeader() const {
  for (const auto& m : members_) {
    if (m.frozen || m.patroni_pid <= 0) continue;
    try {
      json cluster = json::parse(RestGet(m.name, "cluster"));
      for (const auto& mem : cluster.at("members")) {
        const std::string role = mem.value("role", "");
        if (role == "leader" || role == "standby_leader" || role == "master") {
          return mem.value("name", "");
        }
      }
      return "";
    } catch (const std::exception&) {
      // Try the next member.
    }
  }
  return "";
}

bool PatroniCluster::TryQuery(const std::string& name, const std::string& sql, std::string* out,
                              seconds timeout) const {
  const PatroniMember& m = member(name);
  return TrySuperuserQuery(m.dir, m.pg_port, sql, timeout, out);
}

std::string PatroniCluster::Query(const std::string& name, const std::string& sql,
                                  seconds timeout) const {
  std::string out;
  if (!TryQuery(name, sql, &out, timeout)) {
    throw std::runtime_error("[" + scope_ + "/" + name + "] query failed: " + sql + "\n" + out +
                             "\n--- last lines of " + member(name).log_file + " ---\n" +
                             Tail(member(name).log_file, kLogTailLines));
  }
  return out;
}

bool PatroniCluster::Healthy(std::string* why) const {
  for (const auto& m : members_) {
    if (m.frozen) {
      *why = m.name + " is frozen";
      return false;
    }
    if (m.patroni_pid <= 0) {
      *why = m.name + " has no patroni process";
      return false;
    }
  }
  json cluster;
  std::string errors;
  for (const auto& m : members_) {
    try {
      cluster = json::parse(RestGet(m.name, "cluster"));
      break;
    } catch (const std::exception& e) {
      errors += m.name + ": " + e.what() + "; ";
    }
  }
  if (cluster.is_null()) {
    *why = "no member answered GET /cluster: " + errors;
    return false;
  }
  const json& list = cluster.value("members", json::array());
  if (list.size() != members_.size()) {
    *why = "GET /cluster lists " + std::to_string(list.size()) + " members: " + cluster.dump();
    return false;
  }
  std::string leader;
  for (const auto& mem : list) {
    const std::string role = mem.value("role", "");
    const std::string state = mem.value("state", "");
    if (role == "leader") {
      if (!leader.empty() || state != "running") {
        *why = "leader not unique or not running: " + cluster.dump();
        return false;
      }
      leader = mem.value("name", "");
    } else if (role != "replica" || (state != "streaming" && state != "running")) {
      *why = "member not a running replica: " + mem.dump();
      return false;
    }
  }
  if (leader.empty()) {
    *why = "no leader: " + cluster.dump();
    return false;
  }
  std::string out;
  if (!TryQuery(leader, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", &out,
                seconds(10))) {
    *why = "query on leader " + leader + " failed: " + out;
    return false;
  }
  if (out != std::to_string(members_.size() - 1)) {
    *why = "leader " + leader + " has " + out + " streaming replicas";
    return false;
  }
  return true;
}

void PatroniCluster::EnsureMonitorRole() {
  const std::string leader = Leader();
  if (leader.empty()) Fail("EnsureMonitorRole: no leader");
  const std::string user = kMonitorUser;
  const std::string pass = kMonitorPassword;
  Query(leader, "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '" + user +
                    "') THEN CREATE ROLE " + user + " LOGIN; END IF; END$$;");
  Query(leader, "ALTER ROLE " + user + " LOGIN PASSWORD '" + pass + "'");
  Query(leader, "SET client_min_messages = warning; GRANT pg_monitor TO " + user + ";");
  Query(leader,
        "GRANT EXECUTE ON FUNCTION pg_control_system(), pg_control_checkpoint() TO " + user);
  // The fork point of a split brain (the new timeline's history file), as docs/kinds/postgres.md
  // says.
  Query(leader, "GRANT EXECUTE ON FUNCTION pg_read_file(text) TO " + user);
}

void PatroniCluster::WaitHealthy(seconds deadline) {
  const auto end = Clock::now() + deadline;
  auto left = [&] {
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(end - Clock::now()));
  };
  std::string why;
  bool healthy = WaitFor(
      [&] {
        for (auto& m : members_) {
          std::string how;
          if (m.patroni_pid > 0 && ReapIfExited(m.patroni_pid, &how)) {
            m.patroni_pid = -1;
            if (!RestartOnFreshPorts(m)) Fail("patroni " + m.name + " " + how);
          }
        }
        return Healthy(&why);
      },
      left(), milliseconds(200));
  if (!healthy) {
    Fail("cluster not healthy after " + std::to_string(deadline.count()) + " s: " + why);
  }
  ever_healthy_ = true;
  if (monitor_role_ready_) return;

  EnsureMonitorRole();
  // The role replicates; check it the way the detector uses it: TCP, SCRAM, password.
  std::string last;
  bool works = WaitFor(
      [&] {
        for (const auto& m : members_) {
          std::string detail;
          if (!MonitorLoginWorks(
                  m.MonitorDsn() + " password=" + kMonitorPassword + " connect_timeout=5",
                  kMonitorUser, seconds(15), &detail)) {
            last = m.name + ": " + detail;
            return false;
          }
        }
        return true;
      },
      std::max(left(), milliseconds(10000)), milliseconds(200));
  if (!works) Fail("monitoring role does not work on every member: " + last);
  monitor_role_ready_ = true;
}

void PatroniCluster::FreezePatroni(const std::string& name) {
  PatroniMember& m = member(name);
  if (m.patroni_pid <= 0) Fail("FreezePatroni(" + name + "): patroni is not running");
  if (::kill(m.patroni_pid, SIGSTOP) != 0) {
    Fail("kill -STOP " + std::to_string(m.patroni_pid) + ": " + strerror(errno));
  }
  m.frozen = true;
  if (!WaitFor([&] { return ProcessState(m.patroni_pid) == 'T'; }, kSignalDeadline,
               milliseconds(5))) {
    Fail("patroni " + name + " did not stop on SIGSTOP");
  }
}

void PatroniCluster::ThawPatroni(const std::string& name) {
  PatroniMember& m = member(name);
  if (m.patroni_pid <= 0) {
    m.frozen = false;
    return;
  }
  ::kill(m.patroni_pid, SIGCONT);
  m.frozen = false;
  if (!WaitFor([&] { return ProcessState(m.patroni_pid) != 'T'; }, kSignalDeadline,
               milliseconds(5))) {
    Fail("patroni " + name + " did not continue on SIGCONT");
  }
}

std::string PatroniCluster::Switchover(const std::string& candidate, seconds deadline) {
  return MoveLeader("switchover", candidate, deadline);
}

void PatroniCluster::SetPaused(bool paused, seconds deadline) {
  const PatroniMember* via = nullptr;
  for (const auto& m : members_) {
    if (!m.frozen && m.patroni_pid > 0) via = &m;
  }
  if (via == nullptr) Fail("SetPaused: no running member to read the config of");
  const std::vector<std::string> argv = {PatroniBin("patronictl"),    "-c",   via->config_file,
                                         paused ? "pause" : "resume", scope_, "--wait"};
  CommandResult r = RunCommand(argv, /*as_postgres=*/true, deadline);
  if (r.exit_code != 0) Fail("SetPaused: " + DescribeCommandRun(argv, r.exit_code, r.output));
}

std::string PatroniCluster::Failover(const std::string& candidate, seconds deadline) {
  return MoveLeader("failover", candidate, deadline);
}

std::string PatroniCluster::MoveLeader(const std::string& how, const std::string& candidate,
                                       seconds deadline) {
  const auto end = Clock::now() + deadline;
  const std::string old_leader = Leader();
  if (old_leader.empty()) Fail(how + ": the cluster has no leader");
  if (candidate == old_leader) Fail(how + ": " + candidate + " is already the leader");
  const PatroniMember* via = nullptr;
  for (const auto& m : members_) {
    if (!m.frozen && m.patroni_pid > 0) via = &m;
  }
  if (via == nullptr) Fail(how + ": no running member to read the config of");
  std::vector<std::string> argv = {
      PatroniBin("patronictl"), "-c", via->config_file, how, scope_, "--force"};
  // A failover names only its candidate; a switchover also the leader it moves away from.
  if (how == "switchover") {
    argv.push_back("--leader");
    argv.push_back(old_leader);
  }
  if (!candidate.empty()) {
    argv.push_back("--candidate");
    argv.push_back(candidate);
  }
  CommandResult r = RunCommand(argv, /*as_postgres=*/true, deadline);
  if (r.exit_code != 0) {
    Fail(how + ": " + DescribeCommandRun(argv, r.exit_code, r.output));
  }
  std::string new_leader;
  bool switched = WaitFor(
      [&] {
        new_leader = Leader();
        if (new_leader.empty() || new_leader == old_leader) return false;
        std::string out;
        return TryQuery(new_leader, "SELECT pg_is_in_recovery()", &out, seconds(5)) && out == "f";
      },
      std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(end - Clock::now())),
      milliseconds(100));
  if (!switched) {
    Fail(how + ": leader still '" + new_leader + "' (was " + old_leader + ")\npatronictl said:\n" +
         r.output);
  }
  if (!candidate.empty() && new_leader != candidate) {
    Fail(how + ": new leader is " + new_leader + ", not " + candidate);
  }
  WaitHealthy(std::max(seconds(10), std::chrono::duration_cast<seconds>(end - Clock::now())));
  return new_leader;
}

std::vector<std::string> PatroniCluster::WritableMembers() const {
  std::vector<std::string> names;
  for (const auto& m : members_) {
    std::string out;
    if (TryQuery(m.name, "SELECT pg_is_in_recovery()", &out, seconds(5)) && out == "f") {
      names.push_back(m.name);
    }
  }
  return names;
}

void PatroniCluster::Reinit(const std::string& name, seconds deadline) {
  const PatroniMember& target = member(name);
  const PatroniMember* via = nullptr;
  for (const auto& m : members_) {
    if (!m.frozen && m.patroni_pid > 0) via = &m;
  }
  if (via == nullptr || target.frozen || target.patroni_pid <= 0) {
    Fail("Reinit(" + name + "): the member or every other member is frozen or stopped");
  }
  const std::vector<std::string> argv = {PatroniBin("patronictl"),
                                         "-c",
                                         via->config_file,
                                         "reinit",
                                         scope_,
                                         name,
                                         "--force",
                                         "--wait"};
  CommandResult r = RunCommand(argv, /*as_postgres=*/true, deadline);
  if (r.exit_code != 0) {
    Fail("Reinit: " + DescribeCommandRun(argv, r.exit_code, r.output));
  }
}

std::vector<std::string> PatroniCluster::Heal(seconds deadline, seconds grace) {
  const auto end = Clock::now() + deadline;
  std::vector<std::string> reinitialized;
  std::string why;
  if (WaitFor([&] { return Healthy(&why); }, std::min(grace, deadline), milliseconds(200))) {
    WaitHealthy(std::max(seconds(10), std::chrono::duration_cast<seconds>(end - Clock::now())));
    return reinitialized;
  }
  const std::string leader = Leader();
  if (leader.empty()) Fail("Heal: no leader after " + std::to_string(grace.count()) + " s");
  std::string streaming;
  TryQuery(leader,
           "SELECT string_agg(application_name, ',') FROM pg_stat_replication "
           "WHERE state = 'streaming'",
           &streaming, seconds(10));
  const std::string list = "," + streaming + ",";
  for (const auto& m : members_) {
    if (m.name == leader || list.find("," + m.name + ",") != std::string::npos) continue;
    Reinit(m.name, std::max(seconds(30), std::chrono::duration_cast<seconds>(end - Clock::now())));
    reinitialized.push_back(m.name);
  }
  WaitHealthy(std::max(seconds(10), std::chrono::duration_cast<seconds>(end - Clock::now())));
  return reinitialized;
}

std::string PatroniCluster::DescribeLogs(int lines) const {
  std::string s;
  for (const auto& m : members_) {
    s += "--- " + m.name + " (patroni pid " + std::to_string(m.patroni_pid) +
         (m.frozen ? ", frozen" : "") + ", pg " + std::to_string(m.pg_port) + ", rest " +
         std::to_string(m.rest_port) + "): last lines of " + m.log_file + " ---\n" +
         Tail(m.log_file, lines);
  }
  if (etcd_) s += "--- etcd: last lines of " + etcd_->log_file() + " ---\n" + etcd_->LogTail(10);
  for (const ZooKeeperServer* zk : zookeepers_) {
    s += "--- zookeeper " + zk->host() + ": last lines of its log ---\n" + zk->LogTail();
  }
  return s;
}

std::string PatroniCluster::ZooKeeperHosts() const {
  std::string hosts;
  for (const ZooKeeperServer* zk : zookeepers_) {
    hosts += (hosts.empty() ? "'" : ", '") + zk->host() + "'";
  }
  return hosts;
}

void PatroniCluster::Fail(const std::string& what) const {
  throw std::runtime_error("[patroni cluster " + scope_ + "] " + what + "\n" +
                           DescribeLogs(kLogTailLines));
}

void PatroniCluster::StopAll() noexcept {
  try {
    // Thaw first: a stopped patroni cannot handle SIGTERM, and a stopped postgres cannot shut
    // down. Then SIGTERM every patroni at once, so that no replica tries to take over while the
    // leader stops.
    for (auto& m : members_) {
      if (m.patroni_pid > 0) ::kill(m.patroni_pid, SIGCONT);
      m.frozen = false;
      const pid_t pm = ReadPidFile(m.data_dir + "/postmaster.pid");
      if (pm > 0) {
        for (pid_t p : ProcessTree(pm)) ::kill(p, SIGCONT);
      }
    }
    for (auto& m : members_) {
      if (m.patroni_pid > 0) ::kill(m.patroni_pid, SIGTERM);
    }
    WaitFor(
        [&] {
          bool all = true;
          for (auto& m : members_) {
            if (m.patroni_pid > 0 && !ReapIfExited(m.patroni_pid)) all = false;
          }
          return all;
        },
        kPatroniStopDeadline, milliseconds(50));
    for (auto& m : members_) {
      if (m.patroni_pid > 0 && !ReapIfExited(m.patroni_pid)) {
        StopChildProcess(m.patroni_pid, SIGKILL, kSignalDeadline);
      }
      m.patroni_pid = -1;
    }
    // Patroni starts postgres in its own session (not our child): make sure it is gone.
    for (auto& m : members_) {
      const pid_t pm = ReadPidFile(m.data_dir + "/postmaster.pid");
      if (pm <= 0 || !ProcessAlive(pm)) continue;
      const std::string cmdline = ReadFile("/proc/" + std::to_string(pm) + "/cmdline");
      if (cmdline.find("postgres") == std::string::npos) continue;  // pid reused
      RunCommand({PgBin("pg_ctl"), "-D", m.data_dir, "-m", "immediate", "-w", "-t", "30", "stop"},
                 /*as_postgres=*/true, seconds(45));
      if (ProcessAlive(pm)) KillProcessTree(pm, kSignalDeadline);
    }
    // Forget the cluster in etcd, so that the scope can be bootstrapped again.
    if (etcd_ && etcd_->running()) {
      try {
        etcd_->PostV3("kv/deleterange",
                      json{{"key", sbd::Base64Encode(KeyPrefix())},
                           {"range_end", sbd::Base64Encode(PrefixRangeEnd(KeyPrefix()))}}
                          .dump());
      } catch (const std::exception&) {
      }
    }
    std::error_code ec;
    for (auto it = created_dirs_.rbegin(); it != created_dirs_.rend(); ++it) {
      fs::remove_all(*it, ec);
    }
    if (!password_file_.empty()) fs::remove(password_file_, ec);
    created_dirs_.clear();
  } catch (...) {
  }
}

}  // namespace sbd::testing
