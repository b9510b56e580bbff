#include "apnea_locks/survey.h"

#include <utility>

#include "apnea_locks/names.h"

namespace apnea_locks {

namespace {

/// How often an entry that looks dead is gathered again because it changed under the probe.
constexpr int reconfirm_limit = 5;

/// True when the entry is still the very directory, unchanged, whose owner record was read:
/// same device and inode, and the same ctime and mtime. A release renames the lock away (a
/// rename sets the ctime) and a new owner publishes another directory (a new inode, or a
/// reused inode number with a new ctime); Apnea never rewrites a published owner.json, and
/// replacing it inside the directory changes the directory's mtime. So this one lstat says
/// "same device, inode and token" without reading the record again.
bool unchanged_since(System& system, const EntryFacts& facts) {
  if (!facts.stat) return true;  // nothing read: nothing to re-confirm
  auto now = system.lstat(facts.path);
  return now && now->same_object(*facts.stat) && now->ctime_ns == facts.stat->ctime_ns &&
         now->mtime_ns == facts.stat->mtime_ns;
}

/// The settings with the process table read, when a guard may have to be judged.
void note_paused(System& system, SurveySettings& settings, bool& read) {
  if (read) return;
  read = true;
  settings.judge.paused = system.paused_processes();
}

bool needs_paused(const EntryFacts& facts, const SurveySettings& settings) {
  const std::int64_t now = settings.judge.now_ns;
  if (facts.parsed.role == EntryRole::reclaim_guard && facts.stat)
    return now - facts.stat->mtime_ns >= settings.flags.guard_age_ns;
  if (facts.guard) return now - facts.guard->mtime_ns >= settings.flags.guard_age_ns;
  return false;
}

}  // namespace

SurveySettings survey_settings(System& system, const std::string& directory,
                               std::int64_t tolerance_ns, std::int64_t guard_age_ns, bool force) {
  SurveySettings settings;
  settings.judge.now_ns = system.now_ns();
  settings.judge.area_uid = system.uid();
  settings.judge.reuse_tolerance_ns = tolerance_ns;
  settings.judge.guard_threshold_ns = guard_age_ns;
  settings.judge.host = gather_host(system, directory);
  settings.flags.force = force;
  settings.flags.guard_age_ns = guard_age_ns;
  return settings;
}

std::pair<Verdict, Decision> judge_entry(const EntryFacts& facts, const SurveySettings& settings,
                                         const EntryLabel* label) {
  Verdict verdict = classify(facts, settings.judge, label);
  const std::int64_t now = settings.judge.now_ns;
  Decision decision = decide(facts, verdict, settings.flags, now);
  // The one fix: the reclaim without --force if it would remove the entry, else with it.
  RemovalFlags plain = settings.flags;
  plain.force = false;
  RemovalFlags forced = settings.flags;
  forced.force = true;
  const auto removes = [&](const RemovalFlags& flags) {
    if (flags.force == settings.flags.force) return decision.action == PlanAction::remove;
    return decide(facts, verdict, flags, now).action == PlanAction::remove;
  };
  if (removes(plain)) verdict.fix_argv = reclaim_argv(facts, label, false, settings.fix);
  else if (removes(forced)) verdict.fix_argv = reclaim_argv(facts, label, true, settings.fix);
  verdict.fix = shell_command(verdict.fix_argv);
  verdict.force_required =
      verdict.fix_argv.size() > 2 && verdict.fix_argv[2] == "--force";
  return {std::move(verdict), std::move(decision)};
}

SysResult<std::size_t> survey_area(System& system, const std::string& directory,
                                   const SurveySettings& given, const LabelIndex& labels,
                                   const std::set<std::string>& expected_locks,
                                   const std::function<void(const JudgedEntry&)>& visit) {
  SurveySettings settings = given;
  bool paused_read = false;
  std::size_t listed = 0;
  std::set<std::string> absent = expected_locks;
  ProcessCache processes(system, settings.judge.host);
  auto label_of = [&](const EntryFacts& facts) -> const EntryLabel* {
    return facts.parsed.role == EntryRole::unknown ? nullptr : labels.find(facts.parsed.lock_name());
  };
  auto judge = [&](const EntryFacts& facts) {
    if (needs_paused(facts, settings)) note_paused(system, settings, paused_read);
    return judge_entry(facts, settings, label_of(facts));
  };
  auto scanned = system.list_directory(directory, [&](const DirEntry& entry) {
    ++listed;
    EntryFacts facts = gather_entry(system, directory, entry.name, settings.judge.area_uid, processes);
    if (!facts.stat && !facts.kept_changing) return true;  // vanished since the listing
    auto judged = judge(facts);
    // A verdict of death is re-confirmed before it is reported: the lock must still be the
    // same object with the same owner record after the probe, else it changed under us (a
    // release, then a new owner) and is gathered again, with fresh probes. Only a lock's
    // name is reused by a new owner; a candidate's or tombstone's name holds its own token
    // or uuid, so once gone it does not come back.
    for (int tries = 0; facts.parsed.role == EntryRole::lock && facts.stat && !facts.kept_changing &&
                        judged.first.proof_class != ProofClass::none;
         ++tries) {
      if (unchanged_since(system, facts)) break;
      if (tries == reconfirm_limit) {
        facts.kept_changing = true;  // never the same twice: changing, not dead
      } else {
        ProcessCache fresh(system, settings.judge.host);
        facts = gather_entry(system, directory, entry.name, settings.judge.area_uid, fresh);
        if (!facts.stat && !facts.kept_changing) return true;  // released for good
      }
      judged = judge(facts);
    }
    if (facts.parsed.role == EntryRole::lock) absent.erase(facts.name);
    visit(JudgedEntry{facts, judged.first, judged.second, label_of(facts)});
    return true;
  });
  if (!scanned) return std::unexpected(scanned.error());
  for (const std::string& name : absent) {
    EntryFacts facts;
    facts.name = name;
    facts.path = entry_path(directory, name);
    facts.parsed = parse_entry_name(name);
    const auto judged = judge(facts);
    visit(JudgedEntry{facts, judged.first, judged.second, label_of(facts)});
  }
  return listed;
}

EntryFacts survey_entry(System& system, const std::string& directory, const std::string& name,
                        const SurveySettings& settings) {
  ProcessCache processes(system, settings.judge.host);
  return gather_entry(system, directory, name, settings.judge.area_uid, processes);
}

}  // namespace apnea_locks
