// run's supervision rules through a fake Subprocess (subprocess.h): what is forwarded, how
// the command's end maps to run's exit status, a command that ignores SIGTERM, a failed
// start. The real process of each case is in run_cli_test.cc.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <deque>
#include <string>
#include <vector>

#include "cli/subprocess.h"

using namespace apnea_locks::cli;

namespace {

/// A command whose events are scripted; records what run did to it.
class FakeSubprocess final : public Subprocess {
 public:
  int start_errno = 0;             ///< a failed start with this errno, when not 0
  std::deque<ProcessEvent> script; ///< what next() returns, in order
  std::vector<std::string> started;
  std::vector<int> sent;
  int next_calls = 0;

  std::expected<int, int> start(const std::vector<std::string>& argv) override {
    started = argv;
    if (start_errno != 0) return std::unexpected(start_errno);
    return 4242;
  }
  ProcessEvent next() override {
    ++next_calls;
    // supervise must not wait past the command's end: an exhausted script is a failure.
    REQUIRE_FALSE(script.empty());
    ProcessEvent event = script.front();
    script.pop_front();
    return event;
  }
  void send(int signal) override { sent.push_back(signal); }
};

ProcessEvent signal_event(int sig, bool reached_child = false) {
  ProcessEvent event;
  event.kind = ProcessEvent::Kind::signal;
  event.signal = sig;
  event.reached_child = reached_child;
  return event;
}

ProcessEvent exited(int code) {
  ProcessEvent event;
  event.wait_status = code << 8;  // WEXITSTATUS's encoding
  REQUIRE(WIFEXITED(event.wait_status));
  return event;
}

ProcessEvent killed(int sig) {
  ProcessEvent event;
  event.wait_status = sig;  // WTERMSIG's encoding
  REQUIRE(WIFSIGNALED(event.wait_status));
  return event;
}

}  // namespace

TEST_CASE("the command's exit code is run's; killed by signal N is 128+N") {
  for (int code : {0, 1, 3, 75, 255}) {
    CAPTURE(code);
    FakeSubprocess process;
    process.script = {exited(code)};
    const ChildEnd end = supervise(process, {"make", "deploy"});
    CHECK(end.status == code);
    CHECK(end.end_signal == 0);
    CHECK(end.exec_errno == 0);
    CHECK(process.started == std::vector<std::string>{"make", "deploy"});
  }
  for (int sig : {SIGKILL, SIGTERM, SIGSEGV}) {
    CAPTURE(sig);
    FakeSubprocess process;
    process.script = {killed(sig)};
    const ChildEnd end = supervise(process, {"x"});
    CHECK(end.status == 128 + sig);
    CHECK(end.end_signal == sig);
  }
}

TEST_CASE("a failed start: 127 when not found, 126 otherwise; nothing is waited for") {
  for (const auto& [error, status] : {std::pair{ENOENT, 127}, {ENOTDIR, 127}, {EACCES, 126},
                                      {ENOEXEC, 126}, {EAGAIN, 126}}) {
    CAPTURE(error);
    FakeSubprocess process;
    process.start_errno = error;
    bool reported_start = false;
    SuperviseReport report;
    report.started = [&](int) { reported_start = true; };
    const ChildEnd failed = supervise(process, {"nope"}, report);
    CHECK(failed.status == status);
    CHECK(failed.exec_errno == error);
    CHECK(process.next_calls == 0);
    CHECK_FALSE(reported_start);
  }
}

TEST_CASE("signals are forwarded unless the terminal already gave them to the command") {
  FakeSubprocess process;
  process.script = {signal_event(SIGTERM), signal_event(SIGINT, true), signal_event(SIGHUP),
                    signal_event(SIGQUIT, true), exited(0)};
  std::vector<std::pair<int, bool>> reported;
  int ended_pid = 0;
  SuperviseReport report;
  report.signal = [&](int sig, bool forwarded) { reported.emplace_back(sig, forwarded); };
  report.ended = [&](int pid, const ChildEnd&) { ended_pid = pid; };
  const ChildEnd end = supervise(process, {"x"}, report);
  CHECK(process.sent == std::vector<int>{SIGTERM, SIGHUP});
  CHECK(reported == std::vector<std::pair<int, bool>>{
                        {SIGTERM, true}, {SIGINT, false}, {SIGHUP, true}, {SIGQUIT, false}});
  CHECK(end.status == 0);
  CHECK(ended_pid == 4242);
}

TEST_CASE("a command that ignores SIGTERM: run keeps waiting, forwarding each one, until it ends") {
  FakeSubprocess process;
  process.script = {signal_event(SIGTERM), signal_event(SIGTERM), signal_event(SIGTERM), exited(7)};
  const ChildEnd end = supervise(process, {"x"});
  CHECK(process.sent == std::vector<int>{SIGTERM, SIGTERM, SIGTERM});
  CHECK(process.script.empty());  // every event was taken: run did not stop early
  CHECK(end.status == 7);         // the command's own status, not 128+SIGTERM
}
