// File and text helpers shared by the test sandboxes, and the `postgres` OS user that the
// PostgreSQL and Patroni sandboxes hand their files to when the tests run as root.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace sbd::testing {

/// An OS user, as the sandboxes need it to run processes as that user.
struct OsUser {
  uid_t uid;
  gid_t gid;
  std::string home;           // "/" when the passwd entry has none
  std::vector<gid_t> groups;  // supplementary groups, for setgroups()
};

/// The `postgres` OS user, or nullptr when there is none. Looked up once.
const OsUser* FindPostgresUser();
/// The `postgres` OS user; throws std::runtime_error when there is none. Only needed (and
/// required) when running as root.
const OsUser& PostgresUser();
/// Gives `path` to the postgres user when we run as root (otherwise we already own it). Throws
/// on failure.
void GiveToPostgres(const std::string& path);

/// mkdir with exactly `mode` (not subject to the umask). Throws if it cannot be created.
void MakeDir(const std::string& path, mode_t mode);
/// Writes `content` to `path` (created with `mode` if missing), retrying interrupted writes.
/// Truncates first and sets `mode` on an existing file too, unless `append`. Throws on failure.
void WriteFile(const std::string& path, const std::string& content, mode_t mode,
               bool append = false);
/// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);
/// The number at the start of `path` (e.g. a postmaster.pid), or -1 when the file is missing or
/// does not start with a positive number.
pid_t ReadPidFile(const std::string& path);

/// `s` without leading and trailing spaces, tabs, CRs and LFs.
std::string Trim(const std::string& s);
/// The last `lines` lines of the file `path`, ending with a newline; "(<path> is empty or
/// missing)\n" when there is nothing to show. For error messages.
std::string Tail(const std::string& path, int lines);

}  // namespace sbd::testing
