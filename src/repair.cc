#include "apnea_locks/repair.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>

#include "apnea_locks/lock.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/probe.h"

namespace apnea_locks {
namespace {

RepairStep step(RepairAction action, std::string why, bool force_would_help = false) {
  return RepairStep{action, std::move(why), force_would_help};
}

std::string utc_time(std::int64_t ns) {
  const std::time_t seconds = static_cast<std::time_t>(ns / 1'000'000'000);
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(seconds));
}

/// "owner pid 42 is alive (apnea run, started 2026-...)".
std::string live_owner(const EntryFacts& facts) {
  const Owner& owner = *facts.owner->owner;
  std::string text = fmt::format("owner pid {} is alive", pid_text(owner.pid));
  if (facts.process && facts.process->info) {
    const ProcessInfo& info = *facts.process->info;
    text += fmt::format(" ({}, started {})", info.command.empty() ? "?" : info.command,
                        utc_time(info.start_time_ns));
  } else if (facts.process && facts.process->signal_errno == -1) {
    text += " to Apnea (a pid it cannot signal) and not provably dead";
  }
  return text;
}

bool same_object(const std::optional<FileStat>& a, const std::optional<FileStat>& b) {
  return a && b && a->same_object(*b);
}

RepairResult result(RepairOutcome outcome, std::string detail, std::string tombstone = {}) {
  return RepairResult{outcome, std::move(detail), std::move(tombstone)};
}

RepairResult from_reclaim(const LockResult<ReclaimOutcome>& reclaimed) {
  if (!reclaimed) {
    const LockError& error = reclaimed.error();
    return result(error.guarded ? RepairOutcome::guard_held : RepairOutcome::failed, error.message);
  }
  if (reclaimed->removed) return result(RepairOutcome::removed, {}, reclaimed->tombstone);
  return result(RepairOutcome::changed, reclaimed->changed, reclaimed->tombstone);
}

/// Re-gathers and re-judges a candidate, tombstone or guard; the reason to leave it alone,
/// if any.
std::optional<std::string> still_removable(System& system, const EntryFacts& facts,
                                           const RepairPolicy& policy, EntryState expected) {
  ProcessCache processes(system);
  const EntryFacts now = gather_entry(system, node_dirname(facts.path), facts.name,
                                      policy.classify.area_uid, processes);
  if (!now.stat) return "it is already gone";
  if (!same_object(now.stat, facts.stat)) return "it was replaced since it was inspected";
  if (now.stat->type == FileType::symlink) return "it is a symlink now";
  const bool had_owner = facts.owner && facts.owner->owner;
  const bool has_owner = now.owner && now.owner->owner;
  if (had_owner != has_owner || (had_owner && now.owner->owner->token != facts.owner->owner->token) ||
      (facts.owner && now.owner && facts.owner->bytes != now.owner->bytes))
    return "its owner record changed since it was inspected";
  ClassifyPolicy judged = policy.classify;
  judged.now_ns = system.now_ns();
  const Verdict verdict = classify(now, judged, nullptr);
  if (verdict.state != expected)
    return fmt::format("it is {} now ({})", state_name(verdict.state), verdict.reason);
  if (facts.parsed.role == EntryRole::tombstone) {
    // A reclaimer renames a dead owner's lock to a tombstone under the guard and then
    // removes it: while that guard exists, the tombstone is its work in progress.
    const std::string guard = node_dirname(facts.path) + "/" + facts.parsed.lock_name() + ".reclaim";
    if (system.lstat(guard)) return "a reclamation of its lock is in progress";
  }
  return std::nullopt;
}

}  // namespace

std::string_view action_name(RepairAction action) {
  switch (action) {
    case RepairAction::reclaim_owner: return "reclaim";
    case RepairAction::reclaim_malformed: return "reclaim-malformed";
    case RepairAction::remove_debris: return "remove-debris";
    case RepairAction::remove_guard: return "remove-guard";
    case RepairAction::skip: return "skip";
    case RepairAction::refuse: return "refuse";
  }
  return "skip";
}

std::string_view outcome_name(RepairOutcome outcome) {
  switch (outcome) {
    case RepairOutcome::removed: return "removed";
    case RepairOutcome::skipped: return "skipped";
    case RepairOutcome::refused: return "refused";
    case RepairOutcome::changed: return "changed";
    case RepairOutcome::guard_held: return "guard-held";
    case RepairOutcome::failed: return "failed";
  }
  return "failed";
}

RepairStep plan_repair(const EntryFacts& facts, const Verdict& verdict, bool force) {
  switch (verdict.role) {
    case EntryRole::lock:
      switch (verdict.state) {
        case EntryState::live:
          if (facts.owner && facts.owner->owner) return step(RepairAction::refuse, live_owner(facts));
          return step(RepairAction::refuse, "its owner could not be probed: it may be alive");
        case EntryState::stale:
          if (verdict.certain) return step(RepairAction::reclaim_owner, verdict.reason);
          if (force) return step(RepairAction::reclaim_owner, verdict.reason);
          return step(RepairAction::refuse,
                      fmt::format("the only proof of death ({}) rests on the clock: needs --force",
                                  verdict.reason),
                      true);
        case EntryState::malformed:
          if (force) return step(RepairAction::reclaim_malformed, verdict.reason);
          return step(RepairAction::refuse,
                      fmt::format("its owner record is malformed ({}): needs --force", verdict.reason),
                      true);
        case EntryState::in_flight:
          return step(RepairAction::refuse, "it kept changing while it was inspected: run again");
        case EntryState::free: return step(RepairAction::skip, "there is no lock");
        default: return step(RepairAction::skip, verdict.reason);
      }
    case EntryRole::candidate:
    case EntryRole::tombstone:
      if (verdict.state == EntryState::debris) {
        if (force) return step(RepairAction::remove_debris, verdict.reason);
        return step(RepairAction::refuse,
                    fmt::format("a leftover {} ({}): needs --force", role_name(verdict.role), verdict.reason),
                    true);
      }
      if (verdict.state == EntryState::free) return step(RepairAction::skip, "it is gone");
      return step(RepairAction::skip, fmt::format("in flight ({})", verdict.reason));
    case EntryRole::reclaim_guard:
      if (verdict.state == EntryState::leftover) {
        if (force) return step(RepairAction::remove_guard, verdict.reason);
        return step(RepairAction::refuse, "a leftover reclaim guard: needs --force", true);
      }
      if (verdict.state == EntryState::free) return step(RepairAction::skip, "it is gone");
      return step(RepairAction::skip, "a reclamation is in progress");
    case EntryRole::unknown: break;
  }
  return step(RepairAction::skip, "not an Apnea lock entry: left alone");
}

RepairResult execute_repair(System& system, const EntryFacts& facts, const RepairStep& plan,
                            const RepairPolicy& policy) {
  switch (plan.action) {
    case RepairAction::skip: return result(RepairOutcome::skipped, plan.why);
    case RepairAction::refuse: return result(RepairOutcome::refused, plan.why);

    case RepairAction::reclaim_owner: {
      const Owner owner = *facts.owner->owner;
      const std::int64_t written = facts.owner->owner_stat ? facts.owner->owner_stat->mtime_ns : 0;
      ReclaimExpectation expect;
      expect.token = owner.token;
      // Under the guard: the owner must still be proven dead (a fresh probe, no cache).
      expect.confirm = [&]() -> std::optional<std::string> {
        const HostFacts& host = policy.classify.host;
        auto judge = [&](const ProcessFacts& now) {
          return judge_death(now, host, policy.classify.area_uid, written,
                             policy.classify.reuse_tolerance_ns);
        };
        DeathJudgement judged = judge(gather_process(system, owner.pid, nullptr));
        // Shown dead in our namespace: now look for carriers in nested PID namespaces too.
        if (judged.proof != ProofClass::none && judged.reason != DeathProof::pid_out_of_range) {
          const std::vector<ProcessInfo> view = system.namespace_view();
          judged = judge(gather_process(system, owner.pid, &view));
        }
        if (judged.proof == ProofClass::none)
          return fmt::format("its owner pid {} is no longer provably dead", pid_text(owner.pid));
        if (judged.remote_filesystem)
          return fmt::format("the lock area is on {}, not a local filesystem: nothing is removed there",
                             host.filesystem.empty() ? std::string("an unknown filesystem") : host.filesystem);
        if (judged.proof != ProofClass::certain && !policy.force) {
          if (judged.uses_clock)
            return fmt::format("the only proof of death ({}) rests on the clock: needs --force",
                               proof_name(judged.reason));
          return fmt::format("the only proof of death ({}) rests on seeing every process ({}): needs --force",
                             proof_name(judged.reason), host.why_not_certain());
        }
        return std::nullopt;
      };
      return from_reclaim(reclaim_guarded(system, facts.path, policy.resource, expect,
                                          policy.keep_tombstone));
    }

    case RepairAction::reclaim_malformed: {
      ReclaimExpectation expect;
      expect.identity = facts.owner->lock_stat;
      expect.owner_identity = facts.owner->owner_stat;
      expect.owner_bytes = facts.owner->bytes;
      return from_reclaim(reclaim_guarded(system, facts.path, policy.resource, expect,
                                          policy.keep_tombstone));
    }

    case RepairAction::remove_debris:
    case RepairAction::remove_guard: {
      const EntryState expected =
          plan.action == RepairAction::remove_guard ? EntryState::leftover : EntryState::debris;
      if (auto changed = still_removable(system, facts, policy, expected))
        return result(RepairOutcome::changed, *changed);
      // A guard is an empty directory: rmdir refuses anything else. Debris is removed
      // without following any symlink inside it.
      auto removed = plan.action == RepairAction::remove_guard ? system.rmdir(facts.path)
                                                               : system.remove_tree(facts.path);
      if (!removed)
        return result(RepairOutcome::failed,
                      fmt::format("cannot remove {}: {}", facts.path, errno_text(removed.error())));
      return result(RepairOutcome::removed, {});
    }
  }
  return result(RepairOutcome::failed, "unknown action");
}

}  // namespace apnea_locks
