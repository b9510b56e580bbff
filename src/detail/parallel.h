// Internals of the survey: running independent pieces of work on several threads. Not part
// of the library's interface (not installed); for src/ and the tests.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace apnea_locks::detail {

/// The fewest pieces of work worth a thread of their own.
inline constexpr std::size_t pieces_per_thread = 64;

/// Calls `work(i)` once for each i in [0, count), on the calling thread and up to `jobs - 1`
/// more (one per pieces_per_thread pieces), and returns when every call has returned. Each
/// thread takes the next index not yet taken, so `work` must be safe to call concurrently
/// for different indexes. The calling thread first calls `lead()` (while the others start
/// on the pieces), then takes pieces too. When a call throws, no further index is taken
/// and the first exception is rethrown once every thread has stopped.
template <typename Work, typename Lead>
void for_each_index(std::size_t count, unsigned jobs, Work&& work, Lead&& lead) {
  std::atomic<std::size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto stop = [&] {
    std::lock_guard lock(error_mutex);
    if (!error) error = std::current_exception();
    next = count;
  };
  auto run = [&] {
    for (std::size_t i = next++; i < count; i = next++) {
      try {
        work(i);
      } catch (...) {
        stop();
      }
    }
  };
  const std::size_t threads =
      std::min<std::size_t>(std::max(jobs, 1U), (count + pieces_per_thread - 1) / pieces_per_thread);
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(threads > 0 ? threads - 1 : 0);
    for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(run);
    try {
      lead();
    } catch (...) {
      stop();
    }
    run();
  }  // joins the helpers
  if (error) std::rethrow_exception(error);
}

/// for_each_index with nothing to lead.
template <typename Work>
void for_each_index(std::size_t count, unsigned jobs, Work&& work) {
  for_each_index(count, jobs, std::forward<Work>(work), [] {});
}

}  // namespace apnea_locks::detail
