// The Prometheus text exposition format (version 0.0.4) of one pass over the lock area, for
// node_exporter's textfile collector: the text (pure) and the one writer every command's
// metrics go through. Names in docs/metrics.md.
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/system.h"
#include "cli/summary.h"

namespace apnea_locks::cli {

/// What the metrics of one pass say.
struct MetricsReport {
  std::string lock_dir;        ///< the `lock_dir` label of every sample
  std::string version;         ///< apnea-locks' version, for apnea_locks_build_info
  bool area_safe = true;       ///< the area is safe, or missing (nothing to be unsafe)
  bool scrape_success = true;  ///< the area could be checked and, when safe, listed
  /// The counts; null when the area was not listed (unsafe, or the listing failed): then
  /// only the success, safety and info gauges are written.
  const AreaSummary* summary = nullptr;
  std::optional<int> check_status;  ///< `check --prometheus`: the Nagios status 0..3
  /// The `user` label after lock_dir (`check --all-users`); none when nothing.
  std::optional<std::string> user;
  /// False for the temp dir's report (--all-users), which has only the foreign entries.
  bool area = true;
  /// The temp dir's `apnea-*` entries that are not an account's own area (--all-users).
  std::optional<std::size_t> foreign_entries;
};

/// The report of the area at `lock_dir`, by this apnea-locks: safe and scraped until the
/// pass says otherwise, no counts yet.
MetricsReport area_metrics(std::string lock_dir);

/// The exposition text: every family with `# HELP` and `# TYPE` lines, one sample per line,
/// ending in a newline. apnea_locks_entries has a sample (0 when none) for every
/// (kind, role, state) an entry can have, plus any other seen.
std::string prometheus_text(const MetricsReport& report);

/// The exposition text of several areas (`check --all-users`): each family once, with one
/// sample (or set of samples) per report, told apart by their lock_dir and user labels.
std::string prometheus_text(const std::vector<MetricsReport>& reports);

/// Writes the exposition text of `reports`: to standard output (flushed), or to
/// `output_file` when it is not empty, replaced atomically. Fails with one line naming the
/// file.
std::expected<void, std::string> write_metrics(System& system, const std::vector<MetricsReport>& reports,
                                               const std::string& output_file);

/// A label value escaped for the exposition format (`\\`, `\"`, `\n`); invalid UTF-8 is
/// replaced by U+FFFD.
std::string prometheus_label_value(std::string_view text);

}  // namespace apnea_locks::cli
