#include "detector/common/base64.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

namespace sbd {

std::string Base64Encode(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> Base64Decode(const std::string& text) {
  // EVP_DecodeBlock skips whitespace and takes '=' anywhere ("====" gives a byte): check the
  // alphabet and the padding first.
  if (text.size() % 4 != 0) return std::nullopt;
  if (text.empty()) return std::string();
  size_t padding = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '=' && padding < 2; --i) ++padding;
  const bool in_alphabet = std::all_of(text.begin(), text.end() - padding, [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '+' || c == '/';
  });
  if (!in_alphabet) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  // EVP_DecodeBlock counts the padding as zero bytes.
  if (n < 0 || static_cast<size_t>(n) < padding) return std::nullopt;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

}  // namespace sbd
