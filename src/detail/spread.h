// Internals of the parallel survey: starting a worker thread on another CPU than the one
// starting it. Not part of the library's interface (not installed); for src/ and the tests.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

namespace apnea_locks::detail {

/// A thread started by start_elsewhere, and the CPU it was kept off when it started.
struct StartedElsewhere {
  std::jthread thread;
  /// The CPU the starting thread was on, which the new thread's first instruction does not
  /// run on; -1 when nothing was steered (one CPU allowed, or a call failed).
  int avoided_cpu = -1;
  /// The CPU the thread's first instruction ran on, set before it takes back the caller's
  /// affinity mask and runs the body (-1 until then); for the tests.
  std::shared_ptr<std::atomic<int>> first_cpu = std::make_shared<std::atomic<int>>(-1);
};

/// Runs `body` on a new thread that starts on a CPU other than the calling thread's, then
/// may run anywhere the caller may.
///
/// Why: Linux places a new thread on its creator's CPU, or a CPU it thinks idlest, and on
/// a small machine (a 2-CPU VM) that is often the creator's own; the thread then shares one
/// CPU with the creator, the other idle, until the load balancer moves it (a tick or more:
/// up to 4 ms at HZ=250, a third of a 1,000-entry survey). So the new thread is held at its
/// start, its affinity set to the caller's CPUs less the caller's current one (the kernel
/// moves it there), then released, and its first act is to take back the caller's whole
/// affinity mask: only where it starts is chosen, never where it may run later. With a
/// single CPU allowed, or where the calls fail, the thread simply starts where the kernel
/// puts it.
StartedElsewhere start_elsewhere(std::function<void()> body);

}  // namespace apnea_locks::detail
