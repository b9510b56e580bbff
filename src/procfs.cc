// What the files of /proc say about a process: the parsing behind the kernel's Processes.
#include "detail/procfs.h"

#include <dirent.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "apnea_locks/lock_area.h"
#include "detail/probe.h"
#include "detail/split.h"

namespace apnea_locks::detail {

/// Reads a /proc (or cgroup) file, `path` relative to the directory `dir` (or a path of its
/// own with AT_FDCWD), never through a symlink at its end nor blocking on a FIFO: nothing when
/// it cannot be opened or read. Past `limit` bytes it stops: with `whole`, nothing (a file
/// whose end was not seen, such as a mount table, would read as complete at a line's end),
/// else what was read, about `limit` bytes.
std::optional<std::string> read_limited_at(int dir, const char* path, std::size_t limit, bool whole) {
  const int fd = ::openat(dir, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
    if (out.size() > limit) {
      ::close(fd);
      if (whole) return std::nullopt;
      return out;
    }
  }
  ::close(fd);
  return out;
}

namespace {

/// Reads a small /proc (or cgroup) file (read_limited_at): at most about 1 MiB of it.
std::optional<std::string> read_file_if_any_at(int dir, const char* path) {
  return read_limited_at(dir, path, std::size_t{1} << 20, false);
}

/// read_file_if_any_at, empty on any failure.
std::string read_small_file_at(int dir, const char* path) {
  return read_file_if_any_at(dir, path).value_or(std::string());
}

/// Reads a small /proc file whole; empty on any failure.
std::string read_small_file(const std::string& path) {
  return read_small_file_at(AT_FDCWD, path.c_str());
}

/// `<root>/<pid>` followed by `file` (which starts with '/', or is empty).
std::string process_path(std::string_view root, std::int64_t pid, std::string_view file) {
  std::string path(root);
  path += '/';
  path += std::to_string(pid);
  path += file;
  return path;
}

std::int64_t parse_int(std::string_view text) {
  std::int64_t value = 0;
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

/// The value after `key` on its own line of a /proc "Key:\tvalue" file, if present.
std::optional<std::string_view> status_field(std::string_view status, std::string_view key) {
  for (std::string_view line : split_parts(status, '\n')) {
    if (line.starts_with(key) && line.size() > key.size() && line[key.size()] == ':') {
      const std::string_view value = line.substr(key.size() + 1);
      if (value.empty()) return std::nullopt;
      return value;
    }
  }
  return std::nullopt;
}

/// The whitespace-separated decimal numbers of a /proc field ("0\t1000\t1000\t1000"); empty
/// when it is not a list of numbers.
std::vector<std::int64_t> parse_ints(std::string_view text) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
    if (at == text.size()) break;
    std::int64_t value = 0;
    auto [end, error] = std::from_chars(text.data() + at, text.data() + text.size(), value);
    if (error != std::errc() || end == text.data() + at) return {};
    out.push_back(value);
    at = static_cast<std::size_t>(end - text.data());
  }
  return out;
}

/// Calls `visit` with every name of `directory` that is a decimal number of at least `least`;
/// false when it cannot be listed.
bool for_each_number(std::string_view directory, std::int64_t least,
                     const std::function<void(std::int64_t)>& visit) {
  DIR* dir = ::opendir(std::string(directory).c_str());
  if (dir == nullptr) return false;
  while (struct dirent* item = ::readdir(dir)) {
    std::int64_t number = 0;
    const char* end = item->d_name + std::strlen(item->d_name);
    auto parsed = std::from_chars(item->d_name, end, number);
    if (parsed.ec == std::errc() && parsed.ptr == end && number >= least) visit(number);
  }
  ::closedir(dir);
  return true;
}

/// Calls `visit` with the pid of every process in `<root>`; false when it cannot be listed.
bool for_each_process(std::string_view root, const std::function<void(std::int64_t)>& visit) {
  return for_each_number(root, 1, visit);
}

/// Calls `visit` with every open descriptor in `<fd_directory>` (0 included); false when it
/// cannot be listed.
bool for_each_descriptor(std::string_view fd_directory, const std::function<void(std::int64_t)>& visit) {
  return for_each_number(fd_directory, 0, visit);
}

/// read_file_if_any_at of a path of its own.
std::optional<std::string> read_file_if_any(const std::string& path) {
  return read_file_if_any_at(AT_FDCWD, path.c_str());
}

/// True when `pred` holds for one of the `separator`-separated parts of `text`.
template <class Pred>
bool any_part(std::string_view text, char separator, Pred pred) {
  for (const std::string_view part : split_parts(text, separator))
    if (pred(part)) return true;
  return false;
}

/// A mount point as mountinfo writes it, its octal escapes (`\040`) decoded.
std::string unescape_mount_point(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      const std::string_view digits = text.substr(i + 1, 3);
      if (digits.size() == 3 && std::all_of(digits.begin(), digits.end(),
                                             [](char c) { return c >= '0' && c <= '7'; })) {
        out += static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

/// Where the cgroup hierarchies that can freeze a process are mounted (from mountinfo):
/// every cgroup2 mount and every v1 mount carrying the freezer controller.
struct CgroupMounts {
  struct Mount {
    std::string root;   ///< the cgroup directory mounted (mountinfo's field 4)
    std::string point;  ///< where it is mounted
  };
  std::vector<Mount> unified;  ///< cgroup2
  std::vector<Mount> freezer;  ///< v1 freezer

  explicit CgroupMounts(std::string_view mountinfo) {
    for (const MountEntry& entry : parse_mountinfo(mountinfo)) {
      Mount mount{entry.root, unescape_mount_point(entry.mount_point)};
      if (entry.fstype == "cgroup2") unified.push_back(std::move(mount));
      else if (entry.fstype == "cgroup" &&
               any_part(entry.super_options, ',',
                        [](std::string_view option) { return option == "freezer"; }))
        freezer.push_back(std::move(mount));
    }
  }
};

/// The directory of cgroup `group` (a /proc/<pid>/cgroup path) under one of `mounts`, and
/// how many of its levels (the group and its ancestors) are visible there; nothing when no
/// mount shows it or the path climbs (`..`: outside our cgroup namespace).
std::optional<std::pair<std::string, std::size_t>> cgroup_directory(
    const std::vector<CgroupMounts::Mount>& mounts, std::string_view group) {
  if (!group.starts_with('/') || group.find("/..") != std::string_view::npos) return std::nullopt;
  for (const CgroupMounts::Mount& mount : mounts) {
    std::string_view root = mount.root;
    while (root.size() > 1 && root.ends_with('/')) root.remove_suffix(1);
    std::string_view rest = group;
    if (root != "/") {
      if (!rest.starts_with(root) || (rest.size() > root.size() && rest[root.size()] != '/'))
        continue;
      rest.remove_prefix(root.size());
    }
    while (rest.starts_with('/')) rest.remove_prefix(1);
    std::size_t levels = rest.empty() ? 0 : 1 + std::size_t(std::ranges::count(rest, '/'));
    // A mount of a cgroup below the hierarchy's root shows that cgroup as a level too.
    if (root != "/") ++levels;
    std::string directory = mount.point;
    if (!rest.empty()) directory += '/' + std::string(rest);
    return std::pair{std::move(directory), levels};
  }
  return std::nullopt;
}

/// One look at the cgroup hierarchies for one walk of the process table: processes share
/// cgroups, so each file is read once.
class FreezeReader {
 public:
  explicit FreezeReader(const CgroupMounts& mounts) : mounts_(mounts) {}

  /// Why the process whose /proc/<pid>/cgroup says `groups` may be frozen: frozen (the
  /// cgroup directory that says so in `where`), unreadable, or none.
  Pause look(std::string_view groups, std::string& where) {
    for (const std::string_view line : split_parts(groups, '\n')) {
      const std::size_t colon = line.find(':');
      const std::size_t second = colon == std::string_view::npos ? colon : line.find(':', colon + 1);
      if (second == std::string_view::npos) continue;
      const std::string_view controllers = line.substr(colon + 1, second - colon - 1);
      const std::string_view group = line.substr(second + 1);
      Pause found = Pause::none;
      if (controllers.empty()) found = unified(group, where);
      else if (any_part(controllers, ',', [](std::string_view c) { return c == "freezer"; }))
        found = v1_freezer(group, where);
      if (found != Pause::none) return found;
    }
    return Pause::none;
  }

 private:
  const std::optional<std::string>& file(const std::string& path) {
    auto [at, added] = files_.try_emplace(path);
    if (added) at->second = read_file_if_any(path);
    return at->second;
  }

  /// cgroup2: `cgroup.events` says `frozen 1` (a freeze of any ancestor, done), or
  /// `cgroup.freeze` is 1 in the group or a visible ancestor (a freeze in progress).
  Pause unified(std::string_view group, std::string& where) {
    auto directory = cgroup_directory(mounts_.unified, group);
    if (!directory) return Pause::unreadable;
    auto& [path, levels] = *directory;
    if (levels == 0) return Pause::none;  // the root cgroup cannot be frozen
    const auto& events = file(path + "/cgroup.events");
    if (!events) return Pause::unreadable;
    for (const std::string_view line : split_parts(*events, '\n'))
      if (line == "frozen 1") {
        where = path;
        return Pause::frozen;
      }
    std::string level = path;
    for (std::size_t i = 0; i < levels; ++i) {
      const auto& freeze = file(level + "/cgroup.freeze");
      // Kernels before 5.2 have no cgroup.freeze, and no cgroup2 freezer: nothing to read.
      if (freeze && freeze->starts_with('1')) {
        where = level;
        return Pause::frozen;
      }
      level.erase(level.rfind('/'));
    }
    return Pause::none;
  }

  /// The v1 freezer: `freezer.state` FROZEN or FREEZING in the group or a visible ancestor.
  Pause v1_freezer(std::string_view group, std::string& where) {
    auto directory = cgroup_directory(mounts_.freezer, group);
    if (!directory) return Pause::unreadable;
    auto& [path, levels] = *directory;
    std::string level = path;
    for (std::size_t i = 0; i < levels; ++i) {
      const auto& state = file(level + "/freezer.state");
      if (!state) return Pause::unreadable;
      if (state->starts_with("FROZEN") || state->starts_with("FREEZING")) {
        where = level;
        return Pause::frozen;
      }
      level.erase(level.rfind('/'));
    }
    return Pause::none;
  }

  const CgroupMounts& mounts_;
  std::unordered_map<std::string, std::optional<std::string>> files_;
};

/// True when a NUL-separated argument list or NODE_OPTIONS value asks for an inspector:
/// a word starting with `--inspect`.
bool asks_for_inspector(std::string_view words, char separator) {
  return any_part(words, separator, [](std::string_view word) {
    return word.starts_with("--inspect");
  });
}

/// Whether the environment (NUL-separated NAME=VALUE) has NODE_OPTIONS asking for an
/// inspector.
bool node_options_inspect(std::string_view environment) {
  constexpr std::string_view name = "NODE_OPTIONS=";
  for (const std::string_view entry : split_parts(environment, '\0'))
    if (entry.starts_with(name) && asks_for_inspector(entry.substr(name.size()), ' ')) return true;
  return false;
}

/// Why process `pid` may be paused (Pause), from its stat, status, command line,
/// environment and cgroups; `tracer` and `where` filled when they tell. Nothing when it is a
/// kernel thread or gone.
std::optional<Pause> pause_of(std::string_view root, std::int64_t pid, FreezeReader& freezes,
                              std::int64_t& tracer, std::string& where) {
  const std::string directory = process_path(root, pid, "");
  const std::optional<std::string> stat_text = read_file_if_any(directory + "/stat");
  const std::optional<StatLine> stat = stat_text ? parse_stat_line(*stat_text) : std::nullopt;
  if (!stat || stat->state == '?') {
    // Gone since it was listed, or there and unreadable (which may hide any state).
    if (::access(directory.c_str(), F_OK) != 0) return std::nullopt;
    return Pause::unreadable;
  }
  // A kernel thread never holds a guard: passed over before anything else is read. A
  // process whose flags cannot be read counts as a user process.
  if (stat->flags && (*stat->flags & kernel_thread_flag) != 0) return std::nullopt;
  if (stat->state == 'T') return Pause::stopped;
  if (stat->state == 't') return Pause::traced;
  if (stat->state == 'D') return Pause::disk_sleep;
  if (stat->state == 'Z' || stat->state == 'X') return Pause::none;
  const std::optional<std::string> status = read_file_if_any(directory + "/status");
  if (!status) return ::access(directory.c_str(), F_OK) == 0 ? std::optional(Pause::unreadable) : std::nullopt;
  tracer = parse_int(status_field(*status, "TracerPid").value_or(""));
  if (tracer != 0) return Pause::traced;
  const std::optional<std::string> groups = read_file_if_any(directory + "/cgroup");
  if (!groups) return ::access(directory.c_str(), F_OK) == 0 ? std::optional(Pause::unreadable) : std::nullopt;
  if (const Pause frozen = freezes.look(*groups, where); frozen != Pause::none) return frozen;
  if (asks_for_inspector(read_small_file(directory + "/cmdline"), '\0')) return Pause::inspector;
  // Another account's environment is not readable: its command line tells what it can.
  if (node_options_inspect(read_small_file(directory + "/environ"))) return Pause::inspector;
  return Pause::none;
}
}  // namespace

std::optional<StatLine> parse_stat_line(std::string_view text) {
  const std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string_view::npos) return std::nullopt;
  StatLine line;
  const std::size_t open_paren = text.find('(');
  if (open_paren != std::string_view::npos && open_paren < close_paren)
    line.comm = std::string(text.substr(open_paren + 1, close_paren - open_paren - 1));
  // Fields after the command: 3 state, 4 ppid, ... 9 flags, ... 22 starttime.
  const std::string_view rest = text.substr(close_paren + 1);
  std::vector<std::string_view> fields;
  std::size_t at = 0;
  while (at < rest.size() && fields.size() < 20) {
    while (at < rest.size() && rest[at] == ' ') ++at;
    std::size_t end = rest.find(' ', at);
    if (end == std::string_view::npos) end = rest.size();
    if (end > at) fields.push_back(rest.substr(at, end - at));
    at = end;
  }
  if (!fields.empty()) line.state = fields[0][0];
  if (fields.size() >= 7) line.flags = parse_int(fields[6]);
  if (fields.size() >= 20) line.start_ticks = parse_int(fields[19]);
  return line;
}

namespace {
/// A /proc/<pid>/cmdline as one line: its arguments joined by spaces (trailing NULs dropped).
std::string command_line(std::string cmdline) {
  while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  return cmdline;
}
}  // namespace

std::optional<ProcessInfo> read_process(std::string_view root, std::int64_t pid,
                                        std::int64_t boot_time_ns) {
  if (pid <= 0 || pid > INT_MAX) return std::nullopt;
  const int dir = ::open(process_path(root, pid, "").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return std::nullopt;
  const std::string stat_text = read_small_file_at(dir, "stat");
  const std::optional<StatLine> stat = parse_stat_line(stat_text);
  if (!stat || !stat->start_ticks) {
    ::close(dir);
    return std::nullopt;
  }
  ProcessInfo info;
  info.state = stat->state;
  info.kernel_thread = stat->flags && (*stat->flags & kernel_thread_flag) != 0;
  static const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  info.start_time_ns = boot_time_ns + *stat->start_ticks * (1'000'000'000 / ticks_per_second);
  info.pid = pid;

  const std::string status = read_small_file_at(dir, "status");
  info.tgid = parse_int(status_field(status, "Tgid").value_or(""));
  info.uid = static_cast<std::uint32_t>(parse_int(status_field(status, "Uid").value_or("")));
  info.threads = parse_int(status_field(status, "Threads").value_or(""));
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
  info.tracer_pid = parse_int(status_field(status, "TracerPid").value_or(""));
  if (info.tracer_pid > 0 && info.tracer_pid <= INT_MAX) {
    // Rare (a debugger or strace): one more read, so a refusal can name who to detach.
    info.tracer_command = command_line(read_small_file(process_path(root, info.tracer_pid, "/cmdline")));
  }
  struct stat mounts {};
  if (::fstatat(dir, "ns/mnt", &mounts, 0) == 0) info.mount_namespace = static_cast<std::uint64_t>(mounts.st_ino);
  else info.mount_info = read_limited_at(dir, "mountinfo", std::size_t{64} << 20, true);  // proof 4's other way

  info.command = command_line(read_small_file_at(dir, "cmdline"));
  ::close(dir);
  if (info.command.empty() && stat->comm) {
    // Appended rather than `"[" + s + "]"`: GCC 12 at -O3 reports a false -Wrestrict inside
    // libstdc++'s operator+(const char*, string&&) (GCC bug 105329).
    info.command.reserve(stat->comm->size() + 2);
    info.command.append(1, '[').append(*stat->comm).append(1, ']');
  }
  return info;
}

std::int64_t read_boot_time_ns(std::string_view root) {
  const std::string stat = read_small_file(std::string(root) + "/stat");
  std::int64_t seconds = 0;
  const std::size_t at = stat.find("\nbtime ");
  if (at != std::string::npos) seconds = parse_int(std::string_view(stat).substr(at + 7));
  return seconds * 1'000'000'000;
}

std::vector<ProcessInfo> read_namespace_view(std::string_view root, std::int64_t boot_time_ns) {
  std::vector<ProcessInfo> view;
  std::vector<std::int64_t> nested;
  for_each_process(root, [&](std::int64_t pid) {
    // A process of the initial PID namespace has one NSpid field: its pid in the /proc that
    // lists it (only the initial namespace's /proc lists it). One readlink tells, a fraction
    // of what generating its status costs; when the link cannot be read, status.
    char link[64];
    const ssize_t size = ::readlink(process_path(root, pid, "/ns/pid").c_str(), link, sizeof link);
    std::uint64_t inode = 0;
    if (size > 6 && std::string_view(link, 5) == "pid:[" && link[size - 1] == ']') {
      const auto parsed = std::from_chars(link + 5, link + size - 1, inode);
      if (parsed.ec == std::errc() && parsed.ptr == link + size - 1 &&
          inode == initial_pid_namespace_inode)
        return;
    }
    // Most processes live in our namespace only: one read of status tells.
    const std::string status = read_small_file(process_path(root, pid, "/status"));
    auto nspid = status_field(status, "NSpid");
    if (nspid && parse_ints(*nspid).size() > 1) nested.push_back(pid);
  });
  for (std::int64_t pid : nested) {
    auto info = read_process(root, pid, boot_time_ns);  // gone since: left out
    if (info && info->nspid.size() > 1) view.push_back(std::move(*info));
  }
  return view;
}

std::optional<std::vector<ProcessInfo>> read_paused_processes(std::string_view root,
                                                              std::int64_t boot_time_ns) {
  const CgroupMounts mounts(read_small_file(std::string(root) + "/self/mountinfo"));
  FreezeReader freezes(mounts);
  std::vector<ProcessInfo> paused;
  const bool listed = for_each_process(root, [&](std::int64_t pid) {
    std::int64_t tracer = 0;
    std::string where;
    const std::optional<Pause> pause = pause_of(root, pid, freezes, tracer, where);
    if (!pause || *pause == Pause::none) return;
    std::optional<ProcessInfo> info = read_process(root, pid, boot_time_ns);
    if (!info) {
      if (*pause != Pause::unreadable) return;  // gone since
      info.emplace();
      info->pid = pid;
    }
    info->pause = *pause;
    if (info->tracer_pid != tracer) info->tracer_command.clear();  // re-attached between the reads
    info->tracer_pid = tracer;
    info->frozen_cgroup = std::move(where);
    paused.push_back(std::move(*info));
  });
  if (!listed) return std::nullopt;
  return paused;
}

}  // namespace apnea_locks::detail

namespace apnea_locks::detail {

namespace {

/// `path`'s last component, a trailing " (deleted)" dropped.
std::string_view base_name(std::string_view path) {
  if (path.ends_with(" (deleted)")) path.remove_suffix(10);
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// readlink(2) of `path`; nothing when it cannot be read.
std::optional<std::string> read_link(const std::string& path) {
  char buffer[4096];
  const ssize_t size = ::readlink(path.c_str(), buffer, sizeof buffer);
  if (size < 0) return std::nullopt;
  return std::string(buffer, static_cast<std::size_t>(size));
}

/// Why the process whose /proc directory is `directory` may run Apnea (PROTOCOL.md section
/// 10): the first sign found, or "unreadable: WHAT" when a file that could tell cannot be
/// read; "" when nothing says so. Fills `process`'s executable and environment.
std::string runtime_sign(const std::string& directory, RuntimeProcess& process) {
  std::string unreadable;
  const auto cannot = [&](const char* what) {
    if (unreadable.empty()) unreadable = std::string("unreadable: ") + what;
  };
  // The executable and the environment are kept whatever the sign (run computes the area
  // such a process would lock from its environment).
  const std::optional<std::string> exe = read_link(directory + "/exe");
  if (!exe) cannot("exe");
  else process.executable = *exe;
  const std::optional<std::string> environment = read_file_if_any(directory + "/environ");
  if (!environment) cannot("environ");
  else process.environment = *environment;
  if (exe && recognised_runtime(*exe)) return fmt::format("exe {}", base_name(*exe));
  if (environment) {
    for (const std::string_view entry : split_parts(*environment, '\0'))
      if (entry.starts_with("ELECTRON_RUN_AS_NODE=")) return "environ ELECTRON_RUN_AS_NODE";
  }
  if (exe) {
    // An Electron application (an editor hosting extensions) keeps its code beside it.
    const std::string_view executable = *exe;
    const std::string folder(executable.substr(0, executable.rfind('/') + 1));
    struct stat st {};
    if (::stat((folder + "resources/app.asar").c_str(), &st) == 0) return "beside resources/app.asar";
    if (::stat((folder + "resources/app").c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return "beside resources/app/";
  }
  if (const std::optional<std::string> maps = read_file_if_any(directory + "/maps")) {
    for (const std::string_view line : split_parts(*maps, '\n')) {
      const std::size_t slash = line.find('/');
      if (slash == std::string_view::npos) continue;
      const std::string_view mapped = line.substr(slash);
      const std::string_view base = base_name(mapped);
      if (recognised_runtime(mapped) || base.starts_with("libnode.so") ||
          base == "snapshot_blob.bin" || base == "v8_context_snapshot.bin")
        return fmt::format("maps {}", base);
    }
  } else {
    cannot("maps");
  }
  bool asar = false;
  const bool listed = for_each_descriptor(directory + "/fd", [&](std::int64_t fd) {
    if (asar) return;
    const auto target = read_link(directory + "/fd/" + std::to_string(fd));
    asar = target && base_name(*target).ends_with(".asar");
  });
  if (!listed) cannot("fd");
  if (asar) return "fd *.asar";
  return unreadable;
}

}  // namespace

namespace {

/// A file server or sync tool, by its command name (at most 15 bytes) and, for qemu, its
/// command line (PROTOCOL.md section 9, the other-kernel precondition).
bool file_server(std::string_view comm, std::string_view cmdline) {
  for (const std::string_view name :
       {"virtiofsd", "runsc", "sftp-server", "smbd", "ksmbd", "syncthing", "mutagen", "unison"})
    if (comm.starts_with(name)) return true;
  return comm.starts_with("qemu") && (cmdline.find("virtfs") != std::string_view::npos ||
                                      cmdline.find("fsdev") != std::string_view::npos ||
                                      cmdline.find("9p") != std::string_view::npos);
}

/// `path` (a link's target) is `area`, above it or inside it.
bool reaches(std::string_view path, std::string_view area) {
  if (path.ends_with(" (deleted)")) path.remove_suffix(10);
  if (!path.starts_with('/')) return false;  // a socket, a pipe, an anonymous inode
  const auto within = [](std::string_view inner, std::string_view outer) {
    return outer == "/" || inner == outer ||
           (inner.starts_with(outer) && inner.size() > outer.size() && inner[outer.size()] == '/');
  };
  return within(area, path) || within(path, area);
}

/// How the file server whose /proc directory is `directory` reaches `area`, "" when it does
/// not; unreadable counts.
std::string how_it_reaches(const std::string& directory, std::string_view area) {
  const std::optional<std::string> cwd = read_link(directory + "/cwd");
  if (!cwd) return "its working directory cannot be read";
  if (reaches(*cwd, area)) return "working directory " + *cwd;
  std::string found;
  const bool listed = for_each_descriptor(directory + "/fd", [&](std::int64_t fd) {
    if (!found.empty()) return;
    const std::optional<std::string> target = read_link(directory + "/fd/" + std::to_string(fd));
    if (target && reaches(*target, area)) found = "open descriptor " + *target;
  });
  if (!listed) return "its open descriptors cannot be read";
  return found;
}

}  // namespace

std::optional<std::string> read_file_server_reaching(std::string_view root, std::string_view area) {
  std::string found;
  const bool listed = for_each_process(root, [&](std::int64_t pid) {
    if (!found.empty()) return;
    const std::string directory = process_path(root, pid, "");
    std::string comm = read_file_if_any(directory + "/comm").value_or("");
    if (comm.ends_with('\n')) comm.pop_back();
    const std::string cmdline =
        comm.starts_with("qemu") ? read_file_if_any(directory + "/cmdline").value_or("") : std::string();
    if (!file_server(comm, cmdline)) return;
    if (const std::string how = how_it_reaches(directory, area); !how.empty())
      found = fmt::format("{} (pid {}): {}", comm, pid, how);
  });
  if (!listed) return std::nullopt;
  return found;
}

std::optional<std::string> read_runtime_sign(std::string_view root, std::int64_t pid) {
  const std::string directory = process_path(root, pid, "");
  RuntimeProcess process;
  std::string sign = runtime_sign(directory, process);
  // Gone while it was read (its files vanish with it): nothing to say about it.
  if (!read_file_if_any(directory + "/stat")) return std::nullopt;
  return sign;
}

std::optional<std::vector<RuntimeProcess>> read_runtime_processes(std::string_view root,
                                                                  std::uint32_t uid) {
  std::vector<RuntimeProcess> found;
  const bool listed = for_each_process(root, [&](std::int64_t pid) {
    const std::string directory = process_path(root, pid, "");
    // Another account's process by all four uids (proof 4) is no possible owner of an area
    // that is not root's: passed over before anything else is read.
    const std::optional<std::string> status = read_file_if_any(directory + "/status");
    if (!status) return;  // gone (a process that vanished cannot own anything any more)
    const std::vector<std::int64_t> uids = parse_ints(status_field(*status, "Uid").value_or(""));
    if (uid != 0 && uids.size() == 4 &&
        std::none_of(uids.begin(), uids.end(), [&](std::int64_t u) { return u == std::int64_t{uid}; }))
      return;
    // A kernel thread runs no runtime.
    const std::optional<StatLine> stat = parse_stat_line(read_small_file(directory + "/stat"));
    if (stat && stat->flags && (*stat->flags & kernel_thread_flag) != 0) return;
    RuntimeProcess process;
    process.pid = pid;
    process.sign = runtime_sign(directory, process);
    if (process.sign.empty()) return;
    process.cwd = read_link(directory + "/cwd").value_or("");
    found.push_back(std::move(process));
  });
  if (!listed) return std::nullopt;
  return found;
}

}  // namespace apnea_locks::detail
