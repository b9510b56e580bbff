// for_each_index: each piece of work once, on the caller and up to jobs - 1 more threads.
#include "detail/parallel.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using apnea_locks::detail::for_each_index;
using apnea_locks::detail::pieces_per_thread;

TEST_CASE("every index is worked on exactly once, whatever the count and the jobs") {
  for (unsigned jobs : {0U, 1U, 2U, 8U}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, pieces_per_thread - 1, pieces_per_thread,
                              pieces_per_thread + 1, std::size_t{1000}}) {
      CAPTURE(jobs);
      CAPTURE(count);
      std::vector<std::atomic<int>> calls(count);
      for_each_index(count, jobs, [&](std::size_t i) { ++calls[i]; });
      for (std::size_t i = 0; i < count; ++i) CHECK(calls[i].load() == 1);
    }
  }
}

TEST_CASE("one job, or fewer pieces than a thread is worth, runs on the calling thread alone") {
  const auto threads_used = [](std::size_t count, unsigned jobs) {
    std::mutex mutex;
    std::set<std::thread::id> ids;
    for_each_index(count, jobs, [&](std::size_t) {
      std::lock_guard lock(mutex);
      ids.insert(std::this_thread::get_id());
    });
    return ids;
  };
  CHECK(threads_used(1000, 1) == std::set{std::this_thread::get_id()});
  CHECK(threads_used(pieces_per_thread, 8) == std::set{std::this_thread::get_id()});
}

TEST_CASE("with two jobs the work runs on two threads at once") {
  // The first piece waits until a piece has started on another thread: with one thread
  // only, it would wait until the timeout, and the check fails.
  std::mutex mutex;
  std::condition_variable other_started;
  bool seen_other = false;
  bool waited_ok = false;
  const std::thread::id caller = std::this_thread::get_id();
  for_each_index(2 * pieces_per_thread, 2, [&](std::size_t i) {
    std::unique_lock lock(mutex);
    if (std::this_thread::get_id() != caller) {
      seen_other = true;
      other_started.notify_all();
    }
    if (i == 0) waited_ok = other_started.wait_for(lock, std::chrono::seconds(30), [&] { return seen_other; });
  });
  CHECK(waited_ok);
}

TEST_CASE("a piece that throws: no piece is taken after it, and its exception comes back once all have stopped") {
  for (unsigned jobs : {1U, 2U, 8U}) {
    CAPTURE(jobs);
    std::atomic<int> running{0};
    std::atomic<int> running_at_return{-1};
    std::atomic<bool> thrown{false};
    std::atomic<int> taken_after{0};
    CHECK_THROWS_WITH_AS(
        for_each_index(1000, jobs,
                       [&](std::size_t i) {
                         ++running;
                         struct Done {
                           std::atomic<int>& running;
                           ~Done() { --running; }
                         } done{running};
                         if (thrown.load()) ++taken_after;
                         if (i == 100) {
                           thrown = true;
                           throw std::runtime_error("piece failed");
                         }
                       }),
        "piece failed", std::runtime_error);
    running_at_return = running.load();
    CHECK(running_at_return.load() == 0);
    // Other threads may be inside a piece taken before the throw; none takes a new one once
    // the failing thread has stopped the count. With one job none runs after it at all.
    if (jobs == 1) CHECK(taken_after.load() == 0);
  }
}

TEST_CASE("the lead runs once, on the calling thread, before that thread takes a piece") {
  for (unsigned jobs : {1U, 2U}) {
    CAPTURE(jobs);
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> leads{0};
    std::atomic<bool> caller_worked_before_lead{false};
    for_each_index(
        4 * pieces_per_thread, jobs,
        [&](std::size_t) {
          if (std::this_thread::get_id() == caller && leads.load() == 0) caller_worked_before_lead = true;
        },
        [&] {
          CHECK(std::this_thread::get_id() == caller);
          ++leads;
        });
    CHECK(leads.load() == 1);
    CHECK_FALSE(caller_worked_before_lead.load());
  }
}

TEST_CASE("a lead that throws stops the pieces and comes back") {
  std::atomic<int> calls{0};
  CHECK_THROWS_WITH_AS(for_each_index(
                           1000, 1, [&](std::size_t) { ++calls; },
                           [] { throw std::runtime_error("lead failed"); }),
                       "lead failed", std::runtime_error);
  CHECK(calls.load() == 0);  // one job: the caller takes no piece after its lead failed
}
