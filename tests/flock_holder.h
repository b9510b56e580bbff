// A shared flock on a directory, held by another process (as run's shim holds run's).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace apnea_locks::testing {

/// A shared flock on the directory `path` held by a child process sharing the descriptor,
/// as run's shim shares run's, until release() (or destruction): the flock outlives this
/// process's own copy.
class FlockHolder {
 public:
  explicit FlockHolder(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || ::pipe(hold_) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::close(hold_[1]);
      char byte = 0;
      [[maybe_unused]] auto got = ::read(hold_[0], &byte, 1);  // until released
      ::_exit(0);
    }
    ::close(hold_[0]);
    if (::flock(fd, LOCK_SH) != 0) std::abort();
    ::close(fd);  // the child's copy of the descriptor keeps the flock
  }
  ~FlockHolder() { release(); }
  FlockHolder(const FlockHolder&) = delete;
  FlockHolder& operator=(const FlockHolder&) = delete;
  /// Ends the child, and so the flock.
  void release() {
    if (pid_ <= 0) return;
    ::close(hold_[1]);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  int hold_[2] = {-1, -1};
  pid_t pid_ = -1;
};

}  // namespace apnea_locks::testing
