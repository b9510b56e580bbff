// apnea-locks run: hold an Apnea lock around a command, the way flock(1) wraps one.
//
// The lock is taken and released through the core (acquire / HeldLock), so Apnea sees `run`
// as an ordinary live owner. What lives here is process control, which is not protocol I/O:
// the real Subprocess (fork/exec of the child, with a close-on-exec pipe that reports an exec
// failure's errno; subprocess.h holds the forwarding and exit-status rules), signals (blocked
// and taken synchronously with sigwaitinfo, so no handler runs at an awkward moment), and the
// wait policy with its back-off.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
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

namespace apnea_locks::cli {
namespace {

namespace po = boost::program_options;
namespace json = boost::json;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;

/// Exit statuses of `run` besides the command's own (documented in docs/run.md).
constexpr int exit_locked = 75;           ///< held by a live owner (EX_TEMPFAIL), or raced
constexpr int exit_stale = 76;            ///< stale or malformed lock: a human must act

/// The first delay of a wait (Apnea's 25 ms) and the ceiling of the --wait back-off.
constexpr nanoseconds first_delay = std::chrono::milliseconds(25);
constexpr nanoseconds longest_delay = std::chrono::milliseconds(500);

/// The signals `run` forwards to its command.
constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

struct RunOptions {
  std::optional<std::string> repo;
  std::optional<std::string> home;
  std::optional<std::string> lock_dir;
  std::optional<nanoseconds> wait;
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
       ("wait up to DURATION (90s, 2m, 1h; 0 tries once) for a live owner" +
        duration_help(wait_range)).c_str())
      ("nonblock,n", "never wait, not even for the global setup lock")
      ("json", "print an event stream (JSON lines) on standard error")
      ("print-token", "print the held owner (lock path, pid, token) on standard error")
      ("quiet,q", "no informational lines (a takeover of a dead lock, waiting for a live "
       "one); refusals and errors still print");
  // clang-format on
  return options;
}

constexpr CommandHelp help{
    "run",
    "run [options] [--repo PATH | --home PATH] [--] CMD [ARGS...]",
    "Holds the Apnea lock of a repository (or the global setup lock) while CMD runs.",
    "Exit status: CMD's own (128+N when killed by signal N); 75 the lock is held by a\n"
    "live owner; 76 the lock is stale or malformed (run 'apnea-locks reclaim'); 126 CMD\n"
    "could not be executed; 127 CMD not found; 2 usage; 3 unsafe lock area, a --repo,\n"
    "--home or --lock-dir that does not exist, or another error. See docs/run.md."};

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
      if (takes_value(word)) ++i;
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
  if (values.count("wait")) {
    auto wait = parse_duration("--wait", values["wait"].as<std::string>(), wait_range.min_ns,
                               wait_range.max_ns);
    if (!wait) return std::unexpected(wait.error());
    options.wait = nanoseconds(*wait);
  }
  if (options.repo && options.home) return std::unexpected("--repo and --home exclude each other");
  if (options.wait && options.nonblock)
    return std::unexpected("--wait and --nonblock exclude each other");
  options.command.assign(args.begin() + static_cast<long>(command_start), args.end());
  if (options.command.empty())
    return std::unexpected("no command given (apnea-locks run ... -- CMD [ARGS...])");
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

/// What `run` prints on standard error: human lines, or JSON events with --json.
class Output {
 public:
  explicit Output(const RunOptions& options) : json_(options.json), quiet_(options.quiet) {}
  /// One JSON event (only with --json).
  void event(json::object fields) const {
    if (!json_) return;
    // Every line is a JSON document of its own: the schema first (json_writer.h).
    json::object line{{"schema", {{"name", "run-event"}, {"version", json_schema_version}}}};
    for (auto& [key, value] : fields) line[key] = std::move(value);
    write_line(json_safe(json::serialize(line)) + "\n");
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
      survey_settings(system, directory, default_reuse_tolerance_ns, default_guard_age_ns, false);
  if (options.lock_dir) settings.fix.lock_dir = *options.lock_dir;
  const EntryLabel label{target.kind, target.root};
  EntryJudge judge(system, directory, settings);
  const Judgement judged = judge.entry(name, &label);
  return RunFix{judged.verdict.fix, judged.verdict.fix_argv, judged.decision.why,
                judged.decision.next_step, holder_text(judged.facts, judged.verdict)};
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
  const int status = locked ? exit_locked : exit_stale;
  const RunFix fix =
      target != nullptr && !error.is(LockedReason::raced) ? fix_for(options, *target) : RunFix{};
  json::object event = error_event(error, status);
  if (options.wait && locked) event["waited_ms"] = whole_ms(*options.wait);
  if (!locked) {
    event["fix"] = fix.command.empty() ? json::value(nullptr) : json::value(fix.command);
    json::array argv;
    for (const std::string& word : fix.argv) argv.emplace_back(word);
    event["fix_argv"] = fix.argv.empty() ? json::value(nullptr) : json::value(std::move(argv));
    event["why"] = fix.why;
    event["next_step"] = fix.next_step;
  }
  if (!fix.holder.empty()) event["holder"] = fix.holder;
  out.event(std::move(event));
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
  std::optional<steady_clock::time_point> deadline;
  if (options.wait) deadline = steady_clock::now() + *options.wait;
  nanoseconds delay = first_delay;
  bool announced = false;
  for (;;) {
    auto held = acquire(system, target, once);
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

/// The command as a real process: fork/exec with a close-on-exec pipe that reports an exec
/// failure's errno, run's signals taken with sigwaitinfo, SIGCHLD reaped.
class RealSubprocess final : public Subprocess {
 public:
  explicit RealSubprocess(const SignalControl& signals) : signals_(signals) {}

  std::expected<int, int> start(const std::vector<std::string>& command) override {
    std::vector<char*> argv;
    for (const auto& word : command) argv.push_back(const_cast<char*>(word.c_str()));
    argv.push_back(nullptr);
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) return std::unexpected(errno);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child < 0) {
      const int error = errno;
      ::close(report[0]);
      ::close(report[1]);
      return std::unexpected(error);
    }
    if (child == 0) {
      ::close(report[0]);
      signals_.restore_in_child();
      ::execvp(argv[0], argv.data());
      const int error = errno;
      [[maybe_unused]] ssize_t written = ::write(report[1], &error, sizeof error);
      ::_exit(exit_not_found);
    }
    ::close(report[1]);
    int exec_errno = 0;
    ssize_t got = 0;
    do got = ::read(report[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    ::close(report[0]);
    if (got == static_cast<ssize_t>(sizeof exec_errno)) {
      int ignored = 0;
      while (::waitpid(child, &ignored, 0) < 0 && errno == EINTR) {
      }
      return std::unexpected(exec_errno);
    }
    child_ = child;
    // Signals the terminal sends to the whole foreground process group (Ctrl-C, Ctrl-\, a
    // hangup) already reached a child in run's group. A hangup goes to the session leader
    // alone, so when run leads the session the child has not had it.
    same_group_ = ::getpgid(child) == ::getpgrp();
    session_leader_ = ::getsid(0) == ::getpid();
    return child;
  }

  ProcessEvent next() override {
    for (;;) {
      siginfo_t info{};
      const int sig = signals_.next(info);
      ProcessEvent event;
      if (sig < 0) {
        // Cannot wait for signals: still wait for the child, so the lock outlives it.
        while (::waitpid(child_, &event.wait_status, 0) < 0 && errno == EINTR) {
        }
        return event;
      }
      if (sig == SIGCHLD) {
        if (::waitpid(child_, &event.wait_status, WNOHANG) != child_) continue;
        return event;
      }
      event.kind = ProcessEvent::Kind::signal;
      event.signal = sig;
      event.reached_child =
          info.si_code == SI_KERNEL && same_group_ && !(sig == SIGHUP && session_leader_);
      return event;
    }
  }

  void send(int sig) override { ::kill(child_, sig); }

 private:
  const SignalControl& signals_;
  pid_t child_ = -1;
  bool same_group_ = false;
  bool session_leader_ = false;
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

}  // namespace

int run_command(const std::vector<std::string>& args) {
  auto parsed = parse_options(args);
  if (!parsed) {
    fmt::print(stderr, "apnea-locks run: {}\nSee 'apnea-locks run --help'.\n", printable(parsed.error()));
    return exit_usage;
  }
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

  const Owner& owner = held.owner();
  out.event({{"event", "acquired"},
             {"lock_path", held.lock_path()},
             {"resource", target->resource},
             {"kind", kind_name(target->kind)},
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

  const ChildEnd end = run_child(options.command, signals, out);
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

}  // namespace apnea_locks::cli
