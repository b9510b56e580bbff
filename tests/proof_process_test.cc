// Proofs of death against real processes the kernel shows in awkward states: a leader that
// called pthread_exit while its other threads run, and an Apnea in another PID namespace.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apnea_locks/probe.h"
#include "area_builder.h"
#include "spawned_process.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// Reads until end of file from `fd`.
std::string read_all(int fd) {
  std::string out;
  char buffer[256];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

/// Writes all of `text` to `fd` (a pipe the test reads).
void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

/// Blocks until `fd` reaches end of file (the test closed its end of the pipe).
void wait_for_eof(int fd) {
  char byte = 0;
  for (;;) {
    const ssize_t n = ::read(fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
  }
}

int g_hold_fd = -1;  // the read end the child's thread blocks on

void* hold_until_released(void*) {
  wait_for_eof(g_hold_fd);
  ::_exit(0);  // not exit(): the forked copy must not run the test binary's atexit handlers
}

/// What real_system shows for `pid` once `done(info)` holds, or nothing when it never did
/// within 30 s. It spins on /proc (no sleeping): the state changes within microseconds of
/// the event the caller already waited for.
std::optional<ProcessInfo> await_state(pid_t pid, bool (*done)(const ProcessInfo&)) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto info = real_system().process_info(pid);
    if (info && done(*info)) return info;
    std::this_thread::yield();
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a leader that called pthread_exit while another thread runs is alive, not a zombie") {
  int hold[2];
  int ready[2];
  REQUIRE(::pipe2(hold, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  const std::int64_t written = real_system().now_ns();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(hold[1]);
    ::close(ready[0]);
    g_hold_fd = hold[0];
    pthread_t thread;
    if (::pthread_create(&thread, nullptr, hold_until_released, nullptr) != 0) ::_exit(1);
    write_all(ready[1], "ready");
    ::close(ready[1]);
    // The leader goes; the thread keeps the process alive. pthread_exit ends in this very
    // system call, but first unwinds the stack, and doctest's catch-all in the frames below
    // would swallow the unwinding (glibc then aborts the process).
    ::syscall(SYS_exit, 0);
  }
  ::close(hold[0]);
  ::close(ready[1]);
  CHECK(read_all(ready[0]) == "ready");  // EOF once the leader wrote and closed its end
  ::close(ready[0]);

  // The leader shows Z while its thread runs.
  auto leader = await_state(child, [](const ProcessInfo& info) { return info.state == 'Z'; });
  REQUIRE_MESSAGE(leader, "the leader never showed state Z");
  CHECK(leader->threads == 2);

  const std::vector<ProcessInfo> view = real_system().namespace_view();
  const ProcessFacts facts = gather_process(real_system(), child, &view);
  CHECK(facts.signal_errno == 0);
  CHECK(apnea_alive(facts));
  REQUIRE(facts.info);
  CHECK(facts.info->state == 'Z');
  CHECK(facts.info->threads == 2);
  CHECK(facts.info->tgid == child);
  // The real clock may have stepped since boot: judge on a healthy host, with real facts.
  const HostFacts host = healthy_host(real_system().boot_time_ns());
  const DeathJudgement judged =
      judge_death(facts, host, ::getuid(), written, default_reuse_tolerance);
  CHECK(judged.reason == DeathProof::none);
  CHECK(judged.proof == ProofClass::none);
  REQUIRE(judged.blocker);
  CHECK(judged.blocker->pid == child);
  // And with the real host's facts too: no proof either way.
  CHECK(judge_death(facts, gather_host(real_system(), "/tmp"), ::getuid(), written,
                    default_reuse_tolerance)
            .proof == ProofClass::none);

  // Released, its last thread exits: now it is a zombie (Threads: 1) until reaped.
  ::close(hold[1]);
  siginfo_t exited{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &exited, WEXITED | WNOWAIT) == 0);
  const ProcessFacts gone = gather_process(real_system(), child, &view);
  REQUIRE(gone.info);
  CHECK(gone.info->threads == 1);
  CHECK(judge_death(gone, host, ::getuid(), written, default_reuse_tolerance).reason ==
        DeathProof::zombie);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
}

TEST_CASE("an Apnea in another PID namespace keeps its in-namespace pid alive") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: creating a PID namespace needs root");
    return;
  }
  // The pid the contained process should get in its namespace: one no process has here.
  const pid_t target = dead_pid();
  REQUIRE(target > 1);
  int report[2];
  int hold[2];
  REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(hold, O_CLOEXEC) == 0);
  const std::int64_t written = real_system().now_ns();
  const pid_t outer = ::fork();
  REQUIRE(outer >= 0);
  if (outer == 0) {
    ::close(report[0]);
    ::close(hold[1]);
    if (::unshare(CLONE_NEWPID) != 0) {
      write_all(report[1], std::string("unshare: ") + std::strerror(errno));
      ::_exit(1);
    }
    const pid_t init = ::fork();  // pid 1 of the new namespace
    if (init < 0) ::_exit(1);
    if (init == 0) {
      // The next pid in this namespace is `target` (ns_last_pid names the last one used).
      const int fd = ::open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        write_all(fd, std::to_string(target - 1));
        ::close(fd);
      }
      const pid_t apnea = ::fork();
      if (apnea < 0) ::_exit(1);
      if (apnea == 0) {
        // The contained Apnea: it would write getpid() into its owner record.
        write_all(report[1], std::to_string(::getpid()));
        ::close(report[1]);
        wait_for_eof(hold[0]);
        ::_exit(0);
      }
      ::close(report[1]);
      int status = 0;
      ::waitpid(apnea, &status, 0);
      ::_exit(0);
    }
    ::close(report[1]);
    int status = 0;
    ::waitpid(init, &status, 0);
    ::_exit(0);
  }
  ::close(report[1]);
  ::close(hold[0]);
  const std::string said = read_all(report[0]);  // EOF once every writer is done with it
  ::close(report[0]);

  auto finish = [&] {
    ::close(hold[1]);
    int status = 0;
    ::waitpid(outer, &status, 0);
  };
  if (said.empty() || said.starts_with("unshare")) {
    MESSAGE("skipped: cannot create a PID namespace (" << (said.empty() ? "no answer" : said) << ")");
    finish();
    return;
  }
  const std::int64_t inner = std::stoll(said);
  CAPTURE(inner);
  if (real_system().signal_probe(inner) != ESRCH) {
    MESSAGE("skipped: pid " << inner << " is taken in this namespace too (ns_last_pid not honoured?)");
    finish();
    return;
  }

  const HostFacts host = healthy_host(real_system().boot_time_ns());
  // Our namespace alone says it is dead: without the view that is not certain.
  const ProcessFacts blind = gather_process(real_system(), double(inner), nullptr);
  CHECK(blind.signal_errno == ESRCH);
  CHECK_FALSE(apnea_alive(blind));
  const DeathJudgement guess = judge_death(blind, host, ::getuid(), written, default_reuse_tolerance);
  CHECK(guess.reason == DeathProof::pid_dead);
  CHECK(guess.proof == ProofClass::evidence);
  CHECK(guess.uses_visibility);

  // The namespace view finds the carrier, and it blocks the proof.
  const std::vector<ProcessInfo> view = real_system().namespace_view();
  const ProcessFacts facts = gather_process(real_system(), double(inner), &view);
  CHECK(facts.namespace_view_read);
  REQUIRE(facts.ns_carriers.size() == 1);
  const ProcessInfo& carrier = facts.ns_carriers.front();
  REQUIRE(carrier.nspid.size() == 2);
  CHECK(carrier.nspid.back() == inner);
  CHECK(carrier.nspid.front() == carrier.pid);
  CHECK(carrier.pid != inner);
  CHECK(carrier.uids_known);
  const DeathJudgement judged = judge_death(facts, host, ::getuid(), written, default_reuse_tolerance);
  CHECK(judged.reason != DeathProof::pid_dead);
  CHECK(judged.proof == ProofClass::none);
  REQUIRE(judged.blocker);
  CHECK(judged.blocker->pid == carrier.pid);
  finish();
}

TEST_CASE("a stopped user process that calls itself [kworker] is paused; kernel threads are not") {
  // argv[0] "[kworker/9:9]": the command line a kernel thread is shown with. cat echoes a
  // line once it runs as that image, so it is stopped only after the exec.
  SpawnedProcess disguised({"bash", "-c", "exec -a '[kworker/9:9]' cat"});
  disguised.write_line("ready");
  REQUIRE(disguised.read_line(SpawnedProcess::Stream::out, std::chrono::seconds(30)) == "ready");
  disguised.signal(SIGSTOP);
  siginfo_t stopped{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(disguised.pid()), &stopped, WSTOPPED | WNOWAIT) == 0);

  const auto paused = real_system().paused_processes();
  REQUIRE(paused);
  bool found = false;
  for (const ProcessInfo& process : *paused) {
    if (process.pid == disguised.pid()) {
      found = true;
      CHECK(process.command.starts_with("[kworker/9:9]"));
      CHECK(process.state == 'T');
    }
    // No kernel thread (pid 2, kthreadd, and its children) is ever listed.
    CHECK(process.pid != 2);
    std::ifstream status("/proc/" + std::to_string(process.pid) + "/status");
    std::stringstream text;
    text << status.rdbuf();
    CHECK(text.str().find("Kthread:\t1") == std::string::npos);
  }
  CHECK_MESSAGE(found, "a stopped user process named like a kernel thread was left out");
  disguised.signal(SIGKILL);
  REQUIRE(disguised.wait(std::chrono::seconds(30)).has_value());
}
