// A bcrypt hash (cost 10) of a password, for the basic-auth users of a test's web config.
#pragma once

#include <crypt.h>

#include <catch2/catch.hpp>
#include <string>

namespace sbd::testing {

/// The "$2b$10$..." hash of `password`, as `htpasswd -nBC 10` makes it. Fails the test case
/// when libcrypt cannot make one.
inline std::string Bcrypt(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  REQUIRE(crypt_gensalt_rn("$2b$", 10, nullptr, 0, salt, sizeof(salt)) != nullptr);
  crypt_data data{};
  const char* hash = crypt_r(password.c_str(), salt, &data);
  REQUIRE(hash != nullptr);
  return hash;
}

}  // namespace sbd::testing
