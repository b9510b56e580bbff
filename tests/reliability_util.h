// Shared by the reliability process tests (crash_test.cc, load_test.cc): scratch lock areas
// on more than one file system, scale knobs for `scripts/dev soak`, and `status --json`.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "run_test_util.h"

namespace apnea_locks::testing {

/// True under `scripts/dev soak` (APNEA_SOAK=1): run the long versions.
inline bool soak() { return test_env("APNEA_SOAK") == "1"; }

/// The integer in environment variable `name`, else `soak_value` under soak, else `value`.
inline long knob(const char* name, long value, long soak_value) {
  const std::string text = test_env(name);
  if (!text.empty()) return std::stol(text);
  return soak() ? soak_value : value;
}

/// A scratch folder (removed at the end) under `parent`, holding the lock directory
/// `locks/` (created by the first acquire) and repository roots.
struct ScratchArea {
  std::string label;  ///< the file system, for messages
  TempDir dir;
  std::string root = dir.path(), locks = root + "/locks";

  ScratchArea(const std::string& parent, std::string fs_label)
      : label(std::move(fs_label)), dir(parent) {}

  /// A repository root `name` under the scratch folder (created).
  std::string repo(const std::string& name) const {
    const std::string path = root + "/" + name;
    ::mkdir(path.c_str(), 0700);
    return path;
  }

  /// Names in the lock directory (none when it does not exist).
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(locks, error))
      names.push_back(entry.path().filename().string());
    return names;
  }
};

/// The parents to put scratch areas in: the temp folder and, when it is another file
/// system (a tmpfs, where fsync costs nothing and a kill lands anywhere in the protocol),
/// /dev/shm.
inline std::vector<std::pair<std::string, std::string>> area_parents() {
  std::vector<std::pair<std::string, std::string>> parents{
      {std::filesystem::temp_directory_path().string(), "temp dir"}};
  struct stat shm {}, temp {};
  if (::stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) && ::access("/dev/shm", W_OK) == 0 &&
      ::stat(parents[0].first.c_str(), &temp) == 0 && temp.st_dev != shm.st_dev)
    parents.push_back({"/dev/shm", "tmpfs /dev/shm"});
  return parents;
}

/// `apnea-locks status --json --lock-dir DIR`, parsed; `document` is null when the
/// output is not JSON.
struct StatusRun {
  Finished finished;
  boost::json::value document;
};

inline StatusRun status_json(const std::string& lock_dir) {
  StatusRun run;
  run.finished = finish({locks_bin(), "status", "--json", "--lock-dir", lock_dir}, {}, 60s);
  boost::system::error_code error;
  run.document = boost::json::parse(run.finished.out, error);
  if (error) run.document = nullptr;
  return run;
}

/// A string member of a JSON object, or "" when absent or null.
inline std::string member(const boost::json::object& object, const char* name) {
  const auto* value = object.if_contains(name);
  if (value == nullptr || !value->is_string()) return {};
  return std::string(value->as_string());
}

}  // namespace apnea_locks::testing
