// `apnea-locks run` keeps its command (issue 29 item 2): the command runs in a session of its
// own led by run's shim, which kills the whole session when run dies; run releases only once
// every process of that session has exited; and it holds a BSD flock on the lock directory
// while the command runs.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apnea_locks/lock.h"
#include "apnea_locks/owner.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// `apnea-locks run --lock-dir <scratch>/locks --repo <scratch>/repo -- COMMAND`.
std::vector<std::string> run_args(const Scratch& scratch, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {locks_bin(), "run", "--lock-dir", scratch.locks, "--repo",
                                   scratch.repo, "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

std::string repository_lock(const Scratch& scratch) {
  return repository_target(real_system(), scratch.locks, scratch.repo)->lock_path;
}

/// The pid a command wrote into `path` (0 when there is none).
pid_t pid_in(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

/// What /proc/PID/stat says of a process: its state, session and start time (clock ticks).
struct ProcStat {
  char state = 0;
  long session = 0;
  unsigned long long start = 0;
};

std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    return std::nullopt;  // ESRCH: the process exited between the open and the read
  }
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  ProcStat stat;
  long ppid = 0, pgrp = 0;
  fields >> stat.state >> ppid >> pgrp >> stat.session;
  std::string skip;
  for (int field = 7; field < 22; ++field) fields >> skip;  // tty_nr .. nice, itrealvalue
  fields >> stat.start;
  if (!fields) return std::nullopt;
  return stat;
}

/// True when the process that had `pid` and started at `start` runs no more: gone, a zombie
/// (this container's init may not reap), or the pid reused by another process.
bool ended(pid_t pid, unsigned long long start) {
  const auto stat = proc_stat(pid);
  return !stat || stat->state == 'Z' || stat->state == 'X' || stat->start != start;
}

/// Polls until `pid` (started at `start`) has ended or `timeout` passes: the kill is
/// asynchronous and the processes are not this test's children, so they cannot be waited for.
bool ends_within(pid_t pid, unsigned long long start, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ended(pid, start)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// A lock held by `run` names run's pid.
bool names(const std::string& lock, pid_t pid) {
  OwnerRead read = read_owner(real_system(), lock, ::getuid());
  return read.owner && read.owner->pid == double(pid);
}

/// Whether `pid` has an open descriptor on `path`.
bool has_descriptor_on(long pid, const std::string& path) {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& entry : std::filesystem::directory_iterator(fds)) {
    std::error_code ignored;
    if (std::filesystem::read_symlink(entry.path(), ignored).string() == path) return true;
  }
  return false;
}

/// Whether some process holds a flock on the directory `path` (an exclusive one is refused).
bool flocked(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  REQUIRE(fd >= 0);
  errno = 0;
  const bool refused = ::flock(fd, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK;
  ::close(fd);
  return refused;
}

}  // namespace

TEST_CASE("kill -9 of run: nothing of its command's session runs on unlocked") {
  Scratch scratch;
  const std::string lock = repository_lock(scratch);
  const std::string gpid = scratch.root + "/gpid", cpid = scratch.root + "/cpid",
                    opid = scratch.root + "/opid";
  // The command, a background grandchild in its process group, and one that moved to a
  // process group of its own (still in the session): a group kill alone would miss it.
  const std::string script =
      "sleep 1000 & echo $! >\"$0\"; "
      "perl -e 'setpgrp(0, 0); exec \"sleep\", \"1000\"' & echo $! >\"$1\"; "
      "echo $$ >\"$2\"; echo ready; exec sleep 1000";
  SpawnedProcess run(run_args(scratch, {"sh", "-c", script, gpid, opid, cpid}));
  REQUIRE(run.read_line(Stream::out, 30s) == "ready");
  std::vector<std::pair<pid_t, unsigned long long>> command;
  for (const auto& file : {cpid, gpid, opid}) {
    const pid_t pid = pid_in(file);
    REQUIRE(pid > 0);
    const auto stat = proc_stat(pid);
    REQUIRE(stat);
    CHECK(stat->session != ::getsid(0));  // a session of its own, not run's
    command.emplace_back(pid, stat->start);
  }
  REQUIRE(names(lock, run.pid()));

  run.signal(SIGKILL);
  REQUIRE(run.wait(30s) == 128 + SIGKILL);
  for (const auto& [pid, start] : command) {
    CAPTURE(pid);
    CHECK(ends_within(pid, start, 30s));
    if (!ended(pid, start)) ::kill(pid, SIGKILL);  // a failure leaves nothing behind
  }
  // The lock stays behind, naming the dead run: stale, as docs/run.md says.
  CHECK(names(lock, run.pid()));
}

TEST_CASE("run releases only when every process of its command's session has exited") {
  Scratch scratch;
  const std::string lock = repository_lock(scratch);
  const std::string gpid = scratch.root + "/gpid", cpid = scratch.root + "/cpid";
  // The command ends at once; its background grandchild lives on in the session.
  const std::string script = "sleep 1000 & echo $! >\"$0\"; echo $$ >\"$1\"; echo ready";
  SpawnedProcess run(run_args(scratch, {"sh", "-c", script, gpid, cpid}));
  REQUIRE(run.read_line(Stream::out, 30s) == "ready");
  const pid_t command = pid_in(cpid), grandchild = pid_in(gpid);
  REQUIRE(command > 0);
  REQUIRE(grandchild > 0);
  const auto command_stat = proc_stat(command);
  // The command may have ended already: then it is gone or a zombie.
  if (command_stat) REQUIRE(ends_within(command, command_stat->start, 30s));
  const auto grandchild_stat = proc_stat(grandchild);
  REQUIRE(grandchild_stat);
  REQUIRE_FALSE(ended(grandchild, grandchild_stat->start));

  // The command has ended, the grandchild runs: run still holds the lock. (A broken run
  // releases within milliseconds of the command's end; half a second is ample to see it.)
  CHECK_FALSE(run.wait(500ms).has_value());
  CHECK(exists(lock));
  CHECK(names(lock, run.pid()));

  ::kill(grandchild, SIGKILL);
  CHECK(run.wait(30s) == 0);  // the command's own status
  CHECK_FALSE(exists(lock));
}

TEST_CASE("run and the shim leading its command's session hold a BSD flock on the lock directory") {
  Scratch scratch;
  const std::string lock = repository_lock(scratch);
  const std::string cpid = scratch.root + "/cpid";
  SpawnedProcess run(run_args(scratch, {"sh", "-c", "echo $$ >\"$0\"; echo ready; exec cat", cpid}));
  REQUIRE(run.read_line(Stream::out, 30s) == "ready");
  CHECK(flocked(lock));

  // run and the shim (the session's leader: its session id is the shim's pid) have the
  // locked descriptor; the command does not (close-on-exec).
  const pid_t command = pid_in(cpid);
  REQUIRE(command > 0);
  const auto command_stat = proc_stat(command);
  REQUIRE(command_stat);
  CHECK(command_stat->session != ::getsid(0));
  CHECK(has_descriptor_on(run.pid(), lock));
  CHECK(has_descriptor_on(command_stat->session, lock));
  CHECK_FALSE(has_descriptor_on(command, lock));

  run.close_stdin();
  CHECK(run.wait(30s) == 0);
  CHECK_FALSE(exists(lock));
}

// The model's boundary-run-killed trail (docs/model/README.md), staged on real processes:
// the shim cannot run (stopped), run is SIGKILLed, so the record's pid is dead while the
// command still runs. No reclaim may take the lock then; once the shim runs again and has
// ended the session, a plain reclaim removes it (a certain proof).
TEST_CASE("kill -9 of run while its shim is stopped: reclaim refuses until the session has ended") {
  Scratch scratch;
  const std::string lock = repository_lock(scratch);
  const std::string cpid = scratch.root + "/cpid";
  SpawnedProcess run(run_args(scratch, {"sh", "-c", "echo $$ >\"$0\"; echo ready; exec sleep 1000", cpid}));
  REQUIRE(run.read_line(Stream::out, 30s) == "ready");
  const pid_t command = pid_in(cpid);
  REQUIRE(command > 0);
  const auto command_stat = proc_stat(command);
  REQUIRE(command_stat);
  const pid_t shim = static_cast<pid_t>(command_stat->session);
  const auto shim_stat = proc_stat(shim);
  REQUIRE(shim_stat);
  REQUIRE(::kill(shim, SIGSTOP) == 0);
  // SIGSTOP takes effect asynchronously: wait until /proc shows the shim stopped.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (proc_stat(shim) && proc_stat(shim)->state != 'T' && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(proc_stat(shim)->state == 'T');

  run.signal(SIGKILL);
  REQUIRE(run.wait(30s) == 128 + SIGKILL);
  REQUIRE(names(lock, run.pid()));
  REQUIRE_FALSE(ended(command, command_stat->start));  // the command runs on, unlocked but for the flock

  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--yes"}, std::vector<std::string>{"--yes", "--force"}}) {
    std::vector<std::string> argv{locks_bin(), "reclaim", "--lock-dir", scratch.locks};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(lock);
    const Finished refused = finish(argv, {}, 60s);
    CAPTURE(refused.out);
    CAPTURE(refused.err);
    CHECK(refused.status != 0);
    CHECK(refused.out.find("flock") != std::string::npos);
    CHECK(exists(lock));
    CHECK(names(lock, run.pid()));
  }

  REQUIRE(::kill(shim, SIGCONT) == 0);  // the shim takes its parent-death signal: ends the session
  CHECK(ends_within(command, command_stat->start, 30s));
  CHECK(ends_within(shim, shim_stat->start, 30s));
  if (!ended(command, command_stat->start)) ::kill(command, SIGKILL);  // a failure leaves nothing behind
  const Finished removed = finish({locks_bin(), "reclaim", "--lock-dir", scratch.locks, "--yes", lock}, {}, 60s);
  CAPTURE(removed.out);
  CHECK(removed.status == 0);
  CHECK_FALSE(exists(lock));
}
