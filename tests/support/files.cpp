#include "tests/support/files.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "tests/support/process.h"

namespace sbd::testing {

// ---------------------------------------------------------------------------------------------
// The postgres OS user

const OsUser* FindPostgresUser() {
  static const std::optional<OsUser> user = []() -> std::optional<OsUser> {
    passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) return std::nullopt;
    OsUser u{pw->pw_uid, pw->pw_gid, pw->pw_dir != nullptr ? pw->pw_dir : "/", {}};
    int n = 64;
    u.groups.resize(static_cast<size_t>(n));
    if (::getgrouplist("postgres", u.gid, u.groups.data(), &n) < 0) {
      u.groups.resize(static_cast<size_t>(n));
      ::getgrouplist("postgres", u.gid, u.groups.data(), &n);
    }
    u.groups.resize(static_cast<size_t>(std::max(n, 0)));
    return u;
  }();
  return user ? &*user : nullptr;
}

const OsUser& PostgresUser() {
  const OsUser* user = FindPostgresUser();
  if (user == nullptr) {
    throw std::runtime_error(
        "test sandbox: running as root but there is no `postgres` OS user; install "
        "postgresql-15 (scripts/install-deps)");
  }
  return *user;
}

void GiveToPostgres(const std::string& path) {
  if (!RunningAsRoot()) return;
  const OsUser& user = PostgresUser();
  if (::chown(path.c_str(), user.uid, user.gid) != 0) {
    throw std::runtime_error("chown " + path + ": " + strerror(errno));
  }
}

// ---------------------------------------------------------------------------------------------
// Files

void MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0) {
    throw std::runtime_error("mkdir " + path + ": " + strerror(errno));
  }
  ::chmod(path.c_str(), mode);  // not subject to the umask
}

void WriteFile(const std::string& path, const std::string& content, mode_t mode, bool append) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  int fd = ::open(path.c_str(), flags, mode);
  if (fd < 0) throw std::runtime_error("open " + path + ": " + strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error("write " + path + ": " + strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (!append) ::fchmod(fd, mode);
  ::close(fd);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t ReadPidFile(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return -1;
  return static_cast<pid_t>(pid);
}

// ---------------------------------------------------------------------------------------------
// Text

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string Tail(const std::string& path, int lines) {
  std::string log = ReadFile(path);
  if (log.empty()) return "(" + path + " is empty or missing)\n";
  size_t pos = log.size();
  if (log.back() == '\n') --pos;
  int seen = 0;
  while (pos > 0) {
    size_t nl = log.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    if (++seen >= lines) {
      pos = nl + 1;
      break;
    }
    pos = nl;
  }
  std::string tail = log.substr(pos);
  if (tail.back() != '\n') tail += '\n';
  return tail;
}

// ---------------------------------------------------------------------------------------------
// TempDir

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix;
  if (tmpl.back() != '-') tmpl += '-';
  tmpl += "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + tmpl + ": " + strerror(errno));
  }
  path_ = buf.data();
  ::chmod(path_.c_str(), 0755);
  try {
    if (FindPostgresUser() != nullptr) GiveToPostgres(path_);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    throw;
  }
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace sbd::testing
