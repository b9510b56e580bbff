// lock_stress: acquire/release cycles of one lock through the core, for the multi-process
// and interop tests and the benchmarks.
//
//   lock_stress stress LOCK_DIR ROOT COUNTER N   N cycles, each a slow non-atomic
//                                                read-modify-write of COUNTER under the lock;
//                                                prints {"event":"stress-done",...}
//   lock_stress cycles LOCK_DIR ROOT N           N uncontended cycles; microseconds each
//   lock_stress churn LOCK_DIR ROOTS_DIR NLOCKS SECONDS
//                                                acquire/release random locks of NLOCKS
//                                                repositories ROOTS_DIR/r<i> (created when
//                                                missing) for SECONDS; holds one at a time;
//                                                prints {"event":"churn-started"} and, at
//                                                the end, {"event":"churn-done",...}, then
//                                                waits for end of file on stdin
//   lock_stress d-state                          prints {"event":"d-state","pid":P}, then
//                                                waits in uninterruptible sleep (state D)
//                                                for a vfork child that pauses until killed
//   lock_stress crash-loop LOCK_DIR ROOT [ROOT2] acquire/release ROOT's (or ROOT2's) lock
//                                                forever, reclaiming a dead owner's lock at
//                                                once (grace 0, through reclaim_guarded);
//                                                meant to be SIGKILLed at a random moment.
//                                                Checks mutual exclusion with ROOT/holder;
//                                                prints {"event":"ready"} once started.
//
// Prints one JSON object per line; exit 0 on success, 3 on an unexpected lock error
// (including any `malformed`, which the core must never report under contention).
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "apnea_locks/lock.h"

using namespace apnea_locks;

namespace {

long read_counter(const std::string& path) {
  std::ifstream in(path);
  long value = 0;
  in >> value;
  return value;
}

void write_counter(const std::string& path, long value) {
  std::ofstream out(path, std::ios::trunc);
  out << value;
}

int usage() {
  std::fputs("usage: lock_stress stress LOCK_DIR ROOT COUNTER N | cycles LOCK_DIR ROOT N\n"
             "       | churn LOCK_DIR ROOTS_DIR NLOCKS SECONDS | crash-loop LOCK_DIR ROOT [ROOT2]\n",
             stderr);
  return 2;
}

void print_error(const LockError& error) {
  fmt::print("{{\"error\":\"{}\",\"reason\":\"{}\",\"message\":\"{}\"}}\n",
             error.kind == LockError::Kind::operation_locked ? "OperationLocked" : "ConfigError",
             reason_name(error.reason), error.message);
}

/// Process start time (clock ticks since boot, /proc/<pid>/stat field 22), or -1 when the
/// process does not exist or has exited (a zombie: `apnea-locks reclaim` may reclaim its
/// lock). With the pid it names one process (pids are reused, this pair is not).
long long start_time(long pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z' ||
      text[paren + 2] == 'X')
    return -1;
  std::size_t at = paren + 2;  // field 3 (state) starts here; skip to field 22
  for (int field = 3; field < 22 && at < text.size(); ++field) at = text.find(' ', at) + 1;
  if (at == 0 || at >= text.size()) return -1;
  return std::stoll(text.substr(at, text.find(' ', at) - at));
}

/// Replaces `path` with `text` atomically (temp file + rename).
void replace_file(const std::string& path, const std::string& text) {
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
  }
  std::rename(temp.c_str(), path.c_str());
}

/// `crash-loop`: see the header. Exit 3 on a lock error that must not happen (malformed,
/// ConfigError), 4 when the holder file shows another live holder while we hold the lock.
int crash_loop(const std::string& lock_dir, const std::vector<std::string>& roots) {
  System& system = real_system();
  std::vector<LockTarget> targets;
  for (const std::string& root : roots) {
    auto target = repository_target(system, lock_dir, root);
    if (!target) {
      print_error(target.error());
      return 3;
    }
    targets.push_back(*target);
  }
  AcquireOptions options = apnea_options(LockKind::repository);
  options.reclaim_grace = std::chrono::milliseconds(0);
  const long pid = ::getpid();
  const std::string me = fmt::format("{} {}", pid, start_time(pid));
  std::mt19937 random(static_cast<unsigned>(pid));
  fmt::print("{{\"event\":\"ready\",\"pid\":{}}}\n", pid);
  std::fflush(stdout);
  for (;;) {
    const std::size_t which = roots.size() > 1 && random() % 4 == 0 ? 1 : 0;
    auto held = acquire(system, targets[which], options);
    if (!held) {
      const LockError& error = held.error();
      if (error.is(LockedReason::live) || error.is(LockedReason::raced) ||
          error.is(LockedReason::stale)) {  // stale: a guard left by a killed reclaimer
        std::this_thread::sleep_for(std::chrono::microseconds(random() % 500));
        continue;
      }
      print_error(error);
      std::fflush(stdout);
      return 3;
    }
    // Mutual exclusion: the previous holder must have cleared the file or be dead.
    const std::string holder_file = roots[which] + "/holder";
    long other_pid = 0;
    long long other_start = 0;
    {
      std::ifstream in(holder_file);
      in >> other_pid >> other_start;
    }
    if (other_pid > 0 && start_time(other_pid) == other_start) {
      fmt::print("{{\"event\":\"violation\",\"lock\":\"{}\",\"other\":{}}}\n", held->lock_path(),
                 other_pid);
      std::fflush(stdout);
      return 4;
    }
    replace_file(holder_file, me);
    if (random() % 2) std::this_thread::sleep_for(std::chrono::microseconds(random() % 300));
    replace_file(holder_file, "0 0");
    auto released = held->release();
    if (!released || !*released) {
      fmt::print("{{\"event\":\"violation\",\"reason\":\"release lost the lock\"}}\n");
      std::fflush(stdout);
      return 4;
    }
  }
}

/// `churn`: see the header. Exit 3 on any lock error other than live/raced.
int churn(const std::string& lock_dir, const std::string& roots_dir, int count, double seconds) {
  System& system = real_system();
  std::vector<LockTarget> targets;
  for (int i = 0; i < count; ++i) {
    const std::string root = fmt::format("{}/r{}", roots_dir, i);
    ::mkdir(root.c_str(), 0700);  // EEXIST when another churner made it first
    auto target = repository_target(system, lock_dir, root);
    if (!target) {
      print_error(target.error());
      return 3;
    }
    targets.push_back(*target);
  }
  const AcquireOptions options = apnea_options(LockKind::repository);
  std::mt19937 random(static_cast<unsigned>(::getpid()));
  fmt::print("{{\"event\":\"churn-started\",\"pid\":{}}}\n", ::getpid());
  std::fflush(stdout);
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(seconds));
  long cycles = 0, contended = 0;
  while (std::chrono::steady_clock::now() < end) {
    auto held = acquire(system, targets[random() % targets.size()], options);
    if (!held) {
      const LockError& error = held.error();
      if (error.is(LockedReason::live) || error.is(LockedReason::raced)) {
        ++contended;
        continue;
      }
      print_error(error);
      fmt::print("{{\"event\":\"churn-failed\",\"cycles\":{},\"contended\":{}}}\n", cycles, contended);
      return 3;
    }
    if (random() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(random() % 1000));
    auto released = held->release();
    if (!released || !*released) {
      fmt::print("{{\"event\":\"churn-failed\",\"reason\":\"release lost the lock\"}}\n");
      return 3;
    }
    ++cycles;
  }
  fmt::print("{{\"event\":\"churn-done\",\"cycles\":{},\"contended\":{}}}\n", cycles, contended);
  std::fflush(stdout);
  // Stay alive, holding nothing, until stdin closes: an observer never sees a churner's
  // lock outlive it.
  while (std::fgetc(stdin) != EOF) {
  }
  return 0;
}

/// A process in uninterruptible sleep for the live-owner matrix: a vfork parent waits in
/// state D until its child execs or exits; this child pauses until it is killed.
int d_state() {
  std::printf("{\"event\":\"d-state\",\"pid\":%d}\n", static_cast<int>(::getpid()));
  std::fflush(stdout);
  if (::vfork() == 0) {
    for (;;) ::pause();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "d-state") return d_state();
  if (argc < 4) return usage();
  const std::string command = argv[1];
  if (command == "crash-loop")
    return crash_loop(argv[2], std::vector<std::string>(argv + 3, argv + std::min(argc, 5)));
  if (command == "churn") {
    if (argc < 6) return usage();
    return churn(argv[2], argv[3], std::stoi(argv[4]), std::stod(argv[5]));
  }
  if (argc < 5) return usage();
  const std::string lock_dir = argv[2];
  System& system = real_system();
  auto target = repository_target(system, lock_dir, argv[3]);
  if (!target) {
    print_error(target.error());
    return 3;
  }
  const AcquireOptions options = apnea_options(LockKind::repository);

  if (command == "cycles") {
    const long rounds = std::stol(argv[4]);
    const auto started = std::chrono::steady_clock::now();
    for (long i = 0; i < rounds; ++i) {
      auto held = acquire(system, *target, options);
      if (!held) {
        print_error(held.error());
        return 3;
      }
      auto released = held->release();
      if (!released || !*released) return 3;
    }
    const double us = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - started).count() / double(rounds);
    fmt::print("{{\"event\":\"cycles-done\",\"cycles\":{},\"us_per_cycle\":{:.1f}}}\n", rounds, us);
    return 0;
  }

  if (command != "stress" || argc < 6) return usage();
  const std::string counter = argv[4];
  const long rounds = std::stol(argv[5]);
  std::mt19937 random(static_cast<unsigned>(::getpid()));
  long acquired = 0, contended = 0, malformed = 0;
  while (acquired < rounds) {
    auto held = acquire(system, *target, options);
    if (!held) {
      const LockError& error = held.error();
      if (error.is(LockedReason::live) || error.is(LockedReason::raced)) {
        ++contended;
        std::this_thread::sleep_for(std::chrono::microseconds(random() % 2000));
        continue;
      }
      if (error.is(LockedReason::malformed)) ++malformed;
      print_error(error);
      fmt::print("{{\"event\":\"stress-failed\",\"acquired\":{},\"contended\":{},\"malformed\":{}}}\n",
                 acquired, contended, malformed);
      return 3;
    }
    const long before = read_counter(counter);
    if (random() % 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    write_counter(counter, before + 1);
    auto released = held->release();
    if (!released || !*released) {
      fmt::print("{{\"event\":\"stress-failed\",\"reason\":\"release lost the lock\"}}\n");
      return 3;
    }
    ++acquired;
  }
  fmt::print("{{\"event\":\"stress-done\",\"acquired\":{},\"contended\":{},\"spurious_malformed\":{}}}\n",
             acquired, contended, malformed);
  return 0;
}
