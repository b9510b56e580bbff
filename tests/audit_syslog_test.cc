// The audit trail end to end: the real binary's syslog(3) records, read back from a unix
// datagram socket this test provides. glibc's syslog(3) always writes to /dev/log, so each
// command runs in a private mount namespace (unshare -m) where an overlay on /dev holds a
// /dev/log symlink to the test's socket; the machine's /dev is untouched. That needs root
// (and overlayfs): otherwise the test reports SKIP (exit 77) with the reason. The records'
// content in every case is checked through the System seam by audit_test.cc.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "apnea_locks/audit.h"
#include "area_builder.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// Shell words that run `command` in a private mount namespace whose /dev is an overlay (in
/// `work_dir`) on the real one and whose /run is an empty tmpfs: /dev/log a symlink to
/// `socket` (none when empty), /run/systemd/journal/socket one to `journal` (none when empty).
std::string with_logs(const std::string& work_dir, const std::string& socket, const std::string& journal,
                      const std::string& command) {
  const std::string upper = work_dir + "/upper";
  const std::string work = work_dir + "/work";
  std::string setup = "mount -t overlay overlay -o lowerdir=/dev,upperdir=" + upper + ",workdir=" + work +
                      " /dev && rm -f /dev/log && mount -t tmpfs tmpfs /run";
  if (!socket.empty()) setup += " && ln -sf " + socket + " /dev/log";
  if (!journal.empty()) setup += " && mkdir -p /run/systemd/journal && ln -sf " + journal + " /run/systemd/journal/socket";
  return "mkdir -p " + shell_quote(upper) + " " + shell_quote(work) +
         " && exec unshare -m --propagation private sh -c " + shell_quote(setup + " && exec " + command);
}

std::string with_dev_log(const std::string& work_dir, const std::string& socket, const std::string& command) {
  return with_logs(work_dir, socket, "", command);
}

/// A unix datagram socket bound in a temporary directory: where /dev/log points.
struct SyslogSocket {
  TempDir dir;
  std::string path = dir / "log";
  int fd = -1;
  SyslogSocket() {
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof address.sun_path);
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    ::chmod(path.c_str(), 0666);
  }
  ~SyslogSocket() { ::close(fd); }
  /// The datagrams already sent (the command has exited: nothing more will come).
  std::vector<std::string> received() {
    std::vector<std::string> out;
    char buffer[65536];
    for (;;) {
      struct pollfd ready {fd, POLLIN, 0};
      if (::poll(&ready, 1, 0) <= 0) break;
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      out.emplace_back(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }
  /// The shell words that run `command` with /dev/log pointing here.
  std::string wrap(const std::string& command) const { return with_dev_log(dir.path(), path, command); }
};

CommandResult run_logged(SyslogSocket& log, const std::vector<std::string>& args) {
  std::string command = shell_quote(test_env("APNEA_LOCKS_BIN"));
  for (const std::string& arg : args) command += " " + shell_quote(arg);
  return run_command({"sh", "-c", log.wrap(command) + " </dev/null 2>&1"});
}

/// "<PRI>" of LOG_AUTHPRIV | LOG_NOTICE: facility 10, severity 5.
constexpr const char* authpriv_notice = "<85>";

}  // namespace

TEST_CASE("reclaim's removal reaches syslog: authpriv.notice, tagged, one escaped line") {
  SyslogSocket log;
  TempDir temp;
  const std::string area = temp / "operation-locks";
  make_dir(area);
  const std::string record = owner_json(dead_pid());
  const std::string lock = make_entry(area, fake_lock_name("crashed"), record);

  CommandResult reclaimed = run_logged(log, {"reclaim", "--yes", "--lock-dir", area, lock});
  CHECK_MESSAGE(reclaimed.status == 0, reclaimed.out);
  const std::vector<std::string> records = log.received();
  REQUIRE_MESSAGE(records.size() == 1, reclaimed.out);
  const std::string& datagram = records.front();
  MESSAGE("syslog datagram: ", datagram);
  CHECK(datagram.starts_with(authpriv_notice));
  const std::size_t tag = datagram.find(" apnea-locks[");
  REQUIRE(tag != std::string::npos);
  const std::size_t message = datagram.find("]: ", tag);
  REQUIRE(message != std::string::npos);
  const std::string line = datagram.substr(message + 3);
  CHECK(line.starts_with("reclaim removed lock path=\"" + lock + "\" tombstone=\"" + lock + ".tombstone."));
  CHECK(line.find(" owner=\"" + escape_bytes(record) + "\" proof=\"pid-dead (certain)\"") != std::string::npos);
  CHECK(line.find(" uid=" + std::to_string(::getuid()) + " ") != std::string::npos);
  CHECK(line.find(" for_uid=" + std::to_string(::getuid())) != std::string::npos);
  CHECK(line.find('\n') == std::string::npos);

  // A dry run and a refusal write nothing.
  const std::string live = make_entry(area, fake_lock_name("live"), owner_json(::getpid()));
  const std::string other = make_entry(area, fake_lock_name("dead2"), owner_json(dead_pid()));
  CommandResult dry = run_logged(log, {"reclaim", "--dry-run", "--lock-dir", area, other});
  CHECK_MESSAGE(dry.status == 0, dry.out);
  CommandResult refused = run_logged(log, {"reclaim", "--yes", "--force", "--lock-dir", area, live});
  CHECK_MESSAGE(refused.status == 1, refused.out);
  CHECK(log.received().empty());
}

TEST_CASE("run's takeover of a dead owner's lock reaches syslog") {
  SyslogSocket log;
  TempDir temp;
  const std::string area = temp / "operation-locks";
  const std::string repo = temp / "repo";
  make_dir(area);
  make_dir(repo);
  const std::string lock = repo_lock(area, repo);
  const std::string record = owner_json(dead_pid());
  make_entry(area, lock.substr(lock.rfind('/') + 1), record);
  age_path(lock, 120);  // past Apnea's 60 s grace: run takes it over, as Apnea would

  CommandResult ran = run_logged(log, {"run", "--lock-dir", area, "--repo", repo, "--", "true"});
  CHECK_MESSAGE(ran.status == 0, ran.out);
  const std::vector<std::string> records = log.received();
  REQUIRE_MESSAGE(records.size() == 1, ran.out);
  CHECK(records.front().starts_with(authpriv_notice));
  const std::string expected = "]: takeover removed lock path=\"" + lock + "\" tombstone=\"" + lock + ".tombstone.";
  CHECK_MESSAGE(records.front().find(expected) != std::string::npos, records.front());
  CHECK(records.front().find(" owner=\"" + escape_bytes(record) + "\"") != std::string::npos);

  // Its own lock, released at the end, is not a takeover: nothing more.
  CommandResult again = run_logged(log, {"run", "--lock-dir", area, "--repo", repo, "--", "true"});
  CHECK(again.status == 0);
  CHECK(log.received().empty());
}

TEST_CASE("with no syslog socket, journald's native socket takes the record; with neither, standard error") {
  SyslogSocket journal;  // a datagram socket, as journald's is
  TempDir temp;
  const std::string area = temp / "operation-locks";
  make_dir(area);
  const std::string record = owner_json(dead_pid());
  auto run_with = [&](const std::string& journal_path, const std::string& redirect, const std::string& lock) {
    std::string command = shell_quote(test_env("APNEA_LOCKS_BIN"));
    for (const std::string& arg : {std::string("reclaim"), std::string("--yes"), std::string("--lock-dir"), area, lock})
      command += " " + shell_quote(arg);
    return run_command({"sh", "-c", with_logs(journal.dir / "ns", "", journal_path, command + " </dev/null " + redirect)});
  };

  const std::string first = make_entry(area, fake_lock_name("journal"), record);
  CommandResult journaled = run_with(journal.path, "2>&1", first);
  CHECK_MESSAGE(journaled.status == 0, journaled.out);
  CHECK(journaled.out.find("warning") == std::string::npos);
  const std::vector<std::string> fields = journal.received();
  REQUIRE_MESSAGE(fields.size() == 1, journaled.out);
  MESSAGE("journal datagram: ", fields.front());
  CHECK(fields.front().starts_with("MESSAGE=reclaim removed lock path=\"" + first + "\""));
  for (const char* field : {"\nSYSLOG_IDENTIFIER=apnea-locks\n", "\nSYSLOG_FACILITY=10\n", "\nPRIORITY=5\n",
                            "\nSYSLOG_PID="})
    CHECK_MESSAGE(fields.front().find(field) != std::string::npos, field);
  CHECK(fields.front().find(" label=\"") != std::string::npos);
  CHECK(fields.front().find(" login_uid=") != std::string::npos);

  // Neither socket: the record on standard error after a warning, and the removal stands.
  const std::string second = make_entry(area, fake_lock_name("stderr"), record);
  CommandResult fallback = run_with("", "2>&1", second);
  CHECK_MESSAGE(fallback.status == 0, fallback.out);
  CHECK(fallback.out.find("apnea-locks: warning: no system log took the audit record (/dev/log, "
                          "/run/systemd/journal/socket); it follows:\nreclaim removed lock path=\"" + second + "\"") !=
        std::string::npos);
  CHECK(journal.received().empty());

  // A journal socket that never takes the record (a stream listener whose backlog is full
  // and which never accepts): no hang, the record goes to standard error.
  {
    const std::string stuck_path = journal.dir / "stuck";
    const int stuck = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(stuck >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", stuck_path.c_str());
    REQUIRE(::bind(stuck, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(stuck, 0) == 0);
    std::vector<int> queued;  // fill the backlog
    for (int i = 0; i < 4; ++i) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        break;
      }
      queued.push_back(fd);
    }
    const std::string fourth = make_entry(area, fake_lock_name("stuck"), record);
    const auto started = std::chrono::steady_clock::now();
    CommandResult waited = run_with(stuck_path, "2>&1", fourth);
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK_MESSAGE(waited.status == 0, waited.out);
    CHECK(waited.out.find("no system log took the audit record") != std::string::npos);
    CHECK(took < std::chrono::seconds(20));
    for (int fd : queued) ::close(fd);
    ::close(stuck);
  }

  // Not even standard error (closed): exit 3, so a script sees that nothing recorded it.
  const std::string third = make_entry(area, fake_lock_name("nowhere"), record);
  CommandResult lost = run_with("", "2>&-", third);
  CHECK_MESSAGE(lost.status == 3, lost.out);
}

int main(int argc, char** argv) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "\n*** SKIPPED: needs root (a private mount namespace points /dev/log at the "
                         "test's socket); audit_test checks the records through the System seam ***\n\n");
    return 77;
  }
  {  // Can this machine make the namespace and the overlay at all?
    TempDir probe;
    CommandResult tried =
        run_command({"sh", "-c", with_dev_log(probe.path(), probe / "log", "test -L /dev/log") + " 2>&1"});
    if (tried.status != 0) {
      std::fprintf(stderr, "\n*** SKIPPED: cannot overlay /dev in a private mount namespace here: %s ***\n\n",
                   tried.out.c_str());
      return 77;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
