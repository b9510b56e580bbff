// apnea-locks reclaim: removes dead locks, and with --force malformed locks and debris, with
// Apnea's own guarded protocol (src/repair.cc through src/lock.cc). Never a live owner.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/hints.h"
#include "apnea_locks/labels.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/repair.h"
#include "apnea_locks/scan.h"
#include "apnea_locks/survey.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/hint_text.h"
#include "cli/render.h"
#include "cli/summary.h"

namespace apnea_locks::cli {
namespace {

constexpr CommandHelp help{
    "reclaim",
    "reclaim [options] [LOCKPATH...]",
    "Removes Apnea locks whose owner is certainly dead, with Apnea's guarded protocol: under\n"
    "<lock>.reclaim the entry is gathered, judged and decided again before the lock is\n"
    "renamed to a tombstone. --force adds two trusts (the wall clock; no hidden process\n"
    "shares the temp directory) and ownerless debris and old guards. Never, with any flag,\n"
    "an entry whose owner record names a pid that is not proven dead.\n\n"
    "Targets: the current directory's repository lock by default, --repo, --home, LOCKPATH\n"
    "(the path in Apnea's message; its directory is the lock area unless --lock-dir says\n"
    "otherwise), or --all (with each lock's guard, candidates and tombstones). When no lock\n"
    "is where it looked, it says where the lock probably is (the enclosing repository, the\n"
    "global setup lock). A dead global setup lock blocks every Apnea run: every reclaim that\n"
    "does not remove it names it, with the command that would.",
    "Exit status: 0 every requested target is clean, 1 something was refused or changed\n"
    "(or the guard is held), no lock was where it looked, or a dead global setup lock still\n"
    "blocks Apnea, 2 usage error, 3 the lock area is unsafe or unreadable, or a --lock-dir,\n"
    "--repo or --home path does not exist or is not a directory."};
constexpr std::string_view command_name = help.name;

struct ReclaimOptions {
  AreaOptions area;
  std::vector<std::string> repos;
  std::vector<std::string> homes;
  std::vector<std::string> paths;
  bool all = false;
  bool force = false;
  bool dry_run = false;
  bool yes = false;
  bool json = false;
  bool keep_tombstone = false;
  TimingOptions timing;
};

po::options_description describe(ReclaimOptions& o) {
  po::options_description options("Options");
  options.add_options()
      ("repo", po::value(&o.repos)->composing()->value_name("PATH"),
       "the repository lock of PATH (repeatable; default: the current directory)")
      ("home", po::value(&o.homes)->composing()->value_name("PATH"),
       "the global setup lock of the account whose home is PATH")
      ("all", po::bool_switch(&o.all), "every entry of the lock area that needs attention")
      ("force", po::bool_switch(&o.force),
       "also trust the wall clock and that no hidden process shares the temp directory, and "
       "remove ownerless debris and old reclaim guards; never an entry naming a live pid")
      ("dry-run", po::bool_switch(&o.dry_run), "print what would be removed and why; change nothing")
      ("yes,y", po::bool_switch(&o.yes), "do not ask for confirmation")
      ("json,J", po::bool_switch(&o.json), "one JSON document describing every target")
      ("keep-tombstone", po::bool_switch(&o.keep_tombstone),
       "leave a reclaimed lock renamed as <lock>.tombstone.<uuid> for forensics");
  add_timing_options(options, o.timing,
                     "reclaim guards, and candidates/tombstones without a readable owner record, "
                     "older than this are left over (removed with --force)");
  add_area_options(options, o.area);
  return options;
}

/// One entry reclaim looks at: its facts, verdict and decision from the survey, and what
/// carrying the decision out gave.
struct Target {
  EntryFacts facts;
  Verdict verdict;
  Decision decision;
  std::optional<EntryLabel> label;
  RepairResult result;
};

/// Guards first (so --force can clear a leftover guard before its lock is reclaimed), then
/// locks, then candidates and tombstones; by name within each.
int order_of(EntryRole role) {
  switch (role) {
    case EntryRole::reclaim_guard: return 0;
    case EntryRole::lock: return 1;
    default: return 2;
  }
}

bool acts(const Decision& decision) { return decision.action == PlanAction::remove; }

/// The decision as reclaim's JSON has always named it.
std::string_view action_text(const Decision& decision) {
  switch (decision.action) {
    case PlanAction::remove: return removal_name(decision.removal);
    case PlanAction::refuse: return "refuse";
    case PlanAction::keep: break;
  }
  return "skip";
}

std::string describe_target(const Target& t) {
  std::string what(role_name(t.facts.parsed.role));
  if (t.facts.parsed.role == EntryRole::lock) what = std::string(kind_name(t.facts.parsed.kind)) + " lock";
  if (t.label) what += " of " + t.label->path;
  return what;
}

std::string owner_text(const EntryFacts& facts) {
  if (!facts.owner || !facts.owner->owner) return {};
  const Owner& owner = *facts.owner->owner;
  std::string text = fmt::format("owner pid {} token {}", pid_text(owner.pid), owner.token);
  if (facts.owner->owner_stat) text += ", written " + format_time(facts.owner->owner_stat->mtime_ns);
  return text;
}

/// The resource Apnea's messages name for an entry's lock.
std::string resource_of(const Target& t) {
  if (!t.label) return t.facts.parsed.lock_name();
  if (t.label->kind == LockKind::global_setup) return "global setup at " + t.label->path;
  return t.label->path;
}

std::string trusts_text(const Decision& decision) {
  if (decision.trusts.empty()) return {};
  return fmt::format("; --force trusts: {}", fmt::join(decision.trusts, "; "));
}

/// Prints a line with everything from outside escaped.
template <class... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print("{}\n", printable(fmt::format(format, std::forward<Args>(args)...)));
}

void print_plan_line(const Target& t, bool dry_run) {
  const std::string owner = owner_text(t.facts);
  switch (t.decision.action) {
    case PlanAction::remove:
      say("{} {} {} ({}; proof: {}{}{}{})", dry_run ? "would" : "will", removal_name(t.decision.removal),
          t.facts.path, describe_target(t), t.decision.why, trusts_text(t.decision),
          owner.empty() ? "" : "; ", owner);
      break;
    case PlanAction::refuse:
      say("{} {}: {}", dry_run ? "would refuse" : "refuse", t.facts.path, t.decision.why);
      if (!t.decision.next_step.empty()) say("  next step: {}", t.decision.next_step);
      break;
    case PlanAction::keep:
      if (t.verdict.state == EntryState::free && t.facts.parsed.role == EntryRole::lock)
        say("no lock at {} ({})", t.facts.path, describe_target(t));
      else
        say("skip {}: {}", t.facts.path, t.decision.why);
      break;
  }
}

void print_result_line(const Target& t, bool keep_tombstone) {
  if (t.result.outcome == RepairOutcome::removed) {
    say("removed {} ({})", t.facts.path, describe_target(t));
    if (keep_tombstone && !t.result.tombstone.empty()) say("  kept as {}", t.result.tombstone);
    return;
  }
  say("{} {}: {}", outcome_name(t.result.outcome), t.facts.path, t.result.detail);
}

/// A hint reclaim gives besides its targets: where the lock probably is, or a dead global
/// setup lock that still blocks Apnea.
struct ReclaimHint {
  std::string kind;  ///< "enclosing-repository" or "global-setup"
  LockHint lock;
};

std::string hint_state(const LockHint& hint) {
  std::string text = fmt::format("{} ({})", state_name(hint.state), hint.reason);
  if (hint.pid) text += fmt::format(", owner pid {}", pid_text(*hint.pid));
  return text;
}

/// The one sentence reclaim says of `hint` (unescaped), on the terminal and in the JSON.
std::string hint_message(const ReclaimHint& hint) {
  const LockHint& h = hint.lock;
  if (hint.kind == "enclosing-repository") {
    if (!h.present)
      return fmt::format("the enclosing repository {} has no lock either ({})", h.lock.root, h.lock.path);
    return fmt::format("the lock is probably the enclosing repository's (Apnea locks the folder it runs "
                       "in): {} of {} is {}",
                       h.lock.path, h.lock.root, hint_state(h));
  }
  if (h.needs_attention)
    return fmt::format("the global setup lock of {} blocks every Apnea run, and Apnea never reclaims it: "
                       "{} is {}",
                       h.lock.root, h.lock.path, hint_state(h));
  return fmt::format("the global setup lock of {} is there: {} is {}", h.lock.root, h.lock.path, hint_state(h));
}

/// `hint` in the shape status and inspect give theirs (cli/hint_text.h).
Hint shared_hint(const ReclaimHint& hint) { return lock_hint_text(hint.kind, hint.lock, hint_message(hint)); }

void write_json(const std::string& lock_dir, const ReclaimOptions& o, const std::vector<Target>& targets,
                const std::map<std::string, int>& counts, bool found, const std::vector<ReclaimHint>& hints) {
  JsonWriter json(stdout);
  json.begin_object();
  write_schema(json, "reclaim");
  json.key("lock_dir").string(lock_dir);
  json.key("dry_run").boolean(o.dry_run);
  json.key("force").boolean(o.force);
  json.key("targets").begin_array();
  for (const Target& t : targets) {
    json.begin_object();
    json.key("path").string(t.facts.path);
    json.key("name").string(t.facts.name);
    json.key("role").string(role_name(t.facts.parsed.role));
    json.key("kind").string(kind_name(t.facts.parsed.kind));
    json.key("label").optional_string(t.label ? std::optional(t.label->path) : std::nullopt);
    json.key("state").string(state_name(t.verdict.state));
    json.key("reason").string(t.verdict.reason);
    json.key("apnea_verdict")
        .optional_string(t.verdict.apnea_verdict
                             ? std::optional(std::string(apnea_verdict_name(*t.verdict.apnea_verdict)))
                             : std::nullopt);
    json.key("proof").string(proof_class_name(t.verdict.proof_class));
    json.key("proof_name")
        .optional_string(t.verdict.proof != DeathProof::none
                             ? std::optional(std::string(proof_name(t.verdict.proof)))
                             : std::nullopt);
    json.key("certain").boolean(t.verdict.certain);
    json.key("owner");
    if (t.facts.owner && t.facts.owner->owner) {
      json.begin_object();
      json.key("pid").number_text(pid_text(t.facts.owner->owner->pid));
      json.key("token").string(t.facts.owner->owner->token);
      json.key("written").optional_string(
          t.facts.owner->owner_stat ? std::optional(format_time(t.facts.owner->owner_stat->mtime_ns, true))
                                    : std::nullopt);
      json.end_object();
    } else {
      json.null();
    }
    json.key("owner_bytes").optional_string(t.facts.owner && t.facts.owner->bytes
                                                ? std::optional(escape_bytes(*t.facts.owner->bytes))
                                                : std::nullopt);
    json.key("action").string(action_text(t.decision));
    json.key("why").string(t.decision.why);
    json.key("next_step").optional_string(t.decision.next_step.empty() ? std::nullopt
                                                                        : std::optional(t.decision.next_step));
    json.key("trusts").begin_array();
    for (const std::string& trust : t.decision.trusts) json.string(trust);
    json.end_array();
    json.key("outcome").string(o.dry_run && acts(t.decision) ? "would-remove" : outcome_name(t.result.outcome));
    json.key("detail").string(t.result.detail);
    json.key("tombstone").optional_string(t.result.tombstone.empty() ? std::nullopt
                                                                     : std::optional(t.result.tombstone));
    json.end_object();
  }
  json.end_array();
  json.key("summary").begin_object();
  for (const auto& [name, count] : counts) json.key_text(name).integer(count);
  json.end_object();
  json.key("found").boolean(found);
  // The same hint objects as status and inspect write (docs/apnea-locks.schema.json).
  std::vector<Hint> shared;
  for (const ReclaimHint& hint : hints) shared.push_back(shared_hint(hint));
  json.key("hints");
  write_hints_json(json, shared);
  json.end_object();
  json.finish();
}

/// `argv` with `extra` appended, as one shell command line.
std::string with_flag(std::vector<std::string> argv, std::string_view extra) {
  argv.emplace_back(extra);
  return shell_command(argv);
}

/// "stale (pid-dead), pid 4242" for a hint's lock.
/// The commands that act on a hinted lock: its fix as a dry run and for real, or why no
/// flag removes it and the next step.
void print_hint_commands(const LockHint& hint) {
  if (!hint.fix_argv.empty()) {
    say("  to see what would be done: {}", with_flag(hint.fix_argv, "--dry-run"));
    say("  to remove it:              {}", with_flag(hint.fix_argv, "--yes"));
    return;
  }
  if (!hint.why.empty()) say("  apnea-locks will not remove it: {}", hint.why);
  if (!hint.next_step.empty()) say("  next step: {}", hint.next_step);
  say("  everything about it: apnea-locks inspect {}", shell_word(hint.lock.path));
}

/// Asks on the terminal; true when the answer is yes.
bool confirmed(std::size_t count) {
  fmt::print(stderr, "Remove {} entr{} listed above? [y/N] ", count, count == 1 ? "y" : "ies");
  std::fflush(stderr);
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes" || answer == "YES";
}

}  // namespace

int reclaim_command(const std::vector<std::string>& args) {
  ReclaimOptions o;
  const po::options_description options = describe(o);
  po::options_description hidden;
  hidden.add_options()("path", po::value(&o.paths)->composing());
  po::positional_options_description positional;
  positional.add("path", -1);
  auto parsed = parse_command_line(help, args, options, &hidden, &positional);
  if (!parsed) return parsed.error();
  auto usage_error = [](std::string_view message) {
    print_error(command_name, message);
    return exit_usage;
  };
  if (o.all && (!o.repos.empty() || !o.homes.empty() || !o.paths.empty()))
    return usage_error("--all names every entry: give no other target");

  System& system = real_system();
  const std::uint32_t invoking_uid = system.uid();  // the audit record's acting uid, before --user
  // --user NAME: NAME's own area (it may not exist yet), as NAME from here on.
  auto opened = open_lock_area(system, o.area);
  if (!opened) {
    print_error(command_name, opened.error().message);
    return opened.error().exit_status;
  }
  LockArea area = std::move(*opened);
  const std::string home = area.home;  // whose global setup lock is hinted

  // What was asked for: whole locks (with their guard, candidates and tombstones) by lock
  // name, or single entries by name.
  LabelIndex labels;
  std::set<std::string> lock_names;
  std::set<std::string> entry_names;
  auto bad_path = [](std::string_view message) {
    print_error(command_name, message);
    return exit_bad_path;
  };
  for (const std::string& root : o.repos) {
    if (auto typed = typed_directory(system, "--repo", root); !typed) return bad_path(typed.error());
    auto name = labels.add_repository(system, root);
    if (!name) return bad_path(fmt::format("--repo {}: {}", root, errno_text(name.error())));
    lock_names.insert(*name);
  }
  for (const std::string& home : o.homes) {
    if (auto typed = typed_directory(system, "--home", home); !typed) return bad_path(typed.error());
    auto name = labels.add_home(system, home);
    if (!name) return bad_path(fmt::format("--home {}: {}", home, errno_text(name.error())));
    lock_names.insert(*name);
  }
  // A LOCKPATH names its lock area: the path in Apnea's message works wherever Apnea's
  // TMPDIR pointed, without --lock-dir (which, when given, must agree).
  auto without_trailing_slash = [](std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    return path;
  };
  if (o.area.lock_dir.empty() && o.area.user.empty()) {
    std::set<std::string> directories;
    for (const std::string& path : o.paths) {
      const std::string normal = node_normalize(without_trailing_slash(path));
      if (normal.find('/') != std::string::npos) directories.insert(node_dirname(normal));
    }
    if (directories.size() > 1)
      return usage_error("the LOCKPATHs are in different lock areas: give one area at a time");
    if (directories.size() == 1 && *directories.begin() != node_normalize(area.directory)) {
      area = LockArea{*directories.begin(), true, false, area.home};
    }
  }
  const std::string area_dir = node_normalize(area.directory);
  for (const std::string& raw : o.paths) {
    const std::string path = without_trailing_slash(raw);
    const std::string normal = node_normalize(path);
    const bool bare = normal.find('/') == std::string::npos;
    if (!bare && node_dirname(normal) != area_dir)
      return usage_error(fmt::format("{}: not an entry of the lock area {}", path, area_dir));
    const std::string name = bare ? normal : normal.substr(normal.rfind('/') + 1);
    const EntryName entry = parse_entry_name(name);
    if (entry.role == EntryRole::unknown)
      return usage_error(fmt::format("{}: not an Apnea lock entry name", path));
    if (entry.role == EntryRole::lock) lock_names.insert(name);
    else entry_names.insert(name);
  }
  // The folders whose repository lock was asked for: where "not here" hints look up from.
  std::vector<std::string> looked_in = o.repos;
  if (!o.all && lock_names.empty() && entry_names.empty()) {
    auto name = labels.add_repository(system, ".");
    if (!name) return usage_error(fmt::format("the current directory: {}", errno_text(name.error())));
    lock_names.insert(*name);
    looked_in.emplace_back(".");
  }
  {  // Labels for the output: the current directory, its enclosing repository, the home.
    (void)labels.add_repository(system, ".");
    if (auto enclosing = enclosing_repository(system, area.directory, "."))
      (void)labels.add_repository(system, enclosing->root);
    if (!home.empty()) (void)labels.add_home(system, home);
  }

  const AreaCheck check = check_lock_area(system, area);
  if (!check.safe() && check.problem != AreaProblem::missing) {
    print_error(command_name, check.message());
    return exit_unsafe;
  }

  auto settings = judging_policy(system, area, o.timing, o.force);
  if (!settings) return usage_error(settings.error());
  RepairPolicy policy;
  policy.settings = *settings;
  policy.keep_tombstone = o.keep_tombstone;
  policy.acting_uid = invoking_uid;
  policy.acted_for = o.area.user;

  std::vector<Target> targets;
  auto consider = [&](const JudgedEntry& entry) {
    const EntryFacts& facts = entry.facts;
    const std::string lock = facts.parsed.lock_name();
    const bool wanted = o.all ? facts.parsed.role != EntryRole::unknown
                              : lock_names.count(lock) != 0 || entry_names.count(facts.name) != 0;
    if (!wanted) return;
    // --all asks for what needs attention: a live owner or work in flight was not asked for.
    if (o.all && !entry.verdict.needs_attention && !acts(entry.decision)) return;
    targets.push_back(Target{facts, entry.verdict, entry.decision,
                             entry.label ? std::optional(*entry.label) : std::nullopt, {}});
  };
  std::set<std::string> expected = lock_names;
  if (check.safe()) {
    auto scanned = survey_area(system, area.directory, *settings, labels, expected, consider);
    if (!scanned) {
      print_error(command_name, fmt::format("cannot list Apnea lock directory: {}: {}", area.directory,
                                            errno_text(scanned.error())));
      return exit_unsafe;
    }
  } else {
    EntryJudge judge(system, area.directory, *settings);
    for (const std::string& name : expected)  // no area yet: every asked-for lock is absent
      consider(judge.absent(name, labels.find(name)).view());
  }
  std::sort(targets.begin(), targets.end(), [](const Target& a, const Target& b) {
    return std::pair(order_of(a.facts.parsed.role), a.facts.name) <
           std::pair(order_of(b.facts.parsed.role), b.facts.name);
  });

  const std::size_t removals =
      static_cast<std::size_t>(std::count_if(targets.begin(), targets.end(), [](const Target& t) { return acts(t.decision); }));
  if (!o.json)
    for (const Target& t : targets) print_plan_line(t, o.dry_run);

  bool proceed = !o.dry_run && removals > 0;
  if (proceed && !o.yes) {
    if (!system.is_terminal(0)) {
      print_error(command_name, "not a terminal: nothing removed; pass --yes to confirm");
      return exit_usage;
    }
    if (o.json) {
      print_error(command_name, "--json needs --yes to remove anything");
      return exit_usage;
    }
    if (!confirmed(removals)) {
      print_error(command_name, "not confirmed: nothing removed");
      return exit_attention;
    }
  }

  std::map<std::string, int> counts;
  bool refused = false;
  for (Target& t : targets) {
    if (!acts(t.decision) || !proceed) {
      t.result.outcome = t.decision.action == PlanAction::refuse ? RepairOutcome::refused : RepairOutcome::skipped;
      t.result.detail = t.decision.why;
    } else {
      policy.resource = resource_of(t);
      // The ticket's record of what is removed, printed before it is.
      if (!o.json && t.facts.parsed.role == EntryRole::lock)
        say("reclaiming {}: {}{}proof {}{}", t.facts.path, owner_text(t.facts),
            owner_text(t.facts).empty() ? "" : "; ", t.decision.why, trusts_text(t.decision));
      std::fflush(stdout);
      t.result = execute_repair(system, t.facts, t.decision, policy);
      if (!o.json) print_result_line(t, o.keep_tombstone);
    }
    const RepairOutcome outcome = t.result.outcome;
    if (outcome == RepairOutcome::refused || outcome == RepairOutcome::changed ||
        outcome == RepairOutcome::guard_held || outcome == RepairOutcome::failed)
      refused = true;
    ++counts[o.dry_run && acts(t.decision) ? "would_remove" : std::string(outcome_name(t.result.outcome))];
  }

  // Nothing where it looked: a lock the operator is after is somewhere else. Say where it
  // probably is: the enclosing repository (Apnea locks the folder it runs in), the global
  // setup lock; and name a dead global setup lock whenever this run did not remove it.
  const bool found = o.all || std::any_of(targets.begin(), targets.end(), [](const Target& t) {
                       return t.facts.stat.has_value();
                     });
  std::vector<ReclaimHint> hints;
  if (check.safe()) {
    std::set<std::string> hinted;
    if (!found)
      for (const std::string& folder : looked_in) {
        auto enclosing = enclosing_repository(system, area.directory, folder);
        if (!enclosing || lock_names.count(enclosing->name) != 0 ||
            !hinted.insert(enclosing->name).second)
          continue;
        hints.push_back(ReclaimHint{"enclosing-repository", lock_hint(system, area.directory, *enclosing, *settings)});
      }
    auto global = home.empty() ? SysResult<LocatedLock>(std::unexpected(std::error_code()))
                               : global_setup_lock(system, area.directory, home);
    const bool removed_now = global && std::any_of(targets.begin(), targets.end(), [&](const Target& t) {
                               return t.facts.name == global->name &&
                                      t.result.outcome == RepairOutcome::removed;
                             });
    if (global && !removed_now) {
      LockHint hint = lock_hint(system, area.directory, *global, *settings);
      if (hint.needs_attention || (!found && hint.present))
        hints.push_back(ReclaimHint{"global-setup", std::move(hint)});
    }
  }
  const bool global_blocks = std::any_of(hints.begin(), hints.end(), [](const ReclaimHint& h) {
    return h.kind == "global-setup" && h.lock.needs_attention;
  });

  if (o.json) {
    write_json(area.directory, o, targets, counts, found, hints);
  } else {
    if (targets.empty() && o.all) say("nothing to reclaim in {}", area.directory);
    for (const std::string& name : entry_names)
      if (std::none_of(targets.begin(), targets.end(), [&](const Target& t) { return t.facts.name == name; }))
        say("no entry {} in {}", name, area.directory);
    bool located = false;
    for (const ReclaimHint& hint : hints) {
      say("{}", hint_message(hint));
      // An absent enclosing lock locates nothing; every other hint names where the lock is.
      if (hint.kind != "enclosing-repository" || hint.lock.present) located = true;
      if (hint.lock.present && (hint.kind == "enclosing-repository" || hint.lock.needs_attention))
        print_hint_commands(hint.lock);
    }
    if (!found && !located)
      say("no lock where it looked: if Apnea's message names a lock path, pass that path "
          "(apnea-locks reclaim --dry-run LOCKPATH); Apnea may run with another TMPDIR or in "
          "another folder");
  }
  return refused || !found || global_blocks ? exit_attention : exit_ok;
}

}  // namespace apnea_locks::cli
