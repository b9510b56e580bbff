// The kernel's ThisProcess, Accounts and SystemLog (system.h): this process's ids, clock,
// environment and terminal, the accounts it may act as, and the log it records removals in.
#include <grp.h>
#include <pwd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/types.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <ctime>
#include <thread>
#include <vector>

#include "apnea_locks/lock_area.h"
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

namespace {

/// How long a log socket may keep the record waiting (a stopped or flooded daemon): then
/// the next sink, and at last standard error, take it. The removal is done already; the
/// command must not hang on its record.
constexpr int log_wait_ms = 1000;

/// Sends `datagram` to the unix socket at `path` (datagram, else stream as some syslog
/// daemons listen), never blocking longer than log_wait_ms; false when nothing listens
/// there, or it does not take the whole record in time.
bool send_to_socket(const char* path, const std::string& datagram) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
  for (int type : {SOCK_DGRAM, SOCK_STREAM}) {
    const int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return false;
    bool sent = false;
    // A unix socket connects at once or fails (EAGAIN: a full backlog): never in progress.
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
      // A stream socket takes the record with its NUL terminator, as syslog(3) sends it.
      const std::size_t size = datagram.size() + (type == SOCK_STREAM ? 1 : 0);
      for (int tries = 0; tries < 2 && !sent; ++tries) {
        ssize_t n;
        do n = ::send(fd, datagram.c_str(), size, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        sent = n == static_cast<ssize_t>(size);
        if (sent || n >= 0 || errno != EAGAIN) break;
        struct pollfd ready {fd, POLLOUT, 0};
        if (::poll(&ready, 1, log_wait_ms) <= 0) break;
      }
    }
    const int error = errno;
    ::close(fd);
    if (sent) return true;
    if (error != EPROTOTYPE) return false;
  }
  return false;
}

}  // namespace

AuditSink RealSystem::log_audit(const std::string& line) {
  constexpr int priority = LOG_AUTHPRIV | LOG_NOTICE;
  const long pid = static_cast<long>(::getpid());
  // As syslog(3) formats it: "<PRI>Mmm dd hh:mm:ss ident[pid]: message".
  char stamp[32] = "";
  const std::time_t now = std::time(nullptr);
  struct tm local {};
  if (::localtime_r(&now, &local) != nullptr) std::strftime(stamp, sizeof stamp, "%h %e %T ", &local);
  const std::string record = "<" + std::to_string(priority) + ">" + stamp + "apnea-locks[" +
                             std::to_string(pid) + "]: " + line;
  if (send_to_socket("/dev/log", record)) return AuditSink::syslog;
  const std::string fields = "MESSAGE=" + line + "\nSYSLOG_IDENTIFIER=apnea-locks\nSYSLOG_PID=" +
                             std::to_string(pid) + "\nSYSLOG_FACILITY=" + std::to_string(LOG_AUTHPRIV >> 3) +
                             "\nPRIORITY=" + std::to_string(LOG_NOTICE) + "\n";
  if (send_to_socket("/run/systemd/journal/socket", fields)) return AuditSink::journal;
  return AuditSink::none;
}

std::optional<std::uint32_t> RealSystem::login_uid() {
  std::FILE* file = std::fopen("/proc/self/loginuid", "re");
  if (file == nullptr) return std::nullopt;
  char text[16] = "";
  const std::size_t n = std::fread(text, 1, sizeof text - 1, file);
  std::fclose(file);
  return decimal_uid(std::string_view(text, n));  // unset: (uid_t)-1, which is no uid
}

}  // namespace apnea_locks::detail
