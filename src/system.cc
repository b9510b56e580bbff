// The real System: the only file in the project that calls the operating system.
#include "apnea_locks/system.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <grp.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <unordered_map>
#include <vector>

#include "apnea_locks/probe.h"
#include "detail/probe.h"
#include "detail/split.h"

namespace apnea_locks {
namespace {

std::unexpected<std::error_code> fail(int error) {
  return std::unexpected(std::error_code(error, std::generic_category()));
}
std::unexpected<std::error_code> fail_errno() { return fail(errno); }

FileType type_of(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return FileType::regular;
    case S_IFDIR: return FileType::directory;
    case S_IFLNK: return FileType::symlink;
    case S_IFIFO: return FileType::fifo;
    case S_IFSOCK: return FileType::socket;
    case S_IFBLK: return FileType::block;
    case S_IFCHR: return FileType::character;
    default: return FileType::unknown;
  }
}

FileType type_of_dirent(unsigned char d_type) {
  switch (d_type) {
    case DT_REG: return FileType::regular;
    case DT_DIR: return FileType::directory;
    case DT_LNK: return FileType::symlink;
    case DT_FIFO: return FileType::fifo;
    case DT_SOCK: return FileType::socket;
    case DT_BLK: return FileType::block;
    case DT_CHR: return FileType::character;
    default: return FileType::unknown;
  }
}

FileStat from_stat(const struct stat& st) {
  FileStat out;
  out.type = type_of(st.st_mode);
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.mode = st.st_mode & 07777;
  out.uid = st.st_uid;
  out.nlink = st.st_nlink;
  out.size = st.st_size;
  out.mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  out.ctime_ns = std::int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  return out;
}

/// Reads a small /proc file whole (`path` relative to the directory `dir`); empty on any
/// failure.
std::string read_small_file_at(int dir, const char* path) {
  int fd = ::openat(dir, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
    if (out.size() > (1u << 20)) break;
  }
  ::close(fd);
  return out;
}

/// Reads a small /proc file whole; empty on any failure.
std::string read_small_file(const char* path) { return read_small_file_at(AT_FDCWD, path); }

/// Reads a file whole; nothing on any error or when it holds more than `limit` bytes (a
/// truncated text would be taken for the whole).
std::optional<std::string> read_whole_file(const char* path, std::size_t limit) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buffer[16384];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || out.size() + static_cast<std::size_t>(n) > limit) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::int64_t parse_int(std::string_view text) {
  std::int64_t value = 0;
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

/// The value after `key` on its own line of a /proc "Key:\tvalue" file.
std::string_view field_line(std::string_view text, std::string_view key) {
  for (std::string_view line : detail::split_parts(text, '\n')) {
    if (line.starts_with(key) && line.size() > key.size() && line[key.size()] == ':')
      return line.substr(key.size() + 1);
  }
  return {};
}

/// The whitespace-separated decimal numbers of a /proc field ("0\t1000\t1000\t1000").
std::vector<std::int64_t> parse_ints(std::string_view text) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
    if (at == text.size()) break;
    std::int64_t value = 0;
    auto [end, error] = std::from_chars(text.data() + at, text.data() + text.size(), value);
    if (error != std::errc() || end == text.data() + at) return {};  // not a number list
    out.push_back(value);
    at = static_cast<std::size_t>(end - text.data());
  }
  return out;
}

/// A /proc/<pid>/status file's "Key:\tvalue" field, if present.
std::optional<std::string_view> status_field(std::string_view status, std::string_view key) {
  std::string_view value = field_line(status, key);
  if (value.empty()) return std::nullopt;
  return value;
}

/// Calls `visit` with the pid of every process in /proc; false when /proc cannot be listed.
bool for_each_process(const std::function<void(std::int64_t)>& visit) {
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return false;
  while (struct dirent* item = ::readdir(dir)) {
    std::int64_t pid = 0;
    const char* end = item->d_name + std::strlen(item->d_name);
    auto parsed = std::from_chars(item->d_name, end, pid);
    if (parsed.ec == std::errc() && parsed.ptr == end && pid > 0) visit(pid);
  }
  ::closedir(dir);
  return true;
}

/// True when `pid` is in a frozen cgroup: cgroup v2 `cgroup.freeze` holding 1, or the v1
/// freezer's state FROZEN.
/// Whether each cgroup file read by in_frozen_cgroup said frozen, within one look at the
/// process table (processes share cgroups: each file is read once).
using FrozenFiles = std::unordered_map<std::string, bool>;

bool in_frozen_cgroup(std::int64_t pid, FrozenFiles& files) {
  auto frozen = [&](std::string file, std::string_view mark) {
    auto [at, added] = files.try_emplace(std::move(file), false);
    if (added) at->second = read_small_file(at->first.c_str()).starts_with(mark);
    return at->second;
  };
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%lld/cgroup", static_cast<long long>(pid));
  const std::string groups = read_small_file(path);
  for (const std::string_view line : detail::split_parts(groups, '\n')) {
    const std::size_t colon = line.find(':');
    const std::size_t second = colon == std::string_view::npos ? colon : line.find(':', colon + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(colon + 1, second - colon - 1);
    const std::string group(line.substr(second + 1));
    if (group.find("..") != std::string::npos) continue;
    if (controllers.empty()) {
      if (frozen("/sys/fs/cgroup" + group + "/cgroup.freeze", "1")) return true;
    } else if (controllers.find("freezer") != std::string_view::npos) {
      if (frozen("/sys/fs/cgroup/freezer" + group + "/freezer.state", "FROZEN")) return true;
    }
  }
  return false;
}

class RealSystem final : public System {
 public:
  SysResult<FileStat> lstat(const std::string& path) override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return fail_errno();
    return from_stat(st);
  }

  SysResult<int> open_read(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return fail_errno();
    return fd;
  }

  SysResult<FileStat> fstat(int fd) override {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fail_errno();
    return from_stat(st);
  }

  SysResult<std::size_t> pread(int fd, std::span<char> buffer, std::int64_t offset) override {
    for (;;) {
      ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno != EINTR) return fail_errno();
    }
  }

  void close(int fd) override { ::close(fd); }

  SysResult<void> mkdir(const std::string& path, std::uint32_t mode) override {
    if (::mkdir(path.c_str(), mode) != 0) return fail_errno();
    return {};
  }

  SysResult<void> chmod(const std::string& path, std::uint32_t mode) override {
    if (::chmod(path.c_str(), mode) != 0) return fail_errno();
    return {};
  }

  SysResult<void> rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return fail_errno();
    return {};
  }

  SysResult<void> rmdir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return fail_errno();
    return {};
  }

  SysResult<void> remove_tree(const std::string& path) override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return {};
      return fail_errno();
    }
    if (!S_ISDIR(st.st_mode)) {
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) return fail_errno();
      return {};
    }
    return remove_directory_at(AT_FDCWD, path.c_str());
  }

  SysResult<void> write_new_file(const std::string& path, std::string_view data,
                                 std::uint32_t mode) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) return fail_errno();
    std::size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        int error = errno;
        ::close(fd);
        return fail(error);
      }
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0) {
      int error = errno;
      ::close(fd);
      return fail(error);
    }
    if (::close(fd) != 0) return fail_errno();
    return {};
  }

  SysResult<void> replace_file(const std::string& path, std::string_view data) override {
    if (path.empty() || path.back() == '/') return fail(EISDIR);
    const auto slash = path.rfind('/');
    const std::string directory =
        slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    int fd = -1;
    std::string temp;
    for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
      std::array<std::byte, 6> noise{};
      random_bytes(noise);
      temp = directory + "/." + base + ".";
      for (std::byte b : noise) {
        static constexpr char hex[] = "0123456789abcdef";
        temp += hex[std::to_integer<unsigned>(b) >> 4];
        temp += hex[std::to_integer<unsigned>(b) & 15];
      }
      temp += ".tmp";
      fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST) return fail_errno();
    }
    if (fd < 0) return fail(EEXIST);
    auto abandon = [&](int error) {
      if (fd >= 0) ::close(fd);
      ::unlink(temp.c_str());
      return fail(error);
    };
    // A regular file (not through a symlink) keeps its read/write/execute bits, never
    // setuid, setgid or sticky; anything else (a symlink, nothing) gets 0644 less the umask.
    struct stat old {};
    if (::lstat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) &&
        ::fchmod(fd, old.st_mode & 0777) != 0)
      return abandon(errno);
    for (std::string_view rest = data; !rest.empty();) {
      const ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return abandon(errno);
      }
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    if (::fsync(fd) != 0) return abandon(errno);
    const int closed = ::close(fd);
    fd = -1;
    if (closed != 0) return abandon(errno);
    if (::rename(temp.c_str(), path.c_str()) != 0) return abandon(errno);
    // The file is in place; a filesystem that cannot sync directories is not an error.
    return fsync_directory(directory);
  }

  SysResult<void> fsync_directory(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail_errno();
    int result = ::fsync(fd);
    int error = errno;
    ::close(fd);
    if (result != 0 && error != EINVAL && error != ENOTSUP && error != EOPNOTSUPP)
      return fail(error);
    return {};
  }

  SysResult<void> list_directory(const std::string& path,
                                 const std::function<bool(const DirEntry&)>& visit) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail_errno();
    auto listed = list_directory_at(fd, visit);
    ::close(fd);
    return listed;
  }

  SysResult<int> open_directory(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return fail_errno();
    return fd;
  }

  SysResult<void> list_directory_at(int fd, const std::function<bool(const DirEntry&)>& visit) override {
    // getdents64 on the descriptor itself, from its start: no second descriptor and no
    // DIR stream (which would cost an openat, an fstat and two fcntl calls; a release lists
    // its tombstone this way every time, a survey its area), and the entries listed are
    // those of the very directory the per-entry calls are relative to.
    if (::lseek(fd, 0, SEEK_SET) < 0) return fail_errno();
    alignas(struct dirent64) char buffer[32768];
    DirEntry entry;
    for (;;) {
      const ssize_t got = ::getdents64(fd, buffer, sizeof buffer);
      if (got < 0) {
        if (errno == EINTR) continue;
        return fail_errno();
      }
      if (got == 0) return {};
      for (ssize_t at = 0; at < got;) {
        const auto* item = reinterpret_cast<const struct dirent64*>(buffer + at);
        at += item->d_reclen;
        if (std::strcmp(item->d_name, ".") == 0 || std::strcmp(item->d_name, "..") == 0) continue;
        entry.name.assign(item->d_name);
        entry.type = type_of_dirent(item->d_type);
        if (!visit(entry)) return {};
      }
    }
  }

  SysResult<FileStat> lstat_in(const DirRef& dir, std::string_view name) override {
    if (dir.fd < 0) return lstat(dir.join(name));
    const std::string relative(name);
    struct stat st {};
    if (::fstatat(dir.fd, relative.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return fail_errno();
    return from_stat(st);
  }

  SysResult<int> open_read_in(const DirRef& dir, std::string_view relative) override {
    if (dir.fd < 0) return open_read(dir.join(relative));
    const std::string name(relative);
    struct open_how how {};
    how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    // openat2 (Linux 5.6): no component may be a symlink. Without it, openat refuses only a
    // final one, as open_read does.
    static std::atomic<bool> no_openat2{false};
    if (!no_openat2.load(std::memory_order_relaxed)) {
      for (int tries = 1;; ++tries) {
        const long fd = ::syscall(SYS_openat2, dir.fd, name.c_str(), &how, sizeof how);
        if (fd >= 0) return static_cast<int>(fd);
        // EAGAIN: a rename elsewhere raced the walk (RESOLVE_BENEATH); try a few times.
        if ((errno == EAGAIN && tries < 8) || errno == EINTR) continue;
        if (errno != ENOSYS && errno != EPERM) return fail_errno();  // EPERM: a seccomp filter
        no_openat2.store(true, std::memory_order_relaxed);
        break;
      }
    }
    const int fd = ::openat(dir.fd, name.c_str(), static_cast<int>(how.flags));
    if (fd < 0) return fail_errno();
    return fd;
  }

  SysResult<FileStat> stat_at(int fd, const std::string& name) override {
    struct stat st {};
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return fail_errno();
    return from_stat(st);
  }

  SysResult<void> unlink_at(int fd, const std::string& name) override {
    if (::unlinkat(fd, name.c_str(), 0) != 0) return fail_errno();
    return {};
  }

  SysResult<void> lock_exclusive(int fd) override {
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return fail_errno();
    return {};
  }

  SysResult<std::string> realpath(const std::string& path) override {
    char* resolved = ::realpath(path.c_str(), nullptr);
    if (resolved == nullptr) return fail_errno();
    std::string out(resolved);
    std::free(resolved);
    return out;
  }

  int signal_probe(std::int64_t pid) override {
    if (pid <= 0 || pid > INT_MAX) return EINVAL;
    if (::kill(static_cast<pid_t>(pid), 0) == 0) return 0;
    return errno;
  }

  std::optional<ProcessInfo> process_info(std::int64_t pid) override {
    if (pid <= 0 || pid > INT_MAX) return std::nullopt;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%lld", static_cast<long long>(pid));
    // Every file is read through one descriptor of /proc/<pid>: they all describe the same
    // process, even if it exits and its number is reused meanwhile (reads then fail).
    const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return std::nullopt;
    auto info = process_info_at(dir, pid);
    ::close(dir);
    return info;
  }

  std::optional<ProcessInfo> process_info_at(int dir, std::int64_t pid) {
    std::string stat = read_small_file_at(dir, "stat");
    std::size_t close_paren = stat.rfind(')');
    if (close_paren == std::string::npos) return std::nullopt;
    ProcessInfo info;
    // Fields after the command: 3 state, 4 ppid, ... 22 starttime.
    std::string_view rest = std::string_view(stat).substr(close_paren + 1);
    std::vector<std::string_view> fields;
    std::size_t at = 0;
    while (at < rest.size() && fields.size() < 21) {
      while (at < rest.size() && rest[at] == ' ') ++at;
      std::size_t end = rest.find(' ', at);
      if (end == std::string_view::npos) end = rest.size();
      if (end > at) fields.push_back(rest.substr(at, end - at));
      at = end;
    }
    if (fields.size() < 20) return std::nullopt;
    info.state = fields[0].empty() ? '?' : fields[0][0];
    const std::int64_t ticks = parse_int(fields[19]);
    static const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
    info.start_time_ns = boot_time_ns() + ticks * (1'000'000'000 / ticks_per_second);

    info.pid = pid;

    std::string status = read_small_file_at(dir, "status");
    info.tgid = parse_int(field_line(status, "Tgid"));
    info.uid = static_cast<std::uint32_t>(parse_int(field_line(status, "Uid")));
    info.threads = parse_int(field_line(status, "Threads"));
    if (auto uids = status_field(status, "Uid")) {
      const std::vector<std::int64_t> values = parse_ints(*uids);
      if (values.size() == 4 && std::all_of(values.begin(), values.end(), [](std::int64_t v) {
            return v >= 0 && v <= std::int64_t{UINT32_MAX};
          })) {
        for (std::size_t i = 0; i < 4; ++i) info.uids[i] = static_cast<std::uint32_t>(values[i]);
        info.uids_known = true;
        info.uid = info.uids[0];
      }
    }
    if (auto nspid = status_field(status, "NSpid")) info.nspid = parse_ints(*nspid);

    info.command = read_small_file_at(dir, "cmdline");
    while (!info.command.empty() && info.command.back() == '\0') info.command.pop_back();
    for (char& c : info.command)
      if (c == '\0') c = ' ';
    if (info.command.empty() && close_paren != std::string::npos) {
      std::size_t open_paren = stat.find('(');
      if (open_paren != std::string::npos && open_paren < close_paren) {
        // Appended rather than `"[" + s + "]"`: GCC 12 at -O3 reports a false
        // -Wrestrict inside libstdc++'s operator+(const char*, string&&) (GCC bug 105329).
        const std::string_view name =
            std::string_view(stat).substr(open_paren + 1, close_paren - open_paren - 1);
        info.command.reserve(name.size() + 2);
        info.command.append(1, '[').append(name).append(1, ']');
      }
    }
    return info;
  }

  std::int64_t boot_time_ns() override {
    static const std::int64_t value = [] {
      std::string stat = read_small_file("/proc/stat");
      std::int64_t seconds = 0;
      std::size_t at = stat.find("\nbtime ");
      if (at != std::string::npos) seconds = parse_int(std::string_view(stat).substr(at + 7));
      return seconds * 1'000'000'000;
    }();
    return value;
  }

  std::optional<std::uint64_t> namespace_inode(std::string_view kind) override {
    const std::string path = "/proc/self/ns/" + std::string(kind);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    return static_cast<std::uint64_t>(st.st_ino);
  }

  std::string mount_info() override {
    // A host with many mounts has a large mountinfo; one that does not fit is unknown.
    return read_whole_file("/proc/self/mountinfo", std::size_t{64} << 20).value_or(std::string());
  }

  std::optional<std::uint64_t> filesystem_magic(const std::string& path) override {
    struct statfs st {};
    if (::statfs(path.c_str(), &st) != 0) return std::nullopt;
    // Magic numbers are 32 bits; f_type is a signed word that may sign-extend them.
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(st.f_type));
  }

  std::optional<std::int64_t> birth_time_ns(const std::string& path) override {
    struct statx st {};
    if (::statx(AT_FDCWD, path.c_str(), AT_STATX_SYNC_AS_STAT, STATX_BTIME, &st) != 0)
      return std::nullopt;
    if ((st.stx_mask & STATX_BTIME) == 0) return std::nullopt;
    return std::int64_t{st.stx_btime.tv_sec} * 1'000'000'000 + st.stx_btime.tv_nsec;
  }

  std::uint32_t euid() override { return ::geteuid(); }

  std::vector<ProcessInfo> namespace_view() override {
    std::vector<ProcessInfo> view;
    std::vector<std::int64_t> nested;
    for_each_process([&](std::int64_t pid) {
      char path[64];
      // A process of the initial PID namespace has one NSpid field: its pid in the /proc
      // that lists it (only the initial namespace's /proc lists it). One readlink tells, a
      // fraction of what generating its status costs; when the link cannot be read, status.
      std::snprintf(path, sizeof path, "/proc/%lld/ns/pid", static_cast<long long>(pid));
      char link[64];
      const ssize_t size = ::readlink(path, link, sizeof link);
      std::uint64_t inode = 0;
      if (size > 6 && std::string_view(link, 5) == "pid:[" && link[size - 1] == ']') {
        const auto parsed = std::from_chars(link + 5, link + size - 1, inode);
        if (parsed.ec == std::errc() && parsed.ptr == link + size - 1 &&
            inode == detail::initial_pid_namespace_inode)
          return;
      }
      std::snprintf(path, sizeof path, "/proc/%lld/status", static_cast<long long>(pid));
      // Most processes live in our namespace only: one read of status tells.
      const std::string status = read_small_file(path);
      auto nspid = status_field(status, "NSpid");
      if (nspid && parse_ints(*nspid).size() > 1) nested.push_back(pid);
    });
    for (std::int64_t pid : nested) {
      auto info = process_info(pid);  // gone since: left out
      if (info && info->nspid.size() > 1) view.push_back(std::move(*info));
    }
    return view;
  }

  std::optional<std::vector<ProcessInfo>> paused_processes() override {
    std::vector<std::int64_t> candidates;
    FrozenFiles frozen;
    const bool listed = for_each_process([&](std::int64_t pid) {
      char path[64];
      std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
      const std::string stat = read_small_file(path);
      const std::size_t close_paren = stat.rfind(')');
      if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return;
      const char state = stat[close_paren + 2];
      // A kernel thread (PF_KTHREAD in field 9, `flags`) never holds a guard: skipped before
      // its cgroup is read, which is most of the table's cost. A process whose flags cannot be
      // read counts as a user process.
      std::vector<std::string_view> fields;
      for (std::string_view field : detail::split_parts(std::string_view(stat).substr(close_paren + 2), ' ')) {
        fields.push_back(field);
        if (fields.size() == 7) break;
      }
      constexpr std::int64_t kernel_thread = 0x00200000;  // PF_KTHREAD
      if (fields.size() == 7 && (parse_int(fields[6]) & kernel_thread) != 0) return;
      if (state == 'T' || state == 't' || in_frozen_cgroup(pid, frozen)) candidates.push_back(pid);
    });
    if (!listed) return std::nullopt;
    std::vector<ProcessInfo> paused;
    for (std::int64_t pid : candidates) {
      auto info = process_info(pid);
      if (info) paused.push_back(std::move(*info));  // else gone since
    }
    return paused;
  }

  std::int64_t now_ns() override {
    struct timespec ts {};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }

  void sleep(std::chrono::nanoseconds duration) override { std::this_thread::sleep_for(duration); }

  std::uint32_t uid() override { return ::getuid(); }

  std::int64_t pid() override { return ::getpid(); }

  std::optional<std::string> env(const std::string& name) override {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  }

  std::optional<std::string> passwd_home(std::uint32_t uid) override {
    struct passwd entry {};
    struct passwd* found = nullptr;
    std::vector<char> buffer(16384);
    if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr)
      return std::nullopt;
    return std::string(entry.pw_dir);
  }

  void random_bytes(std::span<std::byte> out) override {
    std::size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::abort();  // the kernel's entropy source is gone: nothing safe to do
      }
      done += static_cast<std::size_t>(n);
    }
  }

  bool is_terminal(int fd) override { return ::isatty(fd) == 1; }

  std::optional<int> terminal_columns(int fd) override {
    struct winsize size {};
    if (::ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return std::nullopt;
    return static_cast<int>(size.ws_col);
  }

  std::optional<Account> lookup_account(const std::string& name) override {
    struct passwd entry {};
    struct passwd* found = nullptr;
    std::vector<char> buffer(16384);
    if (::getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
        found == nullptr)
      return std::nullopt;
    return Account{entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir};
  }
  std::optional<Account> lookup_uid(std::uint32_t uid) override {
    struct passwd entry {};
    struct passwd* found = nullptr;
    std::vector<char> buffer(16384);
    if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr)
      return std::nullopt;
    return Account{entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir};
  }
  void log_audit(const std::string& line) override {
    static const bool opened = [] {
      ::openlog("apnea-locks", LOG_PID, LOG_AUTHPRIV);
      return true;
    }();
    (void)opened;
    ::syslog(LOG_AUTHPRIV | LOG_NOTICE, "%s", line.c_str());
  }


  SysResult<void> become(const Account& account) override {
    if (::setgroups(0, nullptr) != 0) return fail_errno();
    if (::setgid(account.gid) != 0) return fail_errno();
    if (::setuid(account.uid) != 0) return fail_errno();
    // Check it stuck: a process that could regain root has not dropped anything.
    if (::getuid() != account.uid || ::geteuid() != account.uid || ::setuid(0) == 0)
      return fail(EPERM);
    return {};
  }

 private:
  /// Removes the directory `name` (relative to `parent`) and all it holds, never following
  /// a symlink: every step is relative to a directory descriptor opened with O_NOFOLLOW.
  SysResult<void> remove_directory_at(int parent, const char* name) {
    int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return {};
      return fail_errno();
    }
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
      int error = errno;
      ::close(fd);
      return fail(error);
    }
    std::vector<std::pair<std::string, bool>> children;
    while (struct dirent* item = ::readdir(dir)) {
      if (std::strcmp(item->d_name, ".") == 0 || std::strcmp(item->d_name, "..") == 0) continue;
      bool is_dir = item->d_type == DT_DIR;
      if (item->d_type == DT_UNKNOWN) {
        struct stat st {};
        is_dir = ::fstatat(fd, item->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      children.emplace_back(item->d_name, is_dir);
    }
    SysResult<void> result;
    for (const auto& [child, is_dir] : children) {
      if (is_dir) {
        auto removed = remove_directory_at(fd, child.c_str());
        if (!removed && result) result = removed;
      } else if (::unlinkat(fd, child.c_str(), 0) != 0 && errno != ENOENT && result) {
        result = fail_errno();
      }
    }
    ::closedir(dir);
    if (::unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT && result)
      result = fail_errno();
    return result;
  }
};

}  // namespace

System& real_system() {
  static RealSystem system;
  return system;
}

std::string DirRef::join(std::string_view name) const {
  if (path.empty()) return std::string(name);
  std::string joined;
  joined.reserve(path.size() + 1 + name.size());
  joined.append(path);
  if (joined.back() != '/') joined += '/';
  joined.append(name);
  return joined;
}

std::string_view file_type_name(FileType type) {
  switch (type) {
    case FileType::regular: return "file";
    case FileType::directory: return "directory";
    case FileType::symlink: return "symlink";
    case FileType::fifo: return "fifo";
    case FileType::socket: return "socket";
    case FileType::block: return "block-device";
    case FileType::character: return "char-device";
    case FileType::unknown: break;
  }
  return "unknown";
}

SysResult<std::string> read_at_most(System& system, int fd, std::size_t limit) {
  std::string bytes(limit, '\0');
  std::size_t offset = 0;
  while (offset < limit) {
    auto n = system.pread(fd, std::span<char>(bytes.data() + offset, limit - offset),
                          static_cast<std::int64_t>(offset));
    if (!n) return std::unexpected(n.error());
    if (*n == 0) break;
    offset += *n;
  }
  bytes.resize(offset);
  return bytes;
}

std::string errno_text(const std::error_code& error) {
  const char* name = ::strerrorname_np(error.value());
  std::string message = error.message();
  if (!message.empty()) message[0] = static_cast<char>(std::tolower(message[0]));
  return std::string(name != nullptr ? name : "E?") + ": " + message;
}

}  // namespace apnea_locks
