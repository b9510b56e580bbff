// The kernel's ThisProcess, Accounts and SystemLog (system.h): this process's ids, clock,
// environment and terminal, the accounts it may act as, and the log it records removals in.
#include <grp.h>
#include <pwd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/types.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

#include "detail/real_system.h"

namespace apnea_locks::detail {

std::int64_t RealSystem::now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void RealSystem::sleep(std::chrono::nanoseconds duration) { std::this_thread::sleep_for(duration); }

std::uint32_t RealSystem::uid() { return ::getuid(); }

std::uint32_t RealSystem::euid() { return ::geteuid(); }

std::int64_t RealSystem::pid() { return ::getpid(); }

std::optional<std::string> RealSystem::env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

void RealSystem::random_bytes(std::span<std::byte> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // the kernel's entropy source is gone: nothing safe to do
    }
    done += static_cast<std::size_t>(n);
  }
}

bool RealSystem::is_terminal(int fd) { return ::isatty(fd) == 1; }

std::optional<int> RealSystem::terminal_columns(int fd) {
  struct winsize size {};
  if (::ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return std::nullopt;
  return static_cast<int>(size.ws_col);
}

std::optional<std::string> RealSystem::passwd_home(std::uint32_t uid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr)
    return std::nullopt;
  return std::string(entry.pw_dir);
}

std::optional<Account> RealSystem::lookup_account(const std::string& name) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr)
    return std::nullopt;
  return Account{entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir};
}

std::optional<Account> RealSystem::lookup_uid(std::uint32_t uid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr)
    return std::nullopt;
  return Account{entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir};
}

SysResult<void> RealSystem::become(const Account& account) {
  if (::setgroups(0, nullptr) != 0) return fail_errno();
  if (::setgid(account.gid) != 0) return fail_errno();
  if (::setuid(account.uid) != 0) return fail_errno();
  // Check it stuck: a process that could regain root has not dropped anything.
  if (::getuid() != account.uid || ::geteuid() != account.uid || ::setuid(0) == 0)
    return fail(EPERM);
  return {};
}

void RealSystem::log_audit(const std::string& line) {
  static const bool opened = [] {
    ::openlog("apnea-locks", LOG_PID, LOG_AUTHPRIV);
    return true;
  }();
  (void)opened;
  ::syslog(LOG_AUTHPRIV | LOG_NOTICE, "%s", line.c_str());
}

}  // namespace apnea_locks::detail
