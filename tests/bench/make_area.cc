// make_area: fills a lock area with N synthetic entries for the benchmarks.
//
//   make_area DIR N LIVE_PID
//
// DIR is created (mode 0700) if missing and must be empty. Entries cycle through a mix of
// twenty, so every 20 entries hold: 10 stale repository locks (distinct dead pids),
// 3 live locks (LIVE_PID), 3 malformed locks (bad JSON, owner.json mode 0644, no owner.json),
// 1 candidate and 1 tombstone (debris, dead pids), 1 reclaim guard of one of the stale locks,
// 1 stale global-setup lock. Owner records are exactly `{"pid":N,"token":"<uuid v4>"}`,
// mode 0600, in 0700 directories; every entry is dated two hours ago. Prints one JSON line.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "make_area: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// 64 lowercase hex digits derived from `seed`.
std::string key_of(std::uint64_t seed) {
  char out[65];
  for (int part = 0; part < 4; ++part)
    std::snprintf(out + part * 16, 17, "%016llx",
                  static_cast<unsigned long long>(mix(seed * 4 + static_cast<std::uint64_t>(part))));
  return std::string(out, 64);
}

/// A UUID v4 text derived from `seed`.
std::string uuid_of(std::uint64_t seed) {
  const std::uint64_t a = mix(seed ^ 0x5555), b = mix(seed ^ 0xaaaa);
  char out[37];
  std::snprintf(out, sizeof out, "%08llx-%04llx-4%03llx-%01llx%03llx-%012llx",
                static_cast<unsigned long long>(a >> 32), static_cast<unsigned long long>((a >> 16) & 0xffff),
                static_cast<unsigned long long>(a & 0xfff), static_cast<unsigned long long>(8 | (b >> 62)),
                static_cast<unsigned long long>((b >> 48) & 0xfff),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return out;
}

void write_file(const std::string& path, const std::string& data, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) die("open " + path);
  if (::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) die("write " + path);
  if (mode != 0600 && ::fchmod(fd, mode) != 0) die("fchmod " + path);
  ::close(fd);
}

void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0) die("mkdir " + path);
}

std::string owner_json(long long pid, std::uint64_t seed) {
  return "{\"pid\":" + std::to_string(pid) + ",\"token\":\"" + uuid_of(seed) + "\"}";
}

/// A lock, candidate or tombstone directory holding `owner` (none: an empty directory).
void make_entry(const std::string& path, const std::string* owner, mode_t owner_mode = 0600) {
  make_dir(path);
  if (owner != nullptr) write_file(path + "/owner.json", *owner, owner_mode);
}

void age(const std::string& path, time_t when) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = when;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) die("utimensat " + path);
}

/// Pids no process has now (kill answers ESRCH), ascending.
std::vector<long long> dead_pids() {
  long long pid_max = 32768;
  if (FILE* f = std::fopen("/proc/sys/kernel/pid_max", "r")) {
    if (std::fscanf(f, "%lld", &pid_max) != 1) pid_max = 32768;
    std::fclose(f);
  }
  std::vector<long long> out;
  for (long long pid = 300; pid < pid_max; ++pid)
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) out.push_back(pid);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fputs("usage: make_area DIR N LIVE_PID\n", stderr);
    return 2;
  }
  const std::string dir = argv[1];
  const long count = std::atol(argv[2]);
  const long long live_pid = std::atoll(argv[3]);
  ::umask(077);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) die("mkdir " + dir);
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        std::fprintf(stderr, "make_area: %s is not empty\n", dir.c_str());
        return 1;
      }
    ::closedir(d);
  }
  const std::vector<long long> dead = dead_pids();
  if (dead.empty()) {
    std::fputs("make_area: no free pid found\n", stderr);
    return 1;
  }
  const time_t when = ::time(nullptr) - 7200;
  std::size_t next_dead = 0;
  auto a_dead_pid = [&] { return dead[next_dead++ % dead.size()]; };
  long stale = 0, live = 0, malformed = 0, debris = 0, guards = 0;
  std::string last_stale;

  for (long i = 0; i < count; ++i) {
    const auto seed = static_cast<std::uint64_t>(i);
    const std::string lock = dir + "/repository-" + key_of(seed) + ".lock";
    std::string path = lock;
    const int slot = static_cast<int>(i % 20);
    if (slot < 10) {
      const std::string owner = owner_json(a_dead_pid(), seed);
      make_entry(path, &owner);
      last_stale = lock;
      ++stale;
    } else if (slot < 13) {
      const std::string owner = owner_json(live_pid, seed);
      make_entry(path, &owner);
      ++live;
    } else if (slot == 13) {
      const std::string owner = "{\"pid\":" + std::to_string(a_dead_pid()) + ",\"token\":";
      make_entry(path, &owner);
      ++malformed;
    } else if (slot == 14) {
      const std::string owner = owner_json(a_dead_pid(), seed);
      make_entry(path, &owner, 0644);
      ++malformed;
    } else if (slot == 15) {
      make_entry(path, nullptr);
      ++malformed;
    } else if (slot == 16) {
      path = lock + ".candidate." + uuid_of(seed ^ 0x1234);
      const std::string owner = owner_json(a_dead_pid(), seed);
      make_entry(path, &owner);
      ++debris;
    } else if (slot == 17) {
      path = lock + ".tombstone." + uuid_of(seed ^ 0x4321);
      const std::string owner = owner_json(a_dead_pid(), seed);
      make_entry(path, &owner);
      ++debris;
    } else if (slot == 18) {
      path = last_stale + ".reclaim";
      make_dir(path);
      ++guards;
    } else {
      path = dir + "/global-setup-" + key_of(seed) + ".lock";
      const std::string owner = owner_json(a_dead_pid(), seed);
      make_entry(path, &owner);
      ++stale;
    }
    age(path, when);
  }
  std::printf("{\"dir\":\"%s\",\"entries\":%ld,\"stale\":%ld,\"live\":%ld,\"malformed\":%ld,"
              "\"debris\":%ld,\"guards\":%ld,\"distinct_dead_pids\":%zu}\n",
              dir.c_str(), count, stale, live, malformed, debris, guards,
              std::min(dead.size(), next_dead));
  return 0;
}
