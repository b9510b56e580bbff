// apnea-locks check: a monitoring plugin with the Nagios/Icinga conventions. Judges the lock
// area exactly as status does (summary.h) and prints one status line with perfdata, then
// one line per entry that needs a human. Changes nothing (see docs/apnea-locks.1).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/lock_area.h"
#include "cli/atomic_file.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/entry_report.h"
#include "cli/prometheus.h"
#include "cli/render.h"
#include "cli/summary.h"

#ifndef APNEA_LOCKS_VERSION
#define APNEA_LOCKS_VERSION "unknown"
#endif

namespace apnea_locks::cli {
namespace {

constexpr std::string_view command_name = "check";
constexpr CommandHelp help{
    "check",
    "check [options]",
    "A monitoring plugin (Nagios, Icinga, Naemon, Sensu, ...). Judges the lock area as\n"
    "'apnea-locks status' does and prints one line\n"
    "  APNEA-LOCKS OK|WARNING|CRITICAL|UNKNOWN - SUMMARY | PERFDATA\n"
    "then one line per entry that needs a human, with the command that fixes it.\n"
    "Changes nothing.",
    "  CRITICAL  a malformed lock, a leftover reclaim guard, an unsafe lock area,\n"
    "            or a lock older than --crit-age\n"
    "  WARNING   anything else that needs a human: a dead owner Apnea will not\n"
    "            reclaim by itself, debris (dead candidates and tombstones), a lock\n"
    "            older than --warn-age\n"
    "  UNKNOWN   the lock area cannot be read, a --lock-dir, --repo or --scan path\n"
    "            does not exist or is not a directory, or a usage error\n\n"
    "Perfdata: locks live stale malformed debris guards (leftover) attention oldest_age_s.\n\n"
    "Exit status: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."};

enum Status { ok = 0, warning = 1, critical = 2, unknown = 3 };

constexpr std::string_view status_word(int status) {
  switch (status) {
    case ok: return "OK";
    case warning: return "WARNING";
    case critical: return "CRITICAL";
    default: return "UNKNOWN";
  }
}

/// Long output lines after the first: at most this many.
constexpr std::size_t max_detail_lines = 20;

struct CheckOptions {
  AreaOptions area;
  LabelOptions labels;
  TimingOptions timing;
  std::int64_t warn_age_ns = ns_per_hour;
  std::optional<std::int64_t> crit_age_ns;
  bool prometheus = false;
  std::string output_file;
};

po::options_description describe(CheckOptions& o) {
  po::options_description options("Options");
  options.add_options()
      ("warn-age", duration_value("--warn-age", lock_age_range, o.warn_age_ns)->default_value("1h"),
       ("WARNING when a lock is older than this" + duration_help(lock_age_range)).c_str())
      ("crit-age",
       duration_value("--crit-age", lock_age_range, [&o](std::int64_t ns) { o.crit_age_ns = ns; }),
       ("CRITICAL when a lock is older than this (default: never; at least --warn-age)" +
        duration_help(lock_age_range)).c_str())
      ("prometheus", po::bool_switch(&o.prometheus),
       "print Prometheus metrics instead of the status line (exit status unchanged)")
      ("output-file", po::value(&o.output_file)->value_name("PATH"),
       "with --prometheus: write the metrics to PATH atomically and print the status line");
  add_label_options(options, o.labels, "only the entries of this repository's lock, labelled (repeatable)");
  add_timing_options(options, o.timing);
  add_area_options(options, o.area);
  return options;
}

/// Text for the status line: printable, and never a '|' (it starts the perfdata).
std::string line_text(std::string_view text) {
  std::string out = printable(text);
  for (char& c : out)
    if (c == '|') c = '/';
  return out;
}

/// A threshold in perfdata and the summary: whole seconds ("3600").
std::string threshold(std::int64_t ns) { return fmt::format("{}", ns / ns_per_second); }

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

/// What the pass found that a human must act on.
struct Findings {
  AreaSummary summary;
  std::size_t stale_attention = 0;       ///< stale locks that need attention
  std::size_t old_locks_warning = 0;     ///< locks older than --warn-age
  std::size_t old_locks_critical = 0;    ///< locks older than --crit-age
  std::vector<std::string> critical_details;  ///< long-output lines of CRITICAL findings
  std::vector<std::string> details;           ///< the others

  void detail(bool critical_entry, std::string line) {
    (critical_entry ? critical_details : details).push_back(std::move(line));
  }
};

/// ", pid N (command)" for an entry with an accepted owner.
std::string owner_words(const EntryView& entry) {
  const std::string pid = field_text(Field::pid, entry);
  if (pid.empty()) return {};
  const std::string command = shorten(field_text(Field::command, entry), 40);
  return fmt::format(", pid {}{}", pid, command.empty() ? "" : " (" + command + ")");
}

int evaluate(const Findings& f) {
  const AreaSummary& s = f.summary;
  if (s.malformed > 0 || s.leftover_guards > 0 || f.old_locks_critical > 0) return critical;
  if (s.attention > 0 || f.old_locks_warning > 0) return warning;
  return ok;
}

std::string summary_text(const Findings& f, const CheckOptions& o) {
  const AreaSummary& s = f.summary;
  std::vector<std::string> parts;
  if (s.malformed > 0) parts.push_back(plural(s.malformed, "malformed lock", "malformed locks"));
  if (s.leftover_guards > 0)
    parts.push_back(plural(s.leftover_guards, "leftover reclaim guard", "leftover reclaim guards"));
  if (f.stale_attention > 0)
    parts.push_back(plural(f.stale_attention, "stale lock Apnea will not reclaim",
                           "stale locks Apnea will not reclaim"));
  if (s.debris > 0) parts.push_back(plural(s.debris, "debris entry", "debris entries"));
  if (f.old_locks_critical > 0)
    parts.push_back(fmt::format("{} older than {}s", plural(f.old_locks_critical, "lock", "locks"),
                                threshold(*o.crit_age_ns)));
  else if (f.old_locks_warning > 0)
    parts.push_back(fmt::format("{} older than {}s", plural(f.old_locks_warning, "lock", "locks"),
                                threshold(o.warn_age_ns)));
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  const std::string counts =
      s.locks == 0 ? "no locks"
                   : fmt::format("{} ({} live, {} stale, {} malformed), oldest {}",
                                 plural(s.locks, "lock", "locks"), s.live, s.stale, s.malformed,
                                 format_age(s.oldest_lock_age_ns.value_or(0)));
  return text.empty() ? counts : text + "; " + counts;
}

std::string perfdata(const Findings& f, const CheckOptions& o) {
  const AreaSummary& s = f.summary;
  const std::int64_t oldest_s = s.oldest_lock_age_ns.value_or(0) / 1'000'000'000;
  return fmt::format(
      "locks={};;;0 live={};;;0 stale={};;;0 malformed={};;0;0 debris={};0;;0 guards={};;0;0 "
      "attention={};0;;0 oldest_age_s={}s;{};{};0",
      s.locks, s.live, s.stale, s.malformed, s.debris, s.leftover_guards, s.attention, oldest_s,
      threshold(o.warn_age_ns), o.crit_age_ns ? threshold(*o.crit_age_ns) : "");
}

void print_line(int status, std::string_view summary, std::string_view perf = {}) {
  fmt::print("APNEA-LOCKS {} - {}{}{}\n", status_word(status), summary, perf.empty() ? "" : " | ", perf);
}

}  // namespace

int check_command(const std::vector<std::string>& args) {
  CheckOptions o;
  const po::options_description options = describe(o);
  // A plugin reports every failure on its status line, as UNKNOWN.
  auto unknown_line = [](std::string_view message) {
    print_line(unknown, line_text(message));
    std::fflush(stdout);
    return static_cast<int>(unknown);
  };
  auto parsed = try_parse_command_line(args, options);
  if (!parsed)
    return unknown_line(fmt::format("usage: {} (see 'apnea-locks check --help')", parsed.error()));
  if (auto done = standard_action(*parsed, help, options)) return *done;
  if (o.crit_age_ns && *o.crit_age_ns < o.warn_age_ns)
    return unknown_line(fmt::format("usage: --crit-age {}: must be at least --warn-age ({})",
                                    duration_text(*o.crit_age_ns), duration_text(o.warn_age_ns)));
  // The thresholds, as the judging below reads them.
  const std::optional<std::int64_t> warn_ns = o.warn_age_ns;
  const std::optional<std::int64_t>& crit_ns = o.crit_age_ns;
  if (!o.output_file.empty() && !o.prometheus)
    return unknown_line("usage: --output-file needs --prometheus");

  System& system = real_system();
  auto opened = open_lock_area(system, o.area);
  if (!opened) return unknown_line(opened.error().message);
  const LockArea area = std::move(*opened);
  auto labels = build_labels(system, area, o.labels);
  if (!labels) return unknown_line(labels.error());
  auto policy = judging_policy(system, area, o.timing);
  if (!policy) return unknown_line("usage: " + policy.error());

  Findings findings;
  MetricsReport metrics;
  metrics.lock_dir = area.directory;
  metrics.version = APNEA_LOCKS_VERSION;
  std::optional<std::string> problem;  // the status line's text when not from findings
  int status = ok;

  const AreaCheck check = check_lock_area(system, area);
  if (check.problem == AreaProblem::unreadable) {
    status = unknown;
    problem = check.message();
    metrics.area_safe = false;
    metrics.scrape_success = false;
  } else if (!check.safe() && check.problem != AreaProblem::missing) {
    status = critical;
    problem = check.message();
    metrics.area_safe = false;
  } else {
    // Every entry as status judges it; counted, and described when a human must act.
    auto visit = [&](const EntryView& entry) {
      if (!labels->repo_locks.empty() && labels->repo_locks.count(entry.facts.parsed.lock_name()) == 0)
        return;  // --repo: only that repository's entries
      const Verdict& verdict = entry.verdict;
      findings.summary.add(entry);
      const bool lock = verdict.role == EntryRole::lock && verdict.state != EntryState::free;
      const std::int64_t age = verdict.age_ns.value_or(0);
      const bool too_old_crit = lock && crit_ns && age > *crit_ns;
      const bool too_old_warn = lock && age > *warn_ns;
      if (too_old_crit) ++findings.old_locks_critical;
      if (too_old_warn) ++findings.old_locks_warning;
      if (lock && verdict.state == EntryState::stale && verdict.needs_attention) ++findings.stale_attention;
      if (!verdict.needs_attention && !too_old_warn && !too_old_crit) return;
      std::string line = fmt::format("{} {} {} ({}{}), age {}", state_name(verdict.state),
                                     role_name(verdict.role), printable(entry.facts.path),
                                     verdict.reason, owner_words(entry), format_age(age));
      if (!verdict.fix.empty()) line += ": fix: " + printable(verdict.fix);
      const bool critical_entry = too_old_crit || verdict.state == EntryState::malformed ||
                                  verdict.state == EntryState::live_malformed ||
                                  verdict.state == EntryState::leftover;
      findings.detail(critical_entry, std::move(line));
    };
    auto judged = check.problem == AreaProblem::missing
                      ? SysResult<std::size_t>(0)
                      : judge_area(system, area.directory, *policy, labels->index,
                                   labels->repo_locks, visit);
    if (!judged) {
      status = unknown;
      problem = fmt::format("cannot list Apnea lock directory: {}: {}", area.directory,
                            errno_text(judged.error()));
      metrics.scrape_success = false;
    } else {
      findings.summary.scanned = *judged;
      status = evaluate(findings);
      metrics.summary = &findings.summary;
      if (check.problem == AreaProblem::missing)
        problem = fmt::format("no lock area yet ({})", area.directory);
    }
  }
  metrics.check_status = status;

  if (o.prometheus) {
    const std::string text = prometheus_text(metrics);
    if (o.output_file.empty()) {
      fmt::print("{}", text);
      std::fflush(stdout);
      return status;
    }
    auto written = write_file_atomically(system, o.output_file, text);
    if (!written) return unknown_line(written.error());
  }
  if (metrics.summary == nullptr) {
    print_line(status, line_text(*problem));
  } else {
    print_line(status, line_text(problem ? *problem : summary_text(findings, o)),
               perfdata(findings, o));
    // The critical ones first; at most max_detail_lines.
    std::size_t printed = 0;
    const std::size_t total = findings.critical_details.size() + findings.details.size();
    for (const auto* lines : {&findings.critical_details, &findings.details})
      for (const std::string& line : *lines)
        if (printed < max_detail_lines) {
          fmt::print("{}\n", line_text(line));
          ++printed;
        }
    if (total > printed) fmt::print("... and {} more\n", total - printed);
  }
  std::fflush(stdout);
  return status;
}

}  // namespace apnea_locks::cli
