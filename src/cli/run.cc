// apnea-locks run: hold an Apnea lock around a command, the way flock(1) wraps one.
//
// The lock is taken and released through the core (acquire / HeldLock), so Apnea sees `run`
// as an ordinary live owner. What lives here is process control, which is not protocol I/O:
// the real Subprocess (run, a child subreaper, forks a shim that leads the command's own
// session, kills that session if run dies and reports when the whole session has ended;
// the command's exec failure still comes back as an errno on a close-on-exec pipe;
// subprocess.h holds the forwarding and exit-status rules), signals (blocked and taken
// synchronously with sigwaitinfo, so no handler runs at an awkward moment), the flock on
// the held lock's directory, and the wait policy with its back-off.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <boost/program_options.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "apnea_locks/lock.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/owner.h"
#include "apnea_locks/survey.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/json_writer.h"
#include "cli/render.h"
#include "cli/subprocess.h"

#ifndef APNEA_LOCKS_DOC_DIR
#define APNEA_LOCKS_DOC_DIR "/usr/share/doc/apnea-locks"
#endif

namespace apnea_locks::cli {
namespace {

namespace po = boost::program_options;
namespace json = boost::json;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;

/// Exit statuses of `run` besides the command's own (documented in docs/run.md).
constexpr int exit_locked = 75;  ///< held by a live owner (EX_TEMPFAIL), or raced; -E's N instead
constexpr int exit_stale = 76;   ///< stale or malformed lock: a human must act

/// The first delay of a wait (Apnea's 25 ms) and the ceiling of the --wait back-off.
constexpr nanoseconds first_delay = std::chrono::milliseconds(25);
constexpr nanoseconds longest_delay = std::chrono::milliseconds(500);

/// The shell `-c COMMAND` runs in (flock's _PATH_BSHELL; not $SHELL, so a crontab line means
/// the same under any login shell).
constexpr const char* command_shell = "/bin/sh";

/// The signals `run` forwards to its command.
constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

struct RunOptions {
  std::optional<std::string> repo;
  std::optional<std::string> home;
  std::optional<std::string> lock_dir;
  std::optional<nanoseconds> wait;
  int conflict_exit = exit_locked;  ///< -E: the exit status of a conflict (a live owner)
  bool nonblock = false;
  bool json = false;
  bool print_token = false;
  bool quiet = false;
  bool help = false;
  bool version = false;
  std::vector<std::string> command;
};

std::int64_t whole_ms(nanoseconds duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

std::string duration_text(nanoseconds duration) { return cli::duration_text(duration.count()); }

po::options_description option_table() {
  po::options_description options("Options");
  // clang-format off
  options.add_options()
      ("repo", po::value<std::string>()->value_name("PATH"),
       "lock the repository at PATH (default: the current directory)")
      ("home", po::value<std::string>()->value_name("PATH"),
       "lock Apnea's global setup lock for the home directory PATH")
      ("lock-dir", po::value<std::string>()->value_name("DIR"),
       "the lock directory (default: Apnea's, from TMPDIR); created 0700 if absent (never its "
       "parents), else it must be a directory of ours with no group/other bits")
      ("wait,w", po::value<std::string>()->value_name("DURATION"),
       ("wait up to DURATION (0.5, 90s, 2m, 1h; 0 tries once) for a live owner" +
        duration_help(wait_range, Fractions::allowed)).c_str())
      ("timeout", po::value<std::string>()->value_name("DURATION"), "the same as --wait (flock's spelling)")
      ("nonblock,n", "never wait, not even for the global setup lock")
      ("conflict-exit-code,E", po::value<std::string>()->value_name("N"),
       "the exit status when a live owner holds the lock and run gives up (0 to 255; "
       "default: 75; it may equal one of run's own statuses, as with flock -E: 0 makes a "
       "conflict look like success)")
      ("command,c", po::value<std::string>()->value_name("COMMAND"),
       "run COMMAND with /bin/sh -c (as flock -c), instead of CMD [ARGS...]")
      ("json,J", "print an event stream (JSON lines) on standard error")
      ("print-token", "print the held owner (lock path, pid, token) on standard error")
      ("quiet,q", "no informational lines (a takeover of a dead lock, waiting for a live "
       "one), and nothing for a conflict that clears by itself (as flock -q): only the exit "
       "status says it; one line for a stopped owner or one only suspected dead; other "
       "refusals and errors still print");
  // clang-format on
  return options;
}

constexpr CommandHelp help{
    "run",
    "run [options] [--repo PATH | --home PATH] [--] CMD [ARGS...]\n"
    "run [options] [--repo PATH | --home PATH] -c COMMAND",
    "Holds the Apnea lock of a repository (or the global setup lock) while CMD runs.",
    "Exit status: CMD's own (128+N when killed by signal N); 75 (or -E's N) the lock is\n"
    "held by a live owner; 76 the lock is stale or malformed (run 'apnea-locks\n"
    "reclaim'); 126 CMD could not be executed; 127 CMD not found; 2 usage; 3 unsafe lock\n"
    "area, a --repo, --home or --lock-dir that does not exist, or another error. See\n"
    "apnea-locks(1) and " APNEA_LOCKS_DOC_DIR "/run.md."};

/// Whether `word` is an option of the table that takes the next word as its value ("--repo",
/// "-w"), for finding where the command starts when there is no "--".
bool takes_value(std::string_view word) {
  static const std::vector<std::string> spellings = [] {
    std::vector<std::string> out;
    const po::options_description table = option_table();
    for (const auto& option : table.options()) {
      if (option->semantic()->min_tokens() == 0) continue;  // a switch, or an implicit value
      out.push_back("--" + option->long_name());
      const std::string& name = option->canonical_display_name(po::command_line_style::allow_dash_for_short);
      if (name.size() == 2 && name[0] == '-') out.push_back(name);
    }
    return out;
  }();
  return std::find(spellings.begin(), spellings.end(), word) != spellings.end();
}

/// Whether `word` takes the next word as its value: an option that does ("-w", "--repo"), or
/// a cluster of short options whose last letter does, with nothing stuck to it ("-nE 0", as
/// flock and getopt read it; "-nE0" holds its value).
bool takes_next_word(std::string_view word) {
  if (takes_value(word)) return true;
  if (word.size() <= 2 || word[1] == '-') return false;
  for (std::size_t k = 1; k < word.size(); ++k)
    if (takes_value(std::string{'-', word[k]})) return k + 1 == word.size();
  return false;
}

std::expected<RunOptions, std::string> parse_options(const std::vector<std::string>& args) {
  // The command starts after "--", or else at the first word that is not an option.
  std::size_t split = args.size();
  std::size_t command_start = args.size();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      split = i;
      command_start = i + 1;
      break;
    }
    if (word.size() > 1 && word[0] == '-') {
      if (takes_next_word(word)) ++i;
      continue;
    }
    split = command_start = i;
    break;
  }
  RunOptions options;
  const std::vector<std::string> words(args.begin(), args.begin() + static_cast<long>(split));
  auto parsed = try_parse_command_line(words, option_table());
  if (!parsed) return std::unexpected(parsed.error());
  const po::variables_map& values = *parsed;
  if (values.count("version")) {
    options.version = true;
    return options;
  }
  if (values.count("help")) {
    options.help = true;
    return options;
  }
  if (values.count("repo")) options.repo = values["repo"].as<std::string>();
  if (values.count("home")) options.home = values["home"].as<std::string>();
  if (values.count("lock-dir")) {
    const std::string& typed = values["lock-dir"].as<std::string>();
    options.lock_dir = typed_area_path(typed);
    if (!options.lock_dir) return std::unexpected(dotdot_refused("--lock-dir", typed));
  }
  options.nonblock = values.count("nonblock") > 0;
  options.json = values.count("json") > 0;
  options.print_token = values.count("print-token") > 0;
  options.quiet = values.count("quiet") > 0;
  if (values.count("wait") && values.count("timeout"))
    return std::unexpected("--wait and --timeout are one option: give it once");
  for (const char* name : {"wait", "timeout"}) {
    if (!values.count(name)) continue;
    auto wait = parse_duration(fmt::format("--{}", name), values[name].as<std::string>(), wait_range.min_ns,
                               wait_range.max_ns, Fractions::allowed);
    if (!wait) return std::unexpected(wait.error());
    options.wait = nanoseconds(*wait);
  }
  if (values.count("conflict-exit-code")) {
    auto code = parse_whole_number("--conflict-exit-code",
                                   values["conflict-exit-code"].as<std::string>(), 0, 255);
    if (!code) return std::unexpected(code.error());
    options.conflict_exit = static_cast<int>(*code);
  }
  if (options.repo && options.home) return std::unexpected("--repo and --home exclude each other");
  if (options.wait && options.nonblock)
    return std::unexpected("--wait and --nonblock exclude each other");
  options.command.assign(args.begin() + static_cast<long>(command_start), args.end());
  if (values.count("command")) {
    if (!options.command.empty())
      return std::unexpected("-c COMMAND and CMD [ARGS...] exclude each other (give one)");
    options.command = {command_shell, "-c", values["command"].as<std::string>()};
  }
  if (options.command.empty())
    return std::unexpected("no command given (apnea-locks run ... -- CMD [ARGS...], or -c COMMAND)");
  return options;
}


std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("SIG{}", sig);
}

/// A JavaScript-number pid as JSON: an integer when it is one JSON readers keep exactly.
json::value json_pid(double pid) {
  if (pid >= 0 && pid < 9007199254740992.0) return static_cast<std::int64_t>(pid);
  return pid;
}

/// Writes one line to standard error, ignoring failure: a closed pipe or a hung-up terminal
/// must not end run while it holds the lock (fmt::print would throw).
void write_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

/// Writes `value` (an event's member) with the one JSON writer; a pid that is no exact
/// JSON integer (json_pid's double) keeps the spelling run has always printed (1E20).
void write_value(JsonWriter& json, const json::value& value) {
  switch (value.kind()) {
    case json::kind::object:
      json.begin_object();
      for (const auto& [key, member] : value.get_object()) {
        json.key_text(key);
        write_value(json, member);
      }
      json.end_object();
      return;
    case json::kind::array:
      json.begin_array();
      for (const json::value& element : value.get_array()) write_value(json, element);
      json.end_array();
      return;
    case json::kind::string: json.string(value.get_string()); return;
    case json::kind::int64: json.integer(value.get_int64()); return;
    case json::kind::uint64: json.number_text(std::to_string(value.get_uint64())); return;
    case json::kind::double_: json.number_text(json::serialize(value)); return;
    case json::kind::bool_: json.boolean(value.get_bool()); return;
    case json::kind::null: json.null(); return;
  }
}

/// What `run` prints on standard error: human lines, or JSON events with --json.
class Output {
 public:
  explicit Output(const RunOptions& options) : json_(options.json), quiet_(options.quiet) {}
  /// One JSON event (only with --json).
  void event(json::object fields) const {
    if (!json_) return;
    // Every line is a JSON document of its own: the schema first (json_writer.h). The
    // writer ignores a failed write: a closed pipe must not end run while it holds the lock.
    JsonWriter line(stderr, JsonLayout::one_line);
    line.begin_object();
    write_schema(line, "run-event");
    for (const auto& [key, value] : fields) {
      line.key_text(key);
      write_value(line, value);
    }
    line.end_object();
    line.finish();
  }
  /// One line for a human (only without --json).
  void say(std::string_view line) const {
    if (!json_) write_line(fmt::format("apnea-locks run: {}\n", printable(line)));
  }
  /// An informational line for a human: not with --json or --quiet.
  void note(std::string_view line) const {
    if (!quiet_) say(line);
  }

 private:
  bool json_;
  bool quiet_;
};

/// The signals run handles synchronously: blocked from the start, taken with sigwaitinfo.
class SignalControl {
 public:
  SignalControl() {
    sigemptyset(&forwarded_);
    sigemptyset(&ignored_);
    for (int sig : forwarded_signals) sigaddset(&forwarded_, sig);
    with_child_ = forwarded_;
    sigaddset(&with_child_, SIGCHLD);
    // SIGPIPE is blocked (not ignored, which the command would inherit) so that writing to
    // a closed standard error fails with EPIPE instead of killing run while it holds the lock.
    sigset_t blocked = with_child_;
    sigaddset(&blocked, SIGPIPE);
    for (int sig : forwarded_signals) {
      struct sigaction action {};
      ::sigaction(sig, nullptr, &action);
      if (action.sa_handler == SIG_IGN) sigaddset(&ignored_, sig);
    }
    // An inherited SIGCHLD=SIG_IGN would make the kernel reap the child for us.
    struct sigaction child {};
    child.sa_handler = SIG_DFL;
    sigemptyset(&child.sa_mask);
    ::sigaction(SIGCHLD, &child, &saved_child_);
    ::sigprocmask(SIG_BLOCK, &blocked, &saved_mask_);
  }
  SignalControl(const SignalControl&) = delete;
  SignalControl& operator=(const SignalControl&) = delete;
  /// The mask stays: run is about to exit, and a signal still pending (one that arrived
  /// after the command ended, or a SIGPIPE from a closed stderr) must not replace the
  /// command's exit status.
  ~SignalControl() = default;

  /// In the forked child: the mask and SIGCHLD action run was started with.
  void restore_in_child() const {
    ::sigaction(SIGCHLD, &saved_child_, nullptr);
    ::sigprocmask(SIG_SETMASK, &saved_mask_, nullptr);
  }

  /// Waits up to `timeout` for a forwarded signal that is not ignored; 0 when none came.
  int wait_for(nanoseconds timeout) const {
    const auto deadline = steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::max(nanoseconds(0), deadline - steady_clock::now());
      struct timespec ts {};
      ts.tv_sec = static_cast<time_t>(left.count() / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(left.count() % 1'000'000'000);
      const int sig = ::sigtimedwait(&forwarded_, nullptr, &ts);
      if (sig > 0 && !sigismember(&ignored_, sig)) return sig;
      if (sig < 0 && errno == EAGAIN) return 0;
      if (left.count() == 0) return 0;
    }
  }

  /// The next forwarded signal or SIGCHLD, with who sent it.
  int next(siginfo_t& info) const {
    for (;;) {
      const int sig = ::sigwaitinfo(&with_child_, &info);
      if (sig > 0) return sig;
      if (errno != EINTR) return -1;
    }
  }

  /// Ends this process by `sig` as if it had not been caught (no lock is held).
  [[noreturn]] void die_by(int sig) const {
    std::fflush(nullptr);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
    std::_Exit(128 + sig);
  }

 private:
  sigset_t forwarded_{};
  sigset_t with_child_{};
  sigset_t ignored_{};
  sigset_t saved_mask_{};
  struct sigaction saved_child_ {};
};

/// The fix Apnea's message asks a human for, from the same survey and policy `status` uses:
/// the lock entry gathered and judged now, with status's default timing. Its fix command
/// (empty when nothing may remove it) and the policy's reason and next step.
struct RunFix {
  std::string command;
  std::vector<std::string> argv;
  std::string why;
  std::string next_step;
  std::string holder;  ///< who holds the lock, for a human (holder_text)
  bool stopped = false;  ///< the owner's process is stopped or traced (T, t): it will not go on by itself
};

/// Who holds the lock, from the survey: the owner's pid, the process that has that pid now
/// with its full command line (escaped when printed), the verdict and the lock's age.
std::string holder_text(const EntryFacts& facts, const Verdict& verdict) {
  if (!facts.stat) return {};
  std::string text;
  const ProcessInfo* process =
      facts.process && facts.process->info ? &*facts.process->info : nullptr;
  if (facts.owner && facts.owner->owner) {
    text = fmt::format("held by pid {}", pid_text(facts.owner->owner->pid));
  } else {
    text = fmt::format("its owner record is malformed ({})", verdict.failed_check);
    if (verdict.death.blocker) {
      process = &*verdict.death.blocker;
      text += fmt::format(" and names pid {}", process->pid);
    } else if (!verdict.blocking_pid.empty()) {
      text += fmt::format(" and names pid {}", verdict.blocking_pid);
    }
  }
  if (process != nullptr && !process->command.empty())
    text += fmt::format(" ({})", process->command);
  if (process != nullptr && process->start_time_ns > 0)
    text += fmt::format(", started {}", format_time(process->start_time_ns));
  text += fmt::format(": {} ({}", state_name(verdict.state), verdict.reason);
  if (verdict.proof_class != ProofClass::none)
    text += fmt::format(", {}", proof_class_name(verdict.proof_class));
  text += ")";
  if (verdict.age_ns) text += fmt::format("; lock written {} ago", format_age(*verdict.age_ns));
  return text;
}

RunFix fix_for(const RunOptions& options, const LockTarget& target) {
  System& system = real_system();
  const std::string directory = node_dirname(target.lock_path);
  const std::string name = target.lock_path.substr(target.lock_path.rfind('/') + 1);
  SurveySettings settings =
      survey_settings(system, directory, Windows{}, false);
  if (options.lock_dir) settings.fix.lock_dir = *options.lock_dir;
  const EntryLabel label{target.kind, target.root};
  EntryJudge judge(system, directory, settings);
  const Judgement judged = judge.entry(name, &label);
  const ProcessInfo* process =
      judged.facts.process && judged.facts.process->info ? &*judged.facts.process->info : nullptr;
  return RunFix{judged.decision.fix.command, judged.decision.fix.argv, judged.decision.why,
                judged.decision.next_step, holder_text(judged.facts, judged.verdict),
                process != nullptr && (process->state == 'T' || process->state == 't')};
}

json::object error_event(const LockError& error, int status) {
  json::object event{{"event", "refused"}, {"message", error.message}, {"exit_status", status}};
  if (error.kind == LockError::Kind::config_error) {
    event["error"] = "ConfigError";
    event["path"] = error.path;
  } else {
    event["error"] = "OperationLocked";
    event["reason"] = reason_name(error.reason);
    event["lock_path"] = error.lock_path;
    event["resource"] = error.resource;
    event["pid"] = error.pid > 0 ? json_pid(error.pid) : json::value(nullptr);
  }
  return event;
}

/// Reports a refusal and returns its exit status: Apnea's words without its advice to remove
/// the lock by hand, who holds the lock (from the survey), and the one fix command or the
/// policy's next step, each once. `described`: the holder was already described when the wait
/// began, so only the outcome is said.
int report_refusal(const Output& out, const RunOptions& options, const LockTarget* target,
                   const LockError& error, bool described = false) {
  if (error.kind == LockError::Kind::config_error) {
    out.event(error_event(error, exit_unsafe));
    out.say(error.message);
    return exit_unsafe;
  }
  const bool locked = error.is(LockedReason::live) || error.is(LockedReason::raced);
  const int status = locked ? options.conflict_exit : exit_stale;
  const RunFix fix =
      target != nullptr && !error.is(LockedReason::raced) ? fix_for(options, *target) : RunFix{};
  json::object event = error_event(error, status);
  if (options.wait && locked) event["waited_ms"] = whole_ms(*options.wait);
  // Every refusal's event has the three, null when there is none (a live owner's next step:
  // a stopped owner, or what --force would trust about an owner only suspected dead).
  event["fix"] = fix.command.empty() ? json::value(nullptr) : json::value(fix.command);
  json::array argv;
  for (const std::string& word : fix.argv) argv.emplace_back(word);
  event["fix_argv"] = fix.argv.empty() ? json::value(nullptr) : json::value(std::move(argv));
  if (!locked) event["why"] = fix.why;
  event["next_step"] = fix.next_step.empty() ? json::value(nullptr) : json::value(fix.next_step);
  if (!fix.holder.empty()) event["holder"] = fix.holder;
  out.event(std::move(event));
  // -q: a conflict that clears by itself (a running owner) prints nothing, as flock -q's
  // does (cron mails whatever is printed); the exit status says it. One that will not (a
  // stopped or traced owner, one only suspected dead, which --force's fix would trust; the
  // lock held in another area) prints one line naming what to look at. A stale or malformed
  // lock needs a human: that still prints in full.
  if (locked && options.quiet) {
    const bool elsewhere = target != nullptr && error.lock_path != target->lock_path;
    if (fix.command.empty() && !fix.stopped && !elsewhere) return status;
    out.say(fmt::format("{}; see apnea-locks inspect {}", error.headline.empty() ? error.message : error.headline,
                        shell_word(error.lock_path)));
    return status;
  }
  const std::string waited =
      options.wait ? fmt::format("still held after waiting {}", duration_text(*options.wait)) : "";
  if (described) {
    out.say(waited);
    return status;
  }
  out.say(error.headline.empty() ? error.message : error.headline);
  if (!fix.holder.empty()) out.say(fix.holder);
  if (locked) {
    if (options.wait) {
      out.say(waited);
    } else if (error.is(LockedReason::live)) {
      out.say("use --wait DURATION to wait for it");
      if (!fix.next_step.empty()) out.say(fmt::format("next step: {}", fix.next_step));
      // An owner only not proven dead (evidence, not proof): what --force would trust.
      if (!fix.command.empty()) out.say(fmt::format("to remove it anyway: {}", fix.command));
    }
    return status;
  }
  if (!fix.command.empty()) {
    out.say(fmt::format("to fix it: {}", fix.command));
  } else {
    if (!fix.why.empty()) out.say(fmt::format("apnea-locks will not remove it: {}", fix.why));
    if (!fix.next_step.empty()) out.say(fmt::format("next step: {}", fix.next_step));
  }
  return status;
}

/// Other areas (PROTOCOL.md section 10): an Apnea of this account whose environment names
/// another temp directory (TMPDIR set in a shell, not for the desktop session) locks the
/// same repository under another area. While the same lock is held there by an owner not
/// proven dead, run is refused as by a live owner, naming that lock. `areas` is
/// other_lock_areas, read once per run (one walk of /proc), not once per attempt.
std::optional<LockError> held_elsewhere(System& system, const LockTarget& target,
                                        const std::vector<std::string>& areas) {
  const std::string name = target.lock_path.substr(target.lock_path.rfind('/') + 1);
  for (const std::string& area : areas) {
    if (!check_area(system, area, system.uid(), true).safe()) continue;  // never read through it
    const SurveySettings settings = survey_settings(system, area, Windows{}, false);
    EntryJudge judge(system, area, settings);
    const Judgement judged = judge.entry(name, nullptr);
    if (!judged.facts.stat || judged.decision.action == PlanAction::remove) continue;
    LockError error;
    error.kind = LockError::Kind::operation_locked;
    error.reason = LockedReason::live;
    error.lock_path = node_join(area, name);
    error.resource = target.resource;
    const auto& owner = judged.facts.owner;
    error.pid = owner && owner->owner ? owner->owner->pid : 0;
    error.message = fmt::format(
        "the same lock is held in another area an Apnea of this account uses: {} ({}, {})",
        error.lock_path, state_name(judged.verdict.state), judged.verdict.reason);
    error.headline = error.message;
    return error;
  }
  return std::nullopt;
}

/// A lock, a refusal, or the signal that interrupted the wait.
using Acquired = std::variant<HeldLock, LockError, int>;

/// Takes the lock per the options: once (--nonblock, or a repository lock by default),
/// waiting like Apnea (the global setup lock by default: 25 ms steps, forever), or waiting
/// with back-off up to the --wait deadline. Live owners are waited for; with --wait a
/// `raced` result is retried too. A forwarded signal ends the wait.
Acquired acquire_for_run(System& system, const LockTarget& target, const RunOptions& options,
                         const Output& out, const SignalControl& signals, bool& described) {
  AcquireOptions once = apnea_options(target.kind);
  // A dead owner's lock past Apnea's grace is taken over as Apnea would: say so, once.
  once.on_reclaimed = [&](const Owner& owner, const std::string& lock) {
    out.event({{"event", "reclaimed"},
               {"lock_path", lock},
               {"pid", json_pid(owner.pid)},
               {"token", owner.token}});
    out.note(fmt::format("took over {}: its owner pid {} is dead and the lock was older than "
                         "Apnea's {}s grace (token {})",
                         lock, pid_text(owner.pid),
                         std::chrono::duration_cast<std::chrono::seconds>(repository_reclaim_grace).count(),
                         owner.token));
  };
  const bool waits = options.wait.has_value() || (!options.nonblock && once.wait_while_live);
  once.wait_while_live = false;
  once.audit_takeover = true;  // the system log records a dead owner's lock taken over
  const std::vector<std::string> other_areas =
      other_lock_areas(system, system.uid(), node_dirname(target.lock_path));
  std::optional<steady_clock::time_point> deadline;
  if (options.wait) deadline = steady_clock::now() + *options.wait;
  nanoseconds delay = first_delay;
  bool announced = false;
  for (;;) {
    auto held = [&]() -> LockResult<HeldLock> {
      if (auto elsewhere = held_elsewhere(system, target, other_areas))
        return std::unexpected(*elsewhere);
      return acquire(system, target, once);
    }();
    if (held) return std::move(*held);
    LockError error = std::move(held.error());
    const bool retry =
        error.is(LockedReason::live) || (options.wait && error.is(LockedReason::raced));
    if (!waits || !retry) return error;
    const auto now = steady_clock::now();
    if (deadline && now >= *deadline) return error;
    if (!announced && error.is(LockedReason::live)) {
      announced = true;
      json::object event{{"event", "waiting"},
                         {"lock_path", target.lock_path},
                         {"resource", target.resource},
                         {"kind", kind_name(target.kind)},
                         {"holder_pid", json_pid(error.pid)}};
      event["timeout_ms"] =
          options.wait ? json::value(whole_ms(*options.wait)) : json::value(nullptr);
      out.event(std::move(event));
      out.note(fmt::format("{}; waiting {}", error.headline,
                           options.wait ? "up to " + duration_text(*options.wait)
                                        : std::string("until it is released")));
      if (!options.quiet && !options.json) {
        const std::string holder = fix_for(options, target).holder;
        if (!holder.empty()) out.note(holder);
        described = true;
      }
    }
    nanoseconds pause = delay;
    if (deadline) pause = std::min<nanoseconds>(pause, *deadline - now);
    if (const int sig = signals.wait_for(pause); sig != 0) return sig;
    if (options.wait) delay = std::min(delay * 2, longest_delay);
  }
}

/// Whether `pid` is a live (not zombie) process of session `sid`, from /proc/PID/stat:
/// "PID (COMM) STATE PPID PGRP SESSION ...", COMM may hold any byte but ends at the last ')'.
bool session_member(pid_t pid, pid_t sid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[512];
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return false;
  text[got] = '\0';
  const char* close = std::strrchr(text, ')');
  if (close == nullptr) return false;
  char state = 0;
  int ppid = 0, pgrp = 0, session = 0;
  if (std::sscanf(close + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4) return false;
  return session == sid && state != 'Z' && state != 'X';
}

/// The members of a session, read from /proc: every process whose session id (field 6 of
/// /proc/PID/stat) is `sid`, except `except` and zombies (a zombie runs nothing). Calls
/// `visit(pid)` for each; false when /proc is not this pid namespace's (or cannot be read),
/// so membership is unknown. Plain system calls only: the shim runs this after fork.
template <class Visit>
bool for_each_session_member(pid_t sid, pid_t except, Visit visit) {
  char self[32] = {};
  if (::readlink("/proc/self", self, sizeof self - 1) <= 0) return false;
  char expected[32];
  std::snprintf(expected, sizeof expected, "%d", static_cast<int>(::getpid()));
  if (std::strcmp(self, expected) != 0) return false;  // another pid namespace's /proc
  const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char entries[4096];
  for (;;) {
    const ssize_t got = ::getdents64(dir, entries, sizeof entries);
    if (got <= 0) break;
    for (ssize_t at = 0; at < got;) {
      const auto* entry = reinterpret_cast<const struct dirent64*>(entries + at);
      at += entry->d_reclen;
      pid_t pid = 0;
      const char* c = entry->d_name;
      for (; *c >= '0' && *c <= '9'; ++c) pid = pid * 10 + (*c - '0');
      if (*c != '\0' || pid <= 0 || pid == except) continue;
      if (session_member(pid, sid)) visit(pid);
    }
  }
  ::close(dir);
  return true;
}

/// SIGKILLs every live process of session `sid` but `except`; how many were found. Each is
/// opened as a pidfd and checked to be a member again before the kill, so a pid reused
/// between the scan and the kill is not hit.
int kill_session_members(pid_t sid, pid_t except, bool& known) {
  int found = 0;
  known = for_each_session_member(sid, except, [&](pid_t pid) {
    ++found;
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) {
      if (errno != ESRCH) ::kill(pid, SIGKILL);  // no pidfds here (ENOSYS), or none left
      return;
    }
    if (session_member(pid, sid)) ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    ::close(pidfd);
  });
  return found;
}

/// Whether any live process of session `sid` but `except` remains; nothing when /proc cannot
/// tell.
std::optional<bool> session_alive(pid_t sid, pid_t except) {
  bool any = false;
  if (!for_each_session_member(sid, except, [&](pid_t) { any = true; })) return std::nullopt;
  return any;
}

/// Reaps every child that has ended (WNOHANG); the wait status of `watched` when it was
/// among them. `none_left`: no child remains at all (ECHILD).
void reap_ended(pid_t watched, std::optional<int>& watched_status, bool& none_left) {
  none_left = false;
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (pid == watched) watched_status = status;
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    none_left = pid < 0 && errno == ECHILD;
    return;
  }
}

/// What the shim tells run on the report pipe, one fixed-size record each (atomic on a pipe).
struct ShimReport {
  enum Kind : int { started = 1, exec_failed = 2, ended = 3 };
  int kind = 0;
  int value = 0;  ///< started: the command's pid; exec_failed: errno; ended: wait status
};

/// How run asks the shim to forward a signal (sigqueue's value): to the command, or to the
/// command's process group, as the terminal would have (the command no longer shares
/// run's terminal).
constexpr int forward_to_command = 0;
constexpr int forward_to_group = 1;

/// The signal the shim gets when run dies (PR_SET_PDEATHSIG): caught with sigwaitinfo, so
/// the shim can kill the session before it exits.
constexpr int parent_death_signal = SIGUSR1;

/// How often the keepers look at /proc again once the command has ended and other processes
/// of its session run on. The last of them to end is normally the shim's child (it inherits
/// the orphans), whose SIGCHLD wakes it at once; the poll is for one whose parent left the
/// session, so it only delays the release, by at most this.
constexpr long session_poll_ns = 1'000'000'000;

void write_report(int fd, ShimReport report) {
  while (::write(fd, &report, sizeof report) < 0 && errno == EINTR) {
  }
}

/// Kills every process of the shim's session (run has died: nothing of the command may run
/// on unlocked), then the shim itself with the rest of its process group.
[[noreturn]] void kill_session() {
  const pid_t self = ::getpid();
  for (int pass = 0; pass < 1000; ++pass) {  // a member forked during a pass is found in the next
    bool known = false;
    const int found = kill_session_members(self, self, known);
    std::optional<int> unused;
    bool none_left = false;
    reap_ended(-1, unused, none_left);
    if (!known || found == 0) break;
    const struct timespec pause {0, 10'000'000};
    ::nanosleep(&pause, nullptr);
  }
  ::kill(-self, SIGKILL);  // the shim's process group, the shim included
  ::_exit(128 + SIGKILL);
}

/// The shim, run's child: leads the command's session, is its child subreaper, and keeps it
/// until every process of the session has exited, then reports the command's wait status to
/// run and exits. When run dies it kills the whole session first. Signals run forwards come
/// as sigqueue values (forward_to_*) and are sent on to the command while the shim has not
/// reaped it (so never to a reused pid), else to the session's process group.
[[noreturn]] void shim_main(pid_t run_pid, int report, std::vector<char*>& argv,
                            const SignalControl& signals) {
  sigset_t wake;
  sigemptyset(&wake);
  for (int sig : forwarded_signals) sigaddset(&wake, sig);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, parent_death_signal);
  ::sigprocmask(SIG_BLOCK, &wake, nullptr);
  ::prctl(PR_SET_PDEATHSIG, parent_death_signal);
  if (::getppid() != run_pid) ::_exit(1);  // run died before the prctl: start nothing
  ::setsid();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t self = ::getpid();

  int exec_report[2];
  if (::pipe2(exec_report, O_CLOEXEC) != 0) {
    write_report(report, {ShimReport::exec_failed, errno});
    ::_exit(1);
  }
  const pid_t command = ::fork();
  if (command < 0) {
    write_report(report, {ShimReport::exec_failed, errno});
    ::_exit(1);
  }
  if (command == 0) {
    ::close(exec_report[0]);
    ::close(report);
    signals.restore_in_child();
    ::execvp(argv[0], argv.data());
    const int error = errno;
    [[maybe_unused]] ssize_t written = ::write(exec_report[1], &error, sizeof error);
    ::_exit(exit_not_found);
  }
  ::close(exec_report[1]);
  int exec_errno = 0;
  ssize_t got = 0;
  do got = ::read(exec_report[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  ::close(exec_report[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    int ignored = 0;
    while (::waitpid(command, &ignored, 0) < 0 && errno == EINTR) {
    }
    write_report(report, {ShimReport::exec_failed, exec_errno});
    ::_exit(1);
  }
  write_report(report, {ShimReport::started, command});

  std::optional<int> command_status;
  for (;;) {
    bool none_left = false;
    reap_ended(command, command_status, none_left);
    if (::getppid() != run_pid) kill_session();
    if (command_status) {
      // The command has ended: done once no process of its session is left (when /proc
      // cannot tell, once the shim has no child left: the subreaper inherits the orphans).
      const std::optional<bool> alive = session_alive(self, self);
      if (alive ? !*alive : none_left) {
        write_report(report, {ShimReport::ended, *command_status});
        ::_exit(0);
      }
    }
    siginfo_t info{};
    int sig = 0;
    if (command_status) {
      const struct timespec poll {session_poll_ns / 1'000'000'000, session_poll_ns % 1'000'000'000};
      sig = ::sigtimedwait(&wake, &info, &poll);
    } else {
      sig = ::sigwaitinfo(&wake, &info);
    }
    if (sig <= 0 || sig == SIGCHLD || sig == parent_death_signal) continue;
    // A forwarded signal: only run's requests are passed on (the shim's own process-group
    // kill comes back to it, and so does anyone else's).
    if (info.si_code != SI_QUEUE || info.si_pid != run_pid) continue;
    const bool group = info.si_value.sival_int == forward_to_group || command_status.has_value();
    ::kill(group ? -self : command, sig);
  }
}

/// The command as real processes: run (child subreaper) forks the shim, which starts the
/// command in a session of its own and reports on a pipe (the command's pid, or the errno
/// of a failed fork or exec; at the end the command's wait status). run's signals are taken
/// with sigwaitinfo and forwarded through the shim; SIGCHLD is reaped.
class RealSubprocess final : public Subprocess {
 public:
  explicit RealSubprocess(const SignalControl& signals) : signals_(signals) {}
  RealSubprocess(const RealSubprocess&) = delete;
  RealSubprocess& operator=(const RealSubprocess&) = delete;
  ~RealSubprocess() override {
    if (report_ >= 0) ::close(report_);
  }

  std::expected<int, int> start(const std::vector<std::string>& command) override {
    std::vector<char*> argv;
    for (const auto& word : command) argv.push_back(const_cast<char*>(word.c_str()));
    argv.push_back(nullptr);
    // Orphans of the command's session come to run if the shim is gone.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) return std::unexpected(errno);
    const pid_t run_pid = ::getpid();
    std::fflush(nullptr);
    const pid_t shim = ::fork();
    if (shim < 0) {
      const int error = errno;
      ::close(report[0]);
      ::close(report[1]);
      return std::unexpected(error);
    }
    if (shim == 0) {
      ::close(report[0]);
      // The shim keeps run's flock of the lock directory (close-on-exec: never the
      // command's): if run is killed, the flock lasts until the shim has ended the
      // command's session, and the removal gate refuses a flocked lock whatever its
      // record's pid says.
      shim_main(run_pid, report[1], argv, signals_);
    }
    ::close(report[1]);
    report_ = report[0];
    shim_ = shim;
    ShimReport first;
    if (!read_report(first) || first.kind != ShimReport::started) {
      int ignored = 0;
      while (::waitpid(shim, &ignored, 0) < 0 && errno == EINTR) {
      }
      shim_ = -1;
      return std::unexpected(first.kind == ShimReport::exec_failed ? first.value : ECHILD);
    }
    child_ = first.value;
    ::fcntl(report_, F_SETFL, O_NONBLOCK);  // the end record is read once the shim has exited
    return child_;
  }

  ProcessEvent next() override {
    for (;;) {
      siginfo_t info{};
      const int sig = signals_.next(info);
      if (sig < 0) {
        // Cannot wait for signals: still wait for the shim, so the lock outlives the session.
        int status = 0;
        while (::waitpid(shim_, &status, 0) < 0 && errno == EINTR) {
        }
        return ended(status);
      }
      if (sig == SIGCHLD) {
        // Orphans reparented to run (the subreaper) are reaped with the shim.
        std::optional<int> shim_status;
        bool none_left = false;
        reap_ended(shim_, shim_status, none_left);
        if (!shim_status) continue;
        return ended(*shim_status);
      }
      ProcessEvent event;
      event.kind = ProcessEvent::Kind::signal;
      event.signal = sig;
      // The command has its own session: nothing the terminal sends reaches it. A signal
      // from the terminal (Ctrl-C, Ctrl-\, a hangup) goes on to its process group, as the
      // terminal would have sent it; one sent with kill goes to the command.
      from_terminal_ = info.si_code == SI_KERNEL;
      return event;
    }
  }

  void send(int sig) override {
    union sigval value {};
    value.sival_int = from_terminal_ ? forward_to_group : forward_to_command;
    ::sigqueue(shim_, sig, value);
  }

 private:
  bool read_report(ShimReport& report) {
    ssize_t got = 0;
    do got = ::read(report_, &report, sizeof report);
    while (got < 0 && errno == EINTR);
    return got == static_cast<ssize_t>(sizeof report);
  }

  /// The command's end once the shim has exited with `shim_status`: the wait status it
  /// reported. A shim that did not report (killed) leaves the command's session to run,
  /// which keeps it as the shim would have until no process of it is left.
  ProcessEvent ended(int shim_status) {
    ProcessEvent event;
    ShimReport last;
    if (read_report(last) && last.kind == ShimReport::ended) {
      event.wait_status = last.value;
      return event;
    }
    std::optional<int> command_status;
    for (;;) {
      bool none_left = false;
      reap_ended(child_, command_status, none_left);
      const std::optional<bool> alive = session_alive(shim_, ::getpid());
      if (alive ? !*alive : none_left) break;
      const struct timespec poll {session_poll_ns / 1'000'000'000, session_poll_ns % 1'000'000'000};
      sigset_t child;
      sigemptyset(&child);
      sigaddset(&child, SIGCHLD);
      ::sigtimedwait(&child, nullptr, &poll);
    }
    event.wait_status = command_status.value_or(shim_status);
    return event;
  }

  const SignalControl& signals_;
  int report_ = -1;
  pid_t shim_ = -1;
  pid_t child_ = -1;
  bool from_terminal_ = false;
};

/// Runs the command under supervise, reporting its start, the signals and its end as events.
ChildEnd run_child(const std::vector<std::string>& command, const SignalControl& signals,
                   const Output& out) {
  RealSubprocess process(signals);
  SuperviseReport report;
  report.started = [&](int pid) {
    json::array words;
    for (const auto& word : command) words.emplace_back(word);
    out.event({{"event", "started"}, {"child_pid", pid}, {"command", std::move(words)}});
  };
  report.signal = [&](int sig, bool forwarded) {
    out.event({{"event", "signal"}, {"signal", signal_name(sig)}, {"forwarded", forwarded}});
  };
  report.ended = [&](int pid, const ChildEnd& end) {
    json::object event{{"event", "exited"}, {"child_pid", pid}};
    if (end.end_signal != 0) {
      event["exit_code"] = nullptr;
      event["signal"] = signal_name(end.end_signal);
    } else {
      event["exit_code"] = end.status;
      event["signal"] = nullptr;
    }
    event["status"] = end.status;
    out.event(std::move(event));
  };
  return supervise(process, command, report);
}

/// Opens the held lock's directory and takes a shared BSD flock on it; the descriptor, or -1
/// (said once) when that failed: the lock is held all the same.
int flock_lock_directory(const std::string& lock_path, const Output& out) {
  const int fd = ::open(lock_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && ::flock(fd, LOCK_SH | LOCK_NB) == 0) return fd;
  out.note(fmt::format("could not flock {} (temp cleaners may not see it in use): {}", lock_path,
                       std::strerror(errno)));
  if (fd >= 0) ::close(fd);
  return -1;
}

/// Releases the lock (token-checked) and reports it; returns false when the release failed.
bool release(HeldLock& held, const Output& out) {
  const std::string lock = held.lock_path();
  const std::string token = held.owner().token;
  auto released = held.release();
  if (!released) {
    out.event(error_event(released.error(), exit_unsafe));
    out.say(fmt::format("could not release {}: {}", lock, released.error().message));
    return false;
  }
  out.event({{"event", "released"}, {"lock_path", lock}, {"token", token}, {"removed", *released}});
  if (!*released)
    out.say(
        fmt::format("{} no longer had our token when the command ended (it was reclaimed "
                    "or replaced meanwhile); nothing was removed",
                    lock));
  return true;
}

/// run's part once the lock is held: the command run in its own session under a flock of
/// the lock directory, then the release; the command's exit status, or exit_unsafe when the
/// lock was not ours any more at the end.
int run_holding(HeldLock& held, const LockTarget& target, const RunOptions& options, const Output& out,
                const SignalControl& signals) {
  const Owner& owner = held.owner();
  out.event({{"event", "acquired"},
             {"lock_path", held.lock_path()},
             {"resource", target.resource},
             {"kind", kind_name(target.kind)},
             {"pid", json_pid(owner.pid)},
             {"token", owner.token}});
  if (options.print_token)
    write_line(printable(fmt::format("apnea-locks run: holding {} as pid {}, token {}", held.lock_path(),
                                     pid_text(owner.pid), owner.token)) +
               "\n");

  // A signal that arrived while the lock was being taken ends run before the command starts.
  if (const int sig = signals.wait_for(nanoseconds(0)); sig != 0) {
    release(held, out);
    signals.die_by(sig);
  }

  // A BSD flock on the lock directory while the command runs: temp cleaners such as
  // systemd-tmpfiles skip a locked directory. Closed before the release renames it away.
  const int lock_fd = flock_lock_directory(held.lock_path(), out);
  const ChildEnd end = run_child(options.command, signals, out);
  if (lock_fd >= 0) ::close(lock_fd);
  if (end.exec_errno != 0) {
    out.event(
        {{"event", "exec-failed"},
         {"command", options.command.front()},
         {"errno", ::strerrorname_np(end.exec_errno) ? ::strerrorname_np(end.exec_errno) : ""},
         {"message", std::strerror(end.exec_errno)},
         {"exit_status", end.status}});
    const std::string& name = options.command.front();
    if (end.exec_errno == ENOENT && name.find('/') == std::string::npos)
      out.say(fmt::format("{}: command not found", name));
    else
      out.say(fmt::format("cannot run '{}': {}", name, std::strerror(end.exec_errno)));
  }
  const bool released = release(held, out);
  if (!released && end.status == 0) return exit_unsafe;
  return end.status;
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
  auto parsed = parse_options(args);
  if (!parsed) return usage_error(help.name, parsed.error());
  const RunOptions& options = *parsed;
  if (options.help) {
    print_help(stdout, help, option_table());
    return exit_ok;
  }
  if (options.version) {
    print_version(stdout, help.name);
    return exit_ok;
  }
  const Output out(options);
  System& system = real_system();
  const std::string lock_dir =
      options.lock_dir ? *options.lock_dir : default_lock_directory(system);
  // A --lock-dir is created (only itself) or must already be safe; Apnea's own area is
  // created and re-checked as Apnea does (see AreaMode).
  const AreaMode mode = options.lock_dir ? AreaMode::explicit_directory : AreaMode::apnea;
  for (const auto& [option, typed] : {std::pair{"--repo", &options.repo}, {"--home", &options.home}}) {
    if (!*typed) continue;
    if (auto checked = typed_directory(system, option, **typed); !checked) {
      LockError error;
      error.message = checked.error();
      error.path = **typed;
      return report_refusal(out, options, nullptr, error);
    }
  }
  auto target = options.home ? global_setup_target(system, lock_dir, *options.home, mode)
                             : repository_target(system, lock_dir, options.repo.value_or("."), mode);
  if (!target) return report_refusal(out, options, nullptr, target.error());

  const SignalControl signals;
  bool described = false;
  Acquired acquired = acquire_for_run(system, *target, options, out, signals, described);
  if (const int* sig = std::get_if<int>(&acquired)) signals.die_by(*sig);
  if (const LockError* error = std::get_if<LockError>(&acquired))
    return report_refusal(out, options, &*target, *error,
                          described && error->is(LockedReason::live));
  HeldLock& held = std::get<HeldLock>(acquired);

  return run_holding(held, *target, options, out, signals);
}

}  // namespace apnea_locks::cli
