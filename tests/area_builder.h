// Building lock areas with real directories for tests: locks, candidates, tombstones,
// guards, with exact modes and mtimes, and pids of processes in known states.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <thread>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "apnea_locks/names.h"
#include "apnea_locks/probe.h"
#include "apnea_locks/system.h"

namespace apnea_locks::testing {

/// The token tests write into owner records.
inline constexpr std::string_view test_token = "6f0d5d0e-1c2b-4a3d-8e9f-0a1b2c3d4e5f";

/// `{"pid":<pid>,"token":"<token>"}` as Apnea writes it.
inline std::string owner_json(long long pid, std::string_view token = test_token) {
  return "{\"pid\":" + std::to_string(pid) + ",\"token\":\"" + std::string(token) + "\"}";
}

/// The entry name of a lock for a made-up repository `seed`.
inline std::string fake_lock_name(std::string_view seed, LockKind kind = LockKind::repository) {
  return lock_name(kind, lock_key(kind, "/fake/" + std::string(seed)));
}

/// mkdir with exactly `mode` (the umask does not apply).
inline void make_dir(const std::string& path, mode_t mode = 0700) {
  if (::mkdir(path.c_str(), 0700) != 0) std::abort();
  if (::chmod(path.c_str(), mode) != 0) std::abort();
}

/// Creates a file holding `data` with exactly `mode`.
inline void write_file(const std::string& path, std::string_view data, mode_t mode = 0600) {
  {
    std::ofstream out(path, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) std::abort();
  }
  if (::chmod(path.c_str(), mode) != 0) std::abort();
}

/// A lock (or candidate, tombstone) directory holding owner.json.
inline std::string make_entry(const std::string& area, const std::string& name,
                              std::string_view owner, mode_t dir_mode = 0700,
                              mode_t file_mode = 0600) {
  const std::string path = area + "/" + name;
  make_dir(path, 0700);
  write_file(path + "/owner.json", owner, file_mode);
  if (::chmod(path.c_str(), dir_mode) != 0) std::abort();
  return path;
}

/// Every byte of a file ("" when it cannot be read).
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Replaces a file's bytes in place (same inode, mode and owner kept).
inline void rewrite_in_place(const std::string& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) std::abort();
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

/// Sets a path's mtime (and atime) to `seconds_ago` before now, without following a symlink.
inline void age_path(const std::string& path, double seconds_ago) {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const auto ns = static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec -
                  static_cast<std::int64_t>(seconds_ago * 1e9);
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ns / 1'000'000'000;
  times[0].tv_nsec = times[1].tv_nsec = ns % 1'000'000'000;
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) std::abort();
}

/// True when this machine's clock is void (HostFacts::clock_void, PROTOCOL.md section 9):
/// then no age counts as old enough, and `reclaim --force` refuses what only an age (a
/// guard's, a pid-less record's) would let it remove. A test of such a removal expects the
/// refusal on such a machine.
inline bool machine_clock_void(const std::string& area = "/tmp") {
  return gather_host(real_system(), area).clock_void();
}

/// Whether `out` (a reclaim's output) refuses or keeps a guard aged with age_path as not yet
/// old enough: removal counts from the latest of a guard's mtime and ctime (PROTOCOL.md
/// section 10), and age_path sets only the mtime back (its ctime is now); on a machine whose
/// clock is void no age counts at all. Either way its next step is to rmdir the guard by hand.
inline bool guard_too_young(const std::string& out) {
  return out.find("(the latest of its mtime and ctime)") != std::string::npos;
}

/// The pid of a child that has exited and been reaped: no process has it (until reused).
inline pid_t dead_pid() {
  pid_t child = ::fork();
  if (child < 0) std::abort();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

/// A child that has exited but is not reaped yet (a zombie) until reap() is called.
class Zombie {
 public:
  Zombie() {
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) ::_exit(0);
    // Wait (without reaping) until the child has exited: waitid with WNOWAIT.
    siginfo_t info{};
    ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT);
  }
  ~Zombie() { reap(); }
  Zombie(const Zombie&) = delete;
  Zombie& operator=(const Zombie&) = delete;
  pid_t pid() const { return pid_; }
  void reap() {
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

/// A child process blocked until destroyed; optionally running as another uid.
class Sleeper {
 public:
  explicit Sleeper(std::optional<uid_t> as_uid = std::nullopt) {
    int ready[2];
    int hold[2];
    if (::pipe(ready) != 0 || ::pipe(hold) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(hold[1]);
      if (as_uid && ::setuid(*as_uid) != 0) ::_exit(1);
      char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
      while (::read(hold[0], &byte, 1) > 0) {
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    hold_ = hold[1];
    char byte = 0;
    ok_ = ::read(ready[0], &byte, 1) == 1;  // the child is set up (and setuid done)
    ::close(ready[0]);
  }
  ~Sleeper() {
    ::close(hold_);
    ::waitpid(pid_, nullptr, 0);
  }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  pid_t pid() const { return pid_; }
  bool ok() const { return ok_; }

 private:
  pid_t pid_ = -1;
  int hold_ = -1;
  bool ok_ = false;
};

/// A thread of this process that waits until destroyed; its tid is not a process leader.
class WaitingThread {
 public:
  WaitingThread() {
    std::promise<pid_t> tid;
    auto got = tid.get_future();
    thread_ = std::thread([this, &tid] {
      tid.set_value(static_cast<pid_t>(::syscall(SYS_gettid)));
      release_.get_future().wait();
    });
    tid_ = got.get();
  }
  ~WaitingThread() {
    release_.set_value();
    thread_.join();
  }
  WaitingThread(const WaitingThread&) = delete;
  WaitingThread& operator=(const WaitingThread&) = delete;
  pid_t tid() const { return tid_; }

 private:
  std::promise<void> release_;
  std::thread thread_;
  pid_t tid_ = 0;
};

/// One path's observable state: type, mode, uid, size, mtime, inode.
using PathState = std::tuple<int, unsigned, unsigned, long long, long long, unsigned long long>;

/// Every path under `root` with its state (lstat, links not followed).
inline std::map<std::string, PathState> snapshot(const std::string& root) {
  std::map<std::string, PathState> out;
  auto record = [&](const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;
    out[path] = PathState{static_cast<int>(st.st_mode & S_IFMT), st.st_mode & 07777, st.st_uid,
                          static_cast<long long>(st.st_size),
                          static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                          static_cast<unsigned long long>(st.st_ino)};
  };
  record(root);
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(
           root, std::filesystem::directory_options::skip_permission_denied, error);
       it != std::filesystem::recursive_directory_iterator(); it.increment(error))
    record(it->path().string());
  return out;
}

/// The repository lock path of `repo` (made canonical) in `dir`.
inline std::string repo_lock(const std::string& dir, const std::string& repo) {
  const std::string canonical = std::filesystem::canonical(repo).string();
  return dir + "/" + lock_name(LockKind::repository, lock_key(LockKind::repository, canonical));
}

/// The `"token"` of an owner record as Apnea writes it ("" when not found).
inline std::string token_of(const std::string& record) {
  const std::string key = "\"token\":\"";
  const auto at = record.find(key);
  if (at == std::string::npos) return {};
  const auto end = record.find('"', at + key.size());
  return end == std::string::npos ? std::string() : record.substr(at + key.size(), end - at - key.size());
}

}  // namespace apnea_locks::testing
