// start_elsewhere: a survey worker starts on another CPU than its starter's, then may run
// wherever the starter may.
#include "detail/spread.h"

#include <doctest/doctest.h>
#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <thread>

using namespace apnea_locks::detail;

namespace {

cpu_set_t affinity_of(pthread_t thread) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK(::pthread_getaffinity_np(thread, sizeof set, &set) == 0);  // CHECK: also on other threads
  return set;
}

bool same(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b); }

/// Runs `test` on a thread of its own allowed only `cpus` (so the test process's own
/// affinity is left alone).
template <typename Test>
void on_cpus(const cpu_set_t& cpus, Test test) {
  std::thread runner([&] {
    const bool set = ::pthread_setaffinity_np(::pthread_self(), sizeof cpus, &cpus) == 0;
    CHECK(set);
    if (set) test();
  });
  runner.join();
}

/// What a thread started by start_elsewhere saw: where it was kept off, where it first ran,
/// and the affinity mask its body ran with.
struct Observed {
  bool ran = false;
  int avoided_cpu = -1;
  int first_cpu = -1;
  cpu_set_t body_mask{};
};

/// start_elsewhere from the calling thread, with a body that records its own mask; joined.
Observed start_and_observe() {
  Observed seen;
  StartedElsewhere started = start_elsewhere([&] {
    seen.body_mask = affinity_of(::pthread_self());
    seen.ran = true;
  });
  started.thread.join();
  seen.avoided_cpu = started.avoided_cpu;
  seen.first_cpu = started.first_cpu->load();
  return seen;
}

}  // namespace

TEST_CASE("start_elsewhere: the body runs, with the starter's whole affinity mask") {
  const cpu_set_t starter = affinity_of(::pthread_self());
  const Observed seen = start_and_observe();
  CHECK(seen.ran);
  CHECK(same(seen.body_mask, starter));  // kept off one CPU only until it started
}

TEST_CASE("start_elsewhere: with two CPUs or more, the first instruction is not on the starter's CPU") {
  const cpu_set_t all = affinity_of(::pthread_self());
  if (CPU_COUNT(&all) < 2) {
    MESSAGE("one CPU allowed here: nothing to steer");
    return;
  }
  // The starter allowed each CPU with one other in turn: whichever it is on when it starts
  // the thread, the thread is held until its mask excludes that CPU, so where it first runs
  // is the other one, whatever the timing.
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &all)) continue;
    cpu_set_t pair;  // `cpu` and one other: wherever the starter is, the worker has one place to go
    CPU_ZERO(&pair);
    CPU_SET(cpu, &pair);
    int other = -1;
    for (int c = 0; c < CPU_SETSIZE && other < 0; ++c)
      if (c != cpu && CPU_ISSET(c, &all)) other = c;
    CPU_SET(other, &pair);
    on_cpus(pair, [&] {
      const Observed seen = start_and_observe();
      CAPTURE(cpu);
      CAPTURE(other);
      CHECK(seen.avoided_cpu >= 0);
      CHECK(seen.first_cpu >= 0);
      CHECK(seen.first_cpu != seen.avoided_cpu);
      CHECK(CPU_ISSET(seen.first_cpu, &pair));
      CHECK(same(seen.body_mask, pair));
    });
  }
}

TEST_CASE("start_elsewhere: with one CPU allowed, the thread starts there and nothing is steered") {
  const cpu_set_t all = affinity_of(::pthread_self());
  int only = -1;
  for (int c = 0; c < CPU_SETSIZE && only < 0; ++c)
    if (CPU_ISSET(c, &all)) only = c;
  REQUIRE(only >= 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(only, &one);
  on_cpus(one, [&] {
    const Observed seen = start_and_observe();
    CHECK(seen.avoided_cpu == -1);
    CHECK(seen.first_cpu == only);
    CHECK(same(seen.body_mask, one));
  });
}
