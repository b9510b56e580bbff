#include "cli/prometheus.h"

#include "cli/atomic_file.h"
#include "cli/fields.h"
#include "cli/text.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <map>

#include "apnea_locks/owner.h"

#ifndef APNEA_LOCKS_VERSION
#define APNEA_LOCKS_VERSION "unknown"
#endif

namespace apnea_locks::cli {
namespace {

/// Every (kind, role, state) an entry of a lock area can have in a steady scan; each gets a
/// sample even when 0, so that alert expressions never see an absent series.
std::map<EntryClass, std::size_t> every_class() {
  std::map<EntryClass, std::size_t> out;
  for (const char* kind : {"repository", "global-setup"}) {
    for (const char* state : {"live", "stale", "malformed", "live-malformed", "in-flight"})
      out[{kind, "lock", state}] = 0;
    for (const char* role : {"candidate", "tombstone"})
      for (const char* state : {"in-flight", "debris"}) out[{kind, role, state}] = 0;
    for (const char* state : {"in-flight", "leftover"}) out[{kind, "reclaim-guard", state}] = 0;
  }
  out[{"unknown", "unknown", "unknown"}] = 0;
  return out;
}

class Exposition {
 public:
  void family(std::string_view name, std::string_view help) {
    name_ = name;
    text_ += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
  }

  /// The labels every sample of `report` starts with: lock_dir, and user when it has one.
  void report(const MetricsReport& report) {
    base_ = fmt::format("lock_dir=\"{}\"", prometheus_label_value(report.lock_dir));
    if (report.user) base_ += fmt::format(",user=\"{}\"", prometheus_label_value(*report.user));
  }

  /// A sample of the current family and report; `labels` follow the report's (already
  /// escaped, each starting with a comma).
  void sample(std::string_view value, std::string_view labels = {}) {
    text_ += fmt::format("{}{{{}{}}} {}\n", name_, base_, labels, value);
  }

  void sample(std::int64_t value, std::string_view labels = {}) { sample(fmt::format("{}", value), labels); }
  /// A sample of the current family with `labels` alone (already escaped).
  void bare_sample(std::int64_t value, std::string_view labels) {
    text_ += fmt::format("{}{{{}}} {}\n", name_, labels, value);
  }

  std::string take() { return std::move(text_); }

 private:
  std::string base_;
  std::string name_;
  std::string text_;
};

}  // namespace

std::string prometheus_label_value(std::string_view text) {
  // The one escaper first (controls, C1 and invalid UTF-8 as visible escapes), then the
  // exposition format's own escapes.
  const std::string valid = printable(text);
  std::string out;
  out.reserve(valid.size());
  for (char c : valid) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

MetricsReport area_metrics(std::string lock_dir) {
  MetricsReport report;
  report.lock_dir = std::move(lock_dir);
  report.version = APNEA_LOCKS_VERSION;
  return report;
}

std::string prometheus_text(const MetricsReport& report) {
  return prometheus_text(std::vector<MetricsReport>{report});
}

std::string prometheus_text(const std::vector<MetricsReport>& reports) {
  Exposition out;
  // Each family once (with HELP and TYPE), then a sample per report that has it.
  auto each = [&](std::string_view name, std::string_view help, auto&& has, auto&& write) {
    bool any = false;
    for (const MetricsReport& report : reports) any = any || has(report);
    if (!any) return;
    out.family(name, help);
    for (const MetricsReport& report : reports) {
      if (!has(report)) continue;
      out.report(report);
      write(report);
    }
  };
  auto always = [](const MetricsReport& report) { return report.area; };
  auto listed = [](const MetricsReport& report) { return report.summary != nullptr; };
  // One sample, labelled by the version alone: it is about the program, not an area.
  if (!reports.empty()) {
    out.family("apnea_locks_build_info", "apnea-locks version that wrote these metrics (always 1).");
    out.bare_sample(1, fmt::format("version=\"{}\"", prometheus_label_value(reports.front().version)));
  }
  each("apnea_locks_scrape_success",
       "1 when the lock area could be checked and, if safe, listed; 0 when it could not be read.",
       always, [&](const MetricsReport& report) { out.sample(report.scrape_success ? 1 : 0); });
  each("apnea_locks_area_safe",
       "1 when the lock area is safe (or does not exist yet); 0 when it is a symlink, "
       "another user's, not a directory, open to group/other, or unreadable.",
       always, [&](const MetricsReport& report) { out.sample(report.area_safe ? 1 : 0); });
  each("apnea_locks_foreign_entries",
       "(--all-users) apnea-* entries of the temp dir that are not an account's own area: "
       "anyone can make one, so they are counted, not judged.",
       [](const MetricsReport& report) { return report.foreign_entries.has_value(); },
       [&](const MetricsReport& report) { out.sample(static_cast<std::int64_t>(*report.foreign_entries)); });
  each("apnea_locks_check_status", "The status of apnea-locks check: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
       [](const MetricsReport& report) { return report.check_status.has_value(); },
       [&](const MetricsReport& report) { out.sample(*report.check_status); });
  each("apnea_locks_entries",
       "Entries of the lock area by kind (repository, global-setup, unknown), role "
       "(lock, candidate, tombstone, reclaim-guard, unknown) and state.",
       listed, [&](const MetricsReport& report) {
         auto classes = every_class();
         for (const auto& [key, count] : report.summary->classes) classes[key] = count;
         // The label names come from the field table (fields.h): kind, role, state.
         const auto& label_fields = prometheus_label_fields();
         for (const auto& [key, count] : classes) {
           const auto& [kind, role, state] = key;
           const std::string_view values[] = {kind, role, state};
           std::string labels;
           for (std::size_t i = 0; i < label_fields.size() && i < std::size(values); ++i)
             labels += fmt::format(",{}=\"{}\"", field_info(label_fields[i]).prometheus_label,
                                   prometheus_label_value(values[i]));
           out.sample(static_cast<std::int64_t>(count), labels);
         }
       });
  each("apnea_locks_entries_needing_attention", "Entries a human (or apnea-locks reclaim) must act on.",
       listed, [&](const MetricsReport& report) {
         out.sample(static_cast<std::int64_t>(report.summary->attention));
       });
  each("apnea_locks_oldest_lock_mtime_seconds",
       "The mtime of the oldest lock directory (Unix time); no sample when there is no lock. "
       "Its age is time() minus this, however old the file holding it.",
       [](const MetricsReport& report) {
         return report.summary != nullptr && report.summary->oldest_lock_mtime_ns.has_value();
       },
       [&](const MetricsReport& report) {
         out.sample(fmt::format("{:.3f}", static_cast<double>(*report.summary->oldest_lock_mtime_ns) / 1e9));
       });
  each("apnea_locks_oldest_lock_age_seconds",
       "Deprecated (removed in the next release; a textfile freezes it): use time() - "
       "apnea_locks_oldest_lock_mtime_seconds. Age (now minus the lock directory's mtime) of the "
       "oldest lock when written; 0 when there is none.", listed,
       [&](const MetricsReport& report) {
         out.sample(fmt::format(
             "{:.3f}", static_cast<double>(report.summary->oldest_lock_age_ns.value_or(0)) / 1e9));
       });
  return out.take();
}

std::expected<void, std::string> write_metrics(System& system, const std::vector<MetricsReport>& reports,
                                               const std::string& output_file) {
  const std::string text = prometheus_text(reports);
  if (!output_file.empty()) return write_file_atomically(system, output_file, text);
  fmt::print("{}", text);
  std::fflush(stdout);
  return {};
}

}  // namespace apnea_locks::cli
