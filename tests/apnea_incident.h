// One incident staged with Apnea's own lock code (the reference, APNEA_REFERENCE =
// apnea-peer) for the tests that follow the runbook or explain on it: its own TMPDIR, home
// and repository, what Apnea said when refused, and a live Apnea holding the lock when the
// incident has one.
#pragma once

#include <doctest/doctest.h>
#include <signal.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "process_util.h"
#include "run_test_util.h"

namespace apnea_locks::testing {

inline std::string peer() { return test_env("APNEA_REFERENCE"); }

/// Where apnea-peer keeps its npm packages: the test's own cache, not each scratch home's.
inline std::string peer_cache() {
  if (const char* cache = std::getenv("APNEA_PEER_CACHE"); cache != nullptr && *cache != '\0') return cache;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::string(xdg) + "/apnea-peer";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/nonexistent") + "/.cache/apnea-peer";
}

/// The first use of apnea-peer may install its npm dependencies.
constexpr auto peer_timeout = 600s;

/// The last JSON object a command printed on stdout.
inline boost::json::object last_json(const std::string& out) {
  std::istringstream lines(out);
  std::string last;
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("{")) last = line;
  REQUIRE_MESSAGE(!last.empty(), out);
  return boost::json::parse(last).as_object();
}

inline std::string text(const boost::json::value& value) {
  return value.is_string() ? std::string(value.as_string()) : boost::json::serialize(value);
}

/// A directory holding `apnea-locks` (the build under test), to put first in PATH.
class BinDir {
 public:
  BinDir() {
    const std::string link = dir_.path() + "/apnea-locks";
    REQUIRE(::symlink(test_env("APNEA_LOCKS_BIN").c_str(), link.c_str()) == 0);
  }
  std::string path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

/// One incident: its own temp dir (TMPDIR: the lock area is Apnea's default there), home and
/// repository, and what Apnea said.
struct Incident {
  std::string name;
  Scratch scratch;
  std::map<std::string, std::string> env;
  std::string cwd;           ///< where the runbook's commands run
  std::string kind = "repo"; ///< apnea-peer's lock kind
  std::string target;        ///< the repository root or the home
  std::string lock;          ///< LOCKPATH: the path in Apnea's message
  boost::json::object refusal;  ///< Apnea's error
  std::optional<SpawnedProcess> holder;  ///< a live Apnea holding the lock
  std::chrono::steady_clock::time_point staged;
  std::string transcript;    ///< every command with its output, for messages
  std::vector<std::string> as;  ///< runs the reference as another account (setpriv ...)

  Incident(std::string incident, const BinDir& bin) : name(std::move(incident)) {
    env = {{"TMPDIR", scratch.root},
           {"HOME", scratch.home},
           {"APNEA_PEER_CACHE", peer_cache()},
           {"PATH", bin.path() + ":" + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin")}};
    cwd = scratch.repo;
    target = scratch.repo;
  }

  Finished apnea(const std::vector<std::string>& args) {
    std::vector<std::string> argv = as;
    argv.push_back(peer());
    argv.insert(argv.end(), args.begin(), args.end());
    return finish(argv, env, peer_timeout);
  }

  /// Apnea holds the lock in a live process (hold: until its stdin ends).
  void hold() {
    std::vector<std::string> argv = as;
    argv.insert(argv.end(), {peer(), "hold", kind, target});
    holder.emplace(argv, env);
    const auto acquired = holder->read_line_containing(SpawnedProcess::Stream::out, "\"acquired\"", peer_timeout);
    REQUIRE_MESSAGE(acquired, name << ": apnea-peer hold did not acquire: " << holder->err());
  }

  /// The live Apnea ends as Apnea does when its work is done (the end of its stdin), having
  /// run and held its lock until then: the line it printed for the release.
  std::string release_holder() {
    REQUIRE(holder);
    CHECK(holder->wait(0ms) == std::nullopt);  // still running, still holding
    holder->close_stdin();
    const auto released = holder->read_line_containing(SpawnedProcess::Stream::out, "\"released\"", 60s);
    REQUIRE(released);
    CHECK(holder->wait(60s) == 0);
    return *released;
  }

  /// An Apnea that held the lock was killed: its lock stays with a dead owner.
  void crash() {
    hold();
    holder->signal(SIGKILL);
    REQUIRE(holder->wait(30s) == 128 + SIGKILL);
    holder.reset();
  }

  /// Apnea runs and is refused with `reason`; its message's lock path becomes LOCKPATH.
  void refused(const std::string& reason) {
    Finished run = apnea({"acquire", kind, target});
    CAPTURE(run.out);
    CAPTURE(run.err);
    REQUIRE(run.status == 3);
    refusal = last_json(run.out);
    REQUIRE(text(refusal.at("reason")) == reason);
    lock = text(refusal.at("lock_path"));
    // The message names it (or its guard) as the operator will copy it.
    REQUIRE(text(refusal.at("message")).find(lock) != std::string::npos);
    staged = std::chrono::steady_clock::now();
  }

  /// Apnea (the reference) takes the lock now.
  void apnea_acquires() {
    Finished run = apnea({"acquire", kind, target});
    CAPTURE(transcript);
    CAPTURE(run.out);
    CHECK_MESSAGE(run.status == 0, name << ": Apnea is still refused");
    CHECK(run.out.find("\"event\":\"acquired\"") != std::string::npos);
  }

  /// An apnea-locks command in this incident's environment.
  Finished locks(const std::vector<std::string>& args) {
    std::vector<std::string> argv{test_env("APNEA_LOCKS_BIN")};
    argv.insert(argv.end(), args.begin(), args.end());
    return finish(argv, env);
  }
};

}  // namespace apnea_locks::testing
