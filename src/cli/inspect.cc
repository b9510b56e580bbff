// apnea-locks inspect: everything known about one lock (or any entry of the lock area).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "apnea_locks/acceptance.h"
#include "apnea_locks/classify.h"
#include "apnea_locks/hints.h"
#include "apnea_locks/labels.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/names.h"
#include "apnea_locks/protocol.h"
#include "apnea_locks/scan.h"
#include "apnea_locks/survey.h"
#include "cli/area.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/entry_report.h"
#include "cli/hint_text.h"
#include "cli/json_writer.h"
#include "cli/options.h"
#include "cli/terminal.h"
#include "cli/text.h"
#include "cli/time_text.h"
#include "detail/scan.h"

namespace apnea_locks::cli {
namespace {

constexpr CommandHelp help{
    "inspect",
    "inspect [options] [LOCK | --repo PATH | --home PATH]",
    "Everything known about one lock: its stat and owner.json's, the raw owner bytes, each\n"
    "of Apnea's acceptance checks, both verdicts, the owner process and the proof of death.\n"
    "LOCK is a path (as Apnea's message prints it), or an entry name inside the lock\n"
    "directory. Default: the repository lock of the current directory; from a subdirectory\n"
    "of a repository the lock of the enclosing repository is named too. Changes nothing.",
    "Exit status: 0 nothing needs attention, 1 something does, 2 usage error,\n"
    "3 the lock area is unsafe or unreadable, LOCK does not exist outside a lock area, or a\n"
    "--lock-dir, --repo or --home path does not exist or is not a directory."};

struct InspectOptions {
  AreaOptions area;
  std::string lock;
  std::string repo;
  std::string home;
  bool json = false;
  TimingOptions timing;
};

constexpr std::string_view command_name = help.name;

/// A related entry of the same lock (candidate, tombstone, guard), judged.
struct Related {
  std::string name;
  Verdict verdict;
};

/// Everything inspect shows.
struct Inspection {
  LockArea area;
  /// From a subdirectory: the enclosing repository's lock, which Apnea run there uses,
  /// needs attention (its hint says so, and the exit status too).
  bool enclosing_needs_attention = false;
  AreaCheck check;
  EntryFacts facts;
  Verdict verdict;
  Decision decision;
  std::optional<EntryLabel> label;  ///< the repository or home of its lock, when known
  /// `label` as the judge and the field table take it: null when unknown.
  const EntryLabel* known_label() const { return label ? &*label : nullptr; }
  OwnerFileDetails owner_file;
  std::vector<Related> related;
  std::vector<Hint> hints;
  std::int64_t now_ns = 0;
  bool colour = false;
};

std::string stat_line(const FileStat& st, std::int64_t now_ns) {
  return fmt::format("{}, mode {}, uid {}, size {}, mtime {} (age {}), inode {}", file_type_name(st.type),
                     format_mode(st.mode), st.uid, st.size, format_time(st.mtime_ns, true),
                     format_age(now_ns - st.mtime_ns), st.ino);
}

void write_stat_json(JsonWriter& json, const std::optional<FileStat>& st) {
  if (!st) {
    json.null();
    return;
  }
  json.begin_object();
  json.key("type").string(file_type_name(st->type));
  json.key("mode").string(format_mode(st->mode));
  json.key("uid").integer(st->uid);
  json.key("size").integer(st->size);
  json.key("mtime").string(format_time(st->mtime_ns, true));
  json.key("mtime_ns").integer(st->mtime_ns);
  json.key("dev").integer(static_cast<std::int64_t>(st->dev));
  json.key("ino").integer(static_cast<std::int64_t>(st->ino));
  json.end_object();
}

/// One "key: value" line of inspect's text.
void line(std::string_view key, std::string_view value) {
  fmt::print("{:<13}{}\n", fmt::format("{}:", key), value);
}

/// The entry, its verdict and the decision on it.
void print_verdict(const Inspection& in) {
  const EntryFacts& facts = in.facts;
  const Verdict& verdict = in.verdict;
  line("path", printable(facts.path));
  if (facts.parsed.role == EntryRole::unknown) {
    line("entry", "unknown (not a name Apnea uses)");
  } else {
    line("entry", fmt::format("{} ({}, key {})", role_name(facts.parsed.role),
                              kind_name(facts.parsed.kind), facts.parsed.key));
  }
  line("label", in.label ? printable(in.label->path) : "-");
  const std::string_view sgr = verdict.needs_attention           ? sgr_attention
                              : verdict.state == EntryState::live ? sgr_ok
                              : verdict.state == EntryState::stale || verdict.state == EntryState::in_flight
                                  ? sgr_warning
                                  : std::string_view();
  line("state", paint(fmt::format("{} ({}{})", state_name(verdict.state), verdict.reason,
                                  verdict.state == EntryState::stale
                                      ? (verdict.certain() ? "; certain proof" : "; evidence only")
                                      : ""),
                      sgr, in.colour));
  if (verdict.apnea_verdict) {
    std::string apnea(apnea_verdict_name(*verdict.apnea_verdict));
    const std::int64_t grace =
        std::chrono::duration_cast<std::chrono::nanoseconds>(repository_reclaim_grace).count();
    if (*verdict.apnea_verdict == ApneaVerdict::stale) {
      if (verdict.apnea_self_heals) {
        apnea += ": Apnea reclaims it on its next run";
      } else if (facts.parsed.kind == LockKind::repository && verdict.guard == GuardState::none &&
                 verdict.age_ns && *verdict.age_ns < grace) {
        // Inside Apnea's grace: it takes a dead owner's repository lock over once 60 s old.
        apnea += fmt::format(": Apnea reclaims it on its first run once it is {} old (in {})",
                             format_age(grace), format_age(grace - *verdict.age_ns));
      } else {
        apnea += ": Apnea will not reclaim it by itself";
      }
    }
    line("apnea", apnea);
  }
  line("proof", fmt::format("{}{}", proof_class_name(verdict.proof_class),
                            verdict.death.clock_void ? " (clock evidence void: the clock stepped since boot)" : ""));
  line("attention", verdict.needs_attention ? "yes" : "no");
  line("reclaim", printable(fmt::format("{}: {}", plan_action_name(in.decision.action), in.decision.why)));
  if (!in.decision.next_step.empty()) line("next step", printable(in.decision.next_step));
  line("fix", in.decision.fix.empty() ? "-" : printable(in.decision.fix.command));
  line("directory", facts.stat ? stat_line(*facts.stat, in.now_ns) : "absent");
}

/// owner.json: its stat, its raw bytes, Apnea's acceptance checks and the owner it names.
void print_owner_file(const Inspection& in) {
  const OwnerFileDetails& file = in.owner_file;
  line("owner.json", file.lstat ? stat_line(*file.lstat, in.now_ns)
                                : fmt::format("cannot lstat: {}", errno_text(file.lstat_error)));
  if (file.raw)
    line("owner bytes", fmt::format("\"{}\"{}", escape_bytes(*file.raw),
                                    file.raw_truncated ? " (first 4096 bytes)" : ""));
  if (!in.facts.owner) return;
  const OwnerRead& owner = *in.facts.owner;
  fmt::print("checks:\n");
  for (const AcceptanceCheck& check : acceptance_checks(owner))
    if (check.detail.empty())
      fmt::print("  {:<8} {}\n", check_outcome_name(check.outcome), check.name);
    else
      fmt::print("  {:<8} {:<24} {}\n", check_outcome_name(check.outcome), check.name,
                 printable(check.detail));
  if (owner.owner)
    line("owner", fmt::format("pid {}, token {}", pid_text(owner.owner->pid),
                              printable(owner.owner->token)));
}

/// The owner process as probed, and what proves it dead.
void print_process(const ProcessFacts& process, const Verdict& verdict) {
  if (process.info) {
    line("process", fmt::format("kill: {}; state {}, uid {}, tgid {}, started {}",
                                signal_answer(process.signal_errno), process.info->state,
                                process.info->uid, process.info->tgid,
                                format_time(process.info->start_time_ns, true)));
    line("command", printable(process.info->command));
  } else {
    line("process", fmt::format("kill: {}; no /proc entry", signal_answer(process.signal_errno)));
  }
  line("proof", fmt::format("{}: {}", proof_name(verdict.proof), proof_explanation(verdict.proof)));
}

/// The entry, and for a lock, candidate or tombstone that exists its owner, process, guard
/// and the other entries of its lock.
void print_details(const Inspection& in) {
  const EntryFacts& facts = in.facts;
  print_verdict(in);
  if (facts.parsed.role == EntryRole::reclaim_guard || facts.parsed.role == EntryRole::unknown ||
      !facts.stat) {
    return;
  }
  print_owner_file(in);
  if (facts.process) print_process(*facts.process, in.verdict);
  if (facts.parsed.role == EntryRole::lock) {
    if (facts.guard)
      line("guard", fmt::format("{}: {} (age {})", guard_state_name(in.verdict.guard),
                                printable(reclaim_guard_path(facts.path)), format_age(in.now_ns - facts.guard->mtime_ns)));
    else
      line("guard", "none");
  }
  for (const Related& related : in.related)
    line("related", fmt::format("{} {} {} ({})", printable(related.name), role_name(related.verdict.role),
                                state_name(related.verdict.state), related.verdict.reason));
}

void print_human(const Inspection& in) {
  print_details(in);
  if (!in.hints.empty()) fmt::print("\n{}", hints_text(in.hints, terminal_width(real_system()).value_or(0), in.colour));
  std::fflush(stdout);
}

void print_json(const Inspection& in, const std::optional<std::string>& error) {
  JsonWriter json(stdout);
  json.begin_object();
  write_schema(json, "inspect");
  json.key("lock_dir").string(in.area.directory);
  json.key("area").begin_object();
  json.key("check").string(in.check.name());
  json.key("path").string(in.check.path.empty() ? in.area.directory : in.check.path);
  json.key("message").string(in.check.message());
  json.end_object();
  json.key("error").optional_string(error);
  json.key("hints");
  write_hints_json(json, in.hints);
  if (error) {
    json.end_object();
    json.finish();
    return;
  }
  json.key("entry");
  write_entry_json(json, EntryView{in.facts, in.verdict, in.decision, in.known_label()});
  json.key("directory_stat");
  write_stat_json(json, in.facts.stat);
  json.key("owner_file").begin_object();
  json.key("lstat");
  write_stat_json(json, in.owner_file.lstat);
  json.key("fstat");
  write_stat_json(json, in.facts.owner ? in.facts.owner->owner_stat : std::nullopt);
  json.key("raw");
  if (in.owner_file.raw) json.string(escape_bytes(*in.owner_file.raw));
  else json.null();
  json.key("raw_truncated").boolean(in.owner_file.raw_truncated);
  json.end_object();
  json.key("checks").begin_array();
  if (in.facts.owner) {
    for (const AcceptanceCheck& check : acceptance_checks(*in.facts.owner)) {
      json.begin_object();
      json.key("name").string(check.name);
      json.key("outcome").string(check_outcome_name(check.outcome));
      json.key("detail").string(check.detail);
      json.end_object();
    }
  }
  json.end_array();
  json.key("proof").begin_object();
  json.key("name").string(proof_name(in.verdict.proof));
  json.key("certain").boolean(in.verdict.certain());
  json.key("explanation").string(proof_explanation(in.verdict.proof));
  json.end_object();
  json.key("guard");
  if (in.facts.guard) {
    json.begin_object();
    json.key("path").string(reclaim_guard_path(in.facts.path));
    json.key("state").string(guard_state_name(in.verdict.guard));
    json.key("age_ms").integer(std::max<std::int64_t>(0, in.now_ns - in.facts.guard->mtime_ns) / 1'000'000);
    json.end_object();
  } else {
    json.null();
  }
  json.key("related").begin_array();
  for (const Related& related : in.related) {
    json.begin_object();
    json.key("name").string(related.name);
    json.key("role").string(role_name(related.verdict.role));
    json.key("state").string(state_name(related.verdict.state));
    json.key("reason").string(related.verdict.reason);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  json.finish();
}

/// Parses inspect's command line into `o`; the exit status when it should stop (help,
/// version, a usage error).
std::expected<po::variables_map, int> parse_options(const std::vector<std::string>& args,
                                                    InspectOptions& o) {
  po::options_description options("Options");
  options.add_options()
      ("repo", po::value(&o.repo)->value_name("PATH"), "the repository lock of PATH")
      ("home", po::value(&o.home)->value_name("PATH"), "the global setup lock of home PATH")
      ("json,J", po::bool_switch(&o.json), "one JSON document");
  add_timing_options(options, o.timing, "reclaim guards older than this are left over");
  add_area_options(options, o.area);
  po::options_description hidden;
  hidden.add_options()("lock", po::value(&o.lock));
  po::positional_options_description positional;
  positional.add("lock", 1);
  auto parsed = parse_command_line(help, args, options, &hidden, &positional);
  if (!parsed) return parsed;
  if (int(!o.lock.empty()) + int(!o.repo.empty()) + int(!o.home.empty()) > 1) {
    return std::unexpected(usage_error(command_name, "give one of LOCK, --repo PATH, --home PATH"));
  }
  return parsed;
}

/// Prints `message` as inspect's error and returns `status`.
std::unexpected<int> fail(int status, std::string_view message) {
  return std::unexpected(command_error(command_name, status, message));
}

/// The area inspect looks at: --lock-dir or --user's, with each typed --repo and --home
/// checked.
std::expected<LockArea, int> open_area(System& system, const InspectOptions& o) {
  auto opened = open_lock_area(system, o.area);
  if (!opened) return fail(opened.error().exit_status, opened.error().message);
  for (const auto& [option, typed] : {std::pair{"--repo", &o.repo}, {"--home", &o.home}}) {
    if (typed->empty()) continue;
    if (auto checked = typed_directory(system, option, *typed); !checked)
      return fail(exit_bad_path, checked.error());
  }
  return std::move(*opened);
}

/// The path of the entry LOCK names (read_lock_paths: its directory becomes the area unless
/// --lock-dir). One that does not exist is an error, unless it is the name of an Apnea entry
/// in a directory that exists (a lock that is not there is free).
std::expected<std::string, int> given_entry_path(System& system, const InspectOptions& o,
                                                 LockArea& area) {
  auto read = read_lock_paths(system, {o.lock}, area, !o.area.lock_dir.empty(), false);
  if (!read) return fail(exit_usage, read.error());
  const LockPath& lock = read->front();
  const std::string path =
      lock.directory.empty() ? entry_path(area.directory, lock.name) : lock.path;
  // A cut name left as typed: its area was not safe to list, which inspect's check says.
  if (lock.elided) return path;
  if (auto st = system.lstat(path); !st) {
    if (lock.entry.role == EntryRole::unknown || !system.lstat(area.directory))
      return fail(exit_bad_path, fmt::format("'{}': {}", o.lock, errno_text(st.error())));
  }
  return path;
}

/// The path of the entry inspect looks at: LOCK's, else the lock of --home, --repo or the
/// current directory.
std::expected<std::string, int> entry_to_inspect(System& system, const InspectOptions& o,
                                                 LockArea& area) {
  if (!o.lock.empty()) return given_entry_path(system, o, area);
  const bool home = !o.home.empty();
  const std::string target = home ? o.home : (o.repo.empty() ? "." : o.repo);
  auto lock = locate_lock(system, area.directory,
                          home ? LockKind::global_setup : LockKind::repository, target);
  if (!lock)
    return fail(exit_bad_path,
                fmt::format("{}{}: {}", home ? "--home " : (o.repo.empty() ? "" : "--repo "),
                            target, errno_text(lock.error())));
  return std::move(lock->path);
}

/// Gathers and judges the entry at `path` (owner.json read only inside a real directory,
/// never through a symlink), and judges the other entries of its lock.
void judge_entry(System& system, EntryJudge& judge, const LabelIndex& labels,
                 const std::string& path, Inspection& in) {
  const std::string name = base_name(path);
  in.facts = judge.gather(name);
  in.facts.path = path;
  if (in.facts.parsed.role != EntryRole::unknown)
    if (const EntryLabel* label = labels.find(in.facts.parsed.lock_name())) in.label = *label;
  Judgement judged = judge.judge(in.facts, in.known_label());
  in.verdict = std::move(judged.verdict);
  in.verdict.needs_attention = named_needs_attention(in.facts, in.verdict);  // it was asked about
  in.decision = std::move(judged.decision);
  if (in.facts.stat && in.facts.stat->type == FileType::directory)
    in.owner_file = gather_owner_file(system, path);
  if (in.facts.parsed.role == EntryRole::unknown || !in.check.safe()) return;
  const std::string prefix = in.facts.parsed.lock_name();
  (void)system.list_directory(in.area.directory, [&](const DirEntry& entry) {
    if (entry.name == name || !entry.name.starts_with(prefix)) return true;
    EntryFacts other = judge.gather(entry.name);
    if (other.stat && other.parsed.lock_name() == prefix)
      in.related.push_back(
          Related{entry.name, judge.judge(std::move(other), in.known_label()).verdict});
    return true;
  });
}

/// From a subdirectory of a repository, the lock Apnea run at the repository's root uses.
void hint_enclosing(System& system, EntryJudge& judge, Inspection& in) {
  auto here = system.realpath(".");
  auto enclosing = enclosing_repository(system, in.area.directory, ".");
  if (!here || !enclosing || enclosing->root == *here) return;
  const EntryLabel label{LockKind::repository, enclosing->root};
  const Judgement judged = judge.entry(enclosing->name, &label);
  const EntryView view{judged.facts, judged.verdict, judged.decision, &label};
  if (auto hint = enclosing_hint_text(*enclosing, *here, &view)) {
    in.hints.push_back(std::move(*hint));
    in.enclosing_needs_attention = judged.facts.stat && judged.verdict.needs_attention;
  }
}

/// Everything inspect shows, or the exit status when it cannot go on (its error printed).
std::expected<Inspection, int> inspect(System& system, const InspectOptions& o, ColourMode colour) {
  auto area = open_area(system, o);
  if (!area) return std::unexpected(area.error());
  Inspection in;
  in.area = std::move(*area);
  in.colour = !o.json && colour_wanted(system, colour);
  auto path = entry_to_inspect(system, o, in.area);
  if (!path) return std::unexpected(path.error());
  auto built = build_labels(system, in.area, LabelOptions{});
  if (!built) return fail(exit_bad_path, built.error());
  LabelIndex& labels = built->index;
  if (!o.repo.empty()) (void)labels.add_repository(system, o.repo);
  if (!o.home.empty()) (void)labels.add_home(system, o.home);
  auto settings = judging_settings(system, in.area, o.timing);
  if (!settings) return fail(exit_usage, settings.error());
  in.now_ns = settings->judge.now_ns;
  in.check = check_lock_area(system, in.area);
  if (!in.check.safe() && in.check.problem != AreaProblem::missing) {
    if (o.json) print_json(in, area_problem(system, in.check));
    return fail(exit_unsafe, area_problem(system, in.check));
  }
  EntryJudge judge(system, in.area.directory, *settings);
  judge_entry(system, judge, labels, *path, in);
  if (o.lock.empty() && o.repo.empty() && o.home.empty() && in.check.safe())
    hint_enclosing(system, judge, in);
  return in;
}

}  // namespace

int inspect_command(const std::vector<std::string>& args) {
  InspectOptions o;
  auto parsed = parse_options(args, o);
  if (!parsed) return parsed.error();
  System& system = real_system();
  auto in = inspect(system, o, colour_mode(*parsed));
  if (!in) return in.error();
  if (o.json) print_json(*in, std::nullopt);
  else print_human(*in);
  return in->verdict.needs_attention || in->enclosing_needs_attention ? exit_attention : exit_ok;
}

}  // namespace apnea_locks::cli
