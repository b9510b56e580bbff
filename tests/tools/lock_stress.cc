// lock_stress: acquire/release cycles of one lock through the core, for the multi-process
// and interop tests and the benchmarks.
//
//   lock_stress stress LOCK_DIR ROOT COUNTER N   N cycles, each a slow non-atomic
//                                                read-modify-write of COUNTER under the lock;
//                                                prints {"event":"stress-done",...}
//   lock_stress cycles LOCK_DIR ROOT N           N uncontended cycles; microseconds each
//
// Prints one JSON object per line; exit 0 on success, 3 on an unexpected lock error
// (including any `malformed`, which the core must never report under contention).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>

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
  std::fputs("usage: lock_stress stress LOCK_DIR ROOT COUNTER N | cycles LOCK_DIR ROOT N\n", stderr);
  return 2;
}

void print_error(const LockError& error) {
  fmt::print("{{\"error\":\"{}\",\"reason\":\"{}\",\"message\":\"{}\"}}\n",
             error.kind == LockError::Kind::operation_locked ? "OperationLocked" : "ConfigError",
             reason_name(error.reason), error.message);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return usage();
  const std::string command = argv[1];
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
