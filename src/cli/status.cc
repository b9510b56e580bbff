// apnea-locks status: every entry of the lock area, judged, as a table fitted to the
// terminal, raw lines or JSON. Never changes anything: it lists, reads and probes (see
// docs/status.md).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/hints.h"
#include "apnea_locks/labels.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/names.h"
#include "cli/all_users.h"
#include "cli/area.h"
#include "cli/commands.h"
#include "cli/entry_report.h"
#include "cli/fields.h"
#include "cli/hint_text.h"
#include "cli/json_writer.h"
#include "cli/options.h"
#include "cli/prometheus.h"
#include "cli/summary.h"
#include "cli/table.h"
#include "cli/terminal.h"
#include "cli/text.h"

namespace apnea_locks::cli {
namespace {

constexpr CommandHelp help{
    "status",
    "status [options] [LOCKPATH...]",
    "List every entry of Apnea's lock area (locks, candidates, tombstones, reclaim guards,\n"
    "anything unknown) with Apnea's verdict and ours, what needs attention first, and the\n"
    "command that would fix it. A LOCKPATH (as Apnea's message prints it) shows only that\n"
    "lock. On a terminal the table fits its width; a footer gives the totals and the next\n"
    "step. Changes nothing.",
    "--format prometheus writes metrics for node_exporter's textfile collector (names in\n"
    "apnea-locks(1)); --output-file PATH replaces PATH atomically.\n\n"
    "Exit status: 0 nothing needs attention, 1 something does, 2 usage error,\n"
    "3 the lock area is unsafe or unreadable, a --lock-dir, --repo, --scan or LOCKPATH\n"
    "directory does not exist or is not a directory, --output-file cannot be written, or\n"
    "(--all-users) an account's area could not be surveyed. An apnea-* entry of the temp\n"
    "dir that is not an account's own area (anyone can make one) is noted, not failed.",
    true};

struct StatusOptions {
  AreaOptions area;
  LabelOptions labels;
  TimingOptions timing;
  bool json = false;
  bool raw = false;
  bool noheadings = false;
  bool notruncate = false;
  bool only_labelled = false;
  bool output_all = false;
  bool list_columns = false;
  bool all_users = false;
  std::string output;
  std::string format;
  std::string output_file;
  std::string pid;  ///< -p/--pid, as given
  std::vector<std::string> states;
  std::vector<std::string> kinds;
  std::vector<std::string> lock_paths;
};

enum class Format { table, raw, json, prometheus };

/// The largest pid -p takes: 2^31-1, the largest an owner record can name (named_pids).
constexpr std::int64_t max_named_pid = 2147483647;

/// Which entries are shown.
struct Filter {
  std::set<EntryState> states;
  std::set<LockKind> kinds;
  std::set<std::string> locks;  ///< lock names of --repo and LOCKPATH; empty: every entry
  std::optional<double> pid;    ///< -p: only entries whose owner record names this pid
  bool only_labelled = false;

  bool accepts(const EntryView& entry) const {
    if (!states.empty() && states.count(entry.verdict.state) == 0) return false;
    if (!kinds.empty() && kinds.count(entry.facts.parsed.kind) == 0) return false;
    if (!locks.empty() && locks.count(entry.facts.parsed.lock_name()) == 0) return false;
    if (pid && !names_pid(entry.facts, *pid)) return false;
    return !only_labelled || entry.label != nullptr;
  }

  /// Whether the owner record may name `pid`: the accepted owner's, any pid a malformed
  /// record names (EntryFacts::named, the pids the never-live rule probes), every pid when
  /// the record could not be read, and every pid whose digits start with those a truncated
  /// record ends inside (`{"pid":2050` may be 20506).
  static bool names_pid(const EntryFacts& facts, double pid) {
    if (facts.owner && facts.owner->owner && facts.owner->owner->pid == pid) return true;
    if (facts.pids_unknown) return true;
    if (facts.truncated_pid && fmt::format("{}", static_cast<long long>(pid)).starts_with(*facts.truncated_pid)) return true;
    return std::any_of(facts.named.begin(), facts.named.end(),
                       [pid](const auto& named) { return named.first == pid; });
  }
};

std::string_view row_colour(const Verdict& verdict) {
  if (verdict.needs_attention) return sgr_attention;
  if (verdict.state == EntryState::stale || verdict.state == EntryState::in_flight) return sgr_warning;
  if (verdict.state == EntryState::live) return sgr_ok;
  return {};
}

/// How the entries shown are written: the format, and the columns (chosen: by -o or
/// --output-all).
struct Presentation {
  Format format = Format::table;
  std::vector<Field> fields;
  bool chosen = false;
};

/// The entry object `write` writes, as text.
std::string json_text_of(const std::function<void(JsonWriter&)>& write) {
  char* data = nullptr;
  std::size_t size = 0;
  std::FILE* memory = ::open_memstream(&data, &size);
  if (memory == nullptr) throw std::runtime_error("open_memstream failed");
  {
    JsonWriter json(memory);
    write(json);
    json.finish();
  }
  std::fclose(memory);
  std::string text(data, size);
  std::free(data);
  return text;
}

/// Writes one entry's JSON object: every field, or the chosen ones.
void write_entry_object(JsonWriter& json, const Presentation& shown, const EntryView& entry) {
  if (shown.chosen) write_fields_json(json, entry, shown.fields);
  else write_entry_json(json, entry);
}

/// One entry as `shown` writes it: a table row (fitted to `terminal`), a raw line's cells, or
/// its JSON object as text; nothing for metrics (counted in the summary).
RenderedEntry render_entry(const Presentation& shown, const Terminal& terminal,
                           const EntryView& entry) {
  RenderedEntry out;
  switch (shown.format) {
    case Format::prometheus: break;
    case Format::json:
      out.cells.push_back(
          json_text_of([&](JsonWriter& json) { write_entry_object(json, shown, entry); }));
      break;
    case Format::raw:
      out.cells.reserve(shown.fields.size());
      for (Field field : shown.fields) out.cells.push_back(field_text(field, entry));
      break;
    case Format::table:
      out.order = entry_order(entry);
      out.colour = row_colour(entry.verdict);
      out.cells.reserve(shown.fields.size());
      for (Field field : shown.fields)
        out.cells.push_back(field_cell(field, entry, terminal.width != 0));
      break;
  }
  return out;
}

/// The hints of one pass: the located locks, and what the survey said about them. The
/// locks are located at the first entry (hashing starts OpenSSL, a millisecond an empty
/// area's status does not pay).
class HintWatch {
 public:
  HintWatch(System& system, const LockArea& area) : system_(system), area_(area) {}

  /// Looks at every entry surveyed, shown or not.
  void see(const EntryView& entry) {
    locate();
    if (global_ && entry.facts.parsed.kind == LockKind::global_setup)
      if (auto judged = global_setup_hint(*global_, JudgedEntry{entry.facts, entry.verdict, entry.decision, entry.label}))
        global_hint_ = global_setup_hint_text(*judged, entry.decision.next_step);
    if (enclosing_ && entry.facts.name == enclosing_->name && entry.facts.stat)
      enclosing_hint_ = enclosing_hint_text(*enclosing_, here_, &entry);
  }

  /// The global setup lock first: it stops every Apnea run.
  std::vector<Hint> hints() const {
    std::vector<Hint> out;
    if (global_hint_) out.push_back(*global_hint_);
    if (enclosing_hint_) out.push_back(*enclosing_hint_);
    return out;
  }

 private:
  void locate() {
    if (located_) return;
    located_ = true;
    if (!area_.home.empty())
      if (auto lock = global_setup_lock(system_, area_.directory, area_.home)) global_ = *lock;
    if (auto here = system_.realpath("."); here) {
      here_ = *here;
      enclosing_ = enclosing_repository(system_, area_.directory, ".");
      if (enclosing_ && enclosing_->root == here_) enclosing_.reset();  // not a subdirectory
    }
  }

  System& system_;
  const LockArea& area_;
  bool located_ = false;
  std::optional<LocatedLock> global_;
  std::optional<LocatedLock> enclosing_;
  std::string here_;
  std::optional<Hint> global_hint_;
  std::optional<Hint> enclosing_hint_;
};

/// Writes shown entries: streamed for raw and JSON, collected and sorted for the table.
class Output {
 public:
  Output(const Presentation& shown, bool headings, const Terminal& terminal)
      : shown_(shown), headings_(headings), terminal_(terminal), json_(stdout) {}

  void begin(const std::string& lock_dir, const AreaCheck& check) {
    if (shown_.format == Format::prometheus) return;
    if (shown_.format == Format::raw && headings_) {
      std::vector<std::string> header;
      for (Field field : shown_.fields) header.emplace_back(field_info(field).header);
      print_raw_line(stdout, header);
    }
    if (shown_.format != Format::json) return;
    json_.begin_object();
    write_schema(json_, "status");
    json_.key("lock_dir").string(lock_dir);
    json_.key("area").begin_object();
    json_.key("check").string(check.name());
    json_.key("path").string(check.path.empty() ? lock_dir : check.path);
    json_.key("message").string(check.message());
    json_.end_object();
    json_.key("columns");
    if (!shown_.chosen) {
      json_.null();
    } else {
      json_.begin_array();
      for (Field field : shown_.fields) json_.string(field_info(field).name);
      json_.end_array();
    }
    json_.key("entries").begin_array();
  }

  void entry(const EntryView& view) {
    // JSON is streamed as it is written: an area of 100,000 entries is one document.
    if (shown_.format == Format::json) write_entry_object(json_, shown_, view);
    else rendered(render_entry(shown_, terminal_, view));
  }

  /// An entry rendered (by render_entry, here or in a child of --all-users).
  void rendered(RenderedEntry entry) {
    switch (shown_.format) {
      case Format::prometheus: break;  // counted in the summary
      case Format::json: json_.raw_value(entry.cells.at(0)); break;
      case Format::raw: print_raw_line(stdout, entry.cells); break;
      case Format::table: rows_.push_back(std::move(entry)); break;
    }
  }

  /// --all-users: writes the document's "users" member before the summary.
  void set_extra_json(std::function<void(JsonWriter&)> extra) { extra_json_ = std::move(extra); }

  void end(const LockArea& area, const AreaCheck& check, const AreaSummary& summary,
           const std::vector<Hint>& hints, const std::optional<std::string>& error) {
    if (shown_.format == Format::json) {
      json_.end_array();
      if (extra_json_) extra_json_(json_);
      json_.key("summary");
      write_summary_json(json_, summary);
      json_.key("hints");
      write_hints_json(json_, hints);
      json_.key("error").optional_string(error);
      json_.end_object();
      json_.finish();
      return;
    }
    if (shown_.format == Format::table) print_table(area, check, summary, hints, error.has_value());
    std::fflush(stdout);
  }

 private:
  void print_table(const LockArea& area, const AreaCheck& check, const AreaSummary& summary,
                   const std::vector<Hint>& hints, bool failed) {
    const std::size_t width = terminal_.width;
    const bool colour = terminal_.colour;
    // Written line by line: a table of 100,000 rows is tens of megabytes.
    auto put = [](std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); };
    if (headings_ && !hints.empty()) {
      put(hints_text(hints, width, colour));
      put("\n");
    }
    std::sort(rows_.begin(), rows_.end(),
              [](const RenderedEntry& a, const RenderedEntry& b) { return a.order < b.order; });
    std::vector<TableColumn> columns;
    for (Field field : shown_.fields)
      columns.push_back(column_of(field, width != 0, !shown_.chosen));
    Table table(std::move(columns));
    for (RenderedEntry& row : rows_) table.add_row(std::move(row.cells), row.colour);
    rows_.clear();
    if (table.size() > 0)
      for (const std::string& line : table.lines(headings_, width, terminal_.ellipsis, colour)) {
        put(line);
        put("\n");
      }
    if (headings_ && !failed) put(footer(area, check, summary, table.hidden()));
  }

  /// Totals by state, what to do next, and the columns hidden to fit.
  std::string footer(const LockArea& area, const AreaCheck& check, const AreaSummary& summary,
                     const std::vector<std::string>& hidden) const {
    const std::size_t width = terminal_.width;
    const bool colour = terminal_.colour;
    const std::string dir = printable(area.directory);
    std::string out;
    // A lock path in the prose (over 100 columns) is split with a trailing `\`, so that no
    // line is wider than the terminal.
    auto say = [&](const std::string& line) { out += wrap(line, width, "  ", LongWords::split) + "\n"; };
    if (summary.shown == 0) {
      if (check.problem == AreaProblem::missing && summary.scanned == 0)
        say(fmt::format("No entries: {} does not exist yet (Apnea has taken no lock there).", dir));
      else if (summary.scanned == 0)
        say(fmt::format("No entries in {}: nothing needs attention.", dir));
      else
        say(fmt::format("No entries match ({} in {}).", plural(summary.scanned, "entry", "entries"), dir));
      return out;
    }
    out += "\n";
    const std::string shown = summary.scanned > summary.shown
                                  ? fmt::format("{} of {}", summary.shown, plural(summary.scanned, "entry", "entries"))
                                  : plural(summary.shown, "entry", "entries");
    const std::string attention =
        summary.attention == 0
            ? std::string("nothing needs attention")
            : paint(fmt::format("{} need{} attention", summary.attention, summary.attention == 1 ? "s" : ""),
                    sgr_attention, colour);
    say(fmt::format("{}: {}; {}.", shown, state_totals(summary), attention));
    if (summary.next) {
      const NextStep& next = *summary.next;
      // On a terminal a lock's name (80 columns) is cut to its kind, 12 digits of its key and
      // its suffix; the fix command below still names the whole path.
      std::string description = next.description;
      const std::string full_name = printable(next.name);
      if (const auto at = description.find(full_name); width != 0 && at != std::string::npos)
        description.replace(at, full_name.size(), brief_name(next.name, terminal_.ellipsis));
      const std::string what = fmt::format("Next: {} is {} ({})", description, next.state, next.reason);
      if (!next.fix_argv.empty()) {
        say(what + ":");
        out += wrap_command(next.fix_argv, width, "  ") + "\n";
      } else if (!next.next_step.empty()) {
        say(fmt::format("{}; next step: {}", what, printable(next.next_step)));
      } else {
        say(fmt::format("{}: {}", what, printable(next.why)));
      }
    }
    if (!hidden.empty()) {
      std::string names;
      for (const std::string& name : hidden) names += (names.empty() ? "" : " ") + name;
      say(fmt::format("Hidden to fit {} columns: {} (--notruncate or -o shows them).", width, names));
    }
    return out;
  }

  Presentation shown_;
  bool headings_;
  Terminal terminal_;
  JsonWriter json_;
  std::vector<RenderedEntry> rows_;
  std::function<void(JsonWriter&)> extra_json_;
};

po::options_description describe(StatusOptions& o) {
  po::options_description options("Options");
  options.add_options()
      ("json,J", po::bool_switch(&o.json), "one JSON document (entries streamed in scan order); honours -o")
      ("raw,r", po::bool_switch(&o.raw), "one line per entry, space-separated, unaligned")
      ("format", po::value(&o.format)->value_name("FORMAT"),
       "table (default), raw, json or prometheus (Prometheus text exposition format)")
      ("output-file", po::value(&o.output_file)->value_name("PATH"),
       "with --format prometheus: write the metrics to PATH atomically (temp file + rename)")
      ("output,o", po::value(&o.output)->value_name("COLUMNS"),
       "columns to show, comma-separated; +COL,... adds to the defaults; 'help' lists them")
      ("output-all", po::bool_switch(&o.output_all), "show every column")
      ("list-columns,H", po::bool_switch(&o.list_columns), "list the columns with descriptions and exit")
      ("noheadings,n", po::bool_switch(&o.noheadings), "no header line, hints or footer")
      ("notruncate,u", po::bool_switch(&o.notruncate),
       "do not fit the table to the terminal: every column, nothing shortened")
      ("pid,p", po::value(&o.pid)->value_name("PID"),
       "only entries whose owner record names PID (1 to 2147483647)")
      ("state", po::value(&o.states)->composing()->value_name("STATE,..."),
       "only these states: live, stale, malformed, live-malformed, free, in-flight, debris, "
       "leftover, unknown")
      ("kind", po::value(&o.kinds)->composing()->value_name("KIND,..."),
       "only these kinds: repository, global-setup, unknown")
      ("only-labelled", po::bool_switch(&o.only_labelled),
       "only entries whose repository or home is known");
  add_survey_options(options, o.labels, o.timing, o.area, o.all_users);
  return options;
}

/// Turns the filter options into a Filter (lock names are added later); a usage message on error.
std::expected<Filter, std::string> make_filter(const StatusOptions& o) {
  Filter filter;
  filter.only_labelled = o.only_labelled;
  for (const std::string& name : split_list(o.states)) {
    auto state = parse_state(name);
    if (!state)
      return std::unexpected(fmt::format(
          "unknown state '{}' (live, stale, malformed, live-malformed, free, in-flight, debris, "
          "leftover, unknown)",
          name));
    filter.states.insert(*state);
  }
  for (const std::string& name : split_list(o.kinds)) {
    std::optional<LockKind> kind;
    for (LockKind k : {LockKind::repository, LockKind::global_setup, LockKind::unknown})
      if (kind_name(k) == name) kind = k;
    if (!kind) return std::unexpected(fmt::format("unknown kind '{}' (repository, global-setup, unknown)", name));
    filter.kinds.insert(*kind);
  }
  if (!o.pid.empty()) {
    auto pid = parse_whole_number("--pid", o.pid, 1, max_named_pid);
    if (!pid) return std::unexpected(pid.error());
    filter.pid = static_cast<double>(*pid);
  }
  return filter;
}

/// The lock names of the LOCKPATH arguments (read_lock_paths), moving `area` to their
/// directory when no --lock-dir was given. A usage message when they are not entries of one
/// lock area.
std::expected<std::set<std::string>, std::string> lock_path_filter(System& system, const StatusOptions& o,
                                                                   LockArea& area) {
  auto paths = read_lock_paths(system, o.lock_paths, area, !o.area.lock_dir.empty());
  if (!paths) return std::unexpected(paths.error());
  std::set<std::string> names;
  for (const LockPath& path : *paths) names.insert(path.entry.lock_name());
  return names;
}


/// What the JSON document says about one `apnea-*` entry of the temp dir.
struct UserArea {
  std::string user;  ///< empty when not surveyed as an account
  std::optional<std::uint32_t> uid;
  std::string top;
  std::string lock_dir;
  std::string check;  ///< the area check (surveyed), or why it was not surveyed
  std::string message;
  bool surveyed = false;
  std::optional<std::string> error;
};

void write_user_areas(JsonWriter& json, const std::vector<UserArea>& areas) {
  json.key("users").begin_array();
  for (const UserArea& area : areas) {
    json.begin_object();
    json.key("user").optional_string(area.surveyed ? std::optional(area.user) : std::nullopt);
    json.key("uid");
    if (area.uid) json.integer(*area.uid);
    else json.null();
    json.key("path").string(area.top);
    json.key("lock_dir").string(area.lock_dir);
    json.key("surveyed").boolean(area.surveyed);
    json.key("check").string(area.check);
    json.key("message").string(area.message);
    json.key("error").optional_string(area.error);
    json.end_object();
  }
  json.end_array();
}

/// --format prometheus: writes `metrics` (whatever the areas hold, so an alert can fire).
/// False, the message printed, when --output-file cannot be written.
bool write_status_metrics(System& system, const StatusOptions& o, Format format,
                          const std::vector<MetricsReport>& metrics) {
  if (format != Format::prometheus) return true;
  auto written = write_metrics(system, metrics, o.output_file);
  if (!written) print_error(help.name, written.error());
  return written.has_value();
}

/// In the child that has become `area`'s account: the same judging pass as for one area,
/// each entry shown rendered and streamed by `show`, the fix acting for the account.
AccountReport survey_account(const AccountArea& area, const StatusOptions& o,
                             const Presentation& shown, const Filter& filter,
                             const Terminal& terminal, const ShowEntry& show) {
  System& own = real_system();
  const std::string user = user_name(area);
  const LockArea mine = account_lock_area(area);
  AccountReport report;
  auto failed = [&](std::string error) {
    report.error = std::move(error);
    report.scrape_success = false;
    return report;
  };
  auto labels = build_labels(own, mine, o.labels);
  if (!labels) return failed(labels.error());
  Filter own_filter = filter;
  own_filter.locks = labels->repo_locks;
  auto settings = judging_settings(own, mine, o.timing, false, HostRead::when_needed);
  if (!settings) return failed(settings.error());
  settings->fix.lock_dir.reset();  // the fix acts for the account: reclaim --user NAME
  settings->fix.user = user;
  const AreaCheck check = check_lock_area(own, mine);
  report.check = std::string(check.name());
  report.message = check.message();
  if (!check.safe() && check.problem != AreaProblem::missing) {
    report.error = check.message();
    report.area_safe = false;
    report.scrape_success = check.problem != AreaProblem::unreadable;
    return report;
  }
  AreaSummary summary;
  auto visit = [&](const EntryView& judged) {
    if (!own_filter.accepts(judged)) return;
    EntryView entry = judged;
    entry.user = &user;
    summary.add(entry);
    if (shown.format == Format::prometheus) return;
    RenderedEntry rendered = render_entry(shown, terminal, entry);
    std::get<3>(rendered.order) += "\n" + user;  // the accounts' rows sort apart
    show(rendered);
  };
  if (!check.safe()) {
    judge_absent_locks(own, mine.directory, *settings, labels->index, own_filter.locks, visit);
  } else if (auto scanned = judge_area(own, mine.directory, *settings, labels->index,
                                       own_filter.locks, visit)) {
    summary.scanned = *scanned;
  } else {
    return failed(fmt::format("cannot list Apnea lock directory: {}: {}", mine.directory,
                              errno_text(scanned.error())));
  }
  report.summary = std::move(summary);
  return report;
}

/// What status --all-users gathers over the accounts' areas.
struct AllUsers {
  AreaSummary summary;                 ///< every account's, merged
  std::vector<UserArea> areas;         ///< the JSON's "users"
  std::deque<AccountReport> reports;   ///< the surveys (stable addresses: metrics point in)
  std::vector<MetricsReport> metrics;  ///< one per apnea-* entry
  std::vector<std::string> problems;   ///< one line each, on standard error
  std::vector<const AccountArea*> foreign;  ///< the apnea-* entries that are no account's area
};

/// Surveys `area` as its account (or reports why not) into `all`, its entries into `output`.
void survey_user_area(System& system, const AccountArea& area, const StatusOptions& o,
                      const Presentation& shown, const Filter& filter, const Terminal& terminal,
                      Output& output, AllUsers& all) {
  UserArea user{user_name(area), area.uid, area.top, area.lock_directory,
                std::string(area.name()), area.message(), area.surveyable(), std::nullopt};
  if (!area.surveyable()) {
    all.foreign.push_back(&area);
    all.areas.push_back(std::move(user));
    return;
  }
  AccountReport& report = all.reports.emplace_back(
      survey_as_account(system, *area.account, [&](const ShowEntry& show) {
        return survey_account(area, o, shown, filter, terminal, show);
      }));
  for (RenderedEntry& entry : report.entries) output.rendered(std::move(entry));
  report.entries = {};
  if (report.check) {
    user.check = *report.check;
    user.message = report.message;
  }
  user.error = report.error;
  if (report.summary) merge_summary(all.summary, *report.summary);
  all.metrics.push_back(account_metrics(area, &report));
  if (user.error) all.problems.push_back(*user.error);
  all.areas.push_back(std::move(user));
}

/// status --all-users: every account's area surveyed by a child that has become the
/// account; the entries and summaries it reports are merged into one table or document.
int status_all_users(const StatusOptions& o, Presentation shown, const Filter& filter,
                     const Terminal& terminal) {
  System& system = real_system();
  if (std::find(shown.fields.begin(), shown.fields.end(), Field::user) == shown.fields.end())
    shown.fields.insert(shown.fields.begin(), Field::user);
  const std::string tmpdir = node_tmpdir(system);
  LockArea every;
  every.directory = node_join(tmpdir, "apnea-*/operation-locks");
  every.explicit_directory = true;
  auto found = find_account_areas(system);
  if (!found) {
    print_error(help.name, fmt::format("cannot list {}: {}", printable(tmpdir), errno_text(found.error())));
    return exit_unsafe;
  }
  AreaCheck check;
  check.path = tmpdir;
  Output output(shown, !o.noheadings, terminal);
  output.begin(every.directory, check);
  AllUsers all;
  for (const AccountArea& area : *found)
    survey_user_area(system, area, o, shown, filter, terminal, output, all);
  all.metrics.push_back(foreign_metrics(tmpdir, all.foreign.size()));
  output.set_extra_json([&](JsonWriter& json) { write_user_areas(json, all.areas); });
  const std::vector<std::string>& problems = all.problems;
  std::optional<std::string> error;
  if (!problems.empty())
    error = problems.size() == 1 ? problems.front()
                                 : fmt::format("{} (and {} more)", problems.front(), problems.size() - 1);
  // The table keeps its footer (about the entries shown); the areas not surveyed are on
  // standard error, one line each, and in the JSON's "users" and "error".
  output.end(every, check, all.summary, {}, shown.format == Format::json ? error : std::nullopt);
  if (!write_status_metrics(system, o, shown.format, all.metrics)) return exit_unsafe;
  // Foreign entries are noted, not failed: anyone can make one.
  if (!all.foreign.empty()) print_error(help.name, "note: " + foreign_line(tmpdir, all.foreign));
  for (const std::string& line : problems) print_error(help.name, line);
  if (!problems.empty()) return exit_unsafe;
  return all.summary.attention > 0 ? exit_attention : exit_ok;
}

/// The format the options name (--json, --raw, --format), or a usage message.
std::expected<Format, std::string> format_of(const StatusOptions& o) {
  if (o.json && o.raw) return std::unexpected("--json and --raw exclude each other");
  const Format implied = o.json ? Format::json : o.raw ? Format::raw : Format::table;
  if (o.format.empty()) return implied;
  const std::optional<Format> named = o.format == "table"        ? std::optional(Format::table)
                                      : o.format == "raw"        ? std::optional(Format::raw)
                                      : o.format == "json"       ? std::optional(Format::json)
                                      : o.format == "prometheus" ? std::optional(Format::prometheus)
                                                                 : std::nullopt;
  if (!named)
    return std::unexpected(
        fmt::format("unknown format '{}' (table, raw, json, prometheus)", o.format));
  if ((o.json && *named != Format::json) || (o.raw && *named != Format::raw))
    return std::unexpected(fmt::format("--format {} and {} exclude each other", o.format,
                                       o.json ? "--json" : "--raw"));
  return *named;
}

/// How the options say to write the entries shown (format, --output-file, columns), or a
/// usage message.
std::expected<Presentation, std::string> presentation_of(const StatusOptions& o) {
  auto format = format_of(o);
  if (!format) return std::unexpected(format.error());
  if (!o.output_file.empty() && *format != Format::prometheus)
    return std::unexpected("--output-file needs --format prometheus");
  if (o.output_all && !o.output.empty())
    return std::unexpected("--output and --output-all exclude each other");
  Presentation shown{*format, default_fields(), o.output_all || !o.output.empty()};
  if (o.output_all) {
    shown.fields.clear();
    for (const FieldInfo& info : all_fields()) shown.fields.push_back(info.field);
  } else if (!o.output.empty()) {
    auto picked = parse_fields(o.output);
    if (!picked) return std::unexpected(fmt::format("-o {}: {}", o.output, picked.error()));
    shown.fields = std::move(*picked);
  }
  return shown;
}

/// The area status surveys, with its labels and its survey settings.
struct StatusArea {
  LockArea area;
  Labels labels;
  SurveySettings settings;
};

/// Opens the area the options name (--lock-dir, --user, LOCKPATH), adding the locks of
/// --repo and LOCKPATH to `filter`. The exit status on failure (the message printed).
std::expected<StatusArea, int> open_status_area(System& system, const StatusOptions& o,
                                                Filter& filter) {
  auto opened = open_lock_area(system, o.area);
  if (!opened)
    return std::unexpected(command_error(help.name, opened.error().exit_status, opened.error().message));
  LockArea area = std::move(*opened);
  auto lock_names = lock_path_filter(system, o, area);
  if (!lock_names) return std::unexpected(usage_error(help.name, lock_names.error()));

  // Labels: the current directory and its ancestors, the home, each --repo and --scan.
  auto labels = build_labels(system, area, o.labels);
  if (!labels) {
    print_error(help.name, labels.error());
    return std::unexpected(exit_bad_path);
  }
  filter.locks = labels->repo_locks;
  filter.locks.insert(lock_names->begin(), lock_names->end());
  auto settings = judging_settings(system, area, o.timing, false, HostRead::when_needed);
  if (!settings) return std::unexpected(usage_error(help.name, settings.error()));
  return StatusArea{std::move(area), std::move(*labels), std::move(*settings)};
}

/// Surveys one area: entries shown as they are judged, then the summary, hints, metrics.
int status_one_area(System& system, const StatusOptions& o, const Presentation& shown,
                    const StatusArea& opened, const Filter& filter, const Terminal& terminal) {
  const LockArea& area = opened.area;
  Output output(shown, !o.noheadings, terminal);
  AreaSummary summary;
  MetricsReport metrics = area_metrics(area.directory);
  const AreaCheck check = check_lock_area(system, area);
  if (!check.safe() && check.problem != AreaProblem::missing) {
    // Prominent and alone: one line naming the path (and the JSON document saying so).
    if (shown.format == Format::json) {
      output.begin(area.directory, check);
      output.end(area, check, summary, {}, area_problem(system, check));
    }
    metrics.area_safe = false;
    metrics.scrape_success = check.problem != AreaProblem::unreadable;
    write_status_metrics(system, o, shown.format, {metrics});
    print_error(help.name, area_problem(system, check));
    return exit_unsafe;
  }
  output.begin(area.directory, check);
  std::optional<std::string> error;
  HintWatch hints(system, area);
  auto show = [&](const EntryView& entry) {
    hints.see(entry);
    if (!filter.accepts(entry)) return;
    summary.add(entry);
    output.entry(entry);
  };
  const Labels& labels = opened.labels;
  if (check.safe()) {
    auto scanned =
        judge_area(system, area.directory, opened.settings, labels.index, filter.locks, show);
    if (scanned)
      summary.scanned = *scanned;
    else
      error = fmt::format("cannot list Apnea lock directory: {}: {}", area.directory,
                          errno_text(scanned.error()));
  } else {
    // No area yet: a --repo's (or LOCKPATH's) lock is free.
    judge_absent_locks(system, area.directory, opened.settings, labels.index, filter.locks, show);
  }
  output.end(area, check, summary, hints.hints(), error);
  if (error) {
    metrics.scrape_success = false;
    write_status_metrics(system, o, shown.format, {metrics});
    print_error(help.name, *error);
    return exit_unsafe;
  }
  metrics.summary = &summary;
  if (!write_status_metrics(system, o, shown.format, {metrics})) return exit_unsafe;
  return summary.attention > 0 ? exit_attention : exit_ok;
}

}  // namespace

int status_command(const std::vector<std::string>& args) {
  StatusOptions o;
  const po::options_description options = describe(o);
  auto parsed = parse_command_line(help, args, options, "lockpath", o.lock_paths);
  if (!parsed) return parsed.error();
  if (o.list_columns || o.output == "help") {
    fmt::print("{}", columns_help());
    return exit_ok;
  }
  auto shown = presentation_of(o);
  if (!shown) return usage_error(help.name, shown.error());
  auto filter = make_filter(o);
  if (!filter) return usage_error(help.name, filter.error());

  System& system = real_system();
  if (auto refused = sudo_refusal(system, o.output_file, typed_paths(o.area, o.labels, o.lock_paths)))
    return usage_error(help.name, *refused);
  auto terminal = [&] {
    if (shown->format != Format::table) return Terminal{};
    return terminal_view(system, colour_mode(*parsed), o.notruncate);
  };
  if (o.all_users) {
    if (auto refused = all_users_usage(system, o.area, o.lock_paths.empty() ? "" : "a LOCKPATH"))
      return usage_error(help.name, refused->message);
    return status_all_users(o, *shown, *filter, terminal());
  }
  auto opened = open_status_area(system, o, *filter);
  if (!opened) return opened.error();
  return status_one_area(system, o, *shown, *opened, *filter, terminal());
}

}  // namespace apnea_locks::cli
