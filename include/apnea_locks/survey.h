// The survey: one pass over a lock area gathering every entry's facts (each pid probed
// once, the host facts and the namespace view read once), each judged by classify and
// decided by the one policy. status, inspect, check, reclaim and run all take their
// verdicts, decisions and fix commands from here.
#pragma once

#include <cstddef>
#include <functional>
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

/// Everything a survey judges and decides with.
struct SurveySettings {
  ClassifyPolicy judge;  ///< now, area uid, tolerance, guard age, host facts
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

/// The settings for a survey of `directory` now: the host facts read once (at once, or
/// when first needed), --guard-age and --tolerance (nanoseconds; their texts, when given,
/// repeated by fix commands).
SurveySettings survey_settings(System& system, const std::string& directory,
                               std::int64_t tolerance_ns, std::int64_t guard_age_ns,
                               bool force, HostRead host = HostRead::now);

/// `settings` with the host facts of `directory` read, if they were still pending.
SurveySettings with_host(System& system, const std::string& directory, SurveySettings settings);

/// Judges and decides one entry (classify, then decide and fix_argv): the verdict with its
/// `fix` filled, and the decision under `settings.flags`. Pure.
std::pair<Verdict, Decision> judge_entry(const EntryFacts& facts, const SurveySettings& settings,
                                         const EntryLabel* label);

/// Surveys `directory`: every entry (one directory pass, whose guard names answer each
/// lock's guard question) gathered relative to the directory, re-confirmed when it looks
/// stale (same device, inode and token after the probe), judged and decided, and passed to
/// `visit` in listing order with its label, on the calling thread. With `settings.jobs`
/// above one, that many threads gather and judge, from the first names listed on while the
/// listing goes on (an entry taken before the listing is whole looks its guard up itself).
/// Then each name of `expected_locks` that was not listed, judged as absent. Pending host
/// facts are read before the first judgement (never for an empty area). A visit that throws
/// ends the survey with its exception. Returns the number of entries listed, or the listing
/// error.
SysResult<std::size_t> survey_area(System& system, const std::string& directory,
                                   const SurveySettings& settings, const LabelIndex& labels,
                                   const std::set<std::string>& expected_locks,
                                   const std::function<void(const JudgedEntry&)>& visit);

/// Gathers, judges and decides the single entry `name` of `directory` (inspect, run, and
/// reclaim's re-validation), probing afresh.
EntryFacts survey_entry(System& system, const std::string& directory, const std::string& name,
                        const SurveySettings& settings);

}  // namespace apnea_locks
