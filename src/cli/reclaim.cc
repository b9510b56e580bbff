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
#include <tuple>
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
    "renamed to a tombstone. --force adds three trusts (the wall clock; no hidden process\n"
    "shares the temp directory; Apnea runs only in a recognised runtime) and ownerless\n"
    "debris and old guards. Never, with any flag, an entry whose owner record names a pid\n"
    "that is not proven dead, unless --not-owner names that one process.\n\n"
    "Targets: the current directory's repository lock by default, --repo, --home, LOCKPATH\n"
    "(the path in Apnea's message; its directory is the lock area unless --lock-dir says\n"
    "otherwise), or --all (with each lock's guard, candidates and tombstones). When no lock\n"
    "is where it looked, it says where the lock probably is (the enclosing repository, the\n"
    "global setup lock). A dead global setup lock blocks every Apnea run: every reclaim that\n"
    "does not remove it names it, with the command that would.",
    "Exit status: 0 every requested target is clean, 1 something was refused or changed\n"
    "(or the guard is held), no lock was where it looked, or a dead global setup lock still\n"
    "blocks Apnea, 2 usage error, 3 the lock area is unsafe or unreadable, a --lock-dir,\n"
    "--repo or --home path does not exist or is not a directory, or a removal's audit record\n"
    "could be written nowhere (no system log, then not to standard error either)."};
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
  bool no_audit = false;
  std::vector<std::string> not_owner_words;  ///< --not-owner, as typed
  std::vector<NotOwner> not_owners;          ///< --not-owner, parsed
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
       "leave a reclaimed lock renamed as <lock>.tombstone.<uuid> for forensics")
      ("no-audit", po::bool_switch(&o.no_audit),
       "record no removal in the system log (refused under sudo); without it, a removal whose "
       "record no log and not even standard error took makes the exit status 3")
      ("not-owner", po::value(&o.not_owner_words)->composing()->value_name("PID@START"),
       "the operator's word that process PID, started at START (UTC, as a refusal shows it, "
       "2026-12-05T15:04:37Z), is not the lock's Apnea (repeatable; with --force and exactly "
       "one LOCKPATH)");
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
      if (t.verdict.state == EntryState::free && t.facts.parsed.role == EntryRole::lock) {
        say("no lock at {} ({})", t.facts.path, describe_target(t));
        break;
      }
      say("skip {}: {}", t.facts.path, t.decision.why);
      // A guard that stays blocks Apnea ("reclamation is guarded"): what to do about it.
      if (t.facts.parsed.role == EntryRole::reclaim_guard && !t.decision.next_step.empty())
        say("  next step: {}", t.decision.next_step);
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
    json.key("certain").boolean(t.verdict.certain());
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
  if (!hint.fix.argv.empty()) {
    say("  to see what would be done: {}", with_flag(hint.fix.argv, "--dry-run"));
    say("  to remove it:              {}", with_flag(hint.fix.argv, "--yes"));
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

/// What reclaim was asked for: whole locks (with their guard, candidates and tombstones) by
/// lock name, or single entries by name, and the labels of the output.
struct Request {
  LabelIndex labels;
  std::set<std::string> lock_names;
  std::set<std::string> entry_names;
  std::vector<std::string> looked_in;  ///< folders whose repository lock was asked for
  std::set<std::string> named;         ///< the entry names LOCKPATHs gave
};

/// Prints `message` as reclaim's error and returns `status`.
std::unexpected<int> fail(int status, std::string_view message) {
  return std::unexpected(command_error(command_name, status, message));
}

/// Parses reclaim's command line into `o`; the exit status when it should stop (help,
/// version, a usage error).
std::expected<void, int> parse_options(const std::vector<std::string>& args, ReclaimOptions& o) {
  const po::options_description options = describe(o);
  auto parsed = parse_command_line(help, args, options, "path", o.paths);
  if (!parsed) return std::unexpected(parsed.error());
  if (o.all && (!o.repos.empty() || !o.homes.empty() || !o.paths.empty()))
    return fail(exit_usage, "--all names every entry: give no other target");
  for (const std::string& word : o.not_owner_words) {
    const std::optional<NotOwner> parsed_word = parse_not_owner(word);
    if (!parsed_word)
      return fail(exit_usage, fmt::format("--not-owner '{}': not PID@YYYY-MM-DDTHH:MM:SSZ (a pid "
                                          "1..2147483647 and its start time in UTC)",
                                          printable(word)));
    o.not_owners.push_back(*parsed_word);
  }
  if (!o.not_owners.empty() &&
      (!o.force || o.all || !o.repos.empty() || !o.homes.empty() || o.paths.size() != 1))
    return fail(exit_usage, "--not-owner needs --force and exactly one LOCKPATH (no --all, --repo "
                            "or --home): the operator's word is about one lock");
  // Under sudo or su, by the kernel's facts (the login uid is not this uid) as well as by
  // $SUDO_UID: the record is how the account behind them is known.
  if (o.no_audit) {
    System& system = real_system();
    const auto login = system.login_uid();
    if (sudo_invoker(system) || (login && *login != system.uid()))
      return fail(exit_usage, "--no-audit is refused under sudo or su (the login uid is not this "
                              "uid): the audit record is how the account behind them is known");
  }
  return {};
}

/// The locks --repo and --home name, labelled; each PATH must resolve to a directory.
std::expected<void, int> add_typed_locks(System& system, const ReclaimOptions& o,
                                         Request& request) {
  for (const auto& [option, kind, paths] : {std::tuple{"--repo", LockKind::repository, &o.repos},
                                            {"--home", LockKind::global_setup, &o.homes}}) {
    for (const std::string& path : *paths) {
      if (auto typed = typed_directory(system, option, path); !typed)
        return fail(exit_bad_path, typed.error());
      auto name = kind == LockKind::repository ? request.labels.add_repository(system, path)
                                               : request.labels.add_home(system, path);
      if (!name)
        return fail(exit_bad_path,
                    fmt::format("{} {}: {}", option, path, errno_text(name.error())));
      request.lock_names.insert(*name);
    }
  }
  return {};
}

/// What reclaim was asked for. A LOCKPATH names its lock area (read_lock_paths): the path in
/// Apnea's message works wherever Apnea's TMPDIR pointed, without --lock-dir or --user (which,
/// when given, must agree). No target is the current directory's repository lock.
std::expected<Request, int> read_request(System& system, const ReclaimOptions& o, LockArea& area) {
  Request request;
  if (auto typed = add_typed_locks(system, o, request); !typed)
    return std::unexpected(typed.error());
  auto paths =
      read_lock_paths(system, o.paths, area, !o.area.lock_dir.empty());
  if (!paths) return fail(exit_usage, paths.error());
  for (const LockPath& path : *paths) {
    (path.entry.role == EntryRole::lock ? request.lock_names : request.entry_names)
        .insert(path.name);
    request.named.insert(path.name);
  }
  request.looked_in = o.repos;
  if (!o.all && request.lock_names.empty() && request.entry_names.empty()) {
    auto name = request.labels.add_repository(system, ".");
    if (!name)
      return fail(exit_usage, fmt::format("the current directory: {}", errno_text(name.error())));
    request.lock_names.insert(*name);
    request.looked_in.emplace_back(".");
  }
  // Labels for the output: the current directory, its enclosing repository, the home.
  (void)request.labels.add_repository(system, ".");
  if (auto enclosing = enclosing_repository(system, area.directory, "."))
    (void)request.labels.add_repository(system, enclosing->root);
  if (!area.home.empty()) (void)request.labels.add_home(system, area.home);
  return request;
}

/// The entries asked for, judged by the survey (an area that does not exist yet: every
/// asked-for lock absent), in the order they are acted on.
std::expected<std::vector<Target>, int> survey_targets(System& system, const ReclaimOptions& o,
                                                       const LockArea& area, const AreaCheck& check,
                                                       const SurveySettings& settings,
                                                       const Request& request) {
  std::vector<Target> targets;
  auto consider = [&](const JudgedEntry& entry) {
    const EntryFacts& facts = entry.facts;
    const std::string lock = facts.parsed.lock_name();
    const bool wanted =
        o.all ? facts.parsed.role != EntryRole::unknown
              : request.lock_names.count(lock) != 0 || request.entry_names.count(facts.name) != 0;
    if (!wanted) return;
    // --all asks for what needs attention: a live owner or work in flight was not asked for.
    if (o.all && !entry.verdict.needs_attention && !acts(entry.decision)) return;
    targets.push_back(Target{facts, entry.verdict, entry.decision,
                             entry.label ? std::optional(*entry.label) : std::nullopt, {}});
  };
  if (check.safe()) {
    auto scanned =
        survey_area(system, area.directory, settings, request.labels, request.lock_names, consider);
    if (!scanned)
      return fail(exit_unsafe, fmt::format("cannot list Apnea lock directory: {}: {}",
                                           area.directory, errno_text(scanned.error())));
  } else {
    EntryJudge judge(system, area.directory, settings);
    for (const std::string& name : request.lock_names)
      consider(judge.absent(name, request.labels.find(name)).view());
  }
  std::sort(targets.begin(), targets.end(), [](const Target& a, const Target& b) {
    return std::pair(order_of(a.facts.parsed.role), a.facts.name) <
           std::pair(order_of(b.facts.parsed.role), b.facts.name);
  });
  return targets;
}

/// Whether to carry the removals out: never on a dry run or with nothing to remove; else
/// with --yes, or when the terminal's answer is yes. The exit status when it must stop.
std::expected<bool, int> removals_confirmed(System& system, const ReclaimOptions& o,
                                            std::size_t removals) {
  if (o.dry_run || removals == 0) return false;
  if (o.yes) return true;
  if (!system.is_terminal(0))
    return fail(exit_usage, "not a terminal: nothing removed; pass --yes to confirm");
  if (o.json) return fail(exit_usage, "--json needs --yes to remove anything");
  if (!confirmed(removals)) return fail(exit_attention, "not confirmed: nothing removed");
  return true;
}

/// What carrying the decisions out gave: the outcomes counted, and whether any target was
/// refused, changed, guarded or failed.
struct Outcomes {
  std::map<std::string, int> counts;
  bool refused = false;
};

/// Carries out each target's decision (a removal only when `proceed`, through execute_repair,
/// which re-validates under the guard), printing what it does unless --json.
Outcomes carry_out(System& system, const ReclaimOptions& o, RepairSettings& repair,
                   std::vector<Target>& targets, bool proceed) {
  Outcomes done;
  for (Target& t : targets) {
    if (!acts(t.decision) || !proceed) {
      t.result.outcome = t.decision.action == PlanAction::refuse ? RepairOutcome::refused : RepairOutcome::skipped;
      t.result.detail = t.decision.why;
    } else {
      repair.resource = resource_of(t);
      // The ticket's record of what is removed, printed before it is.
      if (!o.json && t.facts.parsed.role == EntryRole::lock)
        say("reclaiming {}: {}{}proof {}{}", t.facts.path, owner_text(t.facts),
            owner_text(t.facts).empty() ? "" : "; ", t.decision.why, trusts_text(t.decision));
      std::fflush(stdout);
      t.result = execute_repair(system, t.facts, t.decision, repair);
      if (!o.json) print_result_line(t, o.keep_tombstone);
    }
    const RepairOutcome outcome = t.result.outcome;
    if (outcome == RepairOutcome::refused || outcome == RepairOutcome::changed ||
        outcome == RepairOutcome::guard_held || outcome == RepairOutcome::failed)
      done.refused = true;
    ++done.counts[o.dry_run && acts(t.decision) ? "would_remove"
                                                : std::string(outcome_name(t.result.outcome))];
  }
  return done;
}

/// Nothing where it looked (`found` false): a lock the operator is after is somewhere else.
/// Where it probably is: the enclosing repository (Apnea locks the folder it runs in), the
/// global setup lock; and a dead global setup lock whenever this run did not remove it.
std::vector<ReclaimHint> find_hints(System& system, const LockArea& area,
                                    const SurveySettings& settings, const Request& request,
                                    const std::vector<Target>& targets, bool found) {
  std::vector<ReclaimHint> hints;
  std::set<std::string> hinted;
  if (!found)
    for (const std::string& folder : request.looked_in) {
      auto enclosing = enclosing_repository(system, area.directory, folder);
      if (!enclosing || request.lock_names.count(enclosing->name) != 0 ||
          !hinted.insert(enclosing->name).second)
        continue;
      hints.push_back(ReclaimHint{"enclosing-repository",
                                  lock_hint(system, area.directory, *enclosing, settings)});
    }
  auto global = area.home.empty() ? SysResult<LocatedLock>(std::unexpected(std::error_code()))
                                  : global_setup_lock(system, area.directory, area.home);
  const bool removed_now =
      global && std::any_of(targets.begin(), targets.end(), [&](const Target& t) {
        return t.facts.name == global->name && t.result.outcome == RepairOutcome::removed;
      });
  if (global && !removed_now) {
    LockHint hint = lock_hint(system, area.directory, *global, settings);
    if (hint.needs_attention || (!found && hint.present))
      hints.push_back(ReclaimHint{"global-setup", std::move(hint)});
  }
  return hints;
}

/// The text after the targets: an empty --all, the entries asked for that are not there,
/// and the hints with the commands that act on them.
void print_closing(const ReclaimOptions& o, const std::string& lock_dir, const Request& request,
                   const std::vector<Target>& targets, bool found,
                   const std::vector<ReclaimHint>& hints) {
  if (targets.empty() && o.all) {
    if (!found && !o.area.user.empty())
      say("no lock area {} (nothing of {} to reclaim there): if {}'s Apnea is blocked, it uses "
          "another TMPDIR; pass the lock path from its message (apnea-locks reclaim --user {} LOCKPATH)",
          lock_dir, printable(o.area.user), printable(o.area.user), shell_word(o.area.user));
    else
      say("nothing to reclaim in {}", lock_dir);
  }
  for (const std::string& name : request.entry_names)
    if (std::none_of(targets.begin(), targets.end(),
                     [&](const Target& t) { return t.facts.name == name; }))
      say("no entry {} in {}{}", name, lock_dir,
          request.named.count(name) != 0 ? ": it is gone (removed since it was named)" : "");
  for (const Target& t : targets)
    if (!t.facts.stat && t.facts.parsed.role == EntryRole::lock && request.named.count(t.facts.name) != 0)
      say("{} is gone (released or removed since it was named): Apnea can take it again", t.facts.path);
  bool located = false;
  for (const ReclaimHint& hint : hints) {
    say("{}", hint_message(hint));
    // An absent enclosing lock locates nothing; every other hint names where the lock is.
    if (hint.kind != "enclosing-repository" || hint.lock.present) located = true;
    if (hint.lock.present && (hint.kind == "enclosing-repository" || hint.lock.needs_attention))
      print_hint_commands(hint.lock);
  }
  if (!found && !located && !(o.all && !o.area.user.empty()))
    say("no lock where it looked: if Apnea's message names a lock path, pass that path "
        "(apnea-locks reclaim --dry-run LOCKPATH); Apnea may run with another TMPDIR or in "
        "another folder");
}

}  // namespace

int reclaim_command(const std::vector<std::string>& args) {
  ReclaimOptions o;
  if (auto parsed = parse_options(args, o); !parsed) return parsed.error();
  System& system = real_system();
  const std::uint32_t invoking_uid = system.uid();  // the audit record's acting uid, before --user
  // --user NAME: NAME's own area (it may not exist yet), as NAME from here on.
  auto opened = open_lock_area(system, o.area);
  if (!opened) return fail(opened.error().exit_status, opened.error().message).error();
  LockArea area = std::move(*opened);
  auto request = read_request(system, o, area);
  if (!request) return request.error();

  const AreaCheck check = check_lock_area(system, area);
  if (!check.safe() && check.problem != AreaProblem::missing)
    return fail(exit_unsafe, area_problem(system, check)).error();
  auto settings = judging_settings(system, area, o.timing, o.force);
  if (!settings) return fail(exit_usage, settings.error()).error();
  settings->judge.not_owners = o.not_owners;
  auto targets = survey_targets(system, o, area, check, *settings, *request);
  if (!targets) return targets.error();

  const std::size_t removals = static_cast<std::size_t>(std::count_if(
      targets->begin(), targets->end(), [](const Target& t) { return acts(t.decision); }));
  if (!o.json)
    for (const Target& t : *targets) print_plan_line(t, o.dry_run);
  auto proceed = removals_confirmed(system, o, removals);
  if (!proceed) return proceed.error();
  RepairSettings repair;
  repair.settings = *settings;
  repair.keep_tombstone = o.keep_tombstone;
  repair.acting_uid = invoking_uid;
  repair.acted_for = o.area.user;
  repair.audit = !o.no_audit;
  const Outcomes done = carry_out(system, o, repair, *targets, *proceed);
  const bool record_lost = std::any_of(targets->begin(), targets->end(), [](const Target& t) {
    return t.result.audited == AuditSink::none;
  });

  // Only LOCKPATHs asked for, none of them there: they were released or removed since Apnea
  // named them, which is no lock to look for elsewhere (exit 0: nothing blocks Apnea there).
  const bool only_paths =
      !o.all && !request->named.empty() &&
      std::all_of(request->lock_names.begin(), request->lock_names.end(),
                  [&](const std::string& name) { return request->named.count(name) != 0; });
  // --user NAME --all of an area that does not exist: NAME's Apnea, if blocked, locks
  // elsewhere (another TMPDIR), which is not "nothing to reclaim".
  const bool account_area_missing = !o.area.user.empty() && check.problem == AreaProblem::missing;
  const bool found = (o.all && !account_area_missing) || only_paths ||
                     std::any_of(targets->begin(), targets->end(), [](const Target& t) {
                       return t.facts.stat.has_value();
                     });
  // A reclaim guard named by path (Apnea's message names it first) that stays: Apnea fails
  // while it exists, so it needs attention, even when it is a reclamation still at work.
  const bool named_guard_stays = std::any_of(targets->begin(), targets->end(), [&](const Target& t) {
    return t.facts.stat && t.facts.parsed.role == EntryRole::reclaim_guard &&
           request->named.count(t.facts.name) != 0 && t.result.outcome != RepairOutcome::removed;
  });
  const std::vector<ReclaimHint> hints =
      check.safe() ? find_hints(system, area, *settings, *request, *targets, found)
                   : std::vector<ReclaimHint>{};
  const bool global_blocks = std::any_of(hints.begin(), hints.end(), [](const ReclaimHint& h) {
    return h.kind == "global-setup" && h.lock.needs_attention;
  });
  if (o.json) write_json(area.directory, o, *targets, done.counts, found, hints);
  else print_closing(o, area.directory, *request, *targets, found, hints);
  if (record_lost) return exit_unsafe;  // nothing could be said: standard error failed too
  return done.refused || !found || global_blocks || named_guard_stays ? exit_attention : exit_ok;
}

}  // namespace apnea_locks::cli
