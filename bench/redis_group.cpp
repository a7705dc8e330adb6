#include "bench/redis_group.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <sstream>
#include <stdexcept>

#include "tests/support/process.h"

namespace sbd::bench {

using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

timeval ToTimeval(milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

RedisReply Flatten(const redisReply* r) {
  RedisReply out;
  if (r == nullptr) {
    out.error = "no reply";
    return out;
  }
  switch (r->type) {
    case REDIS_REPLY_ERROR:
      out.error = std::string(r->str, r->len);
      return out;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_STRING:
      out.text = std::string(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < r->elements; ++i) {
        const redisReply* e = r->element[i];
        if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) {
          out.elements.emplace_back(e->str, e->len);
        } else if (e->type == REDIS_REPLY_INTEGER) {
          out.elements.push_back(std::to_string(e->integer));
        }
      }
      break;
    default:
      break;
  }
  out.ok = true;
  return out;
}

}  // namespace

RedisConn::RedisConn(int port, milliseconds timeout) : port_(port), timeout_(timeout) {}

RedisConn::~RedisConn() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

RedisReply RedisConn::Call(const std::vector<std::string>& args) {
  if (ctx_ == nullptr) {
    ctx_ = redisConnectWithTimeout("127.0.0.1", port_, ToTimeval(timeout_));
    if (ctx_ == nullptr || ctx_->err != 0) {
      RedisReply failed;
      failed.error = ctx_ == nullptr ? "cannot connect" : ctx_->errstr;
      if (ctx_ != nullptr) redisFree(ctx_);
      ctx_ = nullptr;
      return failed;
    }
    redisSetTimeout(ctx_, ToTimeval(timeout_));
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (reply == nullptr) {
    RedisReply failed;
    failed.error = ctx_->errstr;
    redisFree(ctx_);
    ctx_ = nullptr;
    return failed;
  }
  RedisReply out = Flatten(reply);
  freeReplyObject(reply);
  return out;
}

RedisReply RedisCall(int port, const std::vector<std::string>& args) {
  RedisConn conn(port, milliseconds(2000));
  return conn.Call(args);
}

std::map<std::string, std::string> PairsOf(const std::vector<std::string>& elements) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i + 1 < elements.size(); i += 2) out[elements[i]] = elements[i + 1];
  return out;
}

std::map<std::string, std::string> InfoFields(const std::string& info) {
  std::map<std::string, std::string> out;
  std::istringstream in(info);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto colon = line.find(':');
    if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
    out[line.substr(0, colon)] = line.substr(colon + 1);
  }
  return out;
}

RedisGroup::RedisGroup(const std::string& master_name, int replicas, milliseconds down_after)
    : master_name_(master_name) {
  // The integration tests' harness: servers and sentinels on free loopback ports.
  const testing::RedisProcess& master = sandbox_.StartServer("r1");
  std::vector<const testing::RedisProcess*> started = {&master};
  for (int i = 0; i < replicas; ++i) {
    started.push_back(&sandbox_.StartServer("r" + std::to_string(i + 2), &master));
  }
  for (const auto* p : started) members_.push_back({p->name(), p->port(), p->pid()});
  sandbox_.StartSentinels(master_name_, master, 3, down_after, milliseconds(60000));
  for (const auto& s : sandbox_.sentinels()) {
    sentinels_.push_back({s->name(), s->port(), s->pid()});
  }
  // The harness waits until the sentinels see each other; a trial also needs them to know
  // every replica (learnt from the master's INFO, every 10 s).
  for (const auto& s : sentinels_) {
    const bool ready = testing::WaitFor(
        [&] {
          const auto r = RedisCall(s.port, {"SENTINEL", "MASTER", master_name_});
          auto f = PairsOf(r.elements);
          return r.ok && f["flags"] == "master" && f["num-slaves"] == std::to_string(replicas);
        },
        seconds(60), milliseconds(200));
    if (!ready) throw std::runtime_error(s.name + " never saw the replicas");
  }
}

RedisGroup::~RedisGroup() = default;

std::string RedisGroup::Role(const Process& p) const {
  const auto info = RedisCall(p.port, {"INFO", "replication"});
  return info.ok ? InfoFields(info.text)["role"] : "";
}

std::string RedisGroup::SentinelMaster() const {
  std::string agreed;
  for (const auto& s : sentinels_) {
    const auto r = RedisCall(s.port, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name_});
    if (!r.ok || r.elements.size() != 2) return "";
    std::string name;
    for (const auto& m : members_) {
      if (std::to_string(m.port) == r.elements[1]) name = m.name;
    }
    if (name.empty() || (!agreed.empty() && name != agreed)) return "";
    agreed = name;
  }
  return agreed;
}

bool RedisGroup::Healthy() const {
  const std::string master = SentinelMaster();
  if (master.empty()) return false;
  const int master_port = Member(master).port;
  for (const auto& m : members_) {
    const auto info = RedisCall(m.port, {"INFO", "replication"});
    if (!info.ok) return false;
    auto f = InfoFields(info.text);
    if (m.name == master) {
      if (f["role"] != "master") return false;
    } else if (f["role"] != "slave" || f["master_port"] != std::to_string(master_port) ||
               f["master_link_status"] != "up") {
      return false;
    }
  }
  return true;
}

const RedisGroup::Process& RedisGroup::Member(const std::string& name) const {
  for (const auto& m : members_) {
    if (m.name == name) return m;
  }
  throw std::runtime_error("no member " + name);
}

DualWriter::DualWriter(const std::vector<int>& ports) : ports_(ports) {
  thread_ = std::thread([this] { Run(); });
}

DualWriter::~DualWriter() {
  stop_ = true;
  thread_.join();
}

void DualWriter::Run() {
  std::vector<std::unique_ptr<RedisConn>> conns;
  for (int port : ports_) conns.push_back(std::make_unique<RedisConn>(port, milliseconds(300)));
  long n = 0;
  while (!stop_) {
    const auto start = std::chrono::steady_clock::now();
    int accepted = 0;
    const std::string value = std::to_string(++n);
    for (auto& c : conns) {
      const auto r = c->Call({"SET", "splitbrain-bench:writer", value});
      if (r.ok && r.text == "OK") ++accepted;
    }
    if (accepted >= 2) {
      // The round's end: both writes have been acknowledged by then.
      const auto now = std::chrono::steady_clock::now();
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_) first_ = now;
      last_ = now;
      ++both_rounds_;
    }
    std::this_thread::sleep_until(start + milliseconds(50));
  }
}

std::optional<std::chrono::steady_clock::time_point> DualWriter::FirstBoth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_;
}

std::optional<std::chrono::steady_clock::time_point> DualWriter::LastBoth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

long DualWriter::BothRounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return both_rounds_;
}

}  // namespace sbd::bench
