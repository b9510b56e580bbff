#include "apnea_locks/survey.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <exception>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "apnea_locks/names.h"
#include "detail/parallel.h"
#include "detail/scan.h"

namespace apnea_locks {
using detail::gather_entry;  // detail/scan.h
using detail::gather_entry_in;
using detail::GuardListing;
using detail::has_owner_record;
using detail::ProcessCache;

SurveySettings survey_settings(System& system, const std::string& directory, Windows windows,
                               bool force, HostRead host) {
  SurveySettings settings;
  settings.judge.now_ns = system.now_ns();
  settings.judge.area_uid = system.uid();
  settings.judge.reuse_tolerance = windows.tolerance;
  settings.judge.guard_threshold = windows.guard_age;
  settings.host_pending = true;
  if (host == HostRead::now) settings = with_host(system, directory, std::move(settings));
  settings.flags.force = force;
  settings.flags.guard_age = windows.guard_age;
  return settings;
}

SurveySettings with_host(System& system, const std::string& directory, SurveySettings settings) {
  if (!settings.host_pending) return settings;
  settings.judge.host = gather_host(system, directory);
  settings.host_pending = false;
  return settings;
}

std::pair<Verdict, Decision> judge_entry(const EntryFacts& facts, const SurveySettings& settings,
                                         const EntryLabel* label) {
  Verdict verdict = classify(facts, settings.judge, label);
  const std::int64_t now = settings.judge.now_ns;
  Decision decision = decide(facts, verdict, settings.flags, now);
  decision.fix = fix_command(facts, verdict, label, settings.flags, decision, now, settings.fix);
  return {std::move(verdict), std::move(decision)};
}

bool needs_paused_processes(const EntryFacts& facts, const JudgingSettings& settings) {
  const auto old = [&](const FileStat& guard) {
    return guard_age(guard, settings.now_ns) >= settings.guard_threshold.count();
  };
  if (facts.parsed.role == EntryRole::reclaim_guard) return facts.stat && old(*facts.stat);
  return facts.guard && old(*facts.guard);
}

EntryJudge::EntryJudge(System& system, const std::string& directory, const SurveySettings& settings)
    : system_(system), directory_(directory), settings_(with_host(system, directory, settings)) {}

namespace {

/// The possible owners' candidates of `uid` (JudgingSettings::runtimes, System::
/// runtime_processes), with their start times, executables, working directories and why
/// they count; this process left out.
std::optional<std::vector<ProcessInfo>> runtime_candidates(System& system, std::uint32_t uid) {
  auto found = system.runtime_processes(uid);
  if (!found) return std::nullopt;
  std::vector<ProcessInfo> candidates;
  for (const RuntimeProcess& process : *found) {
    if (process.pid == system.pid()) continue;
    if (auto info = system.process_info(process.pid)) {
      info->executable = process.executable;
      info->cwd = process.cwd;
      info->runtime_sign = process.sign;
      candidates.push_back(std::move(*info));
    }
  }
  return candidates;
}

}  // namespace

Judgement EntryJudge::judge(EntryFacts facts, const EntryLabel* label) {
  const SurveySettings* settings = &settings_;
  if (needs_paused_processes(facts, settings_.judge)) {
    std::call_once(paused_once_, [&] {
      with_paused_ = settings_;
      with_paused_.judge.paused = system_.paused_processes();
    });
    settings = &with_paused_;
  }
  SurveySettings with_owners;
  if (needs_possible_owners(facts, settings_.judge)) {  // rare: a damaged or pid-less record
    std::call_once(owners_once_, [&] {
      runtimes_ = runtime_candidates(system_, settings_.judge.area_uid);
    });
    with_owners = *settings;
    with_owners.judge.runtimes = runtimes_;
    settings = &with_owners;
  }
  auto [verdict, decision] = judge_entry(facts, *settings, label);
  return Judgement{std::move(facts), std::move(verdict), std::move(decision), label};
}

EntryFacts EntryJudge::gather(const std::string& name) {
  ProcessCache processes(system_, settings_.judge.host, !settings_.judge.not_owners.empty());
  return gather_entry(system_, directory_, name, settings_.judge.area_uid, processes);
}

Judgement EntryJudge::entry(const std::string& name, const EntryLabel* label) {
  return judge(gather(name), label);
}

Judgement EntryJudge::absent(const std::string& name, const EntryLabel* label) {
  EntryFacts facts;
  facts.name = name;
  facts.path = entry_path(directory_, name);
  facts.parsed = parse_entry_name(name);
  return judge(std::move(facts), label);
}

namespace {

/// How often an entry that looks dead is gathered again because it changed under the probe.
constexpr int reconfirm_limit = 5;

/// True when the entry is still the very directory, unchanged, whose owner record was read:
/// same device and inode, and the same ctime and mtime. A release renames the lock away (a
/// rename sets the ctime) and a new owner publishes another directory (a new inode, or a
/// reused inode number with a new ctime); Apnea never rewrites a published owner.json, and
/// replacing it inside the directory changes the directory's mtime. So this one lstat says
/// "same device, inode and token" without reading the record again.
bool unchanged_since(System& system, const DirRef& dir, const EntryFacts& facts) {
  if (!facts.stat) return true;  // nothing read: nothing to re-confirm
  auto now = system.lstat_in(dir, facts.name);
  return now && now->unchanged_since(*facts.stat);
}

/// The locks of an area that have a reclaim guard, from one listing of it.
struct GuardedLocks {
  std::unordered_set<std::string> names;

  /// Notes `name` if it is a reclaim guard.
  void note(std::string_view name) {
    if (!name.ends_with(role_suffix(EntryRole::reclaim_guard))) return;
    const EntryName parsed = parse_entry_name(name);
    if (parsed.role == EntryRole::reclaim_guard) names.insert(parsed.lock_name());
  }
};

/// A survey in progress: the area's descriptor, the judge and the pid cache it shares.
class Survey {
 public:
  Survey(System& system, const DirRef& dir, const SurveySettings& settings, const LabelIndex& labels)
      : system_(system), dir_(dir), judge_(system, dir.path, settings),
        processes_(system, judge_.settings().judge.host, !judge_.settings().judge.not_owners.empty()),
        labels_(labels) {}

  EntryJudge& judge() { return judge_; }

  const EntryLabel* label_of(std::string_view name, const EntryName& parsed) const {
    if (parsed.role == EntryRole::unknown) return nullptr;
    std::string scratch;
    return labels_.find(lock_name_view(name, parsed, scratch));
  }

  /// Entry `name` gathered, judged and re-confirmed; nothing when it vanished since the
  /// listing.
  std::optional<Judgement> one(std::string_view name, const GuardedLocks& guarded) {
    EntryName parsed = parse_entry_name(name);
    GuardListing guard = GuardListing::unknown;
    if (parsed.role != EntryRole::unknown && parsed.role != EntryRole::reclaim_guard)
      guard = guarded.names.contains(parsed.lock_name()) ? GuardListing::present : GuardListing::absent;
    const EntryLabel* label = label_of(name, parsed);
    const std::uint32_t uid = judge_.settings().judge.area_uid;
    EntryFacts facts = gather_entry_in(system_, dir_, name, std::move(parsed), uid, processes_, guard);
    if (!facts.stat && !facts.kept_changing) return std::nullopt;
    Judgement judged = judge_.judge(std::move(facts), label);
    // A verdict of death is re-confirmed before it is reported (PROTOCOL.md section 10,
    // "Re-confirmation"): every pid whose ESRCH came from the survey's cache is probed
    // again (a pid found dead earlier may name a new process by now), and then the
    // entry must still be the same object with the same owner record (one lstat: Apnea
    // never rewrites a published record). Otherwise it changed under us (a release and a
    // new owner; a candidate removed by its writer just before it exited) and is gathered
    // again with fresh probes, or dropped when it is gone.
    for (int tries = 0; looks_removable(judged); ++tries) {
      if (still_dead(judged.facts) &&
          (judged.facts.confirmed_after_probe || unchanged_since(system_, dir_, judged.facts)))
        break;
      EntryFacts again;
      if (tries == reconfirm_limit) {
        again = std::move(judged.facts);
        again.kept_changing = true;  // never the same twice: changing, not dead
      } else {
        ProcessCache fresh(system_, judge_.settings().judge.host, !judge_.settings().judge.not_owners.empty());
        again = gather_entry_in(system_, dir_, name, parse_entry_name(name), uid, fresh,
                                GuardListing::unknown);
        if (!again.stat && !again.kept_changing) return std::nullopt;  // gone for good
      }
      judged = judge_.judge(std::move(again), label);
    }
    return judged;
  }

 private:
  /// A lock, candidate or tombstone with a proof of death: what re-confirmation is for.
  static bool looks_removable(const Judgement& judged) {
    const EntryFacts& facts = judged.facts;
    return has_owner_record(facts.parsed.role) && facts.stat && !facts.kept_changing &&
           judged.verdict.proof_class != ProofClass::none;
  }

  /// True when every pid of the record whose ESRCH came from the survey's cache (probed
  /// for an earlier record) answers ESRCH again now; a pid probed for this record, before
  /// the re-read that follows, needs no second probe.
  bool still_dead(const EntryFacts& facts) {
    const auto dead_now = [&](const ProcessFacts& process) {
      return process.signal_errno != ESRCH || !process.from_cache ||
             system_.signal_probe(static_cast<std::int64_t>(process.pid)) == ESRCH;
    };
    if (facts.process && !dead_now(*facts.process)) return false;
    for (const auto& [pid, process] : facts.named)
      if (!(facts.process && pid == facts.process->pid) && !dead_now(process)) return false;
    return true;
  }

  System& system_;
  const DirRef& dir_;
  EntryJudge judge_;
  ProcessCache processes_;
  const LabelIndex& labels_;
};

/// The listing's first read (`list`, as survey_area reads it): every name noted in
/// `guarded`; how many there are.
template <class List>
SysResult<std::size_t> note_guards(const List& list, GuardedLocks& guarded) {
  std::size_t listed = 0;
  auto read = list([&](const DirEntry& entry) {
    guarded.note(entry.name);
    ++listed;
    return true;
  });
  if (!read) return std::unexpected(read.error());
  return listed;
}

}  // namespace

SysResult<std::size_t> survey_area(System& system, const std::string& directory,
                                   const SurveySettings& settings, const LabelIndex& labels,
                                   const std::set<std::string>& expected_locks,
                                   const std::function<void(const JudgedEntry&)>& visit) {
  // Every per-entry call is relative to the directory, opened once (not following a
  // symlink), and the listing reads that same descriptor; by path only when it cannot be
  // opened.
  Descriptor opened;
  if (auto fd = system.open_directory(directory)) opened = Descriptor(system, *fd);
  const DirRef dir{opened.get(), directory};

  const auto list = [&](const std::function<bool(const DirEntry&)>& each) {
    return dir.fd >= 0 ? system.list_directory_at(dir.fd, each) : system.list_directory(directory, each);
  };
  // The listing is read twice: once for which locks have a guard (a guard may be listed
  // after its lock), then entry by entry, judged in batches, so no survey holds every name.
  GuardedLocks guarded;
  auto listed = note_guards(list, guarded);
  if (!listed) return listed;
  // An empty area, the usual one, reads no host facts.
  if (*listed == 0 && expected_locks.empty()) return listed;

  Survey survey(system, dir, settings, labels);
  (void)labels.size();  // resolves lazy labels now: find() is then read-only, thread-safe
  std::set<std::string> absent = expected_locks;
  // Names are judged a batch at a time: while up to `jobs` threads gather and judge one
  // batch, this one first visits the batch before it, in listing order, then helps.
  struct Batch {
    std::vector<std::string> names;
    std::vector<std::optional<Judgement>> judged;
  };
  Batch ready, filling;
  // Enough pieces for every job (detail::pieces_per_thread each), and no more in memory.
  const std::size_t batch_size = detail::pieces_per_thread * std::max(settings.jobs, 1U);
  const auto deliver = [&](Batch& batch) {
    for (const std::optional<Judgement>& judged : batch.judged) {
      if (!judged) continue;
      if (judged->facts.parsed.role == EntryRole::lock) absent.erase(judged->facts.name);
      visit(judged->view());
    }
    batch.judged.clear();
  };
  const auto step = [&] {
    filling.judged.assign(filling.names.size(), std::nullopt);
    detail::for_each_index(
        filling.names.size(), settings.jobs,
        [&](std::size_t i) { filling.judged[i] = survey.one(filling.names[i], guarded); },
        [&] { deliver(ready); });
    filling.names.clear();
    std::swap(ready, filling);
  };
  std::size_t count = 0;
  std::exception_ptr failed;  // a visit that threw while the listing went on
  auto second = list([&](const DirEntry& entry) {
    filling.names.push_back(entry.name);
    ++count;
    if (filling.names.size() < batch_size) return true;
    try {
      step();
    } catch (...) {
      failed = std::current_exception();
      return false;
    }
    return true;
  });
  if (failed) std::rethrow_exception(failed);
  if (!second) return std::unexpected(second.error());
  if (!filling.names.empty()) step();
  deliver(ready);
  for (const std::string& name : absent)
    visit(survey.judge().absent(name, survey.label_of(name, parse_entry_name(name))).view());
  return count;
}

}  // namespace apnea_locks
