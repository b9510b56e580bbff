// The seam: every call apnea-locks makes to the operating system.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace apnea_locks {

/// A syscall's result: the value, or the errno it failed with.
template <class T>
using SysResult = std::expected<T, std::error_code>;

/// What kind of filesystem object a path names (lstat semantics, links not followed).
enum class FileType { regular, directory, symlink, fifo, socket, block, character, unknown };

/// "file", "directory", "symlink", "fifo", "socket", "block-device", "char-device" or
/// "unknown".
std::string_view file_type_name(FileType type);

/// The parts of `struct stat` the protocol looks at.
struct FileStat {
  FileType type = FileType::unknown;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint32_t mode = 0;  ///< permission bits only (mode & 07777)
  std::uint32_t uid = 0;
  std::uint64_t nlink = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;  ///< wall-clock nanoseconds since the epoch
  std::int64_t ctime_ns = 0;  ///< last status change, wall-clock nanoseconds since the epoch
  /// Birth time (statx), wall-clock nanoseconds since the epoch; 0 where the filesystem (or
  /// the kernel) gives none.
  std::int64_t birth_ns = 0;
  /// The mount the object is on (statx STATX_MNT_ID); 0 when unknown. Device numbers mislead
  /// on overlayfs and btrfs; this does not.
  std::uint64_t mount_id = 0;

  /// True when both name the same filesystem object: the same device and inode, and the
  /// same birth time where both have one (inode numbers are handed out again at once, so
  /// device and inode alone may name a newer object).
  bool same_object(const FileStat& other) const {
    return dev == other.dev && ino == other.ino &&
           (birth_ns == 0 || other.birth_ns == 0 || birth_ns == other.birth_ns);
  }
  /// True when both name the same object of the same type, unchanged in between: the same
  /// mtime and ctime (a rename, a chmod or a write inside sets one of them).
  bool unchanged_since(const FileStat& other) const {
    return same_object(other) && type == other.type && mtime_ns == other.mtime_ns &&
           ctime_ns == other.ctime_ns;
  }
};

/// One directory entry as getdents returns it.
struct DirEntry {
  std::string name;
  FileType type = FileType::unknown;  ///< unknown when the filesystem does not say
};

/// What /proc says about a process id (Linux; other platforms fill what they can). A field
/// /proc did not give keeps its default, which no proof of death accepts (0 = unknown).
/// Why a process may be paused between two steps of a reclamation (PROTOCOL.md section 10,
/// the guard row): what System::paused_processes found.
enum class Pause {
  none,        ///< running or sleeping as usual
  stopped,     ///< state `T` (SIGSTOP, Ctrl-Z)
  traced,      ///< state `t`, or a non-zero `TracerPid`
  disk_sleep,  ///< state `D`: uninterruptible sleep
  frozen,      ///< its cgroup or an ancestor is frozen or freezing (v2 or the v1 freezer)
  inspector,   ///< started with `--inspect*` (command line or NODE_OPTIONS)
  unreadable,  ///< its state or cgroup could not be read: it may be any of the above
};

/// "stopped", "traced", "in uninterruptible sleep", "frozen", "under an inspector",
/// "unreadable" ("running" for none).
std::string_view pause_name(Pause pause);

struct ProcessInfo {
  char state = '?';               ///< 'R', 'S', 'Z', ... from /proc/<pid>/stat
  std::int64_t tgid = 0;          ///< thread group leader; differs from pid for a thread
  std::uint32_t uid = 0;          ///< real uid (uids[0] when uids_known)
  std::int64_t start_time_ns = 0; ///< wall-clock start, from boot time plus start ticks
  std::string command;            ///< command line, NULs shown as spaces; may be empty
  std::int64_t pid = 0;           ///< its pid in our namespace
  std::int64_t threads = 0;       ///< `Threads:` of /proc/<pid>/status; 0 = unknown
  /// Real, effective, saved and filesystem uid (`Uid:` of /proc/<pid>/status).
  std::array<std::uint32_t, 4> uids{};
  bool uids_known = false;        ///< all four `Uid:` fields were read
  /// The `NSpid:` fields: its pid in each PID namespace it belongs to, ours first, its own
  /// last. Empty when unknown (kernels before 4.1 have no `NSpid:`).
  std::vector<std::int64_t> nspid{};
  /// PF_KTHREAD is set in its stat flags: a kernel thread, which no user program runs as.
  bool kernel_thread = false;
  /// The inode of /proc/<pid>/ns/mnt, its mount namespace; nothing when it cannot be read
  /// (another account's process, without privilege). Proof 4 needs it to be ours, or
  /// `mount_info` to show no idmapped mount of the area's device.
  std::optional<std::uint64_t> mount_namespace{};
  /// The text of /proc/<pid>/mountinfo, read only when `mount_namespace` cannot be (any
  /// account may read it): what this process's mounts are, for proof 4.
  std::optional<std::string> mount_info{};
  /// Its tracer (`TracerPid` of /proc/<pid>/status; 0 when none) and the tracer's command
  /// line ("" when none or unreadable): who keeps a process in state `t` alive.
  std::int64_t tracer_pid = 0;
  std::string tracer_command{};
  /// Filled by paused_processes only: why it may be paused, and for a frozen one the cgroup
  /// directory that said so.
  Pause pause = Pause::none;
  std::string frozen_cgroup{};
  /// Filled for possible owners only (runtime_processes): its executable and its working
  /// directory.
  std::string executable{};
  std::string cwd{};
  /// Why it may run Apnea (RuntimeProcess::sign: "exe node", "maps libnode.so.108",
  /// "unreadable: maps", ...), "" when nothing says so (pid-not-runtime); nothing when not
  /// read. Filled for possible owners and for the carriers of a record's pids.
  std::optional<std::string> runtime_sign{};
};

/// A process that runs a recognised runtime (PROTOCOL.md section 10: Node, Bun, Deno,
/// Electron, apnea-locks), with its environment: where an Apnea of the account may compute
/// another lock area than ours.
struct RuntimeProcess {
  std::int64_t pid = 0;
  std::string executable;   ///< the target of /proc/<pid>/exe ("" when unreadable)
  std::string environment;  ///< /proc/<pid>/environ: NUL-separated NAME=VALUE ("" when unreadable)
  std::string cwd{};        ///< the target of /proc/<pid>/cwd ("" when unreadable)
  /// Why it counts (PROTOCOL.md section 10): "exe node", "maps libnode.so.108", "fd
  /// app.asar", "beside resources/app.asar", "environ ELECTRON_RUN_AS_NODE", or
  /// "unreadable: exe" (a process whose exe, maps, fd or environ cannot be read counts).
  std::string sign{};
};

/// A directory a survey reads entry by entry: its path, and a descriptor open on it (or -1).
/// Calls `*_in` resolve names relative to the descriptor when there is one, else relative
/// to `path` joined as `path/name` (an empty `path`: the name is a path of its own).
struct DirRef {
  int fd = -1;
  std::string path;
  /// `path/name`, or `name` when `path` is empty: the path the `*_in` calls stand for.
  std::string join(std::string_view name) const;
};

/// A user account from the passwd database.
struct Account {
  std::string name;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::string home;
};

/// The filesystem: paths used as given, and entries relative to an open directory (removing
/// an entry without a path race). Nothing here follows a final symlink unless the call says so.
class Files {
 public:
  virtual ~Files() = default;

  /// lstat(2).
  virtual SysResult<FileStat> lstat(const std::string& path) = 0;
  /// open(2) read-only with O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC: a symlink fails with ELOOP and
  /// a FIFO opens without blocking. Returns a descriptor to pass to fstat/pread/close.
  virtual SysResult<int> open_read(const std::string& path) = 0;
  /// fstat(2) of a descriptor from open_read.
  virtual SysResult<FileStat> fstat(int fd) = 0;
  /// pread(2): bytes read (0 at end of file).
  virtual SysResult<std::size_t> pread(int fd, std::span<char> buffer, std::int64_t offset) = 0;
  /// close(2).
  virtual void close(int fd) = 0;
  /// mkdir(2) with the given mode (the umask applies, as for Node).
  virtual SysResult<void> mkdir(const std::string& path, std::uint32_t mode) = 0;
  /// chmod(2) on a path that was just checked not to be a symlink.
  virtual SysResult<void> chmod(const std::string& path, std::uint32_t mode) = 0;
  /// rename(2).
  virtual SysResult<void> rename(const std::string& from, const std::string& to) = 0;
  /// rmdir(2).
  virtual SysResult<void> rmdir(const std::string& path) = 0;
  /// renameat(2) of `from` to `to`, both names in `dir` (relative to its descriptor when it
  /// has one, so a symlink swapped in for the directory's path is never followed).
  virtual SysResult<void> rename_in(const DirRef& dir, const std::string& from, const std::string& to) = 0;
  /// unlinkat(2) with AT_REMOVEDIR of the empty directory `name` in `dir`.
  virtual SysResult<void> rmdir_in(const DirRef& dir, const std::string& name) = 0;
  /// Removes a file or directory tree without following any symlink; a missing path is
  /// success (like Node's `rmSync(p, {recursive: true, force: true})`).
  virtual SysResult<void> remove_tree(const std::string& path) = 0;
  /// Creates `path` exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) with `mode`, writes `data`,
  /// fsyncs and closes it.
  virtual SysResult<void> write_new_file(const std::string& path, std::string_view data,
                                         std::uint32_t mode) = 0;
  /// Replaces the file at `path` with `data` so that readers see the old file or the new
  /// one, never part of either. The file written is always a new one: a temporary
  /// `.NAME.<random>.tmp` in the same directory (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0644 less
  /// the umask), fsynced, renamed over `path`, then the directory fsynced. Nothing is
  /// followed at `path`: a symlink there is itself replaced (its target is neither written
  /// nor consulted). A regular file it replaces passes on its rwx bits only (lstat, & 0777):
  /// setuid, setgid and sticky bits are never inherited. On failure the temporary is
  /// removed. (For --output-file; never used in a lock area.)
  virtual SysResult<void> replace_file(const std::string& path, std::string_view data) = 0;
  /// fsync(2) of a directory; filesystems that cannot (EINVAL, ENOTSUP) count as success.
  virtual SysResult<void> fsync_directory(const std::string& path) = 0;
  /// Streams the entries of a directory (without "." and ".."); `visit` returns false to
  /// stop early. Fails if the directory cannot be opened (a symlink is refused with ELOOP).
  virtual SysResult<void> list_directory(const std::string& path,
                                         const std::function<bool(const DirEntry&)>& visit) = 0;
  /// realpath(3).
  virtual SysResult<std::string> realpath(const std::string& path) = 0;

  /// open(2) of a directory with O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC: a symlink fails with
  /// ELOOP, anything but a directory with ENOTDIR. Close it with close().
  virtual SysResult<int> open_directory(const std::string& path) = 0;
  /// open_directory of `name` in `dir` (openat relative to its descriptor when it has one).
  virtual SysResult<int> open_directory_in(const DirRef& dir, const std::string& name) = 0;
  /// Streams the entries of the directory open as `fd` (without "." and ".."), read from
  /// its start, like list_directory; `visit` returns false to stop early. `fd` stays open
  /// (its read position is moved: one listing of a descriptor at a time).
  virtual SysResult<void> list_directory_at(
      int fd, const std::function<bool(const DirEntry&)>& visit) = 0;
  /// fstatat(2) of `name` in the directory `fd`, not following a symlink.
  virtual SysResult<FileStat> stat_at(int fd, const std::string& name) = 0;
  /// unlinkat(2) of the file `name` in the directory `fd` (never a directory).
  virtual SysResult<void> unlink_at(int fd, const std::string& name) = 0;
  /// lstat of `name` inside `dir`: fstatat(dir.fd, name, AT_SYMLINK_NOFOLLOW), or
  /// lstat(dir.join(name)) when `dir` has no descriptor. No default: a wrapper forwards it
  /// as it is, so what it stages runs on the descriptor-relative call users run.
  virtual SysResult<FileStat> lstat_in(const DirRef& dir, std::string_view name) = 0;
  /// open_read of `relative` inside `dir`. The kernel's version resolves it beneath the
  /// descriptor with no symlink in any component (openat2 RESOLVE_BENEATH |
  /// RESOLVE_NO_SYMLINKS: ELOOP, or EXDEV for `..`), where open_read refuses only a final
  /// symlink; open_read(dir.join(relative)) when `dir` has no descriptor. No default, as
  /// for lstat_in.
  virtual SysResult<int> open_read_in(const DirRef& dir, std::string_view relative) = 0;
  /// flock(2) of `fd` with LOCK_EX|LOCK_NB: fails with EWOULDBLOCK while another open file
  /// description holds it. close() drops it, and so does the kernel when the process ends.
  virtual SysResult<void> lock_exclusive(int fd) = 0;
};

/// The processes a pid may name: the kernel's answer to a signal and what /proc says
/// (the kernel's version reads /proc through src/detail/procfs.h).
class Processes {
 public:
  virtual ~Processes() = default;

  /// kill(pid, 0): 0 when the signal could be sent, else the errno (ESRCH, EPERM, ...).
  virtual int signal_probe(std::int64_t pid) = 0;
  /// What /proc says about `pid`, or nothing when it has no entry there.
  virtual std::optional<ProcessInfo> process_info(std::int64_t pid) = 0;
  /// Wall-clock time of the last boot, in nanoseconds since the epoch.
  virtual std::int64_t boot_time_ns() = 0;
  /// Every process in /proc whose `NSpid:` has more than one field (it lives in a nested
  /// PID namespace), with pid, nspid, state, threads, uids, tgid, start_time_ns and command;
  /// processes that vanish while being read are left out. One walk of /proc per call.
  virtual std::vector<ProcessInfo> namespace_view() = 0;
  /// Every user process that may be paused (Pause): stopped, traced, in uninterruptible
  /// sleep, frozen (wherever cgroup2 or the v1 freezer is mounted, any ancestor), started
  /// with an inspector, or unreadable; with the fields of process_info and `pause` set.
  /// Kernel threads (PF_KTHREAD) are left out, whatever a user process calls itself.
  /// Nothing when /proc cannot be listed. One walk of /proc.
  virtual std::optional<std::vector<ProcessInfo>> paused_processes() = 0;
  /// Every process that may run Apnea for an area of uid `uid` (PROTOCOL.md section 10,
  /// possible owners): one with `uid` among its four uids (any process when `uid` is 0) that
  /// runs a recognised runtime by its exe or any file it maps (recognised_runtime,
  /// lock_area.h), maps libnode.so*, snapshot_blob.bin or v8_context_snapshot.bin, has an
  /// `*.asar` open, has resources/app.asar or resources/app/ beside its executable, or has
  /// ELECTRON_RUN_AS_NODE in its environment; or whose exe, maps, fd or environ cannot be
  /// read. Nothing when /proc cannot be listed. One walk of /proc.
  virtual std::optional<std::vector<RuntimeProcess>> runtime_processes(std::uint32_t uid) = 0;
  /// Why the process `pid` may run Apnea (RuntimeProcess::sign, the same tests as
  /// runtime_processes), "" when nothing says so; nothing when it has no /proc entry.
  virtual std::optional<std::string> runtime_sign(std::int64_t pid) = 0;
};

/// The host facts a proof of death rests on (PROTOCOL.md section 9), read once per survey.
class Host {
 public:
  virtual ~Host() = default;

  /// The inode of /proc/self/ns/<kind> (`kind` is "pid" or "user"), by stat; nothing when it
  /// cannot be read.
  virtual std::optional<std::uint64_t> namespace_inode(std::string_view kind) = 0;
  /// The whole text of /proc/self/mountinfo; "" when it cannot be read (whole). It tells
  /// both the mount of the area (idmapped or not) and the options of /proc (hidepid).
  virtual std::string mount_info() = 0;
  /// statfs(2) f_type of the filesystem holding `path`; nothing when statfs fails.
  virtual std::optional<std::uint64_t> filesystem_magic(const std::string& path) = 0;
  /// statx(2) birth time of `path` (STATX_BTIME), in wall-clock nanoseconds; nothing when
  /// the filesystem does not report it.
  virtual std::optional<std::int64_t> birth_time_ns(const std::string& path) = 0;
  /// The text of /proc/fs/nfsd/exports (what this kernel's NFS server exports); nothing when
  /// there is none (no NFS server running).
  virtual std::optional<std::string> nfs_exports() = 0;
  /// A file-server or sync process (virtiofsd, qemu with a 9p share, runsc, sftp-server,
  /// smbd, ksmbd, syncthing, mutagen, unison) whose working directory or an open descriptor
  /// is at, above or inside `area` (a real path), or cannot be read: one phrase naming it
  /// ("smbd (pid 812): working directory /"), "" when none; nothing when the process table
  /// cannot be listed. Another kernel may reach the area through it (PROTOCOL.md section 9).
  virtual std::optional<std::string> file_server_reaching(const std::string& area) = 0;
};

/// This process: its ids, environment, clock, randomness and terminal.
class ThisProcess {
 public:
  virtual ~ThisProcess() = default;

  /// Wall-clock now, in nanoseconds since the epoch.
  virtual std::int64_t now_ns() = 0;
  /// Sleeps (tests make this return at once or run a step of a staged race).
  virtual void sleep(std::chrono::nanoseconds duration) = 0;
  /// getuid(2).
  virtual std::uint32_t uid() = 0;
  /// geteuid(2).
  virtual std::uint32_t euid() = 0;
  /// getpid(2).
  virtual std::int64_t pid() = 0;
  /// The audit login uid (/proc/self/loginuid): the uid that logged in to the session this
  /// process descends from, kept across su and sudo and settable only with CAP_AUDIT_CONTROL.
  /// Nothing when it is unset ((uid_t)-1: a daemon, a boot-time service) or unreadable.
  virtual std::optional<std::uint32_t> login_uid() = 0;
  /// getenv(3); nothing when unset.
  virtual std::optional<std::string> env(const std::string& name) = 0;
  /// Fills `out` with random bytes (getrandom(2)).
  virtual void random_bytes(std::span<std::byte> out) = 0;
  /// isatty(3) of a descriptor of this process (0, 1, 2).
  virtual bool is_terminal(int fd) = 0;
  /// The width in columns of the terminal on descriptor `fd` (ioctl TIOCGWINSZ); nothing
  /// when it is not a terminal or reports no width (0).
  virtual std::optional<int> terminal_columns(int fd) = 0;
};

/// The passwd database, and dropping privileges to one of its accounts (reclaim --user,
/// status/check --all-users).
class Accounts {
 public:
  virtual ~Accounts() = default;

  /// The passwd entry's home directory for `uid`.
  virtual std::optional<std::string> passwd_home(std::uint32_t uid) = 0;
  /// The passwd entry named `name`.
  virtual std::optional<Account> lookup_account(const std::string& name) = 0;
  /// The passwd entry of `uid`.
  virtual std::optional<Account> lookup_uid(std::uint32_t uid) = 0;
  /// Drops this process's privileges to `account` for good: supplementary groups, gid,
  /// then uid (setgroups, setgid, setuid). Fails unless privileged.
  virtual SysResult<void> become(const Account& account) = 0;
};

/// Where an audit record went.
enum class AuditSink {
  syslog,          ///< the syslog socket, /dev/log
  journal,         ///< journald's native socket, /run/systemd/journal/socket
  standard_error,  ///< neither took it: standard error, after a warning (audit.h)
  none,            ///< not even standard error
};

/// The system log, where every removal is recorded.
class SystemLog {
 public:
  virtual ~SystemLog() = default;

  /// One audit line (audit.h, printable ASCII already) to the system log: the syslog socket
  /// /dev/log (ident "apnea-locks" with the pid, facility LOG_AUTHPRIV, level LOG_NOTICE, as
  /// syslog(3) formats it), else journald's native socket (the same identifier, facility and
  /// priority as fields). `syslog` or `journal` when one took the datagram; `none` when
  /// neither did (syslog(3) would have lost it without a word).
  virtual AuditSink log_audit(const std::string& line) = 0;
};

/// Every operating-system call the tool makes, one role per base. `real_system()` talks to
/// the kernel; tests wrap it (see tests/staged_system.h) to stage races, crashes, process
/// tables and host facts. The real one may be called from several threads at once (a survey
/// with jobs > 1); a wrapper need not be, and is surveyed with one job.
class System : public Files,
               public Processes,
               public Host,
               public ThisProcess,
               public Accounts,
               public SystemLog {};

/// A descriptor opened through Files, closed through the same Files when this goes out of
/// scope.
class Descriptor {
 public:
  Descriptor() = default;
  /// Takes `fd` (a descriptor `files` opened), to close through `files`.
  Descriptor(Files& files, int fd) : files_(&files), fd_(fd) {}
  Descriptor(Descriptor&& other) noexcept
      : files_(other.files_), fd_(std::exchange(other.fd_, -1)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) {
      reset();
      files_ = other.files_;
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { reset(); }

  /// The descriptor, or -1 when none is held.
  int get() const { return fd_; }
  /// True when a descriptor is held.
  explicit operator bool() const { return fd_ >= 0; }
  /// Closes the descriptor held, if any.
  void reset() {
    if (fd_ >= 0) files_->close(fd_);
    fd_ = -1;
  }

 private:
  Files* files_ = nullptr;
  int fd_ = -1;
};

/// The first `limit` bytes of the file open as `fd` (fewer when it ends before), read with
/// Files::pread from offset 0; the error of the first read that fails.
SysResult<std::string> read_at_most(Files& files, int fd, std::size_t limit);

/// The process-wide System that talks to the kernel.
System& real_system();

/// "ENOENT: no such file or directory" style text for an error code, as Node prints it.
std::string errno_text(const std::error_code& error);

}  // namespace apnea_locks
