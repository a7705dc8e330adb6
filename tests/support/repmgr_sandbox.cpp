#include "tests/support/repmgr_sandbox.h"

#include <signal.h>

#include <algorithm>
#include <iostream>
#include <stdexcept>

#include "tests/support/files.h"
#include "tests/support/pg_sandbox.h"
#include "tests/support/process.h"

namespace sbd::testing {
namespace {

using std::chrono::seconds;

std::string Run(const std::vector<std::string>& argv, seconds timeout = seconds(90),
                bool as_postgres = true) {
  const CommandResult result = RunCommand(argv, as_postgres, timeout);
  if (result.exit_code != 0) {
    throw std::runtime_error(DescribeCommandRun(argv, result.exit_code, result.output));
  }
  return result.output;
}

// repmgr reaches the other nodes with ssh (a switchover stops the old primary through it);
// every node is on this host, so this one runs the command here.
constexpr const char* kLocalSsh =
    "#!/bin/sh\n"
    "while [ $# -gt 0 ]; do case \"$1\" in -o|-p|-i|-l|-F) shift 2;; -*) shift;; *) shift; "
    "break;; esac; done\n"
    "exec /bin/sh -c \"$*\"\n";

}  // namespace

RepmgrCluster::RepmgrCluster(int count, bool repmgrd, bool witness)
    : root_(std::make_unique<TempDir>("sbd-repmgr-")), repmgrd_(repmgrd) {
  password_file_ = root() + "/monitor.pass";
  WriteFile(password_file_, std::string(kMonitorPassword) + "\n", 0600);
  MakeDir(root() + "/bin", 0755);
  WriteFile(root() + "/bin/ssh", kLocalSsh, 0755);
  for (int i = 0; i < count; ++i) {
    Node node;
    node.id = i + 1;
    node.name = "node" + std::to_string(node.id);
    node.port = FreeLoopbackPort();
    node.dir = root() + "/" + node.name;
    Run({"mkdir", "-p", node.dir});
    nodes_.push_back(node);
    WriteRepmgrConf(node);
  }
  Initdb(nodes_[0]);
  StartServer(nodes_[0]);
  Query(0, "CREATE DATABASE repmgr", "postgres");
  Query(0,
        "CREATE ROLE splitbrain LOGIN PASSWORD '" + std::string(kMonitorPassword) +
            "'; GRANT pg_monitor TO splitbrain",
        "postgres");
  Repmgr(0, {"primary", "register"});
  Query(0,
        "GRANT USAGE ON SCHEMA repmgr TO splitbrain; "
        "GRANT SELECT ON repmgr.nodes, repmgr.events TO splitbrain");
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Repmgr(i, {"-h", "127.0.0.1", "-p", std::to_string(nodes_[0].port), "-U", "postgres", "-d",
               "repmgr", "standby", "clone", "--fast-checkpoint"});
    // The clone copies the primary's settings: this node's port instead.
    WriteFile(nodes_[i].dir + "/data/postgresql.conf",
              "port = " + std::to_string(nodes_[i].port) + "\n", 0600, true);
    StartServer(nodes_[i]);
    Repmgr(i, {"standby", "register"});
  }
  if (witness) AddWitness();
  if (repmgrd_) StartRepmgrd();
}

// A server of its own (initdb, not a clone), its repmgr database made, then registered against
// the primary; the detector's role and grants given on it, as it replicates from nobody.
void RepmgrCluster::AddWitness() {
  Node node;
  node.id = static_cast<int>(nodes_.size()) + 1;
  node.name = "witness";
  node.port = FreeLoopbackPort();
  node.dir = root() + "/" + node.name;
  Run({"mkdir", "-p", node.dir});
  WriteRepmgrConf(node);
  Initdb(node);
  StartServer(node);
  Psql(node, "CREATE DATABASE repmgr", "postgres");
  Psql(node,
       "CREATE ROLE splitbrain LOGIN PASSWORD '" + std::string(kMonitorPassword) +
           "'; GRANT pg_monitor TO splitbrain",
       "postgres");
  witness_ = node;
  Run(RepmgrArgv(*witness_, {"-h", "127.0.0.1", "-p", std::to_string(nodes_[0].port), "-U",
                             "postgres", "-d", "repmgr", "witness", "register"}),
      seconds(120));
  Psql(node,
       "GRANT USAGE ON SCHEMA repmgr TO splitbrain; "
       "GRANT SELECT ON repmgr.nodes, repmgr.events TO splitbrain",
       "repmgr");
}

void RepmgrCluster::StartRepmgrd() {
  BackgroundOptions options;
  options.as_postgres = true;
  options.die_with_parent = true;
  std::vector<Node> all = nodes_;
  if (witness_) all.push_back(*witness_);
  for (const Node& node : all) {
    daemons_.push_back(SpawnBackgroundProcess(
        {PgBin("repmgrd"), "-f", node.dir + "/repmgr.conf", "--daemonize=false"},
        node.dir + "/repmgrd.out", options));
  }
}

RepmgrCluster::~RepmgrCluster() {
  for (pid_t daemon : daemons_) StopChildProcess(daemon, SIGTERM, std::chrono::seconds(5));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Thaw(i);
    RunCommand({PgBin("pg_ctl"), "-D", nodes_[i].dir + "/data", "-m", "immediate", "stop"}, true,
               seconds(30));
  }
  if (witness_) {
    RunCommand({PgBin("pg_ctl"), "-D", witness_->dir + "/data", "-m", "immediate", "stop"}, true,
               seconds(30));
  }
}

void RepmgrCluster::Initdb(Node& node) {
  const std::string data = node.dir + "/data";
  Run({PgBin("initdb"), "-D", data, "-U", "postgres", "--auth-local=trust",
       "--auth-host=scram-sha-256"});
  WriteFile(data + "/postgresql.conf",
            "listen_addresses = '127.0.0.1'\nunix_socket_directories = '" + root() +
                "'\nwal_level = replica\nmax_wal_senders = 10\nhot_standby = on\n"
                "fsync = off\nwal_log_hints = on\n" +
                (repmgrd_ ? "shared_preload_libraries = 'repmgr'\n" : "") +
                "port = " + std::to_string(node.port) + "\n",
            0600, true);
  WriteFile(data + "/pg_hba.conf",
            "local all all trust\nhost replication postgres 127.0.0.1/32 trust\n"
            "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n",
            0600);
  Run({"chown", "-R", "postgres:postgres", node.dir}, seconds(10), false);
}

namespace {

// repmgrd's failover, as small as it goes: 2 attempts 1 s apart to reach the primary.
std::string RepmgrdSettings(const RepmgrCluster::Node& node) {
  const std::string repmgr = PgBin("repmgr") + " -f " + node.dir + "/repmgr.conf --log-to-file";
  return "failover=automatic\npromote_command='" + repmgr + " standby promote'\nfollow_command='" +
         repmgr +
         " standby follow --upstream-node-id=%n'\nreconnect_attempts=2\n"
         "reconnect_interval=1\nmonitor_interval_secs=1\nwitness_sync_interval=1\nlog_file='" +
         node.dir + "/repmgrd.log'\nrepmgrd_pid_file='" + node.dir + "/repmgrd.pid'\n";
}

}  // namespace

void RepmgrCluster::WriteRepmgrConf(const Node& node) const {
  const std::string data = node.dir + "/data";
  const std::string pg_ctl = PgBin("pg_ctl") + " -w -D " + data;
  WriteFile(node.dir + "/repmgr.conf",
            "node_id=" + std::to_string(node.id) + "\nnode_name='" + node.name +
                "'\nconninfo='host=127.0.0.1 port=" + std::to_string(node.port) +
                " user=postgres dbname=repmgr connect_timeout=2'\ndata_directory='" + data +
                "'\npg_bindir='" + PgBinDir() + "'\nservice_start_command='" + pg_ctl + " -l " +
                node.dir + "/server.log start'\nservice_stop_command='" + pg_ctl +
                " -m fast stop'\nservice_restart_command='" + pg_ctl + " -l " + node.dir +
                "/server.log restart'\npromote_check_timeout=20\nstandby_reconnect_timeout=60\n"
                "log_level=INFO\n" +
                (repmgrd_ ? RepmgrdSettings(node) : std::string()),
            0644);
  Run({"chown", "-R", "postgres:postgres", node.dir}, seconds(10), false);
}

void RepmgrCluster::StartServer(const Node& node) const {
  Run({PgBin("pg_ctl"), "-w", "-D", node.dir + "/data", "-l", node.dir + "/server.log", "start"});
}

std::string RepmgrCluster::MemberDsn(size_t index) const {
  return "host=127.0.0.1 port=" + std::to_string(nodes_[index].port) +
         " user=splitbrain dbname=postgres";
}

std::string RepmgrCluster::WitnessDsn() const {
  if (!witness_) throw std::runtime_error("this repmgr cluster has no witness node");
  return "host=127.0.0.1 port=" + std::to_string(witness_->port) + " user=splitbrain dbname=repmgr";
}

std::vector<std::string> RepmgrCluster::RepmgrArgv(const Node& node,
                                                   const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"env", "PATH=" + root() + "/bin:/usr/bin:/bin", "repmgr", "-f",
                                   node.dir + "/repmgr.conf"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string RepmgrCluster::Repmgr(size_t index, const std::vector<std::string>& args) const {
  return Run(RepmgrArgv(nodes_[index], args), seconds(120));
}

CommandResult RepmgrCluster::TryRepmgr(size_t index, const std::vector<std::string>& args,
                                       seconds timeout) const {
  return RunCommand(RepmgrArgv(nodes_[index], args), true, timeout);
}

std::string RepmgrCluster::Psql(const Node& node, const std::string& sql,
                                const std::string& database) const {
  std::vector<std::string> argv = PsqlCommand(
      {"-h", root(), "-p", std::to_string(node.port), "-U", "postgres", "-d", database, "-c", sql});
  return Trim(Run(argv, seconds(30)));
}

std::string RepmgrCluster::Query(size_t index, const std::string& sql,
                                 const std::string& database) const {
  return Psql(nodes_[index], sql, database);
}

std::string RepmgrCluster::QueryWitness(const std::string& sql) const {
  if (!witness_) throw std::runtime_error("this repmgr cluster has no witness node");
  return Psql(*witness_, sql, "repmgr");
}

bool RepmgrCluster::Writable(size_t index) const {
  std::vector<std::string> argv =
      PsqlCommand({"-h", root(), "-p", std::to_string(nodes_[index].port), "-U", "postgres", "-d",
                   "postgres", "-c", "SELECT pg_is_in_recovery()"});
  const CommandResult result = RunCommand(argv, true, seconds(10));
  return result.exit_code == 0 && Trim(result.output) == "f";
}

size_t RepmgrCluster::StreamingStandbys(size_t index) const {
  std::vector<std::string> argv = PsqlCommand(
      {"-h", root(), "-p", std::to_string(nodes_[index].port), "-U", "postgres", "-d", "postgres",
       "-c", "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"});
  const CommandResult result = RunCommand(argv, true, seconds(10));
  if (result.exit_code != 0) return 0;
  try {
    return std::stoul(Trim(result.output));
  } catch (const std::exception&) {
    return 0;
  }
}

namespace {

// A psql -At query's output, or nothing when the server does not answer.
std::optional<std::string> TryPsql(const std::string& socket_dir, int port,
                                   const std::string& sql) {
  const CommandResult result =
      RunCommand(PsqlCommand({"-h", socket_dir, "-p", std::to_string(port), "-U", "postgres", "-d",
                              "postgres", "-c", sql}),
                 true, seconds(10));
  if (result.exit_code != 0) return std::nullopt;
  return Trim(result.output);
}

}  // namespace

bool RepmgrCluster::AwaitStandbys(size_t primary, seconds patience, seconds timeout) const {
  const size_t others = nodes_.size() - 1;
  const auto all = [&] { return StreamingStandbys(primary) == others; };
  if (WaitFor(all, patience)) return true;
  std::cout << "repmgr sandbox: not every standby streams from " << nodes_[primary].name
            << " after " << patience.count() << " s; putting them back by hand\n"
            << Describe(primary);
  const std::optional<std::string> streaming =
      TryPsql(root(), nodes_[primary].port,
              "SELECT string_agg(application_name, ',') FROM pg_stat_replication WHERE state = "
              "'streaming'");
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i == primary) continue;
    const std::string& name = nodes_[i].name;
    if (streaming && ("," + *streaming + ",").find("," + name + ",") != std::string::npos) continue;
    const bool running = TryPsql(root(), nodes_[i].port, "SELECT 1").has_value();
    const std::vector<std::string> args =
        running
            ? std::vector<std::string>{"standby", "follow",
                                       "--upstream-node-id=" + std::to_string(nodes_[primary].id)}
            : std::vector<std::string>{"node",
                                       "rejoin",
                                       "-h",
                                       "127.0.0.1",
                                       "-p",
                                       std::to_string(nodes_[primary].port),
                                       "-U",
                                       "postgres",
                                       "-d",
                                       "repmgr",
                                       "--force-rewind"};
    const CommandResult result = TryRepmgr(i, args, seconds(90));
    std::cout << "repmgr sandbox: " << name << " (" << (running ? "running" : "down") << "): "
              << DescribeCommandRun(RepmgrArgv(nodes_[i], args), result.exit_code, result.output)
              << "\n";
  }
  const bool back = WaitFor(all, timeout - patience);
  if (!back) std::cout << Describe(primary);
  return back;
}

std::string RepmgrCluster::Describe(size_t from) const {
  std::string out;
  const CommandResult show = TryRepmgr(from, {"cluster", "show"}, seconds(30));
  out += "repmgr cluster show (exit " + std::to_string(show.exit_code) + "):\n" + show.output;
  for (const Node& node : nodes_) {
    const std::optional<std::string> recovery =
        TryPsql(root(), node.port, "SELECT pg_is_in_recovery()");
    out += "-- " + node.name + ": " +
           (!recovery          ? "does not answer"
            : *recovery == "t" ? "in recovery"
                               : "writable");
    if (recovery) {
      const std::optional<std::string> from = TryPsql(
          root(), node.port,
          "SELECT string_agg(application_name || ' ' || state, ', ') FROM pg_stat_replication");
      out += "; streaming from it: " + (from && !from->empty() ? *from : std::string("none"));
    }
    out += "\n" + Tail(node.dir + "/server.log", 8) + "\n";
  }
  return out;
}

void RepmgrCluster::Freeze(size_t index) {
  Node& node = nodes_[index];
  const pid_t postmaster = ReadPidFile(node.dir + "/data/postmaster.pid");
  if (postmaster <= 0) throw std::runtime_error(node.name + ": no postmaster to freeze");
  // The postmaster first, so that it forks nothing new; then every child, until none is new.
  ::kill(postmaster, SIGSTOP);
  node.frozen.push_back(postmaster);
  for (int round = 0; round < 20; ++round) {
    size_t before = node.frozen.size();
    for (pid_t pid : ProcessTree(postmaster)) {
      if (std::find(node.frozen.begin(), node.frozen.end(), pid) != node.frozen.end()) continue;
      if (::kill(pid, SIGSTOP) == 0) node.frozen.push_back(pid);
    }
    if (node.frozen.size() == before) break;
  }
}

void RepmgrCluster::Thaw(size_t index) {
  Node& node = nodes_[index];
  for (auto it = node.frozen.rbegin(); it != node.frozen.rend(); ++it) ::kill(*it, SIGCONT);
  node.frozen.clear();
}

}  // namespace sbd::testing
