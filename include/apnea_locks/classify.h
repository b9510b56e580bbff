// Judging one entry of the lock area: facts in, verdicts out. Pure: no system calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "apnea_locks/facts.h"
#include "apnea_locks/names.h"
#include "apnea_locks/probe.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// What Apnea 0.2.2 concludes about a lock on contention (`free` when there is no lock,
/// `raced` when it kept changing while being read).
enum class ApneaVerdict { live, stale, malformed, free, raced };

/// "live", "stale", "malformed", "free" or "raced".
std::string_view apnea_verdict_name(ApneaVerdict verdict);

/// apnea-locks' own state of an entry. Locks: live / stale / malformed / live-malformed (a
/// malformed record naming a pid not proven dead) / free (and in-flight while it kept
/// changing); candidates and tombstones: in-flight / debris; reclaim guards: in-flight /
/// leftover; anything else: unknown.
enum class EntryState {
  live, stale, malformed, live_malformed, free, in_flight, debris, leftover, unknown
};

/// "live", "stale", "malformed", "live-malformed", "free", "in-flight", "debris",
/// "leftover" or "unknown".
std::string_view state_name(EntryState state);

/// The state named `name` (as state_name prints it); nothing when there is none.
std::optional<EntryState> parse_state(std::string_view name);

/// The reclaim guard (`<lock>.reclaim`) of a lock, as far as the lock's verdict cares.
enum class GuardState { none, in_flight, leftover };

/// "none", "in-flight" or "leftover".
std::string_view guard_state_name(GuardState state);

/// The default `guard_threshold`: 5 minutes, the default `--guard-age`.
inline constexpr std::chrono::nanoseconds default_guard_threshold = std::chrono::minutes(5);

/// Settings shared by every entry judged in one pass.
struct JudgingSettings {
  std::int64_t now_ns = 0;
  std::uint32_t area_uid = 0;  ///< the uid the lock area belongs to
  std::chrono::nanoseconds reuse_tolerance = default_reuse_tolerance;  ///< --tolerance
  /// Reclaim guards, and malformed candidates and tombstones, younger than this are in flight.
  std::chrono::nanoseconds guard_threshold = default_guard_threshold;
  /// The host the proofs rest on (gather_host); the default knows nothing, so no proof
  /// judged on it is certain.
  HostFacts host;
  /// The paused processes (System::paused_processes), read when an old guard is judged;
  /// nothing when not read or unreadable (then no guard is shown free of a paused holder).
  std::optional<std::vector<ProcessInfo>> paused;
  /// The possible owners' candidates (PROTOCOL.md section 10): the area uid's processes that
  /// run a recognised runtime (System::runtime_processes, with process_info's start time),
  /// read when a changed owner record is judged; nothing when not read or unreadable (then
  /// no changed record is shown free of a possible owner).
  std::optional<std::vector<ProcessInfo>> runtimes;
  /// The operator's word (`reclaim --force LOCK --not-owner PID@START`): each process named
  /// is neither a carrier nor a possible owner of the one lock judged (judge_death).
  std::vector<NotOwner> not_owners;
};

/// True when the owner record of an entry changed after it was published (PROTOCOL.md
/// section 10, "A damaged record proves nothing about its owner"), from the lock
/// directory's and owner.json's statx: owner.json's birth time and ctime more than
/// a window apart, the directory born more than the window before owner.json (or after it),
/// or owner.json's ctime later than the directory's ctime plus the window. The window is
/// `tolerance` but never more than the default 2 s: a wider --tolerance makes fewer
/// pid-reused proofs, and must never make a rewritten record look unchanged (no flag makes
/// removal more likely by widening a window). Where the filesystem gives no birth time, only
/// the last test is made. False when either stat is missing. Pure.
bool record_changed(const FileStat& directory, const FileStat& owner_file,
                    std::chrono::nanoseconds tolerance);

/// True when `facts`'s entry may be removed (with --force) only while no possible owner is
/// alive (PROTOCOL.md section 10): its owner record changed after it was published
/// (record_changed), or it is a lock whose record is malformed, or its record names no pid.
/// Judging it then needs the possible owners (JudgingSettings::runtimes).
bool needs_possible_owners(const EntryFacts& facts, const JudgingSettings& settings);


/// A guard's age as status shows it (leftover or in flight): now minus its mtime. Removal
/// (policy.h) counts from the latest of its mtime and ctime (PROTOCOL.md section 10, the guard
/// row), so a guard whose mtime was set back is not old enough to remove. Pure.
std::int64_t guard_age(const FileStat& guard, std::int64_t now_ns);

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
  bool certain() const { return proof_class == ProofClass::certain; }
  bool apnea_self_heals = false;   ///< Apnea reclaims it on its next contended run
  bool needs_attention = false;    ///< a human (or `reclaim`) must act
  GuardState guard = GuardState::none;  ///< locks only
  std::optional<std::int64_t> age_ns;   ///< now minus the entry's mtime, at least 0
  /// The judgement over every pid the record names (the weakest one's): blocker, trusts.
  DeathJudgement death;
  /// The pid that blocks a removal when no carrier could be described ("" when none).
  std::string blocking_pid;
  std::string failed_check;        ///< Apnea's failed acceptance check, when malformed
  bool pidless = false;            ///< the record names no pid at all (empty, binary, none)
  bool pids_unknown = false;       ///< the record could not be read: its pids are unknown
  /// The digits a truncated record ends inside (EntryFacts::truncated_pid): it names every
  /// pid they begin, so it is never removed on a proof of death.
  std::optional<std::string> truncated_pid;
  std::string filesystem;          ///< the area's filesystem type (host facts)
  /// The guard's age (guard_age): a lock's, candidate's or tombstone's guard, or the
  /// guard entry itself.
  std::optional<std::int64_t> guard_age_ns;
  /// Why the clock is void (HostFacts::why_clock_void), "" when it is not: then no age
  /// counts as old enough (--guard-age, "unchanged for").
  std::string clock_void_why;
  /// A process that may be paused (Pause) and may hold the (old) guard: not shown by proof
  /// 4 to be another account's (root's count), started no later than 60 s after the
  /// guard's ctime (or with the clock void).
  std::optional<ProcessInfo> guard_blocker;
  bool guard_checked = false;      ///< the paused processes were read for the guard
  /// The owner record changed after it was published (record_changed): its proofs are
  /// evidence at most, and only --force removes it, when no possible owner is alive.
  bool record_changed = false;
  /// Only --force removes it, and only while no possible owner is alive
  /// (needs_possible_owners: a changed record, a malformed lock, a record naming no pid).
  bool owners_needed = false;
  bool owners_checked = false;     ///< the possible owners were read (owners_needed)
  /// Every live process that could have taken the lock (a recognised runtime of the area's
  /// uid started no later than 60 s after the lock was made), grouped by application
  /// (executable), those working in the lock's repository (or home) first.
  std::vector<ProcessInfo> possible_owners;
  /// Possible owners the operator's word set aside (--not-owner), for the trust it prints.
  std::vector<ProcessInfo> operator_cleared;
};

/// Judges `facts` under `settings`; `label` (may be null) names the entry's repository or
/// home. Pure. What to do with it is the policy's (decide, fix_command: policy.h).
Verdict classify(const EntryFacts& facts, const JudgingSettings& settings, const EntryLabel* label);

/// Quotes `word` for a POSIX shell when it needs quoting (else returns it unchanged): in
/// single quotes, or as `$'...'` (bash, POSIX 2024) with `\xHH` escapes when it holds a
/// control, DEL, a C1 control, invalid UTF-8 or an invisible format character (Cf,
/// U+2028/U+2029), every byte outside printable ASCII then escaped. Pasted into bash, the
/// result names exactly `word`'s bytes (a NUL, which no argument or path holds, ends it).
std::string shell_word(std::string_view word);

/// `argv` as one POSIX shell command line (each word quoted as shell_word quotes it).
std::string shell_command(const std::vector<std::string>& argv);

}  // namespace apnea_locks
