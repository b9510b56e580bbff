// status/check --all-users (root): every account's lock area under the temp dir, each
// surveyed by a child process that has become that account for good (System::become, as
// `--user` does; a drop is irreversible, so one child per account). The child sends back
// one AccountReport, the same for status and check; the parent merges and renders. Which
// `apnea-*` entries are an account's area is the core's judgement (find_account_areas in
// lock_area.h).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "apnea_locks/lock_area.h"
#include "apnea_locks/system.h"
#include "cli/area.h"
#include "cli/prometheus.h"
#include "cli/summary.h"

namespace apnea_locks::cli {

/// One entry as a surveying child rendered it, for the parent to place: a table row, a raw
/// line, or (JSON) the entry's object as the only cell.
struct RenderedEntry {
  EntryOrder order;                ///< where a table row goes
  std::string colour;              ///< a table row's SGR colour, or empty
  std::vector<std::string> cells;  ///< the row's or the line's cells, or the JSON object
};

/// What `check` found in one area beyond its totals.
struct CheckFindings {
  std::size_t stale_attention = 0;     ///< stale locks that need attention
  std::size_t blocking_guards = 0;     ///< recent guards of dead locks: Apnea is refused
  std::size_t old_locks_warning = 0;   ///< locks whose age alerts the -w range
  std::size_t old_locks_critical = 0;  ///< locks whose age alerts the -c range
  std::vector<std::string> critical_details;  ///< long-output lines of CRITICAL findings
  std::vector<std::string> details;           ///< the others that need a human
  std::vector<std::string> fine;              ///< entries that need nothing (-vv)

  /// Adds the counts of `other`, and its lines after these.
  void add(const CheckFindings& other);
};

/// What the child that surveyed one account's area reports to the parent, for status and
/// check alike; each command fills the parts it renders.
struct AccountReport {
  /// The child finished its survey; when not, `error` says why and `entries` holds what
  /// it sent before.
  bool finished = false;
  std::optional<std::string> check;    ///< the child's area check (AreaCheck::name), if it ran
  std::string message;                 ///< that check's message
  std::optional<std::string> error;    ///< why the area was not surveyed (one line)
  bool area_safe = true;               ///< the area is safe, or missing
  bool scrape_success = true;          ///< the area could be checked and, when safe, listed
  std::optional<AreaSummary> summary;  ///< the totals, when the area was listed (or is missing)
  std::vector<RenderedEntry> entries;  ///< status: the entries shown, in the order judged
  int status = 0;                      ///< check: the area's Nagios status
  CheckFindings findings;              ///< check: what it found beyond the totals
};

/// Streams an entry shown from the surveying child to the parent.
using ShowEntry = std::function<void(const RenderedEntry&)>;

/// A child's survey: calls `show` with each entry as it is shown and returns the rest of
/// its report.
using AccountSurvey = std::function<AccountReport(const ShowEntry& show)>;

/// Adds `--all-users` to `options`.
void add_all_users_option(po::options_description& options, bool& all_users);

/// Adds the option groups status and check share, in their order: the label options (--repo
/// a filter), the timing options, the area options and `--all-users`.
void add_survey_options(po::options_description& options, LabelOptions& labels,
                        TimingOptions& timing, AreaOptions& area, bool& all_users);

/// The usage error of --all-users: not root ("--all-users needs root"), or given with
/// --user, --lock-dir or explicit paths (`paths`: the name of those, empty when none).
std::optional<CommandFailure> all_users_usage(System& system, const AreaOptions& area,
                                              std::string_view paths = {});

/// The user column's text: the account's name, or its uid when the name is empty.
std::string user_name(const AccountArea& area);

/// The lock area of `area`'s account as that account sees it (its own area, which may not
/// exist yet; its home), for the survey in the child that has become the account.
LockArea account_lock_area(const AccountArea& area);

/// The one line for the foreign entries under `tmpdir` (`apnea-*` entries that are not an
/// account's own area: anyone can make one), escaped: "2 foreign entries under /tmp, not
/// judged: 'apnea-foo' (owner uid 1000; its name is not apnea-<uid>), 'apnea-2' (owner uid
/// 1000; a symlink)"; the first five named, then "and N more".
std::string foreign_line(const std::string& tmpdir, const std::vector<const AccountArea*>& foreign);

/// The metrics of the temp dir itself: how many foreign entries it holds.
MetricsReport foreign_metrics(const std::string& tmpdir, std::size_t count);

/// Runs `survey` in a child that has become `account` (unless this process is that uid
/// already) and returns the report it sent, its entries in the order shown. The child's
/// output and exit go nowhere else. When the child could not be started, could not become
/// the account, or died without finishing, the report is not `finished`, `error` says so in
/// one line and `scrape_success` is false.
AccountReport survey_as_account(System& system, const Account& account,
                                const AccountSurvey& survey);

/// The metrics of `area` (its lock_dir and user labels: the account's name, else its uid),
/// as `report` gives them: null when the survey could not start. The counts only from a
/// finished survey.
MetricsReport account_metrics(const AccountArea& area, const AccountReport* report);

/// Adds `from` to `into`: counts summed, the oldest lock and the worst next step kept.
void merge_summary(AreaSummary& into, const AreaSummary& from);

}  // namespace apnea_locks::cli
