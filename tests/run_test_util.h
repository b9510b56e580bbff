// Shared set-up for the `apnea-locks run` process and interop tests: a scratch folder with
// a repository, the binary's path, and one-shot runs that capture both output streams.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "process_util.h"
#include "temp_dir.h"
#include "spawned_process.h"

namespace apnea_locks::testing {

using namespace std::chrono_literals;
using Stream = SpawnedProcess::Stream;

/// A scratch folder (removed at the end) holding `repo/`, `home/` and, for tests that pass
/// --lock-dir, `locks/`.
struct Scratch {
  TempDir dir;
  std::string root = dir.path(), repo, home, locks;
  Scratch() {
    repo = root + "/repo";
    home = root + "/home";
    locks = root + "/locks";
    std::filesystem::create_directory(repo);
    std::filesystem::create_directory(home);
  }
};

/// The apnea-locks binary under test.
inline std::string locks_bin() { return test_env("APNEA_LOCKS_BIN"); }

/// How a finished command exited and what it printed.
struct Finished {
  std::optional<int> status;  ///< nothing if it did not end in time
  std::string out, err;
};

/// Runs `argv` to completion (stdin at end of file), capturing stdout and stderr.
inline Finished finish(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env = {},
                       std::chrono::milliseconds timeout = 120s) {
  SpawnedProcess process(argv, env);
  process.close_stdin();
  Finished finished;
  finished.status = process.wait(timeout);
  finished.out = process.out();
  finished.err = process.err();
  // Every JSON document apnea-locks prints is checked against docs/apnea-locks.schema.json:
  // a -J document on stdout, run --json events on stderr.
  if (!argv.empty() && argv.front() == locks_bin()) {
    if (finished.out.starts_with('{')) check_first_json_document(finished.out);
    check_json_lines(finished.err);
  }
  return finished;
}

/// A real `apnea-locks run --lock-dir DIR --repo REPO [OPTIONS] -- sh -c 'echo held; exec cat'
/// [ARGS...]`: a live process holding REPO's lock (its own pid in owner.json) from
/// construction until release() or destruction. The construction waits for the command's
/// "held" line, which it prints only once the lock is taken.
class LockHolder {
 public:
  LockHolder(const std::string& lock_dir, const std::string& repo,
         const std::vector<std::string>& options = {},
         const std::vector<std::string>& command_args = {},
         const std::map<std::string, std::string>& env = {})
      : process_(argv(lock_dir, repo, options, command_args), env) {
    held_ = process_.read_line(Stream::out, 30s) == std::optional<std::string>("held");
  }
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;

  /// True when the lock was taken (the command started).
  bool held() const { return held_; }
  pid_t pid() const { return process_.pid(); }
  /// True while `run` has not ended.
  bool alive() { return !process_.wait(0ms).has_value(); }
  /// Ends the command (end of file on its stdin) and waits for `run`: its exit status
  /// (0 when it released the lock it held).
  std::optional<int> release(std::chrono::milliseconds timeout = 30s) {
    process_.close_stdin();
    return process_.wait(timeout);
  }
  SpawnedProcess& process() { return process_; }

 private:
  static std::vector<std::string> argv(const std::string& lock_dir, const std::string& repo,
                                       const std::vector<std::string>& options,
                                       const std::vector<std::string>& command_args) {
    std::vector<std::string> words{locks_bin(), "run", "--lock-dir", lock_dir, "--repo", repo};
    words.insert(words.end(), options.begin(), options.end());
    words.insert(words.end(), {"--", "sh", "-c", "echo held; exec cat"});
    words.insert(words.end(), command_args.begin(), command_args.end());
    return words;
  }

  SpawnedProcess process_;
  bool held_ = false;
};

/// True when `path` exists (without following a final symlink).
inline bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

/// How many times `needle` occurs in `text`.
inline int count(const std::string& text, const std::string& needle) {
  int found = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++found;
  return found;
}

/// The `--not-owner PID@START` arguments a refusal in `out` gives for the processes it names
/// as possible owners (PROTOCOL.md section 10), two words each, every word once.
inline std::vector<std::string> not_owner_args(std::string_view out) {
  std::vector<std::string> args;
  constexpr std::string_view flag = "--not-owner ";
  for (std::size_t at = out.find(flag); at != std::string_view::npos; at = out.find(flag, at)) {
    at += flag.size();
    const std::string word(out.substr(at, out.find_first_of(" \n", at) - at));
    if (std::find(args.begin(), args.end(), word) == args.end()) {
      args.emplace_back("--not-owner");
      args.push_back(word);
    }
  }
  return args;
}

/// `reclaim(args)` (a `reclaim --force` of one LOCK), followed as an operator follows a
/// refusal that lists possible owners: every test program counts as one (runtime_stand_in.cc)
/// and the machine may run others, so a test that means --force to remove a damaged or
/// pid-less record says, with the refusal's own `--not-owner` words, that they are not its
/// Apnea. Programs start and end meanwhile: run again while a refusal names new ones, at
/// most four times. `reclaim` takes the argument list (LOCK last: the words go before it)
/// and returns a Finished.
template <class Reclaim>
Finished past_possible_owners(Reclaim&& reclaim, std::vector<std::string> args) {
  Finished finished = reclaim(args);
  for (int attempt = 0; attempt < 4 && finished.status == 1; ++attempt) {
    bool added = false;
    const std::vector<std::string> words = not_owner_args(finished.out);
    for (std::size_t i = 1; i < words.size(); i += 2) {
      if (std::find(args.begin(), args.end(), words[i]) != args.end()) continue;
      args.insert(args.end() - 1, {words[i - 1], words[i]});
      added = true;
    }
    if (!added) break;
    finished = reclaim(args);
  }
  return finished;
}

}  // namespace apnea_locks::testing
