// What the files of /proc say about a process: the parsing behind the kernel's Processes.
#include "detail/procfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <utility>

#include "apnea_locks/lock_area.h"
#include "detail/probe.h"
#include "detail/split.h"

namespace apnea_locks::detail {
namespace {

/// Reads a small /proc file whole (`path` relative to the directory `dir`, or a path of its
/// own with AT_FDCWD); empty on any failure.
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

/// Calls `visit` with the pid of every process in `<root>`; false when it cannot be listed.
bool for_each_process(std::string_view root, const std::function<void(std::int64_t)>& visit) {
  DIR* dir = ::opendir(std::string(root).c_str());
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

/// Whether each cgroup file read by in_frozen_cgroup said frozen, within one look at the
/// process table (processes share cgroups: each file is read once).
using FrozenFiles = std::unordered_map<std::string, bool>;

/// True when `pid` is in a frozen cgroup: cgroup v2 `cgroup.freeze` holding 1, or the v1
/// freezer's state FROZEN.
bool in_frozen_cgroup(std::string_view root, std::string_view cgroup_root, std::int64_t pid,
                      FrozenFiles& files) {
  auto frozen = [&](std::string file, std::string_view mark) {
    auto [at, added] = files.try_emplace(std::move(file), false);
    if (added) at->second = read_small_file(at->first).starts_with(mark);
    return at->second;
  };
  const std::string groups = read_small_file(process_path(root, pid, "/cgroup"));
  for (const std::string_view line : split_parts(groups, '\n')) {
    const std::size_t colon = line.find(':');
    const std::size_t second = colon == std::string_view::npos ? colon : line.find(':', colon + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(colon + 1, second - colon - 1);
    const std::string group(line.substr(second + 1));
    if (group.find("..") != std::string::npos) continue;
    if (controllers.empty()) {
      if (frozen(std::string(cgroup_root) + group + "/cgroup.freeze", "1")) return true;
    } else if (controllers.find("freezer") != std::string_view::npos) {
      if (frozen(std::string(cgroup_root) + "/freezer" + group + "/freezer.state", "FROZEN"))
        return true;
    }
  }
  return false;
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

  info.command = read_small_file_at(dir, "cmdline");
  ::close(dir);
  while (!info.command.empty() && info.command.back() == '\0') info.command.pop_back();
  for (char& c : info.command)
    if (c == '\0') c = ' ';
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
                                                              std::string_view cgroup_root,
                                                              std::int64_t boot_time_ns) {
  std::vector<std::int64_t> candidates;
  FrozenFiles frozen;
  const bool listed = for_each_process(root, [&](std::int64_t pid) {
    const std::optional<StatLine> stat =
        parse_stat_line(read_small_file(process_path(root, pid, "/stat")));
    if (!stat || stat->state == '?') return;
    // A kernel thread never holds a guard: passed over before its cgroup is read, which is
    // most of the table's cost. A process whose flags cannot be read counts as a user process.
    if (stat->flags && (*stat->flags & kernel_thread_flag) != 0) return;
    const bool stopped = stat->state == 'T' || stat->state == 't';
    if (stopped || in_frozen_cgroup(root, cgroup_root, pid, frozen)) candidates.push_back(pid);
  });
  if (!listed) return std::nullopt;
  std::vector<ProcessInfo> paused;
  for (std::int64_t pid : candidates) {
    auto info = read_process(root, pid, boot_time_ns);
    if (info) paused.push_back(std::move(*info));  // else gone since
  }
  return paused;
}

}  // namespace apnea_locks::detail

namespace apnea_locks::detail {

std::optional<std::vector<RuntimeProcess>> read_runtime_processes(std::string_view root,
                                                                  std::uint32_t uid) {
  std::vector<RuntimeProcess> found;
  const bool listed = for_each_process(root, [&](std::int64_t pid) {
    // The real uid first (one small read), then the executable's name, then the environment.
    const std::string status = read_small_file(process_path(root, pid, "/status"));
    const std::vector<std::int64_t> uids = parse_ints(status_field(status, "Uid").value_or(""));
    if (uids.empty() || uids.front() != static_cast<std::int64_t>(uid)) return;
    char link[4096];
    const ssize_t size = ::readlink(process_path(root, pid, "/exe").c_str(), link, sizeof link);
    if (size <= 0) return;
    std::string executable(link, static_cast<std::size_t>(size));
    if (!recognised_runtime(executable)) return;
    std::string environment = read_small_file(process_path(root, pid, "/environ"));
    if (environment.empty()) return;
    found.push_back(RuntimeProcess{pid, std::move(executable), std::move(environment)});
  });
  if (!listed) return std::nullopt;
  return found;
}

}  // namespace apnea_locks::detail
