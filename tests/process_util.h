// Running real processes from tests: the apnea-locks binary, lock_stress and the reference.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace apnea_locks::testing {

/// What a finished command printed and how it exited.
struct CommandResult {
  int status = -1;  ///< exit status, or 128+signal
  std::string out;  ///< standard output (standard error is passed through)
};

/// Quotes one word for /bin/sh.
inline std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

/// Runs `words` through /bin/sh with `env_prefix` (e.g. "TMPDIR=/x ") and waits for it.
inline CommandResult run_command(const std::vector<std::string>& words,
                                 const std::string& env_prefix = "") {
  std::string line = env_prefix;
  for (const auto& word : words) line += shell_quote(word) + " ";
  CommandResult result;
  std::FILE* pipe = ::popen(line.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) result.status = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.status = 128 + WTERMSIG(status);
  return result;
}

/// The value of an environment variable the test build sets (see tests/meson.build).
inline std::string test_env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace apnea_locks::testing
