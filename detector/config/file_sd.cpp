#include "detector/config/file_sd.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "detector/common/network_text.h"

namespace sbd {
namespace {

// The largest target file read: thousands of targets are a few hundred kilobytes.
constexpr size_t kMaxFileSdBytes = 16 << 20;

std::vector<std::string> Expand(const std::string& pattern, bool* no_match) {
  std::vector<std::string> out;
  glob_t g{};
  const int rc = glob(pattern.c_str(), 0, nullptr, &g);
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  }
  globfree(&g);
  *no_match = rc == GLOB_NOMATCH;
  std::sort(out.begin(), out.end());
  return out;
}

bool IsGlob(const std::string& pattern) {
  return pattern.find_first_of("*?[") != std::string::npos;
}

ConfigError ErrorAt(const std::string& file, const YAML::Mark& mark, const std::string& key,
                    const std::string& message) {
  return {file, std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1, key, message};
}

// A glob may match a FIFO (opening it blocks until a writer comes), a device (/dev/zero never
// ends) or a huge file: only regular files are read, and only up to a bound.
std::optional<std::string> ReadBounded(const std::string& file, std::string* error) {
  struct stat st {};
  if (stat(file.c_str(), &st) != 0) {
    *error = "cannot read file";
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "not a regular file";
    return std::nullopt;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    *error = "cannot read file";
    return std::nullopt;
  }
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxFileSdBytes && in.read(chunk, sizeof(chunk)).gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (text.size() > kMaxFileSdBytes) {
    *error = "larger than " + std::to_string(kMaxFileSdBytes) + " bytes";
    return std::nullopt;
  }
  return text;
}

void ReadOne(const std::string& file, FileSdTargets& out) {
  std::string problem;
  const std::optional<std::string> text = ReadBounded(file, &problem);
  if (!text) {
    out.errors.push_back({file, 0, 0, "", problem});
    return;
  }
  YAML::Node root;
  try {
    // JSON is YAML's flow style: one parser gives line and column for both formats.
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    out.errors.push_back(ErrorAt(file, e.mark, "", e.msg));
    return;
  }
  if (root.IsNull()) return;  // an empty file has no targets, as in Prometheus
  if (!root.IsSequence()) {
    out.errors.push_back(ErrorAt(file, root.Mark(), "", "expected a list of target groups"));
    return;
  }
  std::vector<FileSdTarget> found;
  const size_t errors_before = out.errors.size();
  for (size_t i = 0; i < root.size(); ++i) {
    const YAML::Node group = root[i];
    const std::string path = "[" + std::to_string(i) + "]";
    if (!group.IsMap()) {
      out.errors.push_back(ErrorAt(file, group.Mark(), path, "expected a mapping"));
      continue;
    }
    std::map<std::string, std::string> labels;
    for (const auto& kv : group) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (key != "targets" && key != "labels") {
        out.errors.push_back(ErrorAt(file, kv.first.Mark(), path + "." + key, "unknown key"));
      }
    }
    if (const YAML::Node l = group["labels"]; l && !l.IsNull()) {
      if (!l.IsMap()) {
        out.errors.push_back(ErrorAt(file, l.Mark(), path + ".labels", "expected a mapping"));
      } else {
        for (const auto& kv : l) {
          if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
            out.errors.push_back(
                ErrorAt(file, kv.first.Mark(), path + ".labels", "expected string labels"));
            continue;
          }
          labels[kv.first.Scalar()] = NetworkName(kv.second.Scalar());
        }
      }
    }
    const YAML::Node targets = group["targets"];
    if (!targets || !targets.IsSequence()) {
      out.errors.push_back(ErrorAt(file, targets ? targets.Mark() : group.Mark(), path + ".targets",
                                   "expected a list of host:port targets"));
      continue;
    }
    for (size_t j = 0; j < targets.size(); ++j) {
      if (!targets[j].IsScalar() || targets[j].Scalar().empty()) {
        out.errors.push_back(ErrorAt(file, targets[j].Mark(),
                                     path + ".targets[" + std::to_string(j) + "]",
                                     "expected a host:port string"));
        continue;
      }
      found.push_back({NetworkName(targets[j].Scalar()), labels, file, targets[j].Mark()});
    }
  }
  // A file with an error contributes nothing: half a file is not an inventory.
  if (out.errors.size() == errors_before) {
    for (auto& t : found) out.targets.push_back(std::move(t));
  }
}

}  // namespace

FileSdTargets ReadFileSdTargets(const std::vector<std::string>& patterns) {
  FileSdTargets out;
  for (const auto& pattern : patterns) {
    bool no_match = false;
    const std::vector<std::string> files = Expand(pattern, &no_match);
    if (files.empty() && !IsGlob(pattern)) {
      out.errors.push_back({pattern, 0, 0, "", "cannot read file: no such file"});
    }
    for (const auto& file : files) ReadOne(file, out);
  }
  return out;
}

std::string FileSdFingerprint(const std::vector<std::string>& patterns) {
  std::string out;
  for (const auto& pattern : patterns) {
    bool no_match = false;
    for (const auto& file : Expand(pattern, &no_match)) {
      struct stat st {};
      if (stat(file.c_str(), &st) != 0) continue;
      out += file + "\t" + std::to_string(st.st_mtim.tv_sec) + "." +
             std::to_string(st.st_mtim.tv_nsec) + "\t" + std::to_string(st.st_size) + "\n";
    }
  }
  return out;
}

}  // namespace sbd
