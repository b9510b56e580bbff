// The one policy (PROTOCOL.md section 10): for a judged entry and a set of flags, keep it,
// remove it (with the proof used), or refuse (naming the blocker and the next step); and the
// one fix command. Pure: no system calls. Every command takes its decision from here.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "apnea_locks/classify.h"

namespace apnea_locks {

/// The default `--guard-age`: 5 minutes (a working guard lives for milliseconds).
inline constexpr std::chrono::nanoseconds default_guard_age = default_guard_threshold;

/// What reclaim does with an entry.
enum class PlanAction { keep, remove, refuse };

/// "keep", "remove" or "refuse".
std::string_view plan_action_name(PlanAction action);

/// How a removal is carried out (src/repair.cc), each re-validated under the guard.
enum class RemovalKind {
  none,
  lock_owner,      ///< a lock with a valid owner: token-checked
  lock_malformed,  ///< a malformed lock: identity-, bytes- and pid-checked
  debris,          ///< a candidate or tombstone
  guard,           ///< a leftover reclaim guard
};

/// "none", "reclaim", "reclaim-malformed", "remove-debris" or "remove-guard".
std::string_view removal_name(RemovalKind kind);

/// The flags a decision depends on.
struct RemovalFlags {
  bool force = false;
  std::chrono::nanoseconds guard_age = default_guard_age;
};

/// The one fix command: the `apnea-locks reclaim` that would remove an entry, with
/// `--force` only when nothing less would (fix_command).
struct Fix {
  Fix() = default;
  Fix(std::vector<std::string> argv, bool forced)
      : argv(std::move(argv)), forced(forced), command(shell_command(this->argv)) {}

  std::vector<std::string> argv;  ///< empty when no flag would remove the entry
  bool forced = false;            ///< only `reclaim --force` would remove it
  std::string command;            ///< argv as a shell command line; "" when there is none

  bool empty() const { return argv.empty(); }
};

/// The decision on one entry.
struct Decision {
  PlanAction action = PlanAction::keep;
  RemovalKind removal = RemovalKind::none;
  /// For remove: the proof acted on; for refuse: what blocks it, naming the blocker; for
  /// keep: why nothing is to be done.
  std::string why;
  /// For refuse: what would unblock it (a process to stop, a flag, a check to make by hand).
  std::string next_step;
  /// For a removal only --force allows: what it trusts ("the wall clock", "no hidden
  /// process shares this temp directory", "an ownerless entry older than --guard-age").
  std::vector<std::string> trusts;
  /// The one fix command, whatever the flags decided under (judge_entry fills it).
  Fix fix;
};

/// Decides what `reclaim` with `flags` does with the entry judged `verdict` at `now_ns`.
/// Never removes an entry naming a pid that is not proven dead, under any flag. Pure.
Decision decide(const EntryFacts& facts, const Verdict& verdict, const RemovalFlags& flags,
                std::int64_t now_ns);

/// What the fix command names besides the entry.
struct FixContext {
  std::optional<std::string> user;         ///< the account acted for (--user; --all-users)
  std::optional<std::string> lock_dir;     ///< an explicit lock directory
  std::optional<std::string> guard_age;    ///< --guard-age as given, when not the default
  std::optional<std::string> tolerance;    ///< --tolerance as given, when not the default
};

/// The one fix command: the `apnea-locks reclaim` that would remove the entry (with
/// `--force` only when nothing less would), or none when no flag would. `decided` is
/// decide() of the entry under `flags` (the other flag set is decided here). Pure.
Fix fix_command(const EntryFacts& facts, const Verdict& verdict, const EntryLabel* label,
                const RemovalFlags& flags, const Decision& decided, std::int64_t now_ns,
                const FixContext& context);

}  // namespace apnea_locks
