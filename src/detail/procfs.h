// Internals of the kernel's Processes (system.h): what the files of /proc say about a
// process, read from a /proc tree given by its root directory (tests pass a fixture tree).
// Not part of the library's interface (not installed); for src/ and the tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/system.h"

namespace apnea_locks::detail {

/// The kernel's /proc.
inline constexpr std::string_view default_proc_root = "/proc";

/// PF_KTHREAD in the `flags` field of a stat line: a kernel thread.
inline constexpr std::int64_t kernel_thread_flag = 0x00200000;

/// The fields of a /proc/<pid>/stat line the proofs use. The command (`comm`) may itself hold
/// spaces and parentheses: it runs from the first '(' to the last ')', and the numbered
/// fields follow that last ')'.
struct StatLine {
  /// The command between the first '(' and the last ')'; nothing when no '(' precedes it.
  std::optional<std::string> comm;
  char state = '?';                         ///< field 3 ('?' when the line ends at the ')')
  std::optional<std::int64_t> flags;        ///< field 9; nothing when the line stops before
  std::optional<std::int64_t> start_ticks;  ///< field 22, clock ticks after boot; ditto
};

/// Parses a stat line; nothing when it has no ')' closing the command. Pure.
std::optional<StatLine> parse_stat_line(std::string_view text);

/// What `<root>/<pid>` says about `pid`: stat, status (Tgid, Uid, Threads, NSpid) and
/// cmdline, every file read through one descriptor of the directory, so all describe the
/// same process even if its number is reused meanwhile (a read then fails). Nothing when
/// the pid is out of range, has no entry, or its stat line stops before the start time. A
/// missing status leaves its fields unknown; an empty cmdline (a kernel thread, a zombie)
/// becomes `[comm]`. The start time is `boot_time_ns` plus the start ticks.
std::optional<ProcessInfo> read_process(std::string_view root, std::int64_t pid,
                                        std::int64_t boot_time_ns);

/// The `btime` of `<root>/stat` in nanoseconds since the epoch; 0 when unknown.
std::int64_t read_boot_time_ns(std::string_view root);

/// Every process of `<root>` in a nested PID namespace (more than one `NSpid:` field), read
/// by read_process; a process whose `ns/pid` link names the initial PID namespace is passed
/// over without reading its status.
std::vector<ProcessInfo> read_namespace_view(std::string_view root, std::int64_t boot_time_ns);

/// Every user process of `<root>` that may be paused (Pause, system.h): state `T`, `t` or
/// `D`; a non-zero `TracerPid`; frozen, where `<root>/self/mountinfo` mounts cgroup2
/// (`cgroup.events` says `frozen 1`, or `cgroup.freeze` is 1 in its group or any visible
/// ancestor) or a v1 freezer (`freezer.state` FROZEN or FREEZING at any visible level); an
/// argument or NODE_OPTIONS word starting with `--inspect`; or unreadable (its stat, status
/// or cgroup, or a cgroup no mount shows). Read by read_process, `pause` set; an unreadable
/// one has only its pid. Kernel threads (PF_KTHREAD) are passed over before their cgroup is
/// read. Nothing when `<root>` cannot be listed.
std::optional<std::vector<ProcessInfo>> read_paused_processes(std::string_view root,
                                                              std::int64_t boot_time_ns);

/// Reads a /proc (or cgroup) file, `path` relative to the directory `dir` (or a path of its
/// own with AT_FDCWD), never through a symlink at its end nor blocking on a FIFO; nothing when
/// it cannot be opened or read. Past `limit` bytes it stops: with `whole`, nothing, else what
/// was read.
std::optional<std::string> read_limited_at(int dir, const char* path, std::size_t limit, bool whole);

/// System::runtime_sign, read from `<root>/<pid>`: why it may run Apnea, "" when nothing
/// says so; nothing when it has no entry there.
std::optional<std::string> read_runtime_sign(std::string_view root, std::int64_t pid);

/// System::file_server_reaching, read from `<root>`: the first file-server or sync process
/// whose working directory or an open descriptor is at, above or inside `area`, or cannot be
/// read. A process is one by its command name (`comm`): virtiofsd, runsc, sftp-server, smbd,
/// ksmbd, syncthing, mutagen, unison (each a prefix: `smbd-notifyd`, `mutagen-agent`), and
/// qemu with a 9p share (`virtfs`, `fsdev` or `9p` in its command line).
std::optional<std::string> read_file_server_reaching(std::string_view root, std::string_view area);

/// System::runtime_processes, read from `<root>`: every process that may run Apnea for an
/// area of uid `uid`, with why. Nothing when `<root>` cannot be listed.
std::optional<std::vector<RuntimeProcess>> read_runtime_processes(std::string_view root,
                                                                  std::uint32_t uid);

}  // namespace apnea_locks::detail
