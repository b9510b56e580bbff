// A real child process for tests that must talk to it while it runs: pipes on its stdin,
// stdout and stderr, reading whole lines with a deadline, signals, and waiting for its end.
// Synchronise on what the process prints, never on sleeps.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace apnea_locks::testing {

class SpawnedProcess {
 public:
  enum class Stream { out, err };

  /// Starts `argv` (looked up in PATH) with the environment plus `env` overrides.
  SpawnedProcess(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> environment;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string text = *entry;
      if (!env.contains(text.substr(0, text.find('=')))) environment.push_back(text);
    }
    for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
    std::vector<char*> args, envp;
    for (const auto& word : argv) args.push_back(const_cast<char*>(word.c_str()));
    args.push_back(nullptr);
    for (const auto& entry : environment) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);

    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::execvpe(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    in_ = in[1];
    out_ = out[0];
    err_ = err[0];
    ::fcntl(out_, F_SETFL, O_NONBLOCK);
    ::fcntl(err_, F_SETFL, O_NONBLOCK);
    // glibc 2.36's <sys/pidfd.h> lacks extern "C"; call the syscall directly.
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  }
  SpawnedProcess(const SpawnedProcess&) = delete;
  SpawnedProcess& operator=(const SpawnedProcess&) = delete;
  ~SpawnedProcess() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      int ignored = 0;
      ::waitpid(pid_, &ignored, 0);
    }
    for (int fd : {in_, out_, err_, pidfd_})
      if (fd >= 0) ::close(fd);
  }

  pid_t pid() const { return pid_; }
  /// Everything read so far from stdout / stderr (including lines already returned).
  const std::string& out() const { return all_[0]; }
  const std::string& err() const { return all_[1]; }

  /// The next whole line of `stream`, or nothing at end of file or after `timeout`.
  std::optional<std::string> read_line(Stream stream, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string& pending = pending_[index(stream)];
    for (;;) {
      if (const auto at = pending.find('\n'); at != std::string::npos) {
        std::string line = pending.substr(0, at);
        pending.erase(0, at + 1);
        return line;
      }
      if (fd(stream) < 0) return std::nullopt;
      if (!pump(deadline)) return std::nullopt;
    }
  }

  /// The next line of `stream` that contains `needle` (earlier lines are skipped).
  std::optional<std::string> read_line_containing(Stream stream, const std::string& needle,
                                                  std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      auto line = read_line(stream, left);
      if (!line || line->find(needle) != std::string::npos) return line;
    }
  }

  /// Writes `text` and a newline to the child's stdin.
  void write_line(const std::string& text) {
    const std::string line = text + "\n";
    std::size_t done = 0;
    while (in_ >= 0 && done < line.size()) {
      const ssize_t n = ::write(in_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }

  /// Closes the child's stdin (it reads end of file).
  void close_stdin() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }

  void signal(int sig) const { ::kill(pid_, sig); }

  /// Waits for the process to end: its exit status, 128+N when killed by signal N, or
  /// nothing after `timeout`. Output keeps being collected meanwhile.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!status_) {
      reap();
      if (status_) break;
      if (!pump(deadline)) {
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      }
    }
    drain();
    return status_;
  }

 private:
  static int index(Stream stream) { return stream == Stream::out ? 0 : 1; }
  int& fd(Stream stream) { return stream == Stream::out ? out_ : err_; }

  /// Reads what is available on stdout/stderr; closes a stream at end of file.
  void read_from(int which) {
    int& descriptor = which == 0 ? out_ : err_;
    std::array<char, 4096> buffer{};
    for (;;) {
      const ssize_t n = ::read(descriptor, buffer.data(), buffer.size());
      if (n > 0) {
        pending_[which].append(buffer.data(), static_cast<std::size_t>(n));
        all_[which].append(buffer.data(), static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) {
        ::close(descriptor);
        descriptor = -1;
      }
      return;
    }
  }

  /// Waits (up to `deadline`) for output or the end of the process, and reads the output.
  /// False when the deadline passed with nothing happening.
  bool pump(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    std::array<pollfd, 3> fds{};
    fds[0] = {out_, POLLIN, 0};
    fds[1] = {err_, POLLIN, 0};
    fds[2] = {status_ ? -1 : pidfd_, POLLIN, 0};
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready <= 0) return ready < 0 && errno == EINTR;
    if (fds[0].revents != 0) read_from(0);
    if (fds[1].revents != 0) read_from(1);
    if (fds[2].revents != 0) reap();
    return true;
  }

  /// Records the exit status once the process has ended.
  void reap() {
    int status = 0;
    if (!status_ && ::waitpid(pid_, &status, WNOHANG) == pid_)
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  /// Collects output already written (without waiting for end of file: a grandchild may
  /// still hold the pipes).
  void drain() {
    if (out_ >= 0) read_from(0);
    if (err_ >= 0) read_from(1);
  }

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1, pidfd_ = -1;
  std::array<std::string, 2> pending_, all_;
  std::optional<int> status_;
};

}  // namespace apnea_locks::testing
