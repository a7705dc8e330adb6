#include "detector/config/web_config.h"

#include <crypt.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "detector/common/base64.h"

namespace sbd {
namespace {

std::string Where(const std::string& path, const YAML::Node& node, const std::string& key) {
  return path + ":" + std::to_string(node.Mark().line + 1) + ":" +
         std::to_string(node.Mark().column + 1) + ": " + key;
}

// A key's text, or nothing when the key is a sequence or a mapping.
std::optional<std::string> KeyText(const YAML::Node& key) {
  if (!key.IsScalar()) return std::nullopt;
  return key.Scalar();
}

// "$2b$10$" and 53 characters of bcrypt's base64, as crypt(3) and htpasswd -B write them.
bool IsBcryptHash(const std::string& hash) {
  if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' || hash[3] != '$' || hash[6] != '$' ||
      std::strchr("abxy", hash[2]) == nullptr || !std::isdigit(hash[4]) || !std::isdigit(hash[5])) {
    return false;
  }
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (size_t i = 7; i < hash.size(); ++i) {
    if (!std::isalnum(static_cast<unsigned char>(hash[i])) && hash[i] != '.' && hash[i] != '/') {
      return false;
    }
  }
  return true;
}

void LoadTls(const std::string& path, const YAML::Node& value, WebConfig* web,
             std::vector<std::string>* errors) {
  for (const auto& tls : value) {
    const auto tls_key = KeyText(tls.first);
    std::string* target = !tls_key                  ? nullptr
                          : *tls_key == "cert_file" ? &web->cert_file
                          : *tls_key == "key_file"  ? &web->key_file
                                                    : nullptr;
    if (!tls_key) {
      errors->push_back(Where(path, tls.first, "tls_server_config") + ": expected a string key");
    } else if (target == nullptr) {
      errors->push_back(Where(path, tls.first, "tls_server_config." + *tls_key) + ": unknown key");
    } else if (!tls.second.IsScalar() || tls.second.Scalar().empty()) {
      errors->push_back(Where(path, tls.second, "tls_server_config." + *tls_key) +
                        ": expected a file name");
    } else {
      *target = tls.second.Scalar();
    }
  }
  if (web->cert_file.empty() != web->key_file.empty()) {
    errors->push_back(Where(path, value, "tls_server_config") +
                      ": cert_file and key_file go together");
  }
}

void LoadUsers(const std::string& path, const YAML::Node& value, WebConfig* web,
               std::vector<std::string>* errors) {
  std::set<std::string> seen;
  for (const auto& user : value) {
    const auto name = KeyText(user.first);
    if (!name || name->empty() || name->find(':') != std::string::npos) {
      errors->push_back(Where(path, user.first, "basic_auth_users") +
                        ": expected a user name without ':'");
      continue;
    }
    const std::string key = "basic_auth_users." + *name;
    if (!seen.insert(*name).second) {
      errors->push_back(Where(path, user.first, key) + ": duplicate user");
      continue;
    }
    if (!user.second.IsScalar() || !IsBcryptHash(user.second.Scalar())) {
      errors->push_back(Where(path, user.second, key) + ": expected a bcrypt hash");
      continue;
    }
    web->basic_auth_users.emplace_back(*name, user.second.Scalar());
  }
}

std::string Sha256(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

// Constant-time comparison, so a wrong password takes as long as a right one.
bool SameBytes(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::variant<WebConfig, std::vector<std::string>> LoadWebConfig(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return std::vector<std::string>{path + ":0:0: cannot read file: " + std::strerror(errno)};
  } catch (const YAML::ParserException& e) {
    return std::vector<std::string>{path + ":" + std::to_string(e.mark.line + 1) + ":" +
                                    std::to_string(e.mark.column + 1) + ": " + e.msg};
  } catch (const YAML::Exception& e) {
    return std::vector<std::string>{path + ":0:0: " + e.what()};
  }
  WebConfig web;
  if (root.IsNull()) return web;
  if (!root.IsMap()) return std::vector<std::string>{Where(path, root, "") + "expected a mapping"};
  std::vector<std::string> errors;
  std::set<std::string> seen;
  for (const auto& entry : root) {
    const auto key = KeyText(entry.first);
    const YAML::Node& value = entry.second;
    if (!key) {
      errors.push_back(Where(path, entry.first, "") + "expected a string key");
    } else if (*key != "tls_server_config" && *key != "basic_auth_users") {
      errors.push_back(Where(path, entry.first, *key) + ": unknown key");
    } else if (!seen.insert(*key).second) {
      errors.push_back(Where(path, entry.first, *key) + ": duplicate key");
    } else if (!value.IsMap()) {
      errors.push_back(Where(path, value, *key) + ": expected a mapping");
    } else if (*key == "tls_server_config") {
      LoadTls(path, value, &web, &errors);
    } else {
      LoadUsers(path, value, &web, &errors);
    }
  }
  if (!errors.empty()) return errors;
  return web;
}

BasicAuth::BasicAuth(std::vector<std::pair<std::string, std::string>> users) {
  int cost = 0;
  for (auto& [name, hash] : users) {
    cost = std::max(cost, std::atoi(hash.substr(4, 2).c_str()));
    users_[name] = std::move(hash);
  }
  if (users_.empty()) return;
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  crypt_data data{};
  if (crypt_gensalt_rn("$2b$", cost, nullptr, 0, salt, sizeof(salt)) != nullptr) {
    const char* hash = crypt_r("not a password", salt, &data);
    if (hash != nullptr) dummy_hash_ = hash;
  }
  // Without a dummy the slowest user's hash serves: a wrong password for it never matches.
  if (dummy_hash_.empty()) dummy_hash_ = users_.begin()->second;
}

std::optional<bool> BasicAuth::Bcrypt(const std::string& password, const std::string& hash,
                                      std::optional<TimePoint> wait_until) const {
  {
    std::unique_lock<std::mutex> lock(bcrypt_mu_);
    // Behind those already waiting: a flood that finds it free for an instant never jumps them.
    if (bcrypt_running_ || bcrypt_waiters_ > 0) {
      if (wait_until && (bcrypt_waiters_ >= kMaxBcryptWaiters ||
                         *wait_until <= std::chrono::steady_clock::now())) {
        return std::nullopt;
      }
      ++bcrypt_waiters_;
      const auto free = [&] { return !bcrypt_running_; };
      const bool got = wait_until ? bcrypt_cv_.wait_until(lock, *wait_until, free)
                                  : (bcrypt_cv_.wait(lock, free), true);
      --bcrypt_waiters_;
      if (!got) return std::nullopt;
    }
    bcrypt_running_ = true;
  }
  // crypt_data is 32 KiB: on the heap, not a server thread's stack.
  auto data = std::make_unique<crypt_data>();
  const char* computed = crypt_r(password.c_str(), hash.c_str(), data.get());
  const bool right = computed != nullptr && SameBytes(computed, hash);
  {
    std::lock_guard<std::mutex> lock(bcrypt_mu_);
    bcrypt_running_ = false;
  }
  bcrypt_cv_.notify_one();
  return right;
}

void BasicAuth::Remember(std::map<std::string, TimePoint>& table, const std::string& key,
                         TimePoint until, size_t max) {
  if (table.size() >= max) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = table.begin(); it != table.end();) {
      it = it->second <= now ? table.erase(it) : std::next(it);
    }
    // Still full of live entries: forgetting them costs bcrypt again, never a wrong answer.
    if (table.size() >= max) table.clear();
  }
  table[key] = until;
}

AuthOutcome BasicAuth::Check(const std::string& header, const std::string& source) const {
  return CheckAs(header, source, false);
}

std::optional<std::string> BasicAuth::Verify(const std::string& header) const {
  return CheckAs(header, "", true).user;
}

AuthOutcome BasicAuth::CheckAs(const std::string& header, const std::string& source,
                               bool patient) const {
  const std::string prefix = "Basic ";
  if (header.rfind(prefix, 0) != 0) return {};
  const std::string decoded = Base64Decode(header.substr(prefix.size())).value_or("");
  const auto colon = decoded.find(':');
  if (colon == std::string::npos) return {};
  const std::string user = decoded.substr(0, colon);
  const std::string password = decoded.substr(colon + 1);
  // Looked up by digest: a lookup's timing tells nothing about the password itself.
  const std::string cache_key = user + '\0' + Sha256(password);
  const auto now = std::chrono::steady_clock::now();
  std::optional<TimePoint> wait_until = now + kBcryptWait;
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (auto hit = cache_.find(cache_key); hit != cache_.end() && hit->second > now) return {user};
    if (auto hit = failed_.find(cache_key); hit != failed_.end() && hit->second > now) {
      Remember(suspects_, source, now + kSuspectFor, kMaxSources);
      return {};
    }
    if (auto suspect = suspects_.find(source); suspect != suspects_.end() && !patient) {
      if (suspect->second > now) {
        // Sources that failed share a budget of kSuspectRate bcrypts a second, and only when
        // bcrypt is free: a flood costs a fraction of a core, and still gets an answer.
        if (now < suspect_next_) return {std::nullopt, true};
        suspect_next_ = now + std::chrono::seconds(1) / kSuspectRate;
        wait_until = now;
      }
    }
  }
  if (patient) wait_until.reset();
  const auto known = users_.find(user);
  const std::optional<bool> right =
      Bcrypt(password, known == users_.end() ? dummy_hash_ : known->second, wait_until);
  if (!right) return {std::nullopt, true};
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (!*right || known == users_.end()) {
    Remember(failed_, cache_key, now + kFailedTtl, kFailedMaxEntries);
    Remember(suspects_, source, now + kSuspectFor, kMaxSources);
    return {};
  }
  Remember(cache_, cache_key, now + kCacheTtl, kCacheMaxEntries);
  return {user};
}

}  // namespace sbd
