// apnea-locks status: every entry of the lock area, judged, as a table, raw lines or JSON.
// Never changes anything: it lists, reads and probes (see docs/status.md).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/labels.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/scan.h"
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

constexpr std::string_view command_name = "status";
constexpr std::string_view usage_text =
    "Usage: apnea-locks status [OPTIONS]\n\n"
    "Lists every entry of Apnea's lock area (locks, candidates, tombstones, reclaim guards,\n"
    "anything unknown) with Apnea's verdict and ours, what needs attention first, and the\n"
    "command that would fix it. Changes nothing.\n\n"
    "--format prometheus writes metrics for node_exporter's textfile collector (names in\n"
    "apnea-locks(1)); --output-file PATH replaces PATH atomically.\n\n"
    "Exit status: 0 nothing needs attention, 1 something does, 2 usage error,\n"
    "3 the lock area is unsafe or unreadable, a --lock-dir, --repo or --scan path does not\n"
    "exist or is not a directory, or --output-file cannot be written.";

struct StatusOptions {
  AreaOptions area;
  LabelOptions labels;
  TimingOptions timing;
  bool json = false;
  bool raw = false;
  bool noheadings = false;
  bool notruncate = false;
  bool only_labelled = false;
  std::string output;
  std::string format;
  std::string output_file;
  std::vector<std::string> states;
  std::vector<std::string> kinds;
};

enum class Format { table, raw, json, prometheus };

/// Which entries are shown.
struct Filter {
  std::set<EntryState> states;
  std::set<LockKind> kinds;
  std::set<std::string> repo_locks;  ///< lock names of --repo; empty: every entry
  bool only_labelled = false;

  bool accepts(const EntryFacts& facts, const Verdict& verdict, const EntryLabel* label) const {
    if (!states.empty() && states.count(verdict.state) == 0) return false;
    if (!kinds.empty() && kinds.count(facts.parsed.kind) == 0) return false;
    if (!repo_locks.empty() && repo_locks.count(facts.parsed.lock_name()) == 0) return false;
    return !only_labelled || label != nullptr;
  }
};

/// Sort rank of a state in the table: what needs a human first.
int state_rank(EntryState state) {
  switch (state) {
    case EntryState::malformed:
    case EntryState::live_malformed: return 0;
    case EntryState::stale: return 1;
    case EntryState::leftover: return 2;
    case EntryState::debris: return 3;
    case EntryState::live: return 4;
    case EntryState::in_flight: return 5;
    case EntryState::unknown: return 6;
    case EntryState::free: return 7;
  }
  return 8;
}

std::string_view row_colour(const Verdict& verdict) {
  if (verdict.needs_attention) return "1;31";
  if (verdict.state == EntryState::stale || verdict.state == EntryState::in_flight) return "33";
  if (verdict.state == EntryState::live) return "32";
  return {};
}

/// Writes shown entries: streamed for raw and JSON, collected and sorted for the table.
class Output {
 public:
  Output(Format format, std::vector<Field> fields, bool headings, bool truncate, bool colour)
      : format_(format), fields_(std::move(fields)), headings_(headings), truncate_(truncate),
        colour_(colour), json_(stdout) {}

  void begin(const std::string& lock_dir, const AreaCheck& check) {
    if (format_ == Format::prometheus) return;
    if (format_ == Format::raw && headings_) {
      std::vector<std::string> header;
      for (Field field : fields_) header.emplace_back(field_info(field).header);
      print_raw_line(stdout, header);
    }
    if (format_ != Format::json) return;
    json_.begin_object();
    json_.key("lock_dir").string(lock_dir);
    json_.key("area").begin_object();
    json_.key("check").string(check.name());
    json_.key("path").string(check.path.empty() ? lock_dir : check.path);
    json_.key("message").string(check.message());
    json_.end_object();
    json_.key("entries").begin_array();
  }

  void entry(const EntryView& view) {
    switch (format_) {
      case Format::prometheus: break;  // counted in the summary
      case Format::json: write_entry_json(json_, view); break;
      case Format::raw: print_raw_line(stdout, cells(view, false)); break;
      case Format::table:
        rows_.push_back(Row{view.verdict.needs_attention ? 0 : 1, state_rank(view.verdict.state),
                            view.facts.name, cells(view, truncate_),
                            colour_ ? std::string(row_colour(view.verdict)) : std::string()});
        break;
    }
  }

  void end(const AreaSummary& summary, const std::optional<std::string>& error) {
    if (format_ == Format::json) {
      json_.end_array();
      json_.key("summary").begin_object();
      json_.key("scanned").integer(static_cast<std::int64_t>(summary.scanned));
      json_.key("entries").integer(static_cast<std::int64_t>(summary.shown));
      json_.key("needs_attention").integer(static_cast<std::int64_t>(summary.attention));
      json_.key("states").begin_object();
      for (const auto& [name, count] : summary.states) json_.key(name).integer(static_cast<std::int64_t>(count));
      json_.end_object();
      json_.key("roles").begin_object();
      for (const auto& [name, count] : summary.roles) json_.key(name).integer(static_cast<std::int64_t>(count));
      json_.end_object();
      json_.end_object();
      json_.key("error").optional_string(error);
      json_.end_object();
      json_.finish();
      return;
    }
    if (format_ == Format::table) {
      std::sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) {
        return std::tie(a.attention, a.rank, a.name) < std::tie(b.attention, b.rank, b.name);
      });
      std::vector<TableColumn> columns;
      for (Field field : fields_)
        columns.push_back(TableColumn{std::string(field_info(field).header), field_info(field).right_aligned});
      Table table(std::move(columns));
      for (Row& row : rows_) table.add_row(std::move(row.cells), row.colour);
      table.print(stdout, headings_);
    }
    std::fflush(stdout);
  }

 private:
  struct Row {
    int attention;
    int rank;
    std::string name;
    std::vector<std::string> cells;
    std::string colour;
  };

  std::vector<std::string> cells(const EntryView& view, bool truncate) const {
    std::vector<std::string> out;
    out.reserve(fields_.size());
    for (Field field : fields_) out.push_back(field_text(field, view, truncate));
    if (format_ == Format::table)
      for (auto& cell : out)
        if (cell.empty()) cell = "-";
    return out;
  }

  Format format_;
  std::vector<Field> fields_;
  bool headings_;
  bool truncate_;
  bool colour_;
  JsonWriter json_;
  std::vector<Row> rows_;
};

po::options_description describe(StatusOptions& o) {
  po::options_description options("Options");
  options.add_options()
      ("help,h", "show this help")
      ("json,J", po::bool_switch(&o.json), "one JSON document (entries streamed in scan order)")
      ("raw,r", po::bool_switch(&o.raw), "one line per entry, space-separated, unaligned")
      ("format", po::value(&o.format)->value_name("FORMAT"),
       "table (default), raw, json or prometheus (Prometheus text exposition format)")
      ("output-file", po::value(&o.output_file)->value_name("PATH"),
       "with --format prometheus: write the metrics to PATH atomically (temp file + rename)")
      ("output,o", po::value(&o.output)->value_name("COLUMNS"),
       "columns to show, comma-separated; +COL,... adds to the defaults (see apnea-locks(1))")
      ("noheadings,n", po::bool_switch(&o.noheadings), "no header line")
      ("notruncate", po::bool_switch(&o.notruncate), "do not shorten keys, tokens and commands")
      ("state", po::value(&o.states)->composing()->value_name("STATE,..."),
       "only these states: live, stale, malformed, free, in-flight, debris, leftover, unknown")
      ("kind", po::value(&o.kinds)->composing()->value_name("KIND,..."),
       "only these kinds: repository, global-setup, unknown")
      ("only-labelled", po::bool_switch(&o.only_labelled),
       "only entries whose repository or home is known");
  add_label_options(options, o.labels, "only the entries of this repository's lock, labelled (repeatable)");
  add_timing_options(options, o.timing);
  add_area_options(options, o.area);
  return options;
}

/// Turns the filter options into a Filter (repo locks are added later); a usage message on error.
std::expected<Filter, std::string> make_filter(const StatusOptions& o) {
  Filter filter;
  filter.only_labelled = o.only_labelled;
  for (const std::string& name : split_list(o.states)) {
    auto state = parse_state(name);
    if (!state)
      return std::unexpected(fmt::format(
          "unknown state '{}' (live, stale, malformed, free, in-flight, debris, leftover, unknown)", name));
    filter.states.insert(*state);
  }
  for (const std::string& name : split_list(o.kinds)) {
    std::optional<LockKind> kind;
    for (LockKind k : {LockKind::repository, LockKind::global_setup, LockKind::unknown})
      if (kind_name(k) == name) kind = k;
    if (!kind) return std::unexpected(fmt::format("unknown kind '{}' (repository, global-setup, unknown)", name));
    filter.kinds.insert(*kind);
  }
  return filter;
}

}  // namespace

int status_command(const std::vector<std::string>& args) {
  StatusOptions o;
  const po::options_description options = describe(o);
  auto parsed = parse_command_line(command_name, usage_text, args, options);
  if (!parsed) return parsed.error();

  auto usage_error = [](std::string_view message) {
    print_error(command_name, message);
    return exit_usage;
  };
  if (o.json && o.raw) return usage_error("--json and --raw exclude each other");
  Format format = o.json ? Format::json : o.raw ? Format::raw : Format::table;
  if (!o.format.empty()) {
    const std::optional<Format> named = o.format == "table"        ? std::optional(Format::table)
                                        : o.format == "raw"        ? std::optional(Format::raw)
                                        : o.format == "json"       ? std::optional(Format::json)
                                        : o.format == "prometheus" ? std::optional(Format::prometheus)
                                                                   : std::nullopt;
    if (!named)
      return usage_error(fmt::format("unknown format '{}' (table, raw, json, prometheus)", o.format));
    if ((o.json && *named != Format::json) || (o.raw && *named != Format::raw))
      return usage_error(fmt::format("--format {} and {} exclude each other", o.format,
                                     o.json ? "--json" : "--raw"));
    format = *named;
  }
  if (!o.output_file.empty() && format != Format::prometheus)
    return usage_error("--output-file needs --format prometheus");
  std::vector<Field> fields = default_fields();
  if (!o.output.empty()) {
    auto chosen = parse_fields(o.output);
    if (!chosen) return usage_error(fmt::format("-o {}: {}", o.output, chosen.error()));
    fields = std::move(*chosen);
  }
  auto filter = make_filter(o);
  if (!filter) return usage_error(filter.error());

  System& system = real_system();
  const LockArea area = resolve_area(system, o.area);

  // Labels: the current directory, each --repo, repositories under each --scan, and home.
  auto labels = build_labels(system, o.labels);
  if (!labels) {
    print_error(command_name, labels.error());
    return exit_bad_path;
  }
  filter->repo_locks = labels->repo_locks;
  auto policy = judging_policy(system, area, o.timing);
  if (!policy) return usage_error(policy.error());

  Output output(format, fields, !o.noheadings, !o.notruncate, colour_wanted(system));
  AreaSummary summary;
  MetricsReport metrics;
  metrics.lock_dir = area.directory;
  metrics.version = APNEA_LOCKS_VERSION;
  // Prometheus: the metrics are written whatever the area holds, so an alert can fire.
  auto write_metrics = [&]() -> bool {
    if (format != Format::prometheus) return true;
    const std::string text = prometheus_text(metrics);
    if (o.output_file.empty()) {
      fmt::print("{}", text);
      std::fflush(stdout);
      return true;
    }
    auto written = write_file_atomically(system, o.output_file, text);
    if (!written) print_error(command_name, written.error());
    return written.has_value();
  };

  const AreaCheck check = check_lock_area(system, area);
  if (!check.safe() && check.problem != AreaProblem::missing) {
    // Prominent and alone: one line naming the path (and the JSON document saying so).
    if (format == Format::json) {
      output.begin(area.directory, check);
      output.end(summary, check.message());
    }
    metrics.area_safe = false;
    metrics.scrape_success = check.problem != AreaProblem::unreadable;
    write_metrics();
    print_error(command_name, check.message());
    return exit_unsafe;
  }
  output.begin(area.directory, check);
  std::optional<std::string> error;
  auto show = [&](const EntryView& entry) {
    if (!filter->accepts(entry.facts, entry.verdict, entry.label)) return;
    summary.add(entry);
    output.entry(entry);
  };

  if (check.safe()) {
    auto scanned = judge_area(system, area.directory, *policy, labels->index, filter->repo_locks, show);
    if (scanned)
      summary.scanned = *scanned;
    else
      error = fmt::format("cannot list Apnea lock directory: {}: {}", area.directory,
                          errno_text(scanned.error()));
  } else {
    // No area yet: a --repo's lock is free.
    judge_absent_locks(area.directory, *policy, labels->index, filter->repo_locks, show);
  }
  output.end(summary, error);

  if (error) {
    metrics.scrape_success = false;
    write_metrics();
    print_error(command_name, *error);
    return exit_unsafe;
  }
  metrics.summary = &summary;
  if (!write_metrics()) return exit_unsafe;
  if (format == Format::table && check.problem == AreaProblem::missing && summary.shown == 0)
    fmt::print(stderr, "apnea-locks status: {}\n", check.message());
  return summary.attention > 0 ? exit_attention : exit_ok;
}

}  // namespace apnea_locks::cli
