// The seam between `run` and the process it wraps: starting the command, what happens next
// (a signal to run, or the command's end) and forwarding a signal. `supervise` holds run's
// rules (what is forwarded, how an end maps to run's exit status); the real implementation
// (run.cc) starts the command in its own session under a shim, takes signals with
// sigwaitinfo and forwards them through the shim; tests stage any order of events with a fake,
// as ninja's build logic is tested with a fake command runner.
#pragma once

#include <expected>
#include <functional>
#include <string>
#include <vector>

namespace apnea_locks::cli {

/// Exit statuses of `run` when the command could not be started (as a POSIX shell's).
inline constexpr int exit_cannot_execute = 126;  ///< found but could not be started
inline constexpr int exit_not_found = 127;       ///< command not found

/// What happened next while run waits for its command.
struct ProcessEvent {
  enum class Kind {
    signal,  ///< run received a signal it forwards
    ended,   ///< the command ended
  };
  Kind kind = Kind::ended;
  int signal = 0;  ///< Kind::signal: the signal
  /// Kind::signal: the command has it already (forwarding would deliver it twice). Never so
  /// for the real command, which runs in a session of its own that no signal to run reaches.
  bool reached_child = false;
  int wait_status = 0;  ///< Kind::ended: the status waitpid(2) gave
};

/// A command run waits for. One command per object.
class Subprocess {
 public:
  virtual ~Subprocess() = default;
  /// Starts `argv` (searched in PATH) with run's standard streams and environment; its pid,
  /// or the errno of the failed fork or exec (the command has then already been reaped).
  virtual std::expected<int, int> start(const std::vector<std::string>& argv) = 0;
  /// Blocks until run receives a signal it forwards or the command ends (for the real
  /// command: once every process of its session has ended).
  virtual ProcessEvent next() = 0;
  /// Sends `signal` to the command.
  virtual void send(int signal) = 0;
};

/// How the command ended: run's exit status (the command's own, 128+N when killed by signal
/// N, 126 or 127 when it could not start) and the errno of a failed start.
struct ChildEnd {
  int status = 0;
  int exec_errno = 0;
  int end_signal = 0;  ///< the signal that killed the command, 0 when it exited
};

/// What supervise reports as it goes (each may be empty).
struct SuperviseReport {
  std::function<void(int pid)> started;
  std::function<void(int signal, bool forwarded)> signal;
  std::function<void(int pid, const ChildEnd& end)> ended;
};

/// Starts `command` and waits until it ends, forwarding every signal run receives that did
/// not already reach it. Run never ends before its command does, whatever the command does
/// with the signals it gets: the lock must outlive it.
ChildEnd supervise(Subprocess& process, const std::vector<std::string>& command,
                   const SuperviseReport& report = {});

}  // namespace apnea_locks::cli
