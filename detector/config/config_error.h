#pragma once

#include <string>

namespace sbd {

/// One problem in a config file (or a drop-in declaration, or an inventory file): where it is
/// and which key it concerns.
struct ConfigError {
  std::string file;
  int line = 0;     // 1-based; 0 when the file could not be read at all
  int column = 0;   // 1-based
  std::string key;  // dotted path, e.g. clusters[0].members[1].dsn
  std::string message;
  /// "file:line:column: key: message".
  std::string ToString() const;
};

}  // namespace sbd
