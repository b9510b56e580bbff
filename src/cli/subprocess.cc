#include "cli/subprocess.h"

#include <sys/wait.h>

#include <cerrno>

namespace apnea_locks::cli {

ChildEnd supervise(Subprocess& process, const std::vector<std::string>& command,
                   const SuperviseReport& report) {
  auto started = process.start(command);
  if (!started) {
    const int error = started.error();
    return {error == ENOENT || error == ENOTDIR ? exit_not_found : exit_cannot_execute, error, 0};
  }
  const int pid = *started;
  if (report.started) report.started(pid);
  for (;;) {
    const ProcessEvent event = process.next();
    if (event.kind == ProcessEvent::Kind::signal) {
      const bool forward = !event.reached_child;
      if (forward) process.send(event.signal);
      if (report.signal) report.signal(event.signal, forward);
      continue;
    }
    ChildEnd end;
    if (WIFSIGNALED(event.wait_status)) {
      end.end_signal = WTERMSIG(event.wait_status);
      end.status = 128 + end.end_signal;
    } else {
      end.status = WEXITSTATUS(event.wait_status);
    }
    if (report.ended) report.ended(pid, end);
    return end;
  }
}

}  // namespace apnea_locks::cli
