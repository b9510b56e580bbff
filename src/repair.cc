#include "apnea_locks/repair.h"

#include <fmt/format.h>

#include "apnea_locks/audit.h"
#include "apnea_locks/lock.h"
#include "apnea_locks/lock_area.h"
#include "detail/lock.h"

namespace apnea_locks {
namespace {

RepairResult result(RepairOutcome outcome, std::string detail, std::string tombstone = {}) {
  return RepairResult{outcome, std::move(detail), std::move(tombstone)};
}

RepairResult from_reclaim(const LockResult<ReclaimOutcome>& reclaimed) {
  if (!reclaimed) {
    const LockError& error = reclaimed.error();
    return result(error.guarded ? RepairOutcome::guard_held : RepairOutcome::failed, error.message);
  }
  if (reclaimed->removed && reclaimed->changed.empty())
    return result(RepairOutcome::removed, {}, reclaimed->tombstone);
  return result(RepairOutcome::changed, reclaimed->changed, reclaimed->tombstone);
}

bool same_record(const EntryFacts& was, const EntryFacts& now) {
  if (!was.stat || !now.stat || !was.stat->same_object(*now.stat)) return false;
  if (was.owner.has_value() != now.owner.has_value()) return false;
  if (!was.owner) return true;
  if (was.owner->owner.has_value() != now.owner->owner.has_value()) return false;
  if (was.owner->owner && was.owner->owner->token != now.owner->owner->token) return false;
  return was.owner->bytes == now.owner->bytes;
}

/// Under the guard we hold: the entry gathered again with fresh probes (and, for an old
/// guard, the paused processes read again), judged and decided by the same policy. Why it may not
/// be removed now, or nothing when the decision still stands.
std::optional<std::string> redecide(System& system, const EntryFacts& facts, const Decision& decision,
                                    const RepairPolicy& policy, bool we_hold_guard) {
  SurveySettings settings = policy.settings;
  settings.judge.now_ns = system.now_ns();
  EntryJudge judge(system, node_dirname(facts.path), settings);
  EntryFacts now = judge.gather(facts.name);
  if (!now.stat) return "it is already gone";
  if (!same_record(facts, now)) return "it changed since it was inspected";
  if (we_hold_guard && now.parsed.role != EntryRole::reclaim_guard) now.guard.reset();  // ours
  const Judgement again = judge.judge(std::move(now), nullptr);
  if (again.decision.action != PlanAction::remove || again.decision.removal != decision.removal)
    return fmt::format("it is no longer removable: {}", again.decision.why);
  return std::nullopt;
}

/// Holds `<lock>.reclaim` for the removal of a candidate or tombstone.
class GuardHold {
 public:
  GuardHold(System& system, std::string guard) : system_(system), guard_(std::move(guard)) {
    auto made = system_.mkdir(guard_, 0700);
    if (made) held_ = true;
    else error_ = made.error();
  }
  ~GuardHold() {
    if (held_) (void)system_.rmdir(guard_);
  }
  GuardHold(const GuardHold&) = delete;
  GuardHold& operator=(const GuardHold&) = delete;
  bool held() const { return held_; }
  const std::error_code& error() const { return error_; }

 private:
  System& system_;
  std::string guard_;
  bool held_ = false;
  std::error_code error_;
};

/// An exclusive flock of the lock area, held while a reclaim removes a guard it does not
/// hold. Apnea and reclaim remove only the guard they made; this removal is the one that
/// removes someone else's, by path after an lstat, so two of them must not interleave: the
/// second one's rmdir would remove the guard the first one has just made for its own
/// reclamation (docs/model/). The kernel drops the flock when reclaim dies.
class AreaRemovalLock {
 public:
  AreaRemovalLock(System& system, const std::string& directory) {
    auto fd = system.open_directory(directory);
    if (!fd) {
      error_ = fd.error();
      return;
    }
    fd_ = Descriptor(system, *fd);
    if (auto locked = system.lock_exclusive(fd_.get()); !locked) error_ = locked.error();
  }
  bool held() const { return fd_ && !error_; }
  const std::error_code& error() const { return error_; }

 private:
  Descriptor fd_;
  std::error_code error_;
};

}  // namespace

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

namespace {

RepairResult carry_out(System& system, const EntryFacts& facts, const Decision& decision,
                       const RepairPolicy& policy) {
  if (decision.action == PlanAction::keep) return result(RepairOutcome::skipped, decision.why);
  if (decision.action == PlanAction::refuse) return result(RepairOutcome::refused, decision.why);
  if (!facts.stat) return result(RepairOutcome::changed, "it is already gone");
  const std::string directory = node_dirname(facts.path);
  const std::string guard_path = entry_path(directory, reclaim_guard_path(facts.parsed.lock_name()));

  switch (decision.removal) {
    case RemovalKind::lock_owner:
    case RemovalKind::lock_malformed: {
      ReclaimExpectation expect;
      if (decision.removal == RemovalKind::lock_owner) {
        expect.token = facts.owner->owner->token;
      } else {
        expect.identity = facts.owner->lock_stat;
        expect.owner_identity = facts.owner->owner_stat;
        expect.owner_bytes = facts.owner->bytes;
      }
      expect.confirm = [&]() { return redecide(system, facts, decision, policy, true); };
      return from_reclaim(reclaim_guarded(system, facts.path, policy.resource, expect,
                                          policy.keep_tombstone));
    }
    case RemovalKind::debris: {
      GuardHold guard(system, guard_path);
      if (!guard.held()) {
        if (guard.error() == std::errc::file_exists)
          return result(RepairOutcome::guard_held,
                        fmt::format("a reclamation holds {}: run again when it is done", guard_path));
        return result(RepairOutcome::failed,
                      fmt::format("cannot take {}: {}", guard_path, errno_text(guard.error())));
      }
      if (auto changed = redecide(system, facts, decision, policy, true))
        return result(RepairOutcome::changed, *changed);
      if (auto kept = detail::remove_entry(system, facts.path, *facts.stat))
        return result(RepairOutcome::changed, *kept);
      return result(RepairOutcome::removed, {});
    }
    case RemovalKind::guard: {
      AreaRemovalLock removal_lock(system, directory);
      if (!removal_lock.held()) {
        if (removal_lock.error() == std::errc::resource_unavailable_try_again)
          return result(RepairOutcome::guard_held,
                        fmt::format("another apnea-locks reclaim is removing a reclaim guard in {}: "
                                    "run again when it is done",
                                    directory));
        return result(RepairOutcome::failed, fmt::format("cannot lock {}: {}", directory,
                                                         errno_text(removal_lock.error())));
      }
      if (auto changed = redecide(system, facts, decision, policy, false))
        return result(RepairOutcome::changed, *changed);
      auto now = system.lstat(facts.path);
      if (!now || !now->same_object(*facts.stat) || now->type != FileType::directory)
        return result(RepairOutcome::changed, "it was replaced since it was inspected");
      // A guard is an empty directory: rmdir refuses anything else.
      if (auto removed = system.rmdir(facts.path); !removed)
        return result(RepairOutcome::failed,
                      fmt::format("cannot remove {}: {}", facts.path, errno_text(removed.error())));
      return result(RepairOutcome::removed, {});
    }
    case RemovalKind::none: break;
  }
  return result(RepairOutcome::failed, "no removal to carry out");
}

}  // namespace

RepairResult execute_repair(System& system, const EntryFacts& facts, const Decision& decision,
                            const RepairPolicy& policy) {
  RepairResult done = carry_out(system, facts, decision, policy);
  // The audit trail: what was removed (or renamed away from the lock path), once it was.
  if (done.outcome == RepairOutcome::removed || !done.tombstone.empty()) {
    AuditEvent event;
    event.action = "reclaim";
    event.role = role_name(facts.parsed.role);
    event.path = facts.path;
    event.tombstone = done.tombstone;
    event.kept = !done.tombstone.empty() && (policy.keep_tombstone || done.outcome != RepairOutcome::removed);
    if (facts.owner) event.owner_bytes = facts.owner->bytes;
    event.proof = decision.why;
    for (const std::string& trust : decision.trusts)
      event.trusts.append(event.trusts.empty() ? "" : "; ").append(trust);
    event.for_uid = facts.stat ? facts.stat->uid : system.uid();
    event.for_user = policy.acted_for;
    audit(system, std::move(event), policy.acting_uid);
  }
  return done;
}

}  // namespace apnea_locks
