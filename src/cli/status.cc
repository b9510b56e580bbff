// apnea-locks status: every entry of the lock area, judged, as a table fitted to the
// terminal, raw lines or JSON. Never changes anything: it lists, reads and probes (see
// docs/status.md).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
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
#include "cli/atomic_file.h"
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

#ifndef APNEA_LOCKS_VERSION
#define APNEA_LOCKS_VERSION "unknown"
#endif

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
    "(--all-users) an apnea-* entry of the temp dir is not an account's own area.",
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
  std::vector<std::string> states;
  std::vector<std::string> kinds;
  std::vector<std::string> lock_paths;
};

enum class Format { table, raw, json, prometheus };

/// Which entries are shown.
struct Filter {
  std::set<EntryState> states;
  std::set<LockKind> kinds;
  std::set<std::string> locks;  ///< lock names of --repo and LOCKPATH; empty: every entry
  bool only_labelled = false;

  bool accepts(const EntryView& entry) const {
    if (!states.empty() && states.count(entry.verdict.state) == 0) return false;
    if (!kinds.empty() && kinds.count(entry.facts.parsed.kind) == 0) return false;
    if (!locks.empty() && locks.count(entry.facts.parsed.lock_name()) == 0) return false;
    return !only_labelled || entry.label != nullptr;
  }
};

std::string_view row_colour(const Verdict& verdict) {
  if (verdict.needs_attention) return sgr_attention;
  if (verdict.state == EntryState::stale || verdict.state == EntryState::in_flight) return sgr_warning;
  if (verdict.state == EntryState::live) return sgr_ok;
  return {};
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
    if (global_ && entry.decision != nullptr && entry.facts.parsed.kind == LockKind::global_setup)
      if (auto judged = global_setup_hint(*global_, JudgedEntry{entry.facts, entry.verdict, *entry.decision, entry.label}))
        global_hint_ = global_setup_hint_text(*judged, entry.decision->next_step);
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
  Output(Format format, std::vector<Field> fields, bool chosen_fields, bool headings,
         const Terminal& terminal)
      : format_(format), fields_(std::move(fields)), chosen_(chosen_fields), headings_(headings),
        terminal_(terminal), json_(stdout) {}

  void begin(const std::string& lock_dir, const AreaCheck& check) {
    if (format_ == Format::prometheus) return;
    if (format_ == Format::raw && headings_) {
      std::vector<std::string> header;
      for (Field field : fields_) header.emplace_back(field_info(field).header);
      print_raw_line(stdout, header);
    }
    if (format_ != Format::json) return;
    json_.begin_object();
    write_schema(json_, "status");
    json_.key("lock_dir").string(lock_dir);
    json_.key("area").begin_object();
    json_.key("check").string(check.name());
    json_.key("path").string(check.path.empty() ? lock_dir : check.path);
    json_.key("message").string(check.message());
    json_.end_object();
    json_.key("columns");
    if (!chosen_) {
      json_.null();
    } else {
      json_.begin_array();
      for (Field field : fields_) json_.string(field_info(field).name);
      json_.end_array();
    }
    json_.key("entries").begin_array();
  }

  void entry(const EntryView& view) {
    switch (format_) {
      case Format::prometheus: break;  // counted in the summary
      case Format::json:
        if (chosen_) write_fields_json(json_, view, fields_);
        else write_entry_json(json_, view);
        break;
      case Format::raw: {
        std::vector<std::string> cells;
        cells.reserve(fields_.size());
        for (Field field : fields_) cells.push_back(field_text(field, view));
        print_raw_line(stdout, cells);
        break;
      }
      case Format::table: {
        Row row{entry_order(view), {}, std::string(row_colour(view.verdict))};
        row.cells.reserve(fields_.size());
        for (Field field : fields_) row.cells.push_back(field_cell(field, view, terminal_.width != 0));
        rows_.push_back(std::move(row));
        break;
      }
    }
  }

  /// --all-users: a row of the table a child rendered (see entry()).
  void add_row(EntryOrder order, std::string colour, std::vector<std::string> cells) {
    rows_.push_back(Row{std::move(order), std::move(cells), std::move(colour)});
  }
  /// --all-users: a raw line's cells a child rendered.
  void raw_cells(const std::vector<std::string>& cells) { print_raw_line(stdout, cells); }
  /// --all-users: an entry object a child serialized.
  void json_entry(std::string_view text) { json_.raw_value(text); }
  /// --all-users: writes the document's "users" member before the summary.
  void set_extra_json(std::function<void(JsonWriter&)> extra) { extra_json_ = std::move(extra); }

  void end(const LockArea& area, const AreaCheck& check, const AreaSummary& summary,
           const std::vector<Hint>& hints, const std::optional<std::string>& error) {
    if (format_ == Format::json) {
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
    if (format_ == Format::table) print_table(area, check, summary, hints, error.has_value());
    std::fflush(stdout);
  }

 private:
  struct Row {
    EntryOrder order;
    std::vector<std::string> cells;
    std::string colour;
  };

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
    std::sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) { return a.order < b.order; });
    std::vector<TableColumn> columns;
    for (Field field : fields_) columns.push_back(column_of(field, width != 0, !chosen_));
    Table table(std::move(columns));
    for (Row& row : rows_) table.add_row(std::move(row.cells), row.colour);
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
    auto say = [&](const std::string& line) { out += wrap(line, width, "  ") + "\n"; };
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
        say(fmt::format("{}; no flag removes it: {}", what, printable(next.next_step)));
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

  static std::string plural(std::size_t n, std::string_view one, std::string_view many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
  }

  Format format_;
  std::vector<Field> fields_;
  bool chosen_;
  bool headings_;
  Terminal terminal_;
  JsonWriter json_;
  std::vector<Row> rows_;
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
      ("list-columns", po::bool_switch(&o.list_columns), "list the columns with descriptions and exit")
      ("noheadings,n", po::bool_switch(&o.noheadings), "no header line, hints or footer")
      ("notruncate", po::bool_switch(&o.notruncate),
       "do not fit the table to the terminal: every column, nothing shortened")
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

/// status --all-users: every account's area surveyed by a child that has become the
/// account; the rows, entries and summaries it sends are merged into one table or document.
int status_all_users(const StatusOptions& o, Format format, std::vector<Field> fields, bool chosen,
                     const Filter& filter, const Terminal& terminal) {
  System& system = real_system();
  if (std::find(fields.begin(), fields.end(), Field::user) == fields.end())
    fields.insert(fields.begin(), Field::user);
  const std::string tmpdir = node_tmpdir(system);
  LockArea all;
  all.directory = node_join(tmpdir, "apnea-*/operation-locks");
  all.explicit_directory = true;
  auto found = find_account_areas(system);
  if (!found) {
    print_error(help.name, fmt::format("cannot list {}: {}", printable(tmpdir), errno_text(found.error())));
    return exit_unsafe;
  }
  AreaCheck check;
  check.path = tmpdir;
  Output output(format, fields, chosen, !o.noheadings, terminal);
  output.begin(all.directory, check);
  AreaSummary summary;
  std::vector<std::string> problems;  // one line each, on standard error
  std::vector<UserArea> reported;
  std::vector<MetricsReport> metrics;  // --format prometheus: one per apnea-* entry
  std::deque<AreaSummary> summaries;   // theirs (stable addresses)
  for (const AccountArea& area : *found) {
    MetricsReport metric;
    metric.lock_dir = area.lock_directory;
    metric.version = APNEA_LOCKS_VERSION;
    if (const std::string user = user_name(area); !user.empty()) metric.user = user;
    UserArea report{user_name(area), area.uid, area.top, area.lock_directory,
                    std::string(area.name()), area.message(), area.surveyable(), std::nullopt};
    if (!area.surveyable()) {
      problems.push_back(misfit_line(area));
      reported.push_back(std::move(report));
      metric.area_safe = false;
      metrics.push_back(std::move(metric));
      continue;
    }
    const Account& account = *area.account;
    const std::string& user = report.user;
    // In the child, as the account: the same judging pass as for one account.
    auto survey = [&](FrameWriter& out) {
      System& own = real_system();
      const LockArea mine = account_lock_area(area);
      auto labels = build_labels(own, mine, o.labels);
      if (!labels) {
        out.send('e', {labels.error()});
        return;
      }
      Filter own_filter = filter;
      own_filter.locks = labels->repo_locks;
      auto policy = judging_policy(own, mine, o.timing, false, HostRead::when_needed);
      if (!policy) {
        out.send('e', {policy.error()});
        return;
      }
      policy->fix.lock_dir.reset();  // the fix acts for the account: reclaim --user NAME
      policy->fix.user = user;
      const AreaCheck own_check = check_lock_area(own, mine);
      out.send('c', {std::string(own_check.name()), own_check.message()});
      if (!own_check.safe() && own_check.problem != AreaProblem::missing) return;
      AreaSummary own_summary;
      auto show = [&](const EntryView& judged) {
        if (!own_filter.accepts(judged)) return;
        EntryView entry = judged;
        entry.user = &user;
        own_summary.add(entry);
        switch (format) {
          case Format::json:
            out.send('j', {json_text_of([&](JsonWriter& json) {
                       if (chosen) write_fields_json(json, entry, fields);
                       else write_entry_json(json, entry);
                     })});
            break;
          case Format::raw: {
            std::vector<std::string> cells;
            for (Field field : fields) cells.push_back(field_text(field, entry));
            out.send('l', cells);
            break;
          }
          case Format::table: {
            const EntryOrder order = entry_order(entry);
            std::vector<std::string> row = {fmt::format("{}", std::get<0>(order)),
                                            fmt::format("{}", std::get<1>(order)),
                                            fmt::format("{}", std::get<2>(order)),
                                            std::get<3>(order) + "\n" + user,
                                            std::string(row_colour(entry.verdict))};
            for (Field field : fields) row.push_back(field_cell(field, entry, terminal.width != 0));
            out.send('r', row);
            break;
          }
          case Format::prometheus: break;
        }
      };
      if (own_check.safe()) {
        auto scanned = judge_area(own, mine.directory, *policy, labels->index, own_filter.locks, show);
        if (!scanned) {
          out.send('e', {fmt::format("cannot list Apnea lock directory: {}: {}", mine.directory,
                                     errno_text(scanned.error()))});
          return;
        }
        own_summary.scanned = *scanned;
      } else {
        judge_absent_locks(own, mine.directory, *policy, labels->index, own_filter.locks, show);
      }
      out.send('s', summary_fields(own_summary));
    };
    auto receive = [&](const Frame& frame) {
      const auto& f = frame.fields;
      switch (frame.type) {
        case 'c':
          if (f.size() == 2) {
            report.check = f[0];
            report.message = f[1];
            if (f[0] != "ok" && f[0] != "missing") {
              report.error = f[1];
              metric.area_safe = false;
              metric.scrape_success = f[0] != "unreadable";
            }
          }
          break;
        case 'e':
          if (!f.empty()) report.error = f[0];
          metric.scrape_success = false;
          break;
        case 'j':
          if (!f.empty()) output.json_entry(f[0]);
          break;
        case 'l': output.raw_cells(f); break;
        case 'r':
          if (f.size() >= 5)
            output.add_row(EntryOrder{std::stoi(f[0]), std::stoi(f[1]), std::stoi(f[2]), f[3]}, f[4],
                           std::vector<std::string>(f.begin() + 5, f.end()));
          break;
        case 's':
          summaries.push_back(summary_from_fields(f));
          metric.summary = &summaries.back();
          merge_summary(summary, summaries.back());
          break;
        default: break;
      }
    };
    if (auto ran = survey_as_account(system, account, survey, receive); !ran) {
      report.error = ran.error();
      metric.scrape_success = false;
      metric.summary = nullptr;
    }
    if (report.error) problems.push_back(*report.error);
    reported.push_back(std::move(report));
    metrics.push_back(std::move(metric));
  }
  output.set_extra_json([&](JsonWriter& json) { write_user_areas(json, reported); });
  std::optional<std::string> error;
  if (!problems.empty())
    error = problems.size() == 1 ? problems.front()
                                 : fmt::format("{} (and {} more)", problems.front(), problems.size() - 1);
  // The table keeps its footer (about the entries shown); the areas not surveyed are on
  // standard error, one line each, and in the JSON's "users" and "error".
  output.end(all, check, summary, {}, format == Format::json ? error : std::nullopt);
  if (format == Format::prometheus) {
    // Written whatever the areas hold, so an alert can fire (as for one area).
    const std::string text = prometheus_text(metrics);
    if (o.output_file.empty()) {
      fmt::print("{}", text);
      std::fflush(stdout);
    } else if (auto written = write_file_atomically(system, o.output_file, text); !written) {
      print_error(help.name, written.error());
      return exit_unsafe;
    }
  }
  for (const std::string& line : problems) print_error(help.name, line);
  if (!problems.empty()) return exit_unsafe;
  return summary.attention > 0 ? exit_attention : exit_ok;
}

}  // namespace

int status_command(const std::vector<std::string>& args) {
  StatusOptions o;
  const po::options_description options = describe(o);
  po::options_description hidden;
  hidden.add_options()("lockpath", po::value(&o.lock_paths)->composing());
  po::positional_options_description positional;
  positional.add("lockpath", -1);
  auto parsed = parse_command_line(help, args, options, &hidden, &positional);
  if (!parsed) return parsed.error();

  auto usage_error = [](std::string_view message) {
    print_error(help.name, message);
    return exit_usage;
  };
  if (o.list_columns || o.output == "help") {
    fmt::print("{}", columns_help());
    return exit_ok;
  }
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
  if (o.output_all && !o.output.empty()) return usage_error("--output and --output-all exclude each other");
  std::vector<Field> fields = default_fields();
  const bool chosen = o.output_all || !o.output.empty();
  if (o.output_all) {
    fields.clear();
    for (const FieldInfo& info : all_fields()) fields.push_back(info.field);
  } else if (!o.output.empty()) {
    auto picked = parse_fields(o.output);
    if (!picked) return usage_error(fmt::format("-o {}: {}", o.output, picked.error()));
    fields = std::move(*picked);
  }
  auto filter = make_filter(o);
  if (!filter) return usage_error(filter.error());

  System& system = real_system();
  if (o.all_users) {
    if (auto refused = all_users_usage(system, o.area, o.lock_paths.empty() ? "" : "a LOCKPATH"))
      return usage_error(refused->message);
    const Terminal terminal = format == Format::table ? terminal_view(system, colour_mode(*parsed), o.notruncate)
                                                      : Terminal{};
    return status_all_users(o, format, fields, chosen, *filter, terminal);
  }
  auto opened = open_lock_area(system, o.area);
  if (!opened) {
    print_error(help.name, opened.error().message);
    return opened.error().exit_status;
  }
  LockArea area = std::move(*opened);
  auto lock_names = lock_path_filter(system, o, area);
  if (!lock_names) return usage_error(lock_names.error());

  // Labels: the current directory and its ancestors, the home, each --repo and --scan.
  auto labels = build_labels(system, area, o.labels);
  if (!labels) {
    print_error(help.name, labels.error());
    return exit_bad_path;
  }
  filter->locks = labels->repo_locks;
  filter->locks.insert(lock_names->begin(), lock_names->end());
  auto policy = judging_policy(system, area, o.timing, false, HostRead::when_needed);
  if (!policy) return usage_error(policy.error());

  const Terminal terminal = format == Format::table ? terminal_view(system, colour_mode(*parsed), o.notruncate)
                                                    : Terminal{};
  Output output(format, fields, chosen, !o.noheadings, terminal);
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
    if (!written) print_error(help.name, written.error());
    return written.has_value();
  };

  const AreaCheck check = check_lock_area(system, area);
  if (!check.safe() && check.problem != AreaProblem::missing) {
    // Prominent and alone: one line naming the path (and the JSON document saying so).
    if (format == Format::json) {
      output.begin(area.directory, check);
      output.end(area, check, summary, {}, check.message());
    }
    metrics.area_safe = false;
    metrics.scrape_success = check.problem != AreaProblem::unreadable;
    write_metrics();
    print_error(help.name, check.message());
    return exit_unsafe;
  }
  output.begin(area.directory, check);
  std::optional<std::string> error;
  HintWatch hints(system, area);
  auto show = [&](const EntryView& entry) {
    hints.see(entry);
    if (!filter->accepts(entry)) return;
    summary.add(entry);
    output.entry(entry);
  };

  if (check.safe()) {
    auto scanned = judge_area(system, area.directory, *policy, labels->index, filter->locks, show);
    if (scanned)
      summary.scanned = *scanned;
    else
      error = fmt::format("cannot list Apnea lock directory: {}: {}", area.directory,
                          errno_text(scanned.error()));
  } else {
    // No area yet: a --repo's (or LOCKPATH's) lock is free.
    judge_absent_locks(system, area.directory, *policy, labels->index, filter->locks, show);
  }
  output.end(area, check, summary, hints.hints(), error);

  if (error) {
    metrics.scrape_success = false;
    write_metrics();
    print_error(help.name, *error);
    return exit_unsafe;
  }
  metrics.summary = &summary;
  if (!write_metrics()) return exit_unsafe;
  return summary.attention > 0 ? exit_attention : exit_ok;
}

}  // namespace apnea_locks::cli
