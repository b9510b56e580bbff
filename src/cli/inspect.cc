// apnea-locks inspect: everything known about one lock (or any entry of the lock area).
#include <fmt/format.h>

#include <algorithm>
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
#include "apnea_locks/scan.h"
#include "apnea_locks/survey.h"
#include "cli/area.h"
#include "cli/commands.h"
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
  AreaCheck check;
  EntryFacts facts;
  Verdict verdict;
  Decision decision;
  const EntryLabel* label = nullptr;
  OwnerFileDetails owner_file;
  std::vector<Related> related;
  std::vector<Hint> hints;
  std::int64_t now_ns = 0;
  bool colour = false;
};

std::string base_name(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const auto slash = trimmed.rfind('/');
  return slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
}

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

void print_details(const Inspection& in) {
  const EntryFacts& facts = in.facts;
  const Verdict& verdict = in.verdict;
  auto line = [](std::string_view key, std::string_view value) {
    fmt::print("{:<13}{}\n", fmt::format("{}:", key), value);
  };
  line("path", printable(facts.path));
  if (facts.parsed.role == EntryRole::unknown) {
    line("entry", "unknown (not a name Apnea uses)");
  } else {
    line("entry", fmt::format("{} ({}, key {})", role_name(facts.parsed.role),
                              kind_name(facts.parsed.kind), facts.parsed.key));
  }
  line("label", in.label != nullptr ? printable(in.label->path) : "-");
  const std::string_view sgr = verdict.needs_attention           ? sgr_attention
                              : verdict.state == EntryState::live ? sgr_ok
                              : verdict.state == EntryState::stale || verdict.state == EntryState::in_flight
                                  ? sgr_warning
                                  : std::string_view();
  line("state", paint(fmt::format("{} ({}{})", state_name(verdict.state), verdict.reason,
                                  verdict.state == EntryState::stale
                                      ? (verdict.certain ? "; certain proof" : "; evidence only")
                                      : ""),
                      sgr, in.colour));
  if (verdict.apnea_verdict) {
    std::string apnea(apnea_verdict_name(*verdict.apnea_verdict));
    if (*verdict.apnea_verdict == ApneaVerdict::stale)
      apnea += verdict.apnea_self_heals ? ": Apnea reclaims it on its next run"
                                        : ": Apnea will not reclaim it by itself";
    line("apnea", apnea);
  }
  line("proof", fmt::format("{}{}", proof_class_name(verdict.proof_class),
                            verdict.death.clock_void ? " (clock evidence void: the clock stepped since boot)" : ""));
  line("attention", verdict.needs_attention ? "yes" : "no");
  line("reclaim", printable(fmt::format("{}: {}", plan_action_name(in.decision.action), in.decision.why)));
  if (!in.decision.next_step.empty()) line("next step", printable(in.decision.next_step));
  line("fix", verdict.fix.empty() ? "-" : printable(verdict.fix));
  line("directory", facts.stat ? stat_line(*facts.stat, in.now_ns) : "absent");
  if (facts.parsed.role == EntryRole::reclaim_guard || facts.parsed.role == EntryRole::unknown ||
      !facts.stat) {
    return;
  }
  const OwnerFileDetails& file = in.owner_file;
  line("owner.json", file.lstat ? stat_line(*file.lstat, in.now_ns)
                                : fmt::format("cannot lstat: {}", errno_text(file.lstat_error)));
  if (file.raw)
    line("owner bytes", fmt::format("\"{}\"{}", escape_bytes(*file.raw),
                                    file.raw_truncated ? " (first 4096 bytes)" : ""));
  if (facts.owner) {
    fmt::print("checks:\n");
    for (const AcceptanceCheck& check : acceptance_checks(*facts.owner))
      if (check.detail.empty()) fmt::print("  {:<8} {}\n", check_outcome_name(check.outcome), check.name);
      else fmt::print("  {:<8} {:<24} {}\n", check_outcome_name(check.outcome), check.name, printable(check.detail));
    if (facts.owner->owner)
      line("owner", fmt::format("pid {}, token {}", pid_text(facts.owner->owner->pid),
                                printable(facts.owner->owner->token)));
  }
  if (facts.process) {
    const ProcessFacts& process = *facts.process;
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
  if (facts.parsed.role == EntryRole::lock) {
    if (facts.guard)
      line("guard", fmt::format("{}: {} (age {})", guard_state_name(verdict.guard),
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
  write_entry_json(json, EntryView{in.facts, in.verdict, in.label, &in.decision});
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
  json.key("certain").boolean(in.verdict.certain);
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

}  // namespace

int inspect_command(const std::vector<std::string>& args) {
  InspectOptions o;
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
  if (!parsed) return parsed.error();
  auto usage_error = [](std::string_view message) {
    print_error(command_name, message);
    return exit_usage;
  };
  if (int(!o.lock.empty()) + int(!o.repo.empty()) + int(!o.home.empty()) > 1)
    return usage_error("give one of LOCK, --repo PATH, --home PATH");

  System& system = real_system();
  auto opened = open_lock_area(system, o.area);
  if (!opened) {
    print_error(command_name, opened.error().message);
    return opened.error().exit_status;
  }
  for (const auto& [option, typed] : {std::pair{"--repo", &o.repo}, {"--home", &o.home}}) {
    if (typed->empty()) continue;
    if (auto checked = typed_directory(system, option, *typed); !checked) {
      print_error(command_name, checked.error());
      return exit_bad_path;
    }
  }
  Inspection in;
  in.area = std::move(*opened);
  in.colour = !o.json && colour_wanted(system, colour_mode(*parsed));
  std::string path;
  if (!o.lock.empty()) {
    const bool is_path = o.lock.find('/') != std::string::npos;
    if (is_path) {
      path = o.lock;
      while (path.size() > 1 && path.back() == '/') path.pop_back();
      const std::string directory = node_dirname(path);
      if (o.area.lock_dir.empty())
        in.area = LockArea{directory, directory != default_lock_directory(system), false, in.area.home};
      else if (node_normalize(directory) != node_normalize(in.area.directory))
        return usage_error(fmt::format("{} is not inside --lock-dir {}", o.lock, in.area.directory));
    } else {
      path = entry_path(in.area.directory, o.lock);
    }
    // A path that does not exist is said to be missing, unless it is the name of an Apnea
    // entry in a directory that exists (a lock that is not there is free).
    if (auto st = system.lstat(path); !st) {
      const bool apnea_name = parse_entry_name(base_name(path)).role != EntryRole::unknown;
      if (!apnea_name || !system.lstat(in.area.directory)) {
        print_error(command_name, fmt::format("'{}': {}", o.lock, errno_text(st.error())));
        return exit_bad_path;
      }
    }
  } else {
    const bool home = !o.home.empty();
    const std::string target = home ? o.home : (o.repo.empty() ? "." : o.repo);
    auto lock = home ? global_setup_lock_path(system, in.area.directory, target)
                     : repository_lock_path(system, in.area.directory, target);
    if (!lock) {
      print_error(command_name, fmt::format("{}{}: {}", home ? "--home " : (o.repo.empty() ? "" : "--repo "),
                                            target, errno_text(lock.error())));
      return exit_bad_path;
    }
    path = *lock;
  }

  auto built = build_labels(system, in.area, LabelOptions{});
  if (!built) {
    print_error(command_name, built.error());
    return exit_bad_path;
  }
  LabelIndex& labels = built->index;
  if (!o.repo.empty()) (void)labels.add_repository(system, o.repo);
  if (!o.home.empty()) (void)labels.add_home(system, o.home);

  auto settings = judging_policy(system, in.area, o.timing);
  if (!settings) {
    print_error(command_name, settings.error());
    return exit_usage;
  }
  in.now_ns = settings->judge.now_ns;

  in.check = check_lock_area(system, in.area);
  if (!in.check.safe() && in.check.problem != AreaProblem::missing) {
    if (o.json) print_json(in, in.check.message());
    print_error(command_name, in.check.message());
    return exit_unsafe;
  }

  EntryJudge judge(system, in.area.directory, *settings);
  const std::string name = base_name(path);
  in.facts = judge.gather(name);
  in.facts.path = path;
  if (in.facts.parsed.role != EntryRole::unknown) in.label = labels.find(in.facts.parsed.lock_name());
  Judgement judged = judge.judge(in.facts, in.label);
  in.verdict = std::move(judged.verdict);
  in.decision = std::move(judged.decision);
  // Never through a symlink: owner.json is read only inside a real directory.
  if (in.facts.stat && in.facts.stat->type == FileType::directory)
    in.owner_file = gather_owner_file(system, path);

  if (in.facts.parsed.role != EntryRole::unknown && in.check.safe()) {
    const std::string prefix = in.facts.parsed.lock_name();
    (void)system.list_directory(in.area.directory, [&](const DirEntry& entry) {
      if (entry.name == name || !entry.name.starts_with(prefix)) return true;
      EntryFacts other = judge.gather(entry.name);
      if (other.stat && other.parsed.lock_name() == prefix)
        in.related.push_back(Related{entry.name, judge.judge(std::move(other), in.label).verdict});
      return true;
    });
  }

  // From a subdirectory of a repository, the lock Apnea run at the repository's root uses.
  if (o.lock.empty() && o.repo.empty() && o.home.empty() && in.check.safe()) {
    auto here = system.realpath(".");
    auto enclosing = enclosing_repository(system, in.area.directory, ".");
    if (here && enclosing && enclosing->root != *here) {
      const EntryLabel label{LockKind::repository, enclosing->root};
      const Judgement judged = judge.entry(enclosing->name, &label);
      const EntryView view{judged.facts, judged.verdict, &label, &judged.decision};
      if (auto hint = enclosing_hint_text(*enclosing, *here, &view)) in.hints.push_back(std::move(*hint));
    }
  }

  if (o.json) print_json(in, std::nullopt);
  else print_human(in);
  return in.verdict.needs_attention ? exit_attention : exit_ok;
}

}  // namespace apnea_locks::cli
