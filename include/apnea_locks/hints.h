// Hints: where the lock an operator is looking for probably is. They locate and report;
// every judgement comes from the survey and the policy (survey.h, policy.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/names.h"
#include "apnea_locks/survey.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// The enclosing repository of `directory`: of it and its ancestors (after realpath, as
/// Apnea resolves its root) that hold a `.apnea` directory or a `.git` (a directory, or the
/// file of a worktree), the nearest whose lock exists in `lock_directory` (a nested
/// repository, such as a submodule, does not hide the one Apnea runs in), else the nearest;
/// and the lock Apnea would use for it. Nothing when `directory` does not resolve or no
/// ancestor qualifies.
/// Reads only lstat and realpath.
std::optional<LocatedLock> enclosing_repository(System& system, const std::string& lock_directory,
                                                const std::string& directory);

/// The global setup lock of `home` in `lock_directory` (names.h locate_lock: realpath'd like
/// Apnea; fails with realpath's error).
SysResult<LocatedLock> global_setup_lock(System& system, const std::string& lock_directory,
                                         const std::string& home);

/// A located lock as a survey judged it.
struct LockHint {
  LocatedLock lock;
  bool present = false;           ///< the lock exists
  EntryState state = EntryState::free;
  std::string reason;             ///< the verdict's reason ("pid-dead", ...)
  std::optional<double> pid;      ///< the accepted owner's pid (owner.h)
  /// The policy's verdict: a human (or reclaim) must act. A dead global setup lock blocks
  /// every Apnea run and Apnea never reclaims it.
  bool needs_attention = false;
  Fix fix;                ///< the one fix command (policy.h)
  std::string why;        ///< the decision's why under the survey's flags (policy.h)
  std::string next_step;  ///< the decision's next step, for a refusal
};

/// The global setup lock as a survey judged it.
using GlobalSetupHint = LockHint;

/// Surveys the one entry `lock` (survey_entry, judged under `settings` with its root as the
/// label, so the fix names `--repo` or `--home`). An absent lock is `free`, needing nothing.
LockHint lock_hint(System& system, const std::string& lock_directory, const LocatedLock& lock,
                   const SurveySettings& settings);

/// The hint for `lock` from an entry a survey judged (survey_area's visit). Nothing when
/// `entry` is not that lock.
std::optional<GlobalSetupHint> global_setup_hint(const LocatedLock& lock, const JudgedEntry& entry);

/// Surveys the one entry `lock` (survey_entry, judged under `settings` with the home as its
/// label, so the fix names `--home`). An absent lock is `free`, needing nothing.
GlobalSetupHint global_setup_hint(System& system, const std::string& lock_directory,
                                  const LocatedLock& lock, const SurveySettings& settings);

}  // namespace apnea_locks
