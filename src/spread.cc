#include "detail/spread.h"

#include <pthread.h>
#include <sched.h>

#include <optional>
#include <utility>

namespace apnea_locks::detail {

StartedElsewhere start_elsewhere(std::function<void()> body) {
  StartedElsewhere started;
  // The caller's mask, when there is another CPU in it to start on; else the thread starts
  // where the kernel puts it.
  std::optional<cpu_set_t> allowed{std::in_place};
  const int here = ::sched_getcpu();
  if (::pthread_getaffinity_np(::pthread_self(), sizeof *allowed, &*allowed) != 0 || here < 0 ||
      here >= CPU_SETSIZE || !CPU_ISSET(here, &*allowed) || CPU_COUNT(&*allowed) < 2)
    allowed.reset();
  // The thread waits for `placed` before its first step, so its mask is set while it cannot
  // run yet: where it first runs is never the caller's CPU.
  auto placed = std::make_shared<std::atomic<bool>>(false);
  started.thread = std::jthread([placed, allowed, first_cpu = started.first_cpu, body = std::move(body)] {
    placed->wait(false);
    first_cpu->store(::sched_getcpu());
    if (allowed) ::pthread_setaffinity_np(::pthread_self(), sizeof *allowed, &*allowed);  // whole again
    body();
  });
  if (allowed) {
    cpu_set_t elsewhere = *allowed;
    CPU_CLR(here, &elsewhere);
    if (::pthread_setaffinity_np(started.thread.native_handle(), sizeof elsewhere, &elsewhere) == 0)
      started.avoided_cpu = here;
  }
  placed->store(true);
  placed->notify_one();
  return started;
}

}  // namespace apnea_locks::detail
