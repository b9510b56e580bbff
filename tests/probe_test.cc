#include "apnea_locks/probe.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "staged_system.h"

using namespace apnea_locks;
using apnea_locks::testing::StagedProcess;
using apnea_locks::testing::StagedSystem;

namespace {
constexpr std::int64_t second = 1'000'000'000;
constexpr std::int64_t written = 1'700'000'000 * second;

ProcessFacts alive_process(double pid, std::uint32_t uid, std::int64_t started) {
  ProcessFacts facts;
  facts.pid = pid;
  facts.signal_errno = 0;
  facts.pid_max = 4194304;
  facts.boot_time_ns = written - 3600 * second;
  ProcessInfo info;
  info.state = 'S';
  info.tgid = static_cast<std::int64_t>(pid);
  info.uid = uid;
  info.start_time_ns = started;
  facts.info = info;
  return facts;
}
}  // namespace

TEST_CASE("prove_death: each proof from the facts, strongest first") {
  const std::int64_t tolerance = default_reuse_tolerance_ns;
  ProcessFacts owner = alive_process(100, 1000, written - 10 * second);
  CHECK(prove_death(owner, 1000, written, tolerance) == DeathProof::none);
  CHECK(apnea_alive(owner));

  ProcessFacts dead = owner;
  dead.signal_errno = ESRCH;
  dead.info.reset();
  CHECK(prove_death(dead, 1000, written, tolerance) == DeathProof::pid_dead);
  CHECK_FALSE(apnea_alive(dead));

  ProcessFacts huge = owner;
  huge.pid = 2147483648.0;
  huge.signal_errno = -1;
  huge.info.reset();
  CHECK(prove_death(huge, 1000, written, tolerance) == DeathProof::pid_out_of_range);
  CHECK(apnea_alive(huge));  // Node cannot signal it, so Apnea calls it live

  ProcessFacts above_max = owner;
  above_max.pid = 4194304;
  CHECK(prove_death(above_max, 1000, written, tolerance) == DeathProof::pid_out_of_range);

  ProcessFacts zombie = owner;
  zombie.info->state = 'Z';
  CHECK(prove_death(zombie, 1000, written, tolerance) == DeathProof::zombie);
  CHECK(apnea_alive(zombie));

  ProcessFacts other = owner;
  other.signal_errno = EPERM;
  other.info->uid = 0;
  CHECK(prove_death(other, 1000, written, tolerance) == DeathProof::pid_other_uid);
  CHECK(apnea_alive(other));  // Apnea takes EPERM as alive

  ProcessFacts thread = owner;
  thread.info->tgid = 99;
  CHECK(prove_death(thread, 1000, written, tolerance) == DeathProof::pid_is_thread);

  ProcessFacts reused = alive_process(100, 1000, written + 3 * second);
  CHECK(prove_death(reused, 1000, written, tolerance) == DeathProof::pid_reused);
  ProcessFacts within = alive_process(100, 1000, written + 1 * second);
  CHECK(prove_death(within, 1000, written, tolerance) == DeathProof::none);

  ProcessFacts rebooted = owner;
  rebooted.boot_time_ns = written + second;
  rebooted.info->start_time_ns = written + 2 * second;
  CHECK(prove_death(rebooted, 1000, written, 10 * second) == DeathProof::predates_boot);

  // No /proc entry and no ESRCH (it could not be read): no proof, fail closed.
  ProcessFacts unknown = owner;
  unknown.info.reset();
  CHECK(prove_death(unknown, 1000, written, tolerance) == DeathProof::none);
}

TEST_CASE("proof names and certainty") {
  CHECK(proof_name(DeathProof::pid_dead) == "pid-dead");
  CHECK(proof_name(DeathProof::pid_out_of_range) == "pid-out-of-range");
  CHECK(proof_name(DeathProof::pid_reused) == "pid-reused");
  CHECK(proof_name(DeathProof::predates_boot) == "predates-boot");
  CHECK(proof_is_certain(DeathProof::zombie));
  CHECK(proof_is_certain(DeathProof::pid_other_uid));
  CHECK(proof_is_certain(DeathProof::pid_is_thread));
  CHECK_FALSE(proof_is_certain(DeathProof::pid_reused));
  CHECK_FALSE(proof_is_certain(DeathProof::predates_boot));
  CHECK_FALSE(proof_is_certain(DeathProof::none));
}

TEST_CASE("gather_process asks only what it needs") {
  StagedSystem system;
  system.processes[10] = StagedProcess{0, ProcessInfo{'S', 10, 0, 0, "apnea"}};

  ProcessFacts live = gather_process(system, 10);
  CHECK(live.signal_errno == 0);
  REQUIRE(live.info);
  CHECK(live.info->command == "apnea");
  CHECK(system.count("kill") == 1);
  CHECK(system.count("proc") == 1);

  system.calls.clear();
  ProcessFacts dead = gather_process(system, 11);
  CHECK(dead.signal_errno == ESRCH);
  CHECK_FALSE(dead.info);
  CHECK(system.count("proc") == 0);

  system.calls.clear();
  ProcessFacts huge = gather_process(system, 3e9);
  CHECK(huge.signal_errno == -1);
  CHECK(system.calls.empty());

  // The process exits between the signal and the /proc read: the answer is re-asked.
  system.calls.clear();
  system.processes[12] = StagedProcess{0, std::nullopt};
  system.before = [&](std::string_view op, const std::string&) {
    if (op == "proc") system.processes.erase(12);
  };
  ProcessFacts exited = gather_process(system, 12);
  CHECK(exited.signal_errno == ESRCH);
  CHECK(prove_death(exited, 0, 0, 0) == DeathProof::pid_dead);
}

TEST_CASE("real processes: this one is alive, a reaped child is dead, an unreaped one a zombie") {
  System& system = real_system();
  const std::int64_t now = system.now_ns();
  ProcessFacts self = gather_process(system, static_cast<double>(::getpid()));
  CHECK(apnea_alive(self));
  REQUIRE(self.info);
  CHECK(self.info->tgid == ::getpid());
  CHECK(self.info->start_time_ns <= now);
  CHECK_FALSE(self.info->command.empty());
  CHECK(prove_death(self, ::getuid(), now, default_reuse_tolerance_ns) == DeathProof::none);
  // An owner record written long before this process started: the pid was reused.
  CHECK(prove_death(self, ::getuid(), self.info->start_time_ns - 60 * second,
                    default_reuse_tolerance_ns) == DeathProof::pid_reused);

  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  // Not reaped yet: a zombie once it has exited. waitid(WNOWAIT) waits for the exit
  // without reaping.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  ProcessFacts zombie = gather_process(system, child);
  CHECK(prove_death(zombie, ::getuid(), now, default_reuse_tolerance_ns) == DeathProof::zombie);
  CHECK(apnea_alive(zombie));
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ProcessFacts reaped = gather_process(system, child);
  CHECK(prove_death(reaped, ::getuid(), now, default_reuse_tolerance_ns) == DeathProof::pid_dead);
  CHECK_FALSE(apnea_alive(reaped));
}

TEST_CASE("mountinfo: idmapped mounts of a device, and /proc's options") {
  const std::string mountinfo =
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
      "23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
      "40 22 0:35 / /tmp rw,nosuid,nodev shared:20 - tmpfs tmpfs rw,size=1024k\n"
      "41 22 8:1 /srv /srv/shared rw,relatime,idmapped shared:1 master:3 - ext4 /dev/sda1 rw\n"
      "42 23 0:50 / /proc rw,relatime - proc proc rw,hidepid=invisible,subset=pid\n";
  bool complete = false;
  const auto entries = parse_mountinfo(mountinfo, &complete);
  CHECK(complete);
  REQUIRE(entries.size() == 5);
  CHECK(entries[3].major == 8);
  CHECK(entries[3].minor == 1);
  CHECK(entries[3].mount_point == "/srv/shared");
  CHECK(entries[3].mount_options == "rw,relatime,idmapped");
  CHECK(entries[3].fstype == "ext4");
  CHECK(entries[3].super_options == "rw");

  CHECK(device_idmapped(mountinfo, 8, 1));        // one of its two mounts is idmapped
  CHECK_FALSE(device_idmapped(mountinfo, 0, 35));
  CHECK(device_idmapped(mountinfo, 9, 9));        // not listed: unknown
  CHECK(device_idmapped("", 0, 35));              // unreadable: unknown
  CHECK(device_idmapped(std::string(mountinfo) + "garbage line\n", 0, 35));  // malformed
  // A mount point or root that merely contains the word is not an option.
  CHECK_FALSE(device_idmapped("50 1 0:60 /idmapped /mnt/idmapped rw - tmpfs t rw,idmapped\n", 0, 60));

  CHECK(proc_super_options(mountinfo) == "rw,hidepid=invisible,subset=pid");  // the last mount wins
  CHECK(proc_super_options(mountinfo.substr(0, mountinfo.rfind("42 23"))) == "rw");
  CHECK(proc_super_options("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n").empty());

  CHECK_FALSE(proc_options_hide_processes("rw,nosuid,nodev,noexec,relatime"));
  CHECK_FALSE(proc_options_hide_processes("rw,hidepid=0"));
  CHECK_FALSE(proc_options_hide_processes("rw,hidepid=off,gid=10"));
  CHECK(proc_options_hide_processes("rw,hidepid=2"));
  CHECK(proc_options_hide_processes("rw,hidepid=1"));
  CHECK(proc_options_hide_processes("rw,hidepid=invisible"));
  CHECK(proc_options_hide_processes("rw,hidepid=noaccess"));
  CHECK(proc_options_hide_processes("rw,hidepid=ptraceable"));
  CHECK(proc_options_hide_processes("rw,subset=pid"));
  CHECK(proc_options_hide_processes(""));  // unknown
}

TEST_CASE("filesystem names and the local allowlist") {
  CHECK(local_filesystem_magic(0x01021994));
  CHECK(local_filesystem_magic(0xEF53));
  CHECK(local_filesystem_magic(0x794C7630));
  CHECK_FALSE(local_filesystem_magic(0x6969));
  CHECK_FALSE(local_filesystem_magic(0x65735546));
  CHECK_FALSE(local_filesystem_magic(0x01021997));
  CHECK(filesystem_name(0x01021994) == "tmpfs");
  CHECK(filesystem_name(0xEF53) == "ext4");
  CHECK(filesystem_name(0x6969) == "nfs");
  CHECK(filesystem_name(0x1234abcd) == "0x1234abcd");
}
