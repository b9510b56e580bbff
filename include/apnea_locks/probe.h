// Is an owner's process alive? Apnea's answer, and our proofs of death.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "apnea_locks/system.h"

namespace apnea_locks {

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
