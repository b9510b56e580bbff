// apnea-locks check: a monitoring plugin with the Nagios/Icinga conventions. Judges the lock
// area exactly as status does (summary.h) and prints one status line with perfdata, then
// one line per entry that needs a human. Changes nothing (see docs/apnea-locks.1).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/lock_area.h"
#include "cli/all_users.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/entry_report.h"
#include "cli/nagios.h"
#include "cli/prometheus.h"
#include "cli/render.h"
#include "cli/summary.h"

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
    // Each status is one layout line (print_help wraps it under its text).
    "  CRITICAL  a malformed lock, a reclaim guard that is left over or blocks Apnea,\n"
    "      an unsafe lock area, or a value outside a -c range\n"
    "  WARNING   anything else that needs a human: a dead owner Apnea will not\n"
    "      reclaim by itself, debris (dead candidates and tombstones), or a value\n"
    "      outside a -w range (by default, a lock older than 3600s, unless -w or -c\n"
    "      gives a lock age: each may be given alone), or (--all-users) a foreign\n"
    "      apnea-* entry (--foreign ok: not even that)\n"
    "  UNKNOWN   the lock area cannot be read, a --lock-dir, --repo or --scan path\n"
    "      does not exist or is not a directory, -t expired, or a usage error\n\n"
    "Thresholds only add alerts: what needs a human is never OK.\n\n"
    "RANGE is a Nagios range: N (alert outside 0..N), N: (below N), ~:N (above N), N:M\n"
    "(outside N..M), @N:M (inside N..M). -w/-c RANGE applies to the age of each lock in\n"
    "seconds (N[s|m|h|d]); -w/-c METRIC=RANGE to a count: locks, live, stale, malformed,\n"
    "debris, guards or attention (e.g. -c stale=0). A -c range must not alert where the -w\n"
    "range of the same metric does not.\n\n"
    "Perfdata: locks live stale malformed debris guards attention oldest_age_s.\n\n"
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

/// Long output lines after the first at verbosity 0: at most this many.
constexpr std::size_t max_detail_lines = 20;

/// The -t default and range (whole seconds).
constexpr std::int64_t default_timeout_ns = 30 * ns_per_second;
constexpr DurationRange timeout_range{ns_per_second, ns_per_hour};

/// The metrics -w/-c name: the lock age, and the counts of the perfdata.
const std::vector<std::string> count_metrics = {"locks", "live", "stale", "malformed",
                                                "debris", "guards", "attention"};
const std::vector<std::string> age_metrics = {"age", "oldest_age_s"};

struct CheckOptions {
  AreaOptions area;
  LabelOptions labels;
  TimingOptions timing;
  std::vector<std::string> warnings;   ///< -w/--warning, as given
  std::vector<std::string> criticals;  ///< -c/--critical, as given
  std::optional<std::int64_t> warn_age_ns;  ///< --warn-age (deprecated: -w)
  std::optional<std::int64_t> crit_age_ns;  ///< --crit-age (deprecated: -c)
  std::int64_t timeout_ns = default_timeout_ns;
  int verbosity = 0;
  bool prometheus = false;
  bool all_users = false;
  std::string output_file;
  std::string foreign = "warning";  ///< --foreign: the status of foreign entries (ok, warning)
};

po::options_description describe(CheckOptions& o) {
  po::options_description options("Options");
  options.add_options()
      ("verbose,v", "more output, up to -vvv: 1 every entry that needs a human with its next "
       "step, 2 also the others and the thresholds, 3 also the host facts")
      ("warning,w", po::value(&o.warnings)->composing()->value_name("[METRIC=]RANGE"),
       "WARNING outside RANGE (repeatable; default: a lock age of 3600s)")
      ("critical,c", po::value(&o.criticals)->composing()->value_name("[METRIC=]RANGE"),
       "CRITICAL outside RANGE (repeatable; default: none)")
      ("timeout,t",
       duration_value("--timeout", timeout_range, o.timeout_ns)->default_value("30s"),
       ("UNKNOWN when the check takes longer than this" + duration_help(timeout_range)).c_str())
      ("warn-age",
       duration_value("--warn-age", lock_age_range, [&o](std::int64_t ns) { o.warn_age_ns = ns; }),
       ("deprecated: -w SECONDS" + duration_help(lock_age_range)).c_str())
      ("crit-age",
       duration_value("--crit-age", lock_age_range, [&o](std::int64_t ns) { o.crit_age_ns = ns; }),
       ("deprecated: -c SECONDS" + duration_help(lock_age_range)).c_str())
      ("prometheus", po::bool_switch(&o.prometheus),
       "print Prometheus metrics instead of the status line (exit status unchanged)")
      ("output-file", po::value(&o.output_file)->value_name("PATH"),
       "with --prometheus: write the metrics to PATH atomically and print the status line")
      ("foreign", po::value(&o.foreign)->value_name("ok|warning"),
       "with --all-users: the status of apnea-* entries of the temp dir that are not an "
       "account's own area (anyone can make one; default warning, never critical)");
  add_survey_options(options, o.labels, o.timing, o.area, o.all_users);
  return options;
}

/// The -w and -c ranges by metric ("age" for the lock age).
struct Thresholds {
  std::map<std::string, NagiosRange> warning;
  std::map<std::string, NagiosRange> critical;
  /// How each range was given, for messages ("-w 2h", "--crit-age 1h", "-w 3600 (default)").
  std::map<std::string, std::string> warning_given, critical_given;
};

/// Every metric -w/-c may name.
std::vector<std::string> all_metrics() {
  std::vector<std::string> all = count_metrics;
  all.insert(all.end(), age_metrics.begin(), age_metrics.end());
  return all;
}

/// The thresholds the options give, or a usage message: each metric once per level, the
/// deprecated --warn-age/--crit-age only where -w/-c name no age, a warning lock age of
/// 3600 s by default (when no lock age is given at either level), and every -c consistent
/// with the -w of the same metric.
std::expected<Thresholds, std::string> thresholds_of(const CheckOptions& o) {
  Thresholds out;
  auto take = [&](const std::vector<std::string>& values, std::string_view option,
                  std::map<std::string, NagiosRange>& into,
                  std::map<std::string, std::string>& given) -> std::optional<std::string> {
    for (const std::string& value : values) {
      auto threshold = parse_threshold(value, "age", all_metrics(), age_metrics);
      if (!threshold) return fmt::format("{} {}", option, threshold.error());
      const std::string metric = threshold->metric == "oldest_age_s" ? "age" : threshold->metric;
      if (!into.emplace(metric, threshold->range).second)
        return fmt::format("{} given twice for {}", option, metric);
      given[metric] = fmt::format("{} {}", option, value);
    }
    return std::nullopt;
  };
  if (auto error = take(o.warnings, "-w", out.warning, out.warning_given)) return std::unexpected(*error);
  if (auto error = take(o.criticals, "-c", out.critical, out.critical_given))
    return std::unexpected(*error);
  auto legacy = [&](const std::optional<std::int64_t>& ns, std::string_view option,
                    std::string_view replacement, std::map<std::string, NagiosRange>& into,
                    std::map<std::string, std::string>& given) -> std::optional<std::string> {
    if (!ns) return std::nullopt;
    if (into.count("age") != 0)
      return fmt::format("{} and {} both give a lock age: give {} only", option, replacement, replacement);
    NagiosRange range;
    range.end = static_cast<double>(*ns / ns_per_second);
    into.emplace("age", range);
    given["age"] = fmt::format("{} {}", option, duration_text(*ns));
    return std::nullopt;
  };
  if (auto error = legacy(o.warn_age_ns, "--warn-age", "-w", out.warning, out.warning_given))
    return std::unexpected(*error);
  if (auto error = legacy(o.crit_age_ns, "--crit-age", "-c", out.critical, out.critical_given))
    return std::unexpected(*error);
  // The default warning age only when no lock age threshold is given: -c alone is a
  // threshold alone, as the plugin guidelines allow.
  if (out.warning.count("age") == 0 && out.critical.count("age") == 0) {
    NagiosRange hour;
    hour.end = static_cast<double>(ns_per_hour / ns_per_second);
    out.warning.emplace("age", hour);
    out.warning_given["age"] = "-w 3600 (the default)";
  }
  for (const auto& [metric, critical_range] : out.critical) {
    auto found = out.warning.find(metric);
    if (found == out.warning.end()) continue;
    if (!consistent(found->second, critical_range))
      return std::unexpected(fmt::format(
          "{} alerts where {} does not: a {} would be CRITICAL without being WARNING",
          out.critical_given[metric], out.warning_given[metric],
          metric == "age" ? "lock age" : metric + " count"));
  }
  return out;
}

/// "older than 3600s", "aged within @60:600s": what a lock age range alerts on.
std::string age_words(const NagiosRange& range) {
  if (!range.inside && !range.end_infinite && (range.start_infinite || range.start == 0))
    return fmt::format("older than {}s", range.text().substr(range.start_infinite ? 2 : 0));
  return fmt::format("aged {} {}s", range.inside ? "within" : "outside", range.text());
}

/// What the pass found that a human must act on: the totals, and check's own counts and
/// lines (CheckFindings, as --all-users reports them).
struct Findings : CheckFindings {
  AreaSummary summary;

  void detail(bool critical_entry, std::string line) {
    (critical_entry ? critical_details : details).push_back(std::move(line));
  }
  /// The guards perfdata counts: left over, or blocking a dead lock.
  std::size_t guards() const { return summary.leftover_guards + blocking_guards; }
};

/// ", pid N (command)" for an entry with an accepted owner.
std::string owner_words(const EntryView& entry) {
  const std::string pid = field_text(Field::pid, entry);
  if (pid.empty()) return {};
  const std::string command = shorten(field_text(Field::command, entry), 40);
  return fmt::format(", pid {}{}", pid, command.empty() ? "" : " (" + command + ")");
}

/// The value of a count metric.
double count_value(const Findings& f, const std::string& metric) {
  const AreaSummary& s = f.summary;
  if (metric == "locks") return static_cast<double>(s.locks);
  if (metric == "live") return static_cast<double>(s.live);
  if (metric == "stale") return static_cast<double>(s.stale);
  if (metric == "malformed") return static_cast<double>(s.malformed);
  if (metric == "debris") return static_cast<double>(s.debris);
  if (metric == "guards") return static_cast<double>(f.guards());
  if (metric == "attention") return static_cast<double>(s.attention);
  return 0;
}

/// The count thresholds that alert, at `level`, as summary words ("stale=3 outside 0").
std::vector<std::string> count_alerts(const Findings& f, const std::map<std::string, NagiosRange>& ranges) {
  std::vector<std::string> words;
  for (const auto& [metric, range] : ranges) {
    if (metric == "age") continue;
    const double value = count_value(f, metric);
    if (range.alerts(value))
      words.push_back(fmt::format("{}={} {} {}", metric, static_cast<std::int64_t>(value),
                                  range.inside ? "within" : "outside", range.text()));
  }
  return words;
}

int evaluate(const Findings& f, const Thresholds& t) {
  const AreaSummary& s = f.summary;
  if (s.malformed > 0 || f.guards() > 0 || f.old_locks_critical > 0 ||
      !count_alerts(f, t.critical).empty())
    return critical;
  if (s.attention > 0 || f.old_locks_warning > 0 || !count_alerts(f, t.warning).empty())
    return warning;
  return ok;
}

std::string summary_text(const Findings& f, const Thresholds& t) {
  const AreaSummary& s = f.summary;
  std::vector<std::string> parts;
  if (s.malformed > 0) parts.push_back(plural(s.malformed, "malformed lock", "malformed locks"));
  if (s.leftover_guards > 0)
    parts.push_back(plural(s.leftover_guards, "leftover reclaim guard", "leftover reclaim guards"));
  if (f.blocking_guards > 0)
    parts.push_back(plural(f.blocking_guards, "reclaim guard blocking Apnea",
                           "reclaim guards blocking Apnea"));
  if (f.stale_attention > 0)
    parts.push_back(plural(f.stale_attention, "stale lock Apnea will not reclaim",
                           "stale locks Apnea will not reclaim"));
  if (s.debris > 0) parts.push_back(plural(s.debris, "debris entry", "debris entries"));
  if (f.old_locks_critical > 0)
    parts.push_back(fmt::format("{} {}", plural(f.old_locks_critical, "lock", "locks"),
                                age_words(t.critical.at("age"))));
  else if (f.old_locks_warning > 0)
    parts.push_back(fmt::format("{} {}", plural(f.old_locks_warning, "lock", "locks"),
                                age_words(t.warning.at("age"))));
  for (const std::string& words : count_alerts(f, t.critical)) parts.push_back(words);
  for (const std::string& words : count_alerts(f, t.warning))
    if (std::find(parts.begin(), parts.end(), words) == parts.end()) parts.push_back(words);
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  const std::string counts =
      s.locks == 0 ? "no locks"
                   : fmt::format("{} ({} live, {} stale, {} malformed), oldest {}",
                                 plural(s.locks, "lock", "locks"), s.live, s.stale, s.malformed,
                                 format_age(s.oldest_lock_age_ns.value_or(0)));
  return text.empty() ? counts : text + "; " + counts;
}

/// One perfdata item per the plugin guidelines: label=value[UOM];warn;crit;min. `warn` and
/// `crit` are the ranges given for the metric, else the built-in levels.
std::string perf_item(std::string_view label, std::string_view value, const Thresholds& t,
                      const std::string& metric, std::string_view builtin_warn,
                      std::string_view builtin_crit) {
  auto level = [&](const std::map<std::string, NagiosRange>& ranges, std::string_view builtin) {
    auto found = ranges.find(metric);
    return found != ranges.end() ? found->second.text() : std::string(builtin);
  };
  return fmt::format("{}={};{};{};0", label, value, level(t.warning, builtin_warn),
                     level(t.critical, builtin_crit));
}

std::string perfdata(const Findings& f, const Thresholds& t) {
  const AreaSummary& s = f.summary;
  const std::int64_t oldest_s = s.oldest_lock_age_ns.value_or(0) / ns_per_second;
  const std::vector<std::string> items = {
      perf_item("locks", fmt::format("{}", s.locks), t, "locks", "", ""),
      perf_item("live", fmt::format("{}", s.live), t, "live", "", ""),
      perf_item("stale", fmt::format("{}", s.stale), t, "stale", "", ""),
      perf_item("malformed", fmt::format("{}", s.malformed), t, "malformed", "", "0"),
      perf_item("debris", fmt::format("{}", s.debris), t, "debris", "0", ""),
      perf_item("guards", fmt::format("{}", f.guards()), t, "guards", "", "0"),
      perf_item("attention", fmt::format("{}", s.attention), t, "attention", "0", ""),
      perf_item("oldest_age_s", fmt::format("{}s", oldest_s), t, "age", "", ""),
  };
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : " ") + item;
  return out;
}

/// The status line: `summary` escaped for Nagios (nagios_text), then the perfdata.
void print_line(int status, std::string_view summary, std::string_view perf = {}) {
  fmt::print("APNEA-LOCKS {} - {}{}{}\n", status_word(status), nagios_text(summary),
             perf.empty() ? "" : " | ", perf);
}

std::string yes_no(bool value) { return value ? "yes" : "no"; }

/// A plugin reports every failure on its status line, as UNKNOWN.
int unknown_line(std::string_view message) {
  arm_timeout(0, {}, unknown);
  print_line(unknown, message);
  std::fflush(stdout);
  return static_cast<int>(unknown);
}

/// A usage error: the UNKNOWN line ("usage: MESSAGE") on standard output, and util-linux's
/// line naming the help (usage_hint) on standard error, where a plugin's output is not read.
int usage_unknown(std::string_view message) {
  const int status = unknown_line(fmt::format("usage: {}", message));
  fmt::print(stderr, "{}\n", usage_hint(command_name));
  return status;
}

/// From here on, anything can hang (a network filesystem, a stuck /proc read): -t ends it
/// with an UNKNOWN line saying it was checking `what`.
void arm_check_timeout(const CheckOptions& o, std::string_view what) {
  const std::int64_t timeout_s = o.timeout_ns / ns_per_second;
  arm_timeout(static_cast<unsigned>(timeout_s),
              fmt::format("APNEA-LOCKS {} - {}\n", status_word(unknown),
                          nagios_text(fmt::format("timed out after {}s (-t) checking {}",
                                                  timeout_s, what))),
              unknown);
}

/// One judging pass over one area: what check's status line says about it.
struct Pass {
  Findings findings;
  std::optional<std::string> problem;  ///< the status line's text when not from findings
  int status = ok;
  bool area_safe = true;
  bool scrape_success = true;
  bool listed = false;  ///< the area was listed (or is missing): the findings count
};

/// Judges `area` as check does; `user` (may be null) names the account (--all-users).
Pass judge_pass(System& system, const LockArea& area, const CheckOptions& o, const Thresholds& t,
                const Labels& labels, const SurveySettings& settings, const std::string* user) {
  Pass pass;
  Findings& findings = pass.findings;
  std::optional<std::string>& problem = pass.problem;
  int& status = pass.status;
  const NagiosRange* warn_age = t.warning.count("age") != 0 ? &t.warning.at("age") : nullptr;
  const NagiosRange* crit_age = t.critical.count("age") != 0 ? &t.critical.at("age") : nullptr;

  const AreaCheck check = check_lock_area(system, area);
  if (check.problem == AreaProblem::unreadable) {
    status = unknown;
    problem = check.message();
    pass.area_safe = false;
    pass.scrape_success = false;
  } else if (!check.safe() && check.problem != AreaProblem::missing) {
    status = critical;
    problem = check.message();
    pass.area_safe = false;
  } else {
    // Every entry as status judges it; counted, and described when a human must act.
    auto visit = [&](const EntryView& judged) {
      EntryView entry = judged;
      entry.user = user;
      if (!labels.repo_locks.empty() && labels.repo_locks.count(entry.facts.parsed.lock_name()) == 0)
        return;  // --repo: only that repository's entries
      const Verdict& verdict = entry.verdict;
      findings.summary.add(entry);
      const bool lock = verdict.role == EntryRole::lock && verdict.state != EntryState::free;
      const std::int64_t age = verdict.age_ns.value_or(0);
      const double age_s = static_cast<double>(age / ns_per_second);
      const bool too_old_crit = lock && crit_age != nullptr && crit_age->alerts(age_s);
      const bool too_old_warn = lock && warn_age != nullptr && warn_age->alerts(age_s);
      // A recent guard on a dead lock: Apnea is refused until it goes (a leftover one is
      // counted as its own entry).
      const bool guard_blocks = lock && verdict.guard == GuardState::in_flight && verdict.needs_attention;
      if (too_old_crit) ++findings.old_locks_critical;
      if (too_old_warn) ++findings.old_locks_warning;
      if (guard_blocks) ++findings.blocking_guards;
      if (lock && verdict.state == EntryState::stale && verdict.needs_attention) ++findings.stale_attention;
      std::string line = fmt::format("{} {} {} ({}{}), age {}", state_name(verdict.state),
                                     role_name(verdict.role), printable(entry.facts.path),
                                     verdict.reason, owner_words(entry), format_age(age));
      if (guard_blocks) line += ", its reclaim guard blocks Apnea";
      if (!verdict.needs_attention && !too_old_warn && !too_old_crit) {
        if (o.verbosity >= 2) findings.fine.push_back("ok: " + line);
        return;
      }
      if (!entry.decision.fix.empty()) {
        line += ": fix: " + printable(entry.decision.fix.command);
      } else if (o.verbosity >= 1 && !entry.decision.next_step.empty()) {
        line += ": " + entry.decision.why + "; next step: " + entry.decision.next_step;
      }
      const bool critical_entry = too_old_crit || guard_blocks || verdict.state == EntryState::malformed ||
                                  verdict.state == EntryState::live_malformed ||
                                  verdict.state == EntryState::leftover;
      findings.detail(critical_entry, std::move(line));
    };
    auto judged = check.problem == AreaProblem::missing
                      ? SysResult<std::size_t>(0)
                      : judge_area(system, area.directory, settings, labels.index,
                                   labels.repo_locks, visit);
    if (!judged) {
      status = unknown;
      problem = fmt::format("cannot list Apnea lock directory: {}: {}", area.directory,
                            errno_text(judged.error()));
      pass.scrape_success = false;
    } else {
      findings.summary.scanned = *judged;
      status = evaluate(findings, t);
      pass.listed = true;
      if (check.problem == AreaProblem::missing)
        problem = fmt::format("no lock area yet ({})", area.directory);
    }
  }
  return pass;
}

/// The worse of two statuses for a line covering several areas: CRITICAL, then UNKNOWN,
/// then WARNING, then OK.
int worse(int a, int b) {
  auto rank = [](int status) { return status == critical ? 3 : status == unknown ? 2 : status; };
  return rank(a) >= rank(b) ? a : b;
}

/// Adds the long output of `f` to `lines`: the critical lines first, at most
/// max_detail_lines of them and the others unless -v, then (-vv) the entries that are fine.
void add_details(std::vector<std::string>& lines, const Findings& f, int verbosity) {
  const std::size_t cap =
      verbosity >= 1 ? std::numeric_limits<std::size_t>::max() : max_detail_lines;
  std::size_t printed = 0;
  const std::size_t total = f.critical_details.size() + f.details.size();
  for (const auto* group : {&f.critical_details, &f.details})
    for (const std::string& line : *group)
      if (printed < cap) {
        lines.push_back(line);
        ++printed;
      }
  if (total > printed)
    lines.push_back(fmt::format("... and {} more (-v lists them all)", total - printed));
  for (const std::string& line : f.fine) lines.push_back(line);
}

/// Writes what check found: the metrics (--prometheus; to --output-file while -t still
/// runs), else `print` writes the status line and the long output. The status to exit with.
int report_check(System& system, const CheckOptions& o, const std::vector<MetricsReport>& metrics,
                 int status, const std::function<void()>& print) {
  if (o.prometheus && !o.output_file.empty()) {
    auto written = write_metrics(system, metrics, o.output_file);
    if (!written) return unknown_line(written.error());
  }
  arm_timeout(0, {}, unknown);  // done: nothing may interleave with the output below
  if (o.prometheus && o.output_file.empty()) {
    (void)write_metrics(system, metrics, o.output_file);  // standard output
    return status;
  }
  print();
  std::fflush(stdout);
  return status;
}

/// In the child that has become `area`'s account: judge_pass as for one area, the fix acting
/// for the account, each long-output line naming the account.
AccountReport judge_account(const AccountArea& area, const CheckOptions& o, const Thresholds& t) {
  System& own = real_system();
  const std::string user = user_name(area);
  const LockArea mine = account_lock_area(area);
  AccountReport report;
  auto failed = [&](std::string error) {
    report.status = unknown;
    report.error = std::move(error);
    report.scrape_success = false;
    return report;
  };
  auto labels = build_labels(own, mine, o.labels);
  if (!labels) return failed(labels.error());
  auto settings = judging_settings(own, mine, o.timing, false, HostRead::when_needed);
  if (!settings) return failed(settings.error());
  settings->fix.lock_dir.reset();  // the fix acts for the account: reclaim --user NAME
  settings->fix.user = user;
  Pass pass = judge_pass(own, mine, o, t, *labels, *settings, &user);
  report.status = pass.status;
  report.area_safe = pass.area_safe;
  report.scrape_success = pass.scrape_success;
  if (!pass.listed) {
    report.error = pass.problem.value_or("");
    return report;
  }
  Findings& f = pass.findings;
  for (auto* group : {&f.critical_details, &f.details, &f.fine})
    for (std::string& line : *group) line = user + ": " + line;
  report.summary = std::move(f.summary);
  report.findings = std::move(f);
  return report;
}

/// What check --all-users gathers over the accounts' areas.
struct AllUsers {
  Findings total;                      ///< every account's, merged
  int area_status = ok;                ///< the worst of the areas not judged, or judged unsafe
  std::vector<std::string> problems;   ///< those areas, one line each
  std::vector<const AccountArea*> foreign;  ///< the apnea-* entries that are no account's area
  std::vector<std::string> users;      ///< the accounts judged
  std::deque<AccountReport> reports;   ///< the judgements (stable addresses: metrics point in)
  std::vector<MetricsReport> metrics;  ///< one per apnea-* entry
};

/// Judges `area` as its account (or reports why not) into `all`.
void judge_user_area(System& system, const AccountArea& area, const CheckOptions& o,
                     const Thresholds& t, AllUsers& all) {
  if (!area.surveyable()) {
    all.foreign.push_back(&area);
    return;
  }
  const std::string user = user_name(area);
  all.users.push_back(user);
  const AccountReport& report = all.reports.emplace_back(survey_as_account(
      system, *area.account, [&](const ShowEntry&) { return judge_account(area, o, t); }));
  MetricsReport& metrics = all.metrics.emplace_back(account_metrics(area, &report));
  metrics.check_status = report.finished ? report.status : unknown;
  if (!report.finished) {
    all.problems.push_back(report.error.value_or(""));
    all.area_status = worse(all.area_status, unknown);
  } else if (!report.summary) {
    // Not listed: unsafe (CRITICAL) or unreadable (UNKNOWN), as for one area.
    all.problems.push_back(fmt::format("{}: {}", user, report.error.value_or("")));
    all.area_status = worse(all.area_status, report.status);
  }
  if (report.summary) merge_summary(all.total.summary, *report.summary);
  all.total.add(report.findings);
}

/// check --all-users' status line (the first area not judged, the findings, how many
/// accounts) and long output.
void print_all_users(const AllUsers& all, const CheckOptions& o, const Thresholds& t,
                     const std::string& tmpdir, int status) {
  const std::vector<std::string>& problems = all.problems;
  std::string text = summary_text(all.total, t);
  if (!problems.empty()) {
    const std::string more =
        problems.size() > 1 ? fmt::format(" (and {} more)", problems.size() - 1) : "";
    text = fmt::format("{}{}; {}", problems.front(), more, text);
  }
  text += fmt::format(" in {}", plural(all.users.size(), "account's area", "accounts' areas"));
  print_line(status, text, perfdata(all.total, t));
  std::vector<std::string> lines(problems.begin() + (problems.empty() ? 0 : 1), problems.end());
  if (o.verbosity >= 2) {
    std::string names;
    for (const std::string& user : all.users) names += (names.empty() ? "" : " ") + user;
    lines.push_back(fmt::format("accounts under {}: {}; {} entries", tmpdir,
                                names.empty() ? "none" : names, all.total.summary.scanned));
  }
  add_details(lines, all.total, o.verbosity);
  for (const std::string& line : lines) fmt::print("{}\n", nagios_text(line));
}

/// check --all-users: each account's area judged by a child that has become the account
/// (judge_pass, as for one area); one status line over all of them, perfdata summed.
int check_all_users(System& system, const CheckOptions& o, const Thresholds& t) {
  const std::string tmpdir = node_tmpdir(system);
  arm_check_timeout(o, fmt::format("every account's lock area under {}", tmpdir));
  auto found = find_account_areas(system);
  if (!found)
    return unknown_line(fmt::format("cannot list {}: {}", tmpdir, errno_text(found.error())));
  AllUsers all;
  for (const AccountArea& area : *found) judge_user_area(system, area, o, t, all);
  all.metrics.push_back(foreign_metrics(tmpdir, all.foreign.size()));
  if (!all.foreign.empty()) {
    all.problems.push_back(foreign_line(tmpdir, all.foreign));
    if (o.foreign == "warning") all.area_status = worse(all.area_status, warning);
  }
  const int status = worse(evaluate(all.total, t), all.area_status);
  return report_check(system, o, all.metrics, status,
                      [&] { print_all_users(all, o, t, tmpdir, status); });
}

/// check's status line and long output for one area.
void print_area(const Pass& pass, const LockArea& area, const CheckOptions& o, const Thresholds& t,
                const HostFacts& host) {
  const Findings& findings = pass.findings;
  if (!pass.listed) {
    print_line(pass.status, *pass.problem);
    return;
  }
  print_line(pass.status, pass.problem ? *pass.problem : summary_text(findings, t),
             perfdata(findings, t));
  std::vector<std::string> lines;
  if (o.verbosity >= 2) {
    std::string ranges;
    for (const auto& [level, map] : {std::pair{"-w", &t.warning}, {"-c", &t.critical}})
      for (const auto& [metric, range] : *map)
        ranges += fmt::format(" {} {}={}", level, metric, range.text());
    lines.push_back(fmt::format("lock area {}; {} entries; thresholds:{}",
                                printable(area.directory), findings.summary.scanned, ranges));
  }
  if (o.verbosity >= 3) {
    lines.push_back(fmt::format(
        "host: filesystem {} (local {}), initial pid namespace {}, initial user namespace {}, "
        "process table complete {}, idmapped {}, clock void {}",
        host.filesystem, yes_no(host.local_filesystem), yes_no(host.initial_pid_namespace),
        yes_no(host.initial_user_namespace), yes_no(host.process_table_complete),
        yes_no(host.idmapped), yes_no(host.clock_void())));
  }
  add_details(lines, findings, o.verbosity);
  for (const std::string& line : lines) fmt::print("{}\n", nagios_text(line));
}

/// check on the one area the options name.
int check_one_area(System& system, const CheckOptions& o, const Thresholds& t) {
  auto opened = open_lock_area(system, o.area);
  if (!opened) {
    if (opened.error().exit_status == exit_usage) return usage_unknown(opened.error().message);
    return unknown_line(opened.error().message);
  }
  const LockArea area = std::move(*opened);
  arm_check_timeout(o, area.directory);
  auto labels = build_labels(system, area, o.labels);
  if (!labels) return unknown_line(labels.error());
  // -vvv prints the host facts the judgements rest on: read at once then, so the line shows
  // the very facts judged; otherwise only when the area has something to judge.
  auto settings = judging_settings(system, area, o.timing, false,
                               o.verbosity >= 3 ? HostRead::now : HostRead::when_needed);
  if (!settings) return usage_unknown(settings.error());

  const Pass pass = judge_pass(system, area, o, t, *labels, *settings, nullptr);
  MetricsReport metrics = area_metrics(area.directory);
  metrics.area_safe = pass.area_safe;
  metrics.scrape_success = pass.scrape_success;
  if (pass.listed) metrics.summary = &pass.findings.summary;
  metrics.check_status = pass.status;
  return report_check(system, o, {metrics}, pass.status,
                      [&] { print_area(pass, area, o, t, settings->judge.host); });
}

}  // namespace

int check_main(System& system, const std::vector<std::string>& given) {
  CheckOptions o;
  const po::options_description options = describe(o);
  auto [verbosity, args] = take_verbosity(given);
  o.verbosity = verbosity;
  auto parsed = try_parse_command_line(args, options);
  if (!parsed) return usage_unknown(parsed.error());
  if (auto done = standard_action(*parsed, help, options)) return *done;  // -h, -V
  auto thresholds = thresholds_of(o);
  if (!thresholds) return usage_unknown(thresholds.error());
  if (!o.output_file.empty() && !o.prometheus)
    return usage_unknown("--output-file needs --prometheus");
  if (auto refused = sudo_refusal(system, o.output_file, typed_paths(o.area, o.labels)))
    return usage_unknown(*refused);
  if (o.foreign != "ok" && o.foreign != "warning")
    return usage_unknown(fmt::format("--foreign '{}': must be ok or warning", printable(o.foreign)));
  if (o.all_users) {
    if (auto refused = all_users_usage(system, o.area))
      return usage_unknown(refused->message);
    return check_all_users(system, o, *thresholds);
  }
  return check_one_area(system, o, *thresholds);
}

int check_command(const std::vector<std::string>& args) { return check_main(real_system(), args); }

}  // namespace apnea_locks::cli
