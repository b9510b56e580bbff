// floor: the least the lock protocol's work can cost on this machine, for comparison.
//
//   floor cycles LOCK_DIR N   N acquire/release cycles of LOCK_DIR/repository-<0...0>.lock
//                             with only the protocol's unavoidable system calls, nothing else
//                             (no lock-area checks, no JSON, no error texts):
//     acquire: mkdir candidate; open, write, fsync, close owner.json; open, fsync, close the
//              candidate directory; lstat the lock; rename candidate -> lock
//     release: lstat, open, fstat, read, close owner.json (token check); rename lock ->
//              tombstone; the same five calls on the tombstone (token re-check); unlink
//              owner.json; rmdir the tombstone
//                             prints {"event":"cycles-done","cycles":N,"us_per_cycle":U}
//                             like lock_stress
//   floor scan DIR            the least an inspection of a lock area does: list it; per entry
//                             lstat, and for a lock, candidate or tombstone open, fstat,
//                             read, close its owner.json; kill(pid, 0) once per distinct pid.
//                             No judgement, no output but a count.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

[[noreturn]] void die(const char* what, const std::string& path) {
  std::fprintf(stderr, "floor: %s %s: %s\n", what, path.c_str(), std::strerror(errno));
  std::exit(3);
}

/// lstat the directory, then open/fstat/read/close its owner.json; true when it holds `record`.
bool holds(const std::string& dir, const std::string& record) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  const std::string owner = dir + "/owner.json";
  const int fd = ::open(owner.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[4096];
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size <= 4096)
    n = ::read(fd, buffer, static_cast<std::size_t>(st.st_size));
  ::close(fd);
  return n == static_cast<ssize_t>(record.size()) && std::memcmp(buffer, record.data(), record.size()) == 0;
}

/// The pid of an owner record `{"pid":N,...}`, or 0.
long pid_of(const char* text, std::size_t size) {
  const std::string_view record(text, size);
  const std::size_t at = record.find("\"pid\":");
  if (at == std::string_view::npos) return 0;
  return std::strtol(text + at + 6, nullptr, 10);
}

int scan(const std::string& dir) {
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) die("opendir", dir);
  std::vector<bool> probed(1 << 22);
  long entries = 0, alive = 0;
  char buffer[4096];
  while (const dirent* entry = ::readdir(listing)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    ++entries;
    const std::string path = dir + "/" + entry->d_name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    const bool has_owner = name.ends_with(".lock") || name.find(".lock.candidate.") != name.npos ||
                           name.find(".lock.tombstone.") != name.npos;
    if (!has_owner) continue;
    const int fd = ::open((path + "/owner.json").c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = -1;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size <= 4096)
      n = ::read(fd, buffer, static_cast<std::size_t>(st.st_size));
    ::close(fd);
    const long pid = n > 0 ? pid_of(buffer, static_cast<std::size_t>(n)) : 0;
    if (pid <= 0 || pid >= (1 << 22) || probed[static_cast<std::size_t>(pid)]) continue;
    probed[static_cast<std::size_t>(pid)] = true;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) ++alive;
  }
  ::closedir(listing);
  std::printf("{\"event\":\"scan-done\",\"entries\":%ld,\"live_pids\":%ld}\n", entries, alive);
  return 0;
}

int cycles(int argc, char** argv) {
  if (argc != 4) {
    std::fputs("usage: floor cycles LOCK_DIR N | floor scan DIR\n", stderr);
    return 2;
  }
  const std::string dir = argv[2];
  const long rounds = std::atol(argv[3]);
  const std::string lock = dir + "/repository-" + std::string(64, '0') + ".lock";
  const std::string pid = std::to_string(::getpid());
  ::umask(077);
  const auto started = std::chrono::steady_clock::now();
  for (long i = 0; i < rounds; ++i) {
    // Tokens differ per cycle as real ones do; made without a system call.
    char token[48];
    std::snprintf(token, sizeof token, "00000000-0000-4000-8000-%012lx", i & 0xffffffffffffL);
    const std::string record = "{\"pid\":" + pid + ",\"token\":\"" + token + "\"}";
    const std::string candidate = lock + ".candidate." + token;
    const std::string owner = candidate + "/owner.json";

    if (::mkdir(candidate.c_str(), 0700) != 0) die("mkdir", candidate);
    int fd = ::open(owner.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) die("open", owner);
    if (::write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size())) die("write", owner);
    if (::fsync(fd) != 0) die("fsync", owner);
    ::close(fd);
    fd = ::open(candidate.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) die("open", candidate);
    if (::fsync(fd) != 0) die("fsync", candidate);
    ::close(fd);
    struct stat st {};
    if (::lstat(lock.c_str(), &st) == 0 || errno != ENOENT) die("lstat (lock exists)", lock);
    if (::rename(candidate.c_str(), lock.c_str()) != 0) die("rename", candidate);

    if (!holds(lock, record)) die("token check", lock);
    const std::string tombstone = lock + ".tombstone." + token;
    if (::rename(lock.c_str(), tombstone.c_str()) != 0) die("rename", lock);
    if (!holds(tombstone, record)) die("token re-check", tombstone);
    if (::unlink((tombstone + "/owner.json").c_str()) != 0) die("unlink", tombstone);
    if (::rmdir(tombstone.c_str()) != 0) die("rmdir", tombstone);
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count() /
                    static_cast<double>(rounds);
  std::printf("{\"event\":\"cycles-done\",\"cycles\":%ld,\"us_per_cycle\":%.1f}\n", rounds, us);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "cycles") return cycles(argc, argv);
  if (argc == 3 && std::string_view(argv[1]) == "scan") return scan(argv[2]);
  std::fputs("usage: floor cycles LOCK_DIR N | floor scan DIR\n", stderr);
  return 2;
}
