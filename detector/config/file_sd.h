// Prometheus file_sd target files, read the way Prometheus reads them: a list of
// {targets: [host:port, ...], labels: {name: value}} in JSON (*.json) or YAML (*.yml, *.yaml).
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "detector/config/config_error.h"

namespace sbd {

struct FileSdTarget {
  std::string address;  ///< the target as written ("10.0.0.5:5432")
  std::map<std::string, std::string> labels;
  std::string file;  ///< where it was read, for errors
  YAML::Mark mark;
};

struct FileSdTargets {
  std::vector<FileSdTarget> targets;
  std::vector<ConfigError> errors;  ///< per file, with line and column; other files still count
};

/// Expands the globs and reads every matching file. A pattern without a glob character that
/// names no file is an error; a glob matching nothing is not (Prometheus does the same).
FileSdTargets ReadFileSdTargets(const std::vector<std::string>& patterns);

/// The files the patterns match right now, each with its modification time and size: a
/// fingerprint that changes when a target file is written, added or removed.
std::string FileSdFingerprint(const std::vector<std::string>& patterns);

}  // namespace sbd
