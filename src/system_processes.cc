// The kernel's Processes (system.h): kill(pid, 0), and /proc read through detail/procfs.h.
#include <signal.h>

#include <cerrno>
#include <climits>

#include "detail/procfs.h"
#include "detail/real_system.h"

namespace apnea_locks::detail {

int RealSystem::signal_probe(std::int64_t pid) {
  if (pid <= 0 || pid > INT_MAX) return EINVAL;
  if (::kill(static_cast<pid_t>(pid), 0) == 0) return 0;
  return errno;
}

std::optional<ProcessInfo> RealSystem::process_info(std::int64_t pid) {
  return read_process(default_proc_root, pid, boot_time_ns());
}

std::int64_t RealSystem::boot_time_ns() {
  static const std::int64_t value = read_boot_time_ns(default_proc_root);
  return value;
}

std::vector<ProcessInfo> RealSystem::namespace_view() {
  return read_namespace_view(default_proc_root, boot_time_ns());
}

std::optional<std::vector<ProcessInfo>> RealSystem::paused_processes() {
  return read_paused_processes(default_proc_root, boot_time_ns());
}

std::optional<std::string> RealSystem::file_server_reaching(const std::string& area) {
  return read_file_server_reaching(default_proc_root, area);
}

std::optional<std::vector<RuntimeProcess>> RealSystem::runtime_processes(std::uint32_t uid) {
  return read_runtime_processes(default_proc_root, uid);
}

std::optional<std::string> RealSystem::runtime_sign(std::int64_t pid) {
  return read_runtime_sign(default_proc_root, pid);
}

}  // namespace apnea_locks::detail
