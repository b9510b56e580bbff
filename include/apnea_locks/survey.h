// The survey: one pass over a lock area gathering every entry's facts (each pid probed
// once, the host facts and the namespace view read once), each judged by classify and
// decided by the one policy. status, inspect, check, reclaim and run all take their
// verdicts, decisions and fix commands from here.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/labels.h"
#include "apnea_locks/policy.h"
#include "apnea_locks/scan.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// When survey_settings reads the host facts (gather_host).
enum class HostRead {
  now,          ///< at once
  when_needed,  ///< by survey_area once it has an entry to judge (never for an empty area)
};

/// The two windows a survey judges and decides with.
struct Windows {
  std::chrono::nanoseconds tolerance = default_reuse_tolerance;  ///< --tolerance (pid-reused)
  std::chrono::nanoseconds guard_age = default_guard_age;        ///< --guard-age
};

/// Everything a survey judges and decides with.
struct SurveySettings {
  JudgingSettings judge;  ///< now, area uid, tolerance, guard age, host facts
  RemovalFlags flags;    ///< the flags the decisions are for (reclaim's; status: none)
  FixContext fix;        ///< what the fix command repeats
  /// How many threads gather and judge entries at once (survey_area; the visits stay in
  /// listing order on the calling thread). More than one needs a System that is safe to
  /// call from several threads (the real one is).
  unsigned jobs = 1;
  /// The host facts are not read yet (HostRead::when_needed): survey_area reads them before
  /// it judges anything, with_host reads them for anyone else. Judged without them, no
  /// proof is certain (an empty HostFacts knows nothing).
  bool host_pending = false;
};

/// One entry, judged and decided.
struct JudgedEntry {
  const EntryFacts& facts;
  const Verdict& verdict;
  const Decision& decision;
  const EntryLabel* label;  ///< may be null
};

/// One entry's facts with its verdict and decision: what EntryJudge returns.
struct Judgement {
  EntryFacts facts;
  Verdict verdict;
  Decision decision;
  const EntryLabel* label = nullptr;  ///< may be null

  /// A view of it, as survey_area visits entries.
  JudgedEntry view() const { return JudgedEntry{facts, verdict, decision, label}; }
};

/// The settings for a survey of `directory` now: the host facts read once (at once, or
/// when first needed), and `windows` (the fix context, for the texts fix commands repeat,
/// is the caller's).
SurveySettings survey_settings(System& system, const std::string& directory, Windows windows,
                               bool force, HostRead host = HostRead::now);

/// `settings` with the host facts of `directory` read, if they were still pending.
SurveySettings with_host(System& system, const std::string& directory, SurveySettings settings);

/// Judges and decides one entry (classify, then decide, then the one fix): the verdict, and
/// the decision under `settings.flags` with its `fix` filled. Pure: the paused processes are
/// those `settings` holds (EntryJudge reads them when an entry needs them).
std::pair<Verdict, Decision> judge_entry(const EntryFacts& facts, const SurveySettings& settings,
                                         const EntryLabel* label);

/// True when judging `facts` needs the paused processes: the entry is a reclaim guard, or
/// has one, at least the guard threshold old (only such a guard's holder is looked for).
bool needs_paused_processes(const EntryFacts& facts, const JudgingSettings& settings);

/// The one way every command judges an entry of one area: gathered (or given), judged with
/// the paused processes when it needs them (read once, on first need), decided, and its fix
/// built. May be called from several threads when its System may.
class EntryJudge {
 public:
  /// A judge of entries of `directory` under `settings`; pending host facts are read now.
  EntryJudge(System& system, const std::string& directory, const SurveySettings& settings);
  EntryJudge(const EntryJudge&) = delete;
  EntryJudge& operator=(const EntryJudge&) = delete;

  /// The settings judged with (host facts read).
  const SurveySettings& settings() const { return settings_; }

  /// The facts of entry `name` of the directory, gathered afresh (every pid probed now;
  /// the guard looked up); no `stat` when it is not there.
  EntryFacts gather(const std::string& name);

  /// Judges facts already gathered.
  Judgement judge(EntryFacts facts, const EntryLabel* label);

  /// judge(gather(name), label): an entry that is not there is judged as absent.
  Judgement entry(const std::string& name, const EntryLabel* label);

  /// Judges the lock `name` as absent without touching the disk (an area that is missing
  /// or unsafe to read).
  Judgement absent(const std::string& name, const EntryLabel* label);

 private:
  System& system_;
  std::string directory_;
  SurveySettings settings_;
  std::once_flag paused_once_, owners_once_;
  SurveySettings with_paused_;  ///< the settings with the paused processes read
  std::optional<std::vector<ProcessInfo>> runtimes_;  ///< the possible owners, once read
};

/// Surveys `directory`: every entry (the listing read twice from one descriptor: first for
/// the guard names that answer each lock's guard question, then entry by entry, in
/// batches) gathered relative to the directory, re-confirmed when it looks
/// stale (same device, inode and token after the probe), judged and decided, and passed to
/// `visit` in listing order with its label, on the calling thread. With `settings.jobs`
/// above one, up to that many threads gather and judge. Then each name of `expected_locks`
/// that was not listed, judged as absent. Pending host facts are read before the first
/// judgement (never for an empty area). A visit that throws ends the survey with its
/// exception. Returns the number of entries listed, or the listing error.
SysResult<std::size_t> survey_area(System& system, const std::string& directory,
                                   const SurveySettings& settings, const LabelIndex& labels,
                                   const std::set<std::string>& expected_locks,
                                   const std::function<void(const JudgedEntry&)>& visit);

}  // namespace apnea_locks
