// Running real processes from tests: the apnea-locks binary, lock_stress and the reference.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "json_schema.h"

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
  // Every JSON document apnea-locks prints is checked against docs/apnea-locks.schema.json.
  const char* bin = std::getenv("APNEA_LOCKS_BIN");
  if (!words.empty() && bin != nullptr && words.front() == bin && result.out.starts_with('{'))
    check_first_json_document(result.out);
  return result;
}

/// The words bash reads from `line`, as a command printed for pasting is read: each word
/// exactly as bash passes it to a program (`printf '%s\0'`, split at the NULs).
inline std::vector<std::string> bash_words(const std::string& line) {
  const CommandResult result = run_command({"bash", "-c", "printf '%s\\0' " + line});
  std::vector<std::string> words;
  for (std::size_t at = 0; at < result.out.size();) {
    const std::size_t end = result.out.find('\0', at);
    words.push_back(result.out.substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return words;
}

/// The value of an environment variable the test build sets (see tests/meson.build).
/// A copy of `sleep` named `node`, executable by every account: a live process that looks
/// like a Node runtime (PROTOCOL.md section 10) once exec'ed, where a plain `sleep` runs no
/// runtime (pid-not-runtime). Made once per test program, removed when it exits.
inline const std::string& node_named_sleep() {
  struct Copy {
    std::string folder, path;
    pid_t maker = ::getpid();  // a forked child that exits normally must not remove it
    Copy() {
      char name[] = "/tmp/apnea-locks-test-node-XXXXXX";
      if (::mkdtemp(name) == nullptr || ::chmod(name, 0755) != 0) std::abort();
      folder = name;
      path = folder + "/node";
      std::ifstream in("/bin/sleep", std::ios::binary);
      std::ofstream out(path, std::ios::binary);
      out << in.rdbuf();
      out.close();
      if (!in || !out || ::chmod(path.c_str(), 0755) != 0) std::abort();
    }
    ~Copy() {
      if (::getpid() != maker) return;
      ::unlink(path.c_str());
      ::rmdir(folder.c_str());
    }
  };
  static const Copy copy;
  return copy.path;
}

inline std::string test_env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

/// The number a counter file holds (the stress tests' shared counter); -1 when unreadable.
inline long read_number(const std::string& path) {
  std::ifstream in(path);
  long value = -1;
  in >> value;
  return value;
}

/// A child process with a pipe to its stdin and one from its stdout (stderr passes
/// through), for tests that talk to a long-running process line by line.
class Child {
 public:
  /// Starts `argv` (searched in PATH) with `env` added to this process's environment.
  explicit Child(const std::vector<std::string>& argv,
                 const std::vector<std::pair<std::string, std::string>>& env = {}) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
      std::vector<char*> args;
      for (const auto& word : argv) args.push_back(const_cast<char*>(word.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    close_stdin();
    if (stdout_ >= 0) ::close(stdout_);
  }

  pid_t pid() const { return pid_; }

  /// The next line of output (without the newline), or nothing at end of output or when
  /// `timeout` passes first.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      struct pollfd fd {stdout_, POLLIN, 0};
      if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      ssize_t n = ::read(stdout_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  /// Closes the child's stdin (it sees end of file).
  void close_stdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }

  /// Sends `signal` to the child.
  void signal(int signal) { ::kill(pid_, signal); }

  /// Waits for the child: its exit status, or 128+signal.
  int wait() {
    if (status_) return *status_;
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return *status_;
  }

  /// Everything the child still prints until it closes its output.
  std::string read_rest() {
    std::string rest = std::move(buffer_);
    buffer_.clear();
    char chunk[4096];
    ssize_t n;
    while ((n = ::read(stdout_, chunk, sizeof chunk)) > 0) rest.append(chunk, static_cast<std::size_t>(n));
    return rest;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

}  // namespace apnea_locks::testing
