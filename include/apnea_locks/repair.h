// The removal gate: carrying out the policy's removals (policy.h), each re-decided under the
// lock's reclaim guard right before it acts. reclaim's removals and run's takeovers
// (acquire) come through here; src/removal.cc holds every step that renames or removes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "apnea_locks/classify.h"
#include "apnea_locks/policy.h"
#include "apnea_locks/survey.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// How one carried-out decision ended.
enum class RepairOutcome {
  removed,     ///< renamed to a tombstone and removed (or kept), or debris/guard removed
  skipped,     ///< nothing was to be done (keep)
  refused,     ///< the policy refused it
  changed,     ///< it changed since inspection, or the re-decision under the guard differs: left alone
  guard_held,  ///< another reclamation holds the guard
  failed,      ///< a system error
};

/// "removed", "skipped", "refused", "changed", "guard-held" or "failed".
std::string_view outcome_name(RepairOutcome outcome);

/// The result of one decision carried out.
struct RepairResult {
  RepairOutcome outcome = RepairOutcome::skipped;
  std::string detail;     ///< why (the refusal, what changed, the error)
  std::string tombstone;  ///< the tombstone a lock was renamed to, when it was
  /// Where the audit record of the removal went (audit.h); nothing when none was due (no
  /// removal, or RepairSettings::audit false).
  std::optional<AuditSink> audited;
};

/// Settings of one reclaim run.
struct RepairSettings {
  SurveySettings settings;      ///< the same judgement and flags the plan was made with
  bool keep_tombstone = false;  ///< leave the renamed lock as a tombstone for forensics
  std::string resource;         ///< what Apnea's messages call the lock's resource (the
                                ///< audit record's label)
  /// For the audit record (audit.h) of each removal: the uid that ran reclaim, taken before
  /// any switch to another account (none: the current uid), and the account acted for
  /// (`reclaim --user NAME`; "" for one's own).
  std::optional<std::uint32_t> acting_uid;
  std::string acted_for;
  /// Record each removal in the system log (reclaim always; run's takeover when asked), as
  /// `audit_action` ("reclaim", "takeover").
  bool audit = true;
  std::string audit_action = "reclaim";
};

/// Carries out `decision` (as made from `facts` by the survey) through the lock core: under
/// `<lock>.reclaim` the entry is gathered again with fresh probes, judged and decided again
/// by the same policy, and acted on only when the decision is unchanged and the entry is the
/// same object with the same owner record; a lock is renamed to a tombstone (token- or
/// bytes-checked) and removed without recursion, debris is removed without recursion, a
/// guard is rmdir'ed. Anything changed is left alone and reported. Every removal (and every
/// lock renamed to a tombstone) is recorded in the system log (audit.h) once it is done.
RepairResult execute_repair(System& system, const EntryFacts& facts, const Decision& decision,
                            const RepairSettings& repair);

}  // namespace apnea_locks
