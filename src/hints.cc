#include "apnea_locks/hints.h"

#include "apnea_locks/lock_area.h"
#include "apnea_locks/names.h"

namespace apnea_locks {

namespace {

/// True when `folder` holds a `.apnea` directory or a `.git` (directory or worktree file).
bool marks_repository(System& system, const std::string& folder) {
  const std::string base = folder == "/" ? std::string() : folder;
  auto apnea = system.lstat(base + "/.apnea");
  if (apnea && apnea->type == FileType::directory) return true;
  auto git = system.lstat(base + "/.git");
  return git && (git->type == FileType::directory || git->type == FileType::regular);
}

LockHint hint_from(const LocatedLock& lock, const EntryFacts& facts, const Verdict& verdict,
                   const Decision& decision) {
  LockHint hint;
  hint.lock = lock;
  hint.present = facts.stat.has_value();
  hint.state = verdict.state;
  hint.reason = verdict.reason;
  if (facts.owner && facts.owner->owner) hint.pid = facts.owner->owner->pid;
  hint.needs_attention = verdict.needs_attention;
  hint.fix = decision.fix;
  hint.why = decision.why;
  hint.next_step = decision.next_step;
  return hint;
}

}  // namespace

std::optional<LocatedLock> enclosing_repository(System& system, const std::string& lock_directory,
                                                const std::string& directory) {
  auto canonical = system.realpath(directory);
  if (!canonical || canonical->empty() || canonical->front() != '/') return std::nullopt;
  std::string folder = *canonical;
  std::optional<LocatedLock> nearest;
  while (true) {
    if (marks_repository(system, folder)) {
      LocatedLock lock = canonical_lock(lock_directory, LockKind::repository, folder);
      // A nested repository (a submodule, a vendored checkout) is seldom where Apnea runs:
      // the nearest marked ancestor whose lock is there wins, else the nearest.
      if (system.lstat(lock.path)) return lock;
      if (!nearest) nearest = std::move(lock);
    }
    if (folder == "/") return nearest;
    folder = node_dirname(folder);
  }
}

SysResult<LocatedLock> global_setup_lock(System& system, const std::string& lock_directory,
                                         const std::string& home) {
  return locate_lock(system, lock_directory, LockKind::global_setup, home);
}

std::optional<GlobalSetupHint> global_setup_hint(const LocatedLock& lock, const JudgedEntry& entry) {
  if (entry.facts.name != lock.name) return std::nullopt;
  return hint_from(lock, entry.facts, entry.verdict, entry.decision);
}

LockHint lock_hint(System& system, const std::string& lock_directory, const LocatedLock& lock,
                   const SurveySettings& given) {
  const EntryLabel label{lock.kind, lock.root};
  EntryJudge judge(system, lock_directory, given);
  const Judgement judged = judge.entry(lock.name, &label);
  return hint_from(lock, judged.facts, judged.verdict, judged.decision);
}

GlobalSetupHint global_setup_hint(System& system, const std::string& lock_directory,
                                  const LocatedLock& lock, const SurveySettings& settings) {
  return lock_hint(system, lock_directory, lock, settings);
}

}  // namespace apnea_locks
