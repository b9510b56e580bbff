// Internals of probe.h: the parsing behind the host facts and the steps of judge_death.
// Not part of the library's interface (not installed); for src/ and the tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/probe.h"
#include "apnea_locks/system.h"

namespace apnea_locks::detail {

/// The inode of the initial PID namespace (/proc/self/ns/pid; the kernel's PROC_PID_INIT_INO).
inline constexpr std::uint64_t initial_pid_namespace_inode = 4026531836;
/// The inode of the initial user namespace (/proc/self/ns/user).
inline constexpr std::uint64_t initial_user_namespace_inode = 4026531837;
/// The inode of the initial time namespace (/proc/self/ns/time).
inline constexpr std::uint64_t initial_time_namespace_inode = 4026531834;

/// The kernel's hard ceiling on pids (PID_MAX_LIMIT).
inline constexpr std::int64_t pid_max_limit = 4194304;

/// The smallest tolerance for `pid-reused`: 1 s.
inline constexpr std::chrono::nanoseconds minimum_reuse_tolerance = std::chrono::seconds(1);

/// The statfs magic numbers section 9 calls local: tmpfs, ext2/3/4, xfs, btrfs, f2fs, zfs,
/// bcachefs, overlay.
bool local_filesystem_magic(std::uint64_t magic);

/// A name for a statfs magic number: "tmpfs", "ext4" (ext2/3/4 share one), "nfs", "fuse",
/// ... or "0x" and its hex digits when unknown.
std::string filesystem_name(std::uint64_t magic);

/// One line of /proc/self/mountinfo (proc(5)), the fields the proofs look at.
struct MountEntry {
  std::uint64_t major = 0;
  std::uint64_t minor = 0;
  std::string root;           ///< field 4: the directory of the filesystem mounted here
  std::string mount_point;    ///< as written (octal escapes such as \040 kept)
  std::string mount_options;  ///< per-mount options, field 6 ("rw,relatime,idmapped")
  std::string fstype;
  std::string super_options;  ///< per-superblock options, the last field
};

/// Parses mountinfo text; malformed lines are skipped, and `complete` (when not null) says
/// whether every non-empty line parsed.
std::vector<MountEntry> parse_mountinfo(std::string_view text, bool* complete = nullptr);

/// Whether a mount of device `major:minor` is idmapped (its per-mount options hold
/// `idmapped`). True when it cannot be told: empty or malformed text, or no mount of that
/// device listed.
bool device_idmapped(std::string_view mountinfo, std::uint64_t major, std::uint64_t minor);

/// The super options of the mount at /proc (the last one listed wins: it hides the
/// others), "" when there is none.
std::string proc_super_options(std::string_view mountinfo);

/// Whether /proc mount options hide processes from us: any `hidepid` but 0/off, or
/// `subset=pid`. True for "" (unknown).
bool proc_options_hide_processes(std::string_view super_options);

/// The processes of `view` whose NSpid holds `pid` in a field other than the first.
std::vector<ProcessInfo> namespace_carriers(const std::vector<ProcessInfo>& view, double pid);

/// `process` has exited and was the last of its thread group (a zombie): it holds nothing. A
/// leader that called pthread_exit shows Z while its other threads run, and an unknown
/// thread count (0) proves nothing.
bool exited(const ProcessInfo& process);

/// Proof 4's test (PROTOCOL.md section 9): `process` runs as another account than the
/// area's by all four uids, the area is not root's, no mount of its device is idmapped in our
/// mountinfo, and it shares our mount namespace (both known) or, when its namespace cannot be
/// read, its own mountinfo lists the area's device with no idmapped mount of it.
bool another_account(const ProcessInfo& process, const HostFacts& host, std::uint32_t area_uid);

/// Proof 4 without its mount-namespace part: what a carrier in another (or an unknown) mount
/// namespace shows, which is evidence only (an idmapped mount there may translate its uid).
bool another_account_by_uids(const ProcessInfo& process, const HostFacts& host, std::uint32_t area_uid);

/// Reads `carrier`'s runtime sign (System::runtime_sign) unless other proofs settle it (a
/// zombie, a kernel thread).
void note_runtime_sign(System& system, ProcessInfo& carrier);

/// The first export in `exports` (the text of /proc/fs/nfsd/exports: a path, octal escapes
/// such as `\040` decoded, then its clients; `#` comments) that is `path` or one of its
/// ancestors; "" when none is.
std::string export_covering(std::string_view exports, std::string_view path);

/// True for the proofs that are certain when the host allows: no clock, no runtime trust,
/// not the operator's word.
bool proof_is_certain(DeathProof proof);

}  // namespace apnea_locks::detail
