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
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/entry_report.h"
#include "cli/render.h"

namespace apnea_locks::cli {
namespace {

constexpr std::string_view command_name = "status";
constexpr std::string_view usage_text =
    "Usage: apnea-locks status [OPTIONS]\n\n"
    "Lists every entry of Apnea's lock area (locks, candidates, tombstones, reclaim guards,\n"
    "anything unknown) with Apnea's verdict and ours, what needs attention first, and the\n"
    "command that would fix it. Changes nothing.\n\n"
    "Exit status: 0 nothing needs attention, 1 something does, 2 usage error,\n"
    "3 the lock area is unsafe or unreadable.";

struct StatusOptions {
  AreaOptions area;
  bool json = false;
  bool raw = false;
  bool noheadings = false;
  bool notruncate = false;
  bool only_labelled = false;
  std::string output;
  std::vector<std::string> states;
  std::vector<std::string> kinds;
  std::vector<std::string> repos;
  std::vector<std::string> scans;
  int scan_depth = 4;
  double tolerance = 2;
  double guard_age = 60;
};

enum class Format { table, raw, json };

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

/// Counts for the summary and the exit status.
struct Summary {
  std::size_t scanned = 0;
  std::size_t shown = 0;
  std::size_t attention = 0;
  std::map<std::string, std::size_t> states;
  std::map<std::string, std::size_t> roles;

  void add(const Verdict& verdict) {
    ++shown;
    if (verdict.needs_attention) ++attention;
    ++states[std::string(state_name(verdict.state))];
    ++roles[std::string(role_name(verdict.role))];
  }
};

/// Sort rank of a state in the table: what needs a human first.
int state_rank(EntryState state) {
  switch (state) {
    case EntryState::malformed: return 0;
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
      case Format::json: write_entry_json(json_, view); break;
      case Format::raw: print_raw_line(stdout, cells(view, false)); break;
      case Format::table:
        rows_.push_back(Row{view.verdict.needs_attention ? 0 : 1, state_rank(view.verdict.state),
                            view.facts.name, cells(view, truncate_),
                            colour_ ? std::string(row_colour(view.verdict)) : std::string()});
        break;
    }
  }

  void end(const Summary& summary, const std::optional<std::string>& error) {
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
      ("output,o", po::value(&o.output)->value_name("COLUMNS"),
       "columns to show, comma-separated; +COL,... adds to the defaults (see docs/status.md)")
      ("noheadings,n", po::bool_switch(&o.noheadings), "no header line")
      ("notruncate", po::bool_switch(&o.notruncate), "do not shorten keys, tokens and commands")
      ("state", po::value(&o.states)->composing()->value_name("STATE,..."),
       "only these states: live, stale, malformed, free, in-flight, debris, leftover, unknown")
      ("kind", po::value(&o.kinds)->composing()->value_name("KIND,..."),
       "only these kinds: repository, global-setup, unknown")
      ("repo", po::value(&o.repos)->composing()->value_name("PATH"),
       "only the entries of this repository's lock, labelled (repeatable)")
      ("only-labelled", po::bool_switch(&o.only_labelled),
       "only entries whose repository or home is known")
      ("scan", po::value(&o.scans)->composing()->value_name("DIR"),
       "label the repositories (folders holding .apnea/) under DIR (repeatable)")
      ("scan-depth", po::value(&o.scan_depth)->value_name("N")->default_value(4),
       "how many levels below each --scan DIR to look")
      ("tolerance", po::value(&o.tolerance)->value_name("SECONDS")->default_value(2),
       "a process started this much after its owner record was written is a reused pid")
      ("guard-age", po::value(&o.guard_age)->value_name("SECONDS")->default_value(60),
       "reclaim guards (and unreadable candidates/tombstones) older than this are left over");
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
  if (o.scan_depth < 0) return usage_error("--scan-depth must be >= 0");
  auto tolerance = seconds_option("tolerance", o.tolerance);
  if (!tolerance) return usage_error(tolerance.error());
  auto guard_age = seconds_option("guard-age", o.guard_age);
  if (!guard_age) return usage_error(guard_age.error());
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
  LabelIndex labels;
  (void)labels.add_repository(system, ".");
  const std::string home = node_homedir(system);
  if (!home.empty()) (void)labels.add_home(system, home);
  for (const std::string& root : o.scans) {
    auto found = find_repositories(system, root, o.scan_depth,
                                   [&](const std::string& repo) { (void)labels.add_repository(system, repo); });
    if (!found) return usage_error(fmt::format("--scan {}: {}", root, errno_text(found.error())));
  }
  for (const std::string& root : o.repos) {
    auto name = labels.add_repository(system, root);
    if (!name) return usage_error(fmt::format("--repo {}: {}", root, errno_text(name.error())));
    filter->repo_locks.insert(*name);
  }

  ClassifyPolicy policy;
  policy.now_ns = system.now_ns();
  policy.area_uid = system.uid();
  policy.reuse_tolerance_ns = *tolerance;
  policy.guard_threshold_ns = *guard_age;
  if (area.explicit_directory) policy.lock_dir_option = area.directory;

  const Format format = o.json ? Format::json : o.raw ? Format::raw : Format::table;
  Output output(format, fields, !o.noheadings, !o.notruncate, colour_wanted(system));
  Summary summary;

  const AreaCheck check = check_lock_area(system, area);
  if (!check.safe() && check.problem != AreaProblem::missing) {
    // Prominent and alone: one line naming the path (and the JSON document saying so).
    if (format == Format::json) {
      output.begin(area.directory, check);
      output.end(summary, check.message());
    }
    print_error(command_name, check.message());
    return exit_unsafe;
  }
  output.begin(area.directory, check);
  std::optional<std::string> error;
  std::set<std::string> seen_repo_locks;
  auto show = [&](const EntryFacts& facts) {
    const EntryLabel* label = facts.parsed.role == EntryRole::unknown ? nullptr
                                                                        : labels.find(facts.parsed.lock_name());
    const Verdict verdict = classify(facts, policy, label);
    if (facts.parsed.role == EntryRole::lock && filter->repo_locks.count(facts.name) != 0)
      seen_repo_locks.insert(facts.name);
    if (!filter->accepts(facts, verdict, label)) return;
    summary.add(verdict);
    output.entry(EntryView{facts, verdict, label});
  };

  if (check.safe()) {
    auto scanned = scan_area(system, area.directory, policy.area_uid, [&](const EntryFacts& facts) {
      ++summary.scanned;
      show(facts);
      return true;
    });
    if (!scanned)
      error = fmt::format("cannot list Apnea lock directory: {}: {}", area.directory,
                          errno_text(scanned.error()));
  }
  if (!error) {
    // A --repo whose lock is not there: its lock is free.
    for (const std::string& name : filter->repo_locks) {
      if (seen_repo_locks.count(name) != 0) continue;
      EntryFacts facts;
      facts.name = name;
      facts.path = entry_path(area.directory, name);
      facts.parsed = parse_entry_name(name);
      show(facts);
    }
  }
  output.end(summary, error);

  if (error) {
    print_error(command_name, *error);
    return exit_unsafe;
  }
  if (format == Format::table && check.problem == AreaProblem::missing && summary.shown == 0)
    fmt::print(stderr, "apnea-locks status: {}\n", check.message());
  return summary.attention > 0 ? exit_attention : exit_ok;
}

}  // namespace apnea_locks::cli
