// Is an owner's process alive? Apnea's answer, and our proofs of death.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/system.h"

namespace apnea_locks {

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

/// Everything the system says about one pid, gathered once (per pid, per scan).
struct ProcessFacts {
  double pid = 0;
  /// kill(pid, 0): 0 sent, else errno; -1 when Node could not even try (pid >= 2^31).
  int signal_errno = -1;
  std::optional<ProcessInfo> info;  ///< /proc, when the pid has an entry
  std::int64_t pid_max = 0;
  std::int64_t boot_time_ns = 0;
};

/// Probes `pid`: kill(pid, 0) when Node could, then /proc for a process that is not ESRCH.
ProcessFacts gather_process(System& system, double pid);

/// Apnea 0.2.2's liveness: alive unless kill(pid, 0) failed with ESRCH (so EPERM and pids
/// Node cannot signal count as alive). Pure.
bool apnea_alive(const ProcessFacts& facts);

/// Our proof that the owner's process is gone (PROTOCOL.md section 9), strongest first.
enum class DeathProof {
  none,              ///< no proof: the owner may be alive (fail closed)
  pid_out_of_range,  ///< >= 2^31 or >= pid_max: no such process can exist
  pid_dead,          ///< kill(pid, 0) failed with ESRCH
  zombie,            ///< exited, waiting to be reaped
  pid_other_uid,     ///< the number now belongs to another account
  pid_is_thread,     ///< the number now names a non-leader thread
  pid_reused,        ///< started after the owner record was written (clock-based)
  predates_boot,     ///< the owner record was written before the last boot (clock-based)
};

/// "pid-dead", "pid-out-of-range", ... ("none" for none).
std::string_view proof_name(DeathProof proof);

/// True for proofs that involve no clock (enough for reclaim without --force).
bool proof_is_certain(DeathProof proof);

/// Judges `facts` for an owner record written at `written_ns` (owner.json's mtime) in an
/// area owned by `area_uid`; a start more than `tolerance_ns` after the write is reuse. Pure.
DeathProof prove_death(const ProcessFacts& facts, std::uint32_t area_uid, std::int64_t written_ns,
                       std::int64_t tolerance_ns);

/// The default tolerance for `pid-reused`: 2 s.
inline constexpr std::int64_t default_reuse_tolerance_ns = 2'000'000'000;

}  // namespace apnea_locks
