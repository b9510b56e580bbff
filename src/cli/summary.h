// One judging pass over the lock area, shared by `status` and `check`: the labels, the
// classify policy, scan_area + classify for every entry, and the counts the summary, the
// Nagios line and the Prometheus metrics are made of. No protocol I/O of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/labels.h"
#include "apnea_locks/survey.h"
#include "apnea_locks/system.h"
#include "cli/common.h"
#include "cli/entry_report.h"

namespace apnea_locks::cli {

/// The options that say which repositories are known by name.
struct LabelOptions {
  std::vector<std::string> repos;  ///< --repo: labelled and, for status/check, a filter
  std::vector<std::string> scans;  ///< --scan: folders whose .apnea/ repositories are labelled
  int scan_depth = 4;
};

/// Adds `--repo PATH`, `--scan DIR` and `--scan-depth N` to `options`; `repo_help` says
/// what --repo does for the command.
void add_label_options(po::options_description& options, LabelOptions& labels,
                       const char* repo_help);

/// The labels of a pass, and the lock names --repo asked for.
struct Labels {
  LabelIndex index;
  std::set<std::string> repo_locks;  ///< entry names of the --repo locks; empty: no filter
};

/// Labels the current directory's repository, the home's global setup lock, every
/// repository under each --scan and each --repo. Fails with a message naming the option
/// and the path that does not resolve to a directory (a path the user typed: callers
/// exit exit_bad_path, check UNKNOWN).
std::expected<Labels, std::string> build_labels(System& system, const LabelOptions& options);

/// The timing options of a judging command, range-checked when the command line is parsed.
struct TimingOptions {
  std::int64_t tolerance_ns = default_tolerance_ns;
  std::int64_t guard_age_ns = default_guard_age_ns;
  unsigned jobs = 0;  ///< --jobs: threads gathering entries; 0 = one per CPU we may run on
};

/// The most --jobs accepted.
inline constexpr unsigned max_jobs = 64;

/// The default --jobs: the number of CPUs this process may run on (1..max_jobs).
unsigned default_jobs();

/// Adds `--tolerance DURATION` (default 2s, 1s..1d), `--guard-age DURATION` (default 5m,
/// 1m..30d) and `--jobs N` (1..max_jobs, default the CPU count) to `options`; `guard_help` (null: the status wording) says what --guard-age does
/// for the command.
void add_timing_options(po::options_description& options, TimingOptions& timing,
                        const char* guard_help = nullptr);

/// The survey settings for a pass over `area` now (host facts read once), deciding for
/// `reclaim` with `force`. (The timing options were checked when they were parsed: this does
/// not fail today.)
std::expected<SurveySettings, std::string> judging_policy(System& system, const LockArea& area,
                                                          const TimingOptions& timing,
                                                          bool force = false);

/// Lists `area` with scan_area and calls `visit` with each entry judged by classify (with
/// its label); then, for each name of `expected_locks` that was not listed, with that lock
/// judged as absent (`free`). Returns the number of entries listed, or the listing error
/// (then no absent lock is visited).
SysResult<std::size_t> judge_area(System& system, const std::string& area,
                                  const SurveySettings& settings, const LabelIndex& labels,
                                  const std::set<std::string>& expected_locks,
                                  const std::function<void(const EntryView&)>& visit);

/// Calls `visit` with each lock of `names` (entry names in `area`) judged as absent
/// (`free`), as when the area does not exist yet.
void judge_absent_locks(const std::string& area, const SurveySettings& settings,
                        const LabelIndex& labels, const std::set<std::string>& names,
                        const std::function<void(const EntryView&)>& visit);

/// (kind, role, state) as the metrics name them: "unknown" for the kind of an unknown entry.
using EntryClass = std::tuple<std::string, std::string, std::string>;

/// Counts of the entries of one pass (after filters).
struct AreaSummary {
  std::size_t scanned = 0;    ///< entries listed (set by the caller)
  std::size_t shown = 0;      ///< entries added
  std::size_t attention = 0;  ///< entries needing attention
  std::map<std::string, std::size_t> states;  ///< by state name
  std::map<std::string, std::size_t> roles;   ///< by role name
  std::map<EntryClass, std::size_t> classes;  ///< by (kind, role, state)
  std::size_t locks = 0;            ///< locks present (role lock, not free)
  std::size_t live = 0;             ///< locks in state live
  std::size_t stale = 0;            ///< locks in state stale
  std::size_t malformed = 0;        ///< locks in state malformed
  std::size_t debris = 0;           ///< candidates and tombstones in state debris
  std::size_t leftover_guards = 0;  ///< reclaim guards in state leftover
  std::optional<std::int64_t> oldest_lock_age_ns;  ///< of the locks present

  /// Counts one entry.
  void add(const EntryView& entry);
};

}  // namespace apnea_locks::cli
