// Reclaim: what to remove and why (pure), and removing it through the lock core with every
// fact re-validated right before acting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "apnea_locks/classify.h"
#include "apnea_locks/scan.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// What reclaim does with one entry.
enum class RepairAction {
  reclaim_owner,      ///< a lock whose owner is proven dead: guarded, token-checked
  reclaim_malformed,  ///< a malformed lock (--force): guarded, identity- and bytes-checked
  remove_debris,      ///< a candidate or tombstone whose writer is gone (--force)
  remove_guard,       ///< a leftover reclaim guard (--force)
  skip,               ///< nothing to do: free, in flight, or not an Apnea entry
  refuse,             ///< a live owner, a lock changing under us, or --force needed
};

/// "reclaim", "reclaim-malformed", "remove-debris", "remove-guard", "skip" or "refuse".
std::string_view action_name(RepairAction action);

/// The plan for one entry: the action and, for skip/refuse, why.
struct RepairStep {
  RepairAction action = RepairAction::skip;
  std::string why;
  /// True when the step would be taken with --force (refusals that --force lifts).
  bool force_would_help = false;
};

/// Decides what reclaim does with an entry judged `verdict`. Never a live owner, even with
/// `force`; without it only locks with a certain proof of death. Pure.
RepairStep plan_repair(const EntryFacts& facts, const Verdict& verdict, bool force);

/// How one carried-out step ended.
enum class RepairOutcome {
  removed,     ///< renamed to a tombstone and removed (or kept), or debris/guard removed
  skipped,     ///< nothing was to be done
  refused,     ///< the plan refused it
  changed,     ///< it changed since inspection: left alone
  guard_held,  ///< another reclamation holds the guard
  failed,      ///< a system error
};

/// "removed", "skipped", "refused", "changed", "guard-held" or "failed".
std::string_view outcome_name(RepairOutcome outcome);

/// The result of one step.
struct RepairResult {
  RepairOutcome outcome = RepairOutcome::skipped;
  std::string detail;     ///< why (the refusal, what changed, the error)
  std::string tombstone;  ///< the tombstone a lock was renamed to, when it was
};

/// Settings of one reclaim run.
struct RepairPolicy {
  ClassifyPolicy classify;     ///< the same judgement status makes
  bool force = false;
  bool keep_tombstone = false;  ///< leave the renamed lock as a tombstone for forensics
  std::string resource;         ///< what Apnea's messages call the lock's resource
};

/// Carries out `step` on the entry of `facts` (as scanned) through the lock core:
/// a lock is reclaimed under its reclaim guard with the owner re-probed there (it must still
/// be proven dead) and the token (or, when malformed, the directory, owner file and bytes)
/// unchanged; debris and guards are re-checked (same object, still dead, still old) just
/// before removal, never through a symlink. Anything changed is left alone and reported.
RepairResult execute_repair(System& system, const EntryFacts& facts, const RepairStep& step,
                            const RepairPolicy& policy);

}  // namespace apnea_locks
