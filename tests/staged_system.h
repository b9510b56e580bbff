// A System for tests: real files in a temp folder, plus a hook before every call (to stage a
// race or a crash at an exact step), a staged process table and a staged clock. Every call of
// System is overridden here, grouped by its roles, and, unless staged, forwarded to the same
// call of the real one, so staged races run on the calls users run (the descriptor-relative
// ones included).
#pragma once

#include <sys/sysmacros.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/probe.h"
#include "apnea_locks/system.h"
#include "temp_dir.h"

namespace apnea_locks::testing {

/// One staged process: what kill(pid, 0) answers and what /proc would show.
struct StagedProcess {
  int signal_errno = 0;
  std::optional<ProcessInfo> info;
};

class StagedSystem : public System {
 public:
  explicit StagedSystem(System& real = real_system()) : real_(real) {}

  /// Runs before each call with the call's name and its path (or pid as text). Stage races
  /// here: publish, rename or remove entries through `real()`. lstat_in and open_read_in run
  /// it as "lstat" and "open" of the joined path `dir.join(name)`.
  std::function<void(std::string_view op, const std::string& path)> before;
  /// After this many calls have run, the process "crashes": every later call fails with
  /// ENOTRECOVERABLE and changes nothing, as if the process had died there.
  std::optional<int> crash_after;
  /// Calls made so far, as "op path".
  std::vector<std::string> calls;

  /// The process table. Pids not listed answer ESRCH and have no /proc entry, unless
  /// `real_processes` is set.
  std::map<std::int64_t, StagedProcess> processes;
  bool real_processes = false;
  /// A pid_max for tests to pick pids against (nothing asks for the current pid_max: it
  /// proves nothing).
  std::int64_t staged_pid_max = 4194304;
  /// Boot time: 2001-09-09, before any record a test writes.
  std::int64_t staged_boot_ns = 1'000'000'000'000'000'000;

  /// The host facts (System's Host calls, and namespace_view). They default to a healthy
  /// host in the initial namespaces, on tmpfs, whose clock has not stepped since boot; with
  /// `real_processes` set the real ones are used instead.
  std::map<std::string, std::uint64_t, std::less<>> namespace_inodes = {
      {"pid", 4026531836}, {"user", 4026531837}, {"mnt", 4026531841}};
  /// The super options of /proc, carried by mount_info() as its last /proc line.
  std::string staged_proc_options = "rw,nosuid,nodev,noexec,relatime";
  /// mountinfo text before that /proc line; unset: a line for the device of `staged_area`
  /// without `idmapped` when that is set (nothing when it cannot be read), else the real
  /// mountinfo.
  std::optional<std::string> staged_mount_info;
  /// The area whose device the default mountinfo lists.
  std::optional<std::string> staged_area;
  std::optional<std::uint64_t> staged_filesystem_magic = 0x01021994;  ///< tmpfs
  /// Birth time of /dev: unset is staged_boot_ns (no step); `dev_birth_known` false: unknown.
  std::optional<std::int64_t> staged_dev_birth_ns;
  bool dev_birth_known = true;
  std::optional<std::uint32_t> staged_euid;
  /// What runtime_processes() returns (nothing: /proc could not be listed).
  std::optional<std::vector<RuntimeProcess>> staged_runtime = std::vector<RuntimeProcess>{};
  /// What namespace_view() returns (processes in nested PID namespaces).
  std::vector<ProcessInfo> namespace_processes;
  /// What paused_processes() returns (nothing: /proc could not be listed).
  std::optional<std::vector<ProcessInfo>> staged_paused = std::vector<ProcessInfo>{};

  /// The clock: real time plus `clock_offset_ns` unless `fixed_now_ns` is set.
  std::optional<std::int64_t> fixed_now_ns;
  std::int64_t clock_offset_ns = 0;
  /// Sleeps made (they return at once after running `on_sleep`).
  std::vector<std::chrono::nanoseconds> sleeps;
  std::function<void()> on_sleep;

  std::optional<std::int64_t> staged_pid;
  std::map<std::string, std::optional<std::string>> environment;  ///< overrides getenv
  std::optional<std::string> staged_passwd_home;

  System& real() { return real_; }
  bool crashed() const { return crash_after && steps_ >= *crash_after; }

  // Files.
  SysResult<FileStat> lstat(const std::string& path) override {
    if (!step("lstat", path)) return dead();
    return restated(path, real_.lstat(path));
  }
  SysResult<int> open_read(const std::string& path) override {
    if (!step("open", path)) return dead();
    return opened(path, real_.open_read(path));
  }
  SysResult<FileStat> fstat(int fd) override {
    if (!step("fstat", std::to_string(fd))) return dead();
    auto found = open_paths_.find(fd);
    return found == open_paths_.end() ? real_.fstat(fd) : restated(found->second, real_.fstat(fd));
  }
  SysResult<std::size_t> pread(int fd, std::span<char> buffer, std::int64_t offset) override {
    if (!step("pread", std::to_string(fd))) return dead();
    return real_.pread(fd, buffer, offset);
  }
  void close(int fd) override {
    open_paths_.erase(fd);
    real_.close(fd);
  }
  SysResult<void> mkdir(const std::string& path, std::uint32_t mode) override {
    if (!step("mkdir", path)) return dead();
    return real_.mkdir(path, mode);
  }
  SysResult<void> chmod(const std::string& path, std::uint32_t mode) override {
    if (!step("chmod", path)) return dead();
    return real_.chmod(path, mode);
  }
  SysResult<void> rename(const std::string& from, const std::string& to) override {
    if (!step("rename", from + " -> " + to)) return dead();
    return real_.rename(from, to);
  }
  SysResult<void> rmdir(const std::string& path) override {
    if (!step("rmdir", path)) return dead();
    return real_.rmdir(path);
  }
  /// Staged as rename and rmdir of the joined paths, so a race staged on a path runs on the
  /// descriptor-relative call production makes.
  SysResult<void> rename_in(const DirRef& dir, const std::string& from, const std::string& to) override {
    if (!step("rename", dir.join(from) + " -> " + dir.join(to))) return dead();
    return real_.rename_in(dir, from, to);
  }
  SysResult<void> rmdir_in(const DirRef& dir, const std::string& name) override {
    if (!step("rmdir", dir.join(name))) return dead();
    return real_.rmdir_in(dir, name);
  }
  SysResult<void> remove_tree(const std::string& path) override {
    if (!step("remove_tree", path)) return dead();
    return real_.remove_tree(path);
  }
  SysResult<void> write_new_file(const std::string& path, std::string_view data,
                                 std::uint32_t mode) override {
    if (!step("write_new_file", path)) return dead();
    return real_.write_new_file(path, data, mode);
  }
  SysResult<void> replace_file(const std::string& path, std::string_view data) override {
    if (!step("replace_file", path)) return dead();
    return real_.replace_file(path, data);
  }
  SysResult<void> fsync_directory(const std::string& path) override {
    if (!step("fsync_directory", path)) return dead();
    return real_.fsync_directory(path);
  }
  SysResult<void> list_directory(const std::string& path,
                                 const std::function<bool(const DirEntry&)>& visit) override {
    if (!step("list_directory", path)) return dead();
    return real_.list_directory(path, visit);
  }
  SysResult<std::string> realpath(const std::string& path) override {
    if (!step("realpath", path)) return dead();
    return real_.realpath(path);
  }
  SysResult<int> open_directory(const std::string& path) override {
    if (!step("open_directory", path)) return dead();
    return opened(path, real_.open_directory(path));
  }
  SysResult<int> open_directory_in(const DirRef& dir, const std::string& name) override {
    if (!step("open_directory", dir.join(name))) return dead();
    return opened(dir.join(name), real_.open_directory_in(dir, name));
  }
  SysResult<void> list_directory_at(int fd, const std::function<bool(const DirEntry&)>& visit) override {
    if (!step("list_directory_at", std::to_string(fd))) return dead();
    return real_.list_directory_at(fd, visit);
  }
  SysResult<FileStat> stat_at(int fd, const std::string& name) override {
    if (!step("stat_at", name)) return dead();
    return real_.stat_at(fd, name);
  }
  SysResult<void> unlink_at(int fd, const std::string& name) override {
    if (!step("unlink_at", name)) return dead();
    return real_.unlink_at(fd, name);
  }
  /// Staged as lstat of `dir.join(name)` (the same op and path a race is staged on), then
  /// run as the real lstat_in: relative to the descriptor, as users run it.
  SysResult<FileStat> lstat_in(const DirRef& dir, std::string_view name) override {
    if (!step("lstat", dir.join(name))) return dead();
    return restated(dir.join(name), real_.lstat_in(dir, name));
  }
  /// Staged as open_read of `dir.join(relative)` ("open"), then run as the real
  /// open_read_in (beneath the descriptor, no symlink in any component).
  SysResult<int> open_read_in(const DirRef& dir, std::string_view relative) override {
    if (!step("open", dir.join(relative))) return dead();
    return opened(dir.join(relative), real_.open_read_in(dir, relative));
  }
  SysResult<void> lock_exclusive(int fd) override {
    if (!step("lock_exclusive", std::to_string(fd))) return dead();
    return real_.lock_exclusive(fd);
  }

  // Processes.
  int signal_probe(std::int64_t pid) override {
    if (!step("kill", std::to_string(pid))) return ENOTRECOVERABLE;
    if (real_processes) return real_.signal_probe(pid);
    auto found = processes.find(pid);
    return found == processes.end() ? ESRCH : found->second.signal_errno;
  }
  std::optional<ProcessInfo> process_info(std::int64_t pid) override {
    if (!step("proc", std::to_string(pid))) return std::nullopt;
    if (real_processes) return real_.process_info(pid);
    auto found = processes.find(pid);
    if (found == processes.end()) return std::nullopt;
    std::optional<ProcessInfo> info = found->second.info;
    if (info && info->pid == 0) info->pid = pid;
    return info;
  }
  std::int64_t boot_time_ns() override {
    return real_processes ? real_.boot_time_ns() : staged_boot_ns;
  }
  std::vector<ProcessInfo> namespace_view() override {
    if (!step("ns_view", "")) return {};
    return real_processes ? real_.namespace_view() : namespace_processes;
  }
  std::optional<std::vector<ProcessInfo>> paused_processes() override {
    if (!step("paused", "")) return std::nullopt;
    return real_processes ? real_.paused_processes() : staged_paused;
  }

  // Host.
  std::optional<std::vector<RuntimeProcess>> runtime_processes(std::uint32_t uid) override {
    if (!step("runtime_processes", std::to_string(uid))) return std::nullopt;
    return real_processes ? real_.runtime_processes(uid) : staged_runtime;
  }
  /// A staged process's `info->runtime_sign` (nothing: not read, so it may be a runtime).
  std::optional<std::string> runtime_sign(std::int64_t pid) override {
    if (!step("runtime", std::to_string(pid))) return std::nullopt;
    if (real_processes) return real_.runtime_sign(pid);
    auto found = processes.find(pid);
    if (found == processes.end() || !found->second.info) return std::nullopt;
    return found->second.info->runtime_sign;
  }
  std::optional<std::uint64_t> namespace_inode(std::string_view kind) override {
    ++namespace_inode_reads;
    if (real_processes) return real_.namespace_inode(kind);
    auto found = namespace_inodes.find(kind);
    if (found == namespace_inodes.end()) return std::nullopt;
    return found->second;
  }
  /// The staged mountinfo (see staged_mount_info) followed by a /proc mount whose super
  /// options are `staged_proc_options`: the last /proc listed is the one that counts.
  std::string mount_info() override {
    ++mount_info_reads;
    if (real_processes) return real_.mount_info();
    std::string text;
    if (staged_mount_info) {
      text = *staged_mount_info;
    } else if (!staged_area) {
      text = real_.mount_info();
    } else if (auto st = real_.lstat(*staged_area)) {
      text = mount_line(*st, "rw,relatime");
    }
    return text + proc_mount_line(staged_proc_options);
  }
  std::optional<std::uint64_t> filesystem_magic(const std::string& path) override {
    return real_processes ? real_.filesystem_magic(path) : staged_filesystem_magic;
  }
  /// What nfs_exports() returns (nothing: no NFS server).
  std::optional<std::string> staged_nfs_exports;
  /// What file_server_reaching() returns ("": none reaches the area).
  std::optional<std::string> staged_file_server = std::string();
  std::optional<std::string> file_server_reaching(const std::string& area) override {
    return real_processes ? real_.file_server_reaching(area) : staged_file_server;
  }
  std::optional<std::string> nfs_exports() override {
    return real_processes ? real_.nfs_exports() : staged_nfs_exports;
  }
  std::optional<std::int64_t> birth_time_ns(const std::string& path) override {
    if (real_processes) return real_.birth_time_ns(path);
    if (!dev_birth_known) return std::nullopt;
    return staged_dev_birth_ns.value_or(staged_boot_ns);
  }

  /// A mountinfo line mounting proc at /proc with super options `options`, on device 0:0
  /// (which the kernel gives no filesystem, so it is never an area's).
  static std::string proc_mount_line(std::string_view options) {
    return "22 1 0:0 / /proc rw,nosuid,nodev,noexec,relatime shared:2 - proc proc " +
           std::string(options) + "\n";
  }
  /// A mountinfo line mounting the device of `st` at /mnt with per-mount `options`.
  static std::string mount_line(const FileStat& st, std::string_view options) {
    return "30 1 " + std::to_string(::major(static_cast<dev_t>(st.dev))) + ":" +
           std::to_string(::minor(static_cast<dev_t>(st.dev))) + " / /mnt " + std::string(options) +
           " shared:1 - tmpfs tmpfs rw\n";
  }

  // ThisProcess.
  std::int64_t now_ns() override {
    return fixed_now_ns ? *fixed_now_ns : real_.now_ns() + clock_offset_ns;
  }
  void sleep(std::chrono::nanoseconds duration) override {
    sleeps.push_back(duration);
    if (fixed_now_ns) *fixed_now_ns += duration.count();
    if (on_sleep) on_sleep();
  }
  std::uint32_t uid() override { return real_.uid(); }
  std::uint32_t euid() override { return staged_euid.value_or(real_.euid()); }
  std::int64_t pid() override { return staged_pid ? *staged_pid : real_.pid(); }
  std::optional<std::uint32_t> login_uid() override { return staged_login_uid; }
  std::optional<std::string> env(const std::string& name) override {
    auto found = environment.find(name);
    if (found != environment.end()) return found->second;
    return real_.env(name);
  }
  void random_bytes(std::span<std::byte> out) override { real_.random_bytes(out); }
  bool is_terminal(int fd) override { return terminal.value_or(real_.is_terminal(fd)); }
  std::optional<int> terminal_columns(int fd) override {
    return terminal ? terminal_width : real_.terminal_columns(fd);
  }

  // Accounts.
  std::optional<std::string> passwd_home(std::uint32_t uid) override {
    return staged_passwd_home ? staged_passwd_home : real_.passwd_home(uid);
  }
  std::optional<Account> lookup_account(const std::string& name) override {
    auto found = accounts.find(name);
    if (found != accounts.end()) return found->second;
    return real_.lookup_account(name);
  }
  std::optional<Account> lookup_uid(std::uint32_t uid) override {
    for (const auto& [name, account] : accounts)
      if (account.uid == uid) return account;
    return real_.lookup_uid(uid);
  }
  SysResult<void> become(const Account& account) override {
    became.push_back(account);
    return {};
  }

  // SystemLog.
  AuditSink log_audit(const std::string& line) override {
    if (audit_sink == AuditSink::syslog || audit_sink == AuditSink::journal) audit_lines.push_back(line);
    return audit_sink;
  }

  /// Staged answers for is_terminal (with terminal_width for terminal_columns while
  /// `terminal` is staged), lookup_account; become() only records.
  std::optional<bool> terminal;
  std::optional<int> terminal_width;
  std::map<std::string, Account> accounts;
  std::vector<Account> became;
  /// Calls of namespace_inode (gather_host's first host fact): how often the host was read.
  int namespace_inode_reads = 0;
  /// Calls of mount_info: how often mountinfo was read.
  int mount_info_reads = 0;
  /// The audit lines sent to the system log (never to the real one), and where log_audit
  /// says they went (`none`: no log took them).
  std::vector<std::string> audit_lines;
  AuditSink audit_sink = AuditSink::syslog;
  /// What login_uid says (never the real one: the records must not depend on the session
  /// the tests run in).
  std::optional<std::uint32_t> staged_login_uid;
  /// Rewrites what lstat says of a path (both lstat and lstat_in): to stage what a real
  /// filesystem may do, such as ext4 handing a removed directory's inode number to the
  /// next mkdir at once.
  std::function<void(const std::string& path, FileStat& stat)> restat;

  /// Number of calls whose name is `op`.
  int count(std::string_view op) const {
    int n = 0;
    for (const auto& call : calls)
      if (std::string_view(call).substr(0, call.find(' ')) == op) ++n;
    return n;
  }

 private:
  /// Remembers which path a descriptor was opened on, so that fstat is restated too.
  SysResult<int> opened(const std::string& path, SysResult<int> fd) {
    if (fd) open_paths_[*fd] = path;
    return fd;
  }
  SysResult<FileStat> restated(const std::string& path, SysResult<FileStat> stat) {
    if (stat && restat) restat(path, *stat);
    return stat;
  }
  bool step(std::string_view op, const std::string& path) {
    if (crashed()) return false;
    ++steps_;
    calls.push_back(std::string(op) + " " + path);
    if (before) before(op, path);
    return true;
  }
  static std::unexpected<std::error_code> dead() {
    return std::unexpected(std::error_code(ENOTRECOVERABLE, std::generic_category()));
  }

  System& real_;
  int steps_ = 0;
  std::map<int, std::string> open_paths_;  ///< what each open descriptor was opened on
};

/// The mount namespace of a staged host and of the processes staged in it (proof 4 needs a
/// carrier to share it).
inline constexpr std::uint64_t staged_mount_namespace = 4026531841;

/// What gather_host says about a healthy host: initial namespaces, a complete process table,
/// a local filesystem without idmapped mounts, and a clock that has not stepped since boot.
inline HostFacts healthy_host(std::int64_t boot_time_ns = 1'000'000'000'000'000'000) {
  HostFacts host;
  host.mount_namespace = staged_mount_namespace;
  host.initial_pid_namespace = true;
  host.initial_user_namespace = true;
  host.process_table_complete = true;
  host.filesystem = "tmpfs";
  host.local_filesystem = true;
  host.idmapped = false;
  host.boot_time_ns = boot_time_ns;
  host.dev_birth_ns = boot_time_ns;
  return host;
}


}  // namespace apnea_locks::testing
