#include "detail/spread.h"

#include <utility>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace apnea_locks::detail {

StartedElsewhere start_elsewhere(std::function<void()> body) {
  StartedElsewhere started;
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool known = ::pthread_getaffinity_np(::pthread_self(), sizeof allowed, &allowed) == 0;
  const int here = ::sched_getcpu();
  if (known && here >= 0 && here < CPU_SETSIZE && CPU_ISSET(here, &allowed) && CPU_COUNT(&allowed) >= 2) {
    // The thread waits for `placed` before its first real step, so its mask is set while it
    // cannot run yet: where it first runs is never the caller's CPU.
    auto placed = std::make_shared<std::atomic<bool>>(false);
    started.thread = std::jthread([placed, allowed, first_cpu = started.first_cpu, body = std::move(body)] {
      placed->wait(false);
      first_cpu->store(::sched_getcpu());
      ::pthread_setaffinity_np(::pthread_self(), sizeof allowed, &allowed);  // the caller's, whole
      body();
    });
    cpu_set_t elsewhere = allowed;
    CPU_CLR(here, &elsewhere);
    if (::pthread_setaffinity_np(started.thread.native_handle(), sizeof elsewhere, &elsewhere) == 0)
      started.avoided_cpu = here;
    placed->store(true);
    placed->notify_one();
    return started;
  }
#endif
  started.thread = std::jthread([first_cpu = started.first_cpu, body = std::move(body)] {
#if defined(__linux__)
    first_cpu->store(::sched_getcpu());
#endif
    body();
  });
  return started;
}

}  // namespace apnea_locks::detail
