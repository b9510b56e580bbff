// Judging one entry of the lock area: facts in, verdicts out. Pure: no system calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "apnea_locks/names.h"
#include "apnea_locks/owner.h"
#include "apnea_locks/probe.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// What Apnea 0.2.2 concludes about a lock on contention (`free` when there is no lock,
/// `raced` when it kept changing while being read).
enum class ApneaVerdict { live, stale, malformed, free, raced };

/// "live", "stale", "malformed", "free" or "raced".
std::string_view apnea_verdict_name(ApneaVerdict verdict);

/// apnea-locks' own state of an entry. Locks: live / stale / malformed / free (and
/// in-flight while it kept changing); candidates and tombstones: in-flight / debris; reclaim
/// guards: in-flight / leftover; anything else: unknown.
enum class EntryState { live, stale, malformed, free, in_flight, debris, leftover, unknown };

/// "live", "stale", "malformed", "free", "in-flight", "debris", "leftover" or "unknown".
std::string_view state_name(EntryState state);

/// The state named `name` (as state_name prints it); nothing when there is none.
std::optional<EntryState> parse_state(std::string_view name);

/// The reclaim guard (`<lock>.reclaim`) of a lock, as far as the lock's verdict cares.
enum class GuardState { none, in_flight, leftover };

/// "none", "in-flight" or "leftover".
std::string_view guard_state_name(GuardState state);

/// Everything gathered about one entry of the lock area (see scan.h).
struct EntryFacts {
  std::string name;                     ///< the entry name
  std::string path;                     ///< the entry's path (lock directory + name)
  EntryName parsed;                     ///< what the name says
  std::optional<FileStat> stat;         ///< lstat of the entry; none when it is gone
  std::optional<OwnerRead> owner;       ///< for locks, candidates and tombstones
  std::optional<ProcessFacts> process;  ///< the accepted owner's pid, probed
  std::optional<FileStat> guard;        ///< for a lock: lstat of `<lock>.reclaim` if it exists
  bool kept_changing = false;           ///< a lock replaced on every re-read during the scan
};

/// A repository root or home an entry is known to belong to.
struct EntryLabel {
  LockKind kind = LockKind::repository;
  std::string path;  ///< the canonical repository root, or the home (global setup lock)
};

/// Settings shared by every entry judged in one pass.
struct ClassifyPolicy {
  std::int64_t now_ns = 0;
  std::uint32_t area_uid = 0;  ///< the uid the lock area belongs to
  std::int64_t reuse_tolerance_ns = default_reuse_tolerance_ns;
  /// Reclaim guards, and malformed candidates and tombstones, younger than this are in flight.
  std::int64_t guard_threshold_ns = 60'000'000'000;
  /// An explicit lock directory, repeated as `--lock-dir` in fix commands.
  std::optional<std::string> lock_dir_option;
  /// The host the proofs rest on (gather_host); the default knows nothing, so no proof
  /// judged on it is certain.
  HostFacts host;
};

/// The default `guard_threshold_ns`: 60 s.
inline constexpr std::int64_t default_guard_threshold_ns = 60'000'000'000;

/// The verdict on one entry.
struct Verdict {
  EntryRole role = EntryRole::unknown;
  EntryState state = EntryState::unknown;
  std::optional<ApneaVerdict> apnea_verdict;  ///< locks only
  /// The proof of death (probe.h names), the failed owner check (OwnerRejection::reason),
  /// or what made it live / in flight ("pid-alive", "guard-recent", ...).
  std::string reason;
  DeathProof proof = DeathProof::none;
  ProofClass proof_class = ProofClass::none;  ///< how strong `proof` is (judge_death)
  bool certain = false;            ///< proof_class is certain
  bool apnea_self_heals = false;   ///< Apnea reclaims it on its next contended run
  bool needs_attention = false;    ///< a human (or `reclaim`) must act
  bool force_required = false;     ///< only `reclaim --force` would remove it
  GuardState guard = GuardState::none;  ///< locks only
  std::optional<std::int64_t> age_ns;   ///< now minus the entry's mtime, at least 0
  std::string fix;                 ///< the `apnea-locks reclaim` command; empty when none
};

/// Judges `facts` under `policy`; `label` (may be null) names the entry's repository or
/// home and is used in the fix command. Pure.
Verdict classify(const EntryFacts& facts, const ClassifyPolicy& policy, const EntryLabel* label);

/// Quotes `word` for a POSIX shell when it needs quoting (else returns it unchanged).
std::string shell_word(std::string_view word);

}  // namespace apnea_locks
