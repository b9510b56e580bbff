#include "apnea_locks/probe.h"

#include <doctest/doctest.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "apnea_locks/scan.h"
#include "detail/probe.h"
#include "detail/scan.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::detail;
using apnea_locks::testing::healthy_host;
using apnea_locks::testing::StagedProcess;
using apnea_locks::testing::StagedSystem;
using apnea_locks::testing::TempDir;

namespace {
constexpr std::int64_t second = 1'000'000'000;
constexpr std::int64_t written = 1'700'000'000 * second;
constexpr std::chrono::nanoseconds tolerance = default_reuse_tolerance;
constexpr std::uint32_t area_uid = 1000;

/// A running leader with every /proc field known, all four uids `uid`.
ProcessInfo running(std::int64_t pid, std::uint32_t uid, std::int64_t started) {
  ProcessInfo info;
  info.pid = pid;
  info.state = 'S';
  info.tgid = pid;
  info.uid = uid;
  info.uids = {uid, uid, uid, uid};
  info.uids_known = true;
  info.threads = 1;
  info.start_time_ns = started;
  info.nspid = {pid};
  info.command = "node apnea";
  info.mount_namespace = apnea_locks::testing::staged_mount_namespace;
  return info;
}

ProcessFacts alive_process(double pid, std::uint32_t uid, std::int64_t started) {
  ProcessFacts facts;
  facts.pid = pid;
  facts.signal_errno = 0;
  facts.info = running(static_cast<std::int64_t>(pid), uid, started);
  facts.namespace_view_read = true;
  return facts;
}

ProcessFacts dead_process(double pid) {
  ProcessFacts facts;
  facts.pid = pid;
  facts.signal_errno = ESRCH;
  facts.namespace_view_read = true;
  return facts;
}

/// A process in a nested PID namespace: pid `outer` here, `inner` in its own namespace.
ProcessInfo nested(std::int64_t outer, std::int64_t inner, std::uint32_t uid) {
  ProcessInfo info = running(outer, uid, written - 10 * second);
  info.nspid = {outer, inner};
  info.command = "node apnea (container)";
  return info;
}

const HostFacts host = healthy_host(written - 3600 * second);

DeathJudgement judge(const ProcessFacts& facts, const HostFacts& on = host,
                     std::uint32_t uid = area_uid) {
  return judge_death(facts, on, uid, written, tolerance);
}
}  // namespace

TEST_CASE("judge_death: each proof from the facts, on a healthy host") {
  ProcessFacts owner = alive_process(100, area_uid, written - 10 * second);
  DeathJudgement live = judge(owner);
  CHECK(live.reason == DeathProof::none);
  CHECK(live.proof == ProofClass::none);
  REQUIRE(live.blocker);
  CHECK(live.blocker->pid == 100);
  CHECK(apnea_alive(owner));

  DeathJudgement dead = judge(dead_process(100));
  CHECK(dead.reason == DeathProof::pid_dead);
  CHECK(dead.proof == ProofClass::certain);
  CHECK_FALSE(dead.blocker);
  CHECK_FALSE(apnea_alive(dead_process(100)));

  ProcessFacts zombie = owner;
  zombie.info->state = 'Z';
  CHECK(judge(zombie).reason == DeathProof::zombie);
  CHECK(judge(zombie).proof == ProofClass::certain);
  CHECK(apnea_alive(zombie));

  ProcessFacts other = owner;
  other.signal_errno = EPERM;
  other.info->uids = {0, 0, 0, 0};
  CHECK(judge(other).reason == DeathProof::pid_other_uid);
  CHECK(judge(other).proof == ProofClass::certain);
  CHECK(apnea_alive(other));  // Apnea takes EPERM as alive

  ProcessFacts thread = owner;
  thread.info->tgid = 99;
  CHECK(judge(thread).reason == DeathProof::pid_is_thread);
  CHECK(judge(thread).proof == ProofClass::certain);

  // A kernel thread (PF_KTHREAD, e.g. kthreadd at pid 2) is never the writer, even in root's
  // area where its uid 0 proves nothing: {"pid":2} is a dead lock, for certain.
  ProcessFacts kthread = owner;
  kthread.info->kernel_thread = true;
  kthread.info->uids = {0, 0, 0, 0};
  for (const std::uint32_t uid : {area_uid, std::uint32_t{0}}) {
    CAPTURE(uid);
    CHECK(judge(kthread, host, uid).reason == DeathProof::pid_is_kernel_thread);
    CHECK(judge(kthread, host, uid).proof == ProofClass::certain);
  }
  CHECK(proof_name(DeathProof::pid_is_kernel_thread) == "pid-is-kernel-thread");

  ProcessFacts reused = alive_process(100, area_uid, written + 3 * second);
  DeathJudgement clock = judge(reused);
  CHECK(clock.reason == DeathProof::pid_reused);
  CHECK(clock.proof == ProofClass::evidence);
  CHECK(clock.uses_clock);
  CHECK_FALSE(clock.uses_visibility);
  CHECK_FALSE(clock.clock_void);
  CHECK(judge(alive_process(100, area_uid, written + 1 * second)).proof == ProofClass::none);
  // A tolerance below 1 s counts as 1 s, in the proof as in what --force says it trusts.
  for (const std::chrono::nanoseconds small : {std::chrono::nanoseconds(0), std::chrono::nanoseconds(500'000'000)}) {
    CAPTURE(small.count());
    const DeathJudgement near = judge_death(alive_process(100, area_uid, written + 700'000'000), host, area_uid,
                                            written, small);
    CHECK(near.proof == ProofClass::none);
    CHECK(near.tolerance == std::chrono::seconds(1));
    CHECK(judge_death(reused, host, area_uid, written, small).reason == DeathProof::pid_reused);
  }

  HostFacts rebooted = healthy_host(written + second);
  ProcessFacts after_boot = alive_process(100, area_uid, written + 2 * second);
  DeathJudgement boot = judge_death(after_boot, rebooted, area_uid, written, std::chrono::seconds(10));
  CHECK(boot.reason == DeathProof::predates_boot);
  CHECK(boot.proof == ProofClass::evidence);

  // kill reached it but /proc said nothing: it may be the writer.
  ProcessFacts unknown = owner;
  unknown.info.reset();
  DeathJudgement unread = judge(unknown);
  CHECK(unread.proof == ProofClass::none);
  REQUIRE(unread.blocker);
  CHECK(unread.blocker->pid == 100);
  CHECK(unread.blocker->state == '?');

  // Not a pid at all: nothing to prove.
  CHECK(judge(dead_process(0)).proof == ProofClass::none);
  CHECK(judge(dead_process(1.5)).proof == ProofClass::none);
}

TEST_CASE("pid-not-runtime: a live carrier that runs no recognised runtime is evidence, needing no clock") {
  ProcessFacts owner = alive_process(100, area_uid, written - 10 * second);
  // Its sign not read (a staged or unknown process): it may be the writer.
  CHECK(judge(owner).proof == ProofClass::none);
  // A runtime, or a process whose files could not be read: it may be the writer.
  for (const char* sign : {"exe node", "maps libnode.so.108", "unreadable: maps"}) {
    CAPTURE(sign);
    owner.info->runtime_sign = sign;
    CHECK(judge(owner).proof == ProofClass::none);
    CHECK(judge(owner).blocker);
  }
  // Read, and nothing says it runs one: evidence, under --force's third trust.
  owner.info->runtime_sign = "";
  DeathJudgement plain = judge(owner);
  CHECK(plain.reason == DeathProof::pid_not_runtime);
  CHECK(plain.proof == ProofClass::evidence);
  CHECK(plain.uses_runtime);
  CHECK_FALSE(plain.uses_clock);
  CHECK_FALSE(plain.blocker);
  CHECK(proof_name(DeathProof::pid_not_runtime) == "pid-not-runtime");
  // No clock involved: a void clock does not void it (where it voids pid-reused).
  HostFacts stepped = host;
  stepped.dev_birth_ns = host.boot_time_ns - 600 * second;
  REQUIRE(stepped.clock_void());
  ProcessFacts reused = alive_process(100, area_uid, written + 30 * second);
  CHECK(judge(reused, stepped).proof == ProofClass::none);
  reused.info->runtime_sign = "";
  CHECK(judge(reused, stepped).reason == DeathProof::pid_not_runtime);
  CHECK(judge(reused, stepped).proof == ProofClass::evidence);
  // A carrier in a nested namespace that runs a runtime still blocks.
  ProcessFacts both = owner;
  both.ns_carriers.push_back(nested(300, 100, area_uid));
  both.ns_carriers.back().runtime_sign = "exe node";
  CHECK(judge(both).proof == ProofClass::none);
  REQUIRE(judge(both).blocker);
  CHECK(judge(both).blocker->pid == 300);
  // Mixed with clock evidence on another carrier: both trusts are named.
  both.ns_carriers.back() = nested(300, 100, area_uid);
  both.ns_carriers.back().start_time_ns = written + 30 * second;
  DeathJudgement mixed = judge(both);
  CHECK(mixed.proof == ProofClass::evidence);
  CHECK(mixed.uses_runtime);
  CHECK(mixed.uses_clock);
}

TEST_CASE("proof names, classes and certainty") {
  CHECK(proof_name(DeathProof::pid_dead) == "pid-dead");
  CHECK(proof_name(DeathProof::pid_out_of_range) == "pid-out-of-range");
  CHECK(proof_name(DeathProof::pid_reused) == "pid-reused");
  CHECK(proof_name(DeathProof::predates_boot) == "predates-boot");
  CHECK(proof_class_name(ProofClass::none) == "none");
  CHECK(proof_class_name(ProofClass::evidence) == "evidence");
  CHECK(proof_class_name(ProofClass::certain) == "certain");
  CHECK(proof_is_certain(DeathProof::zombie));
  CHECK(proof_is_certain(DeathProof::pid_other_uid));
  CHECK(proof_is_certain(DeathProof::pid_is_thread));
  CHECK_FALSE(proof_is_certain(DeathProof::pid_reused));
  CHECK_FALSE(proof_is_certain(DeathProof::predates_boot));
  CHECK_FALSE(proof_is_certain(DeathProof::none));
}

TEST_CASE("pid-out-of-range comes from PID_MAX_LIMIT and 2^31, never the current pid_max") {
  StagedSystem system;
  system.staged_pid_max = 1000;  // lowered after pid 5000 started
  system.processes[5000] = StagedProcess{0, running(5000, area_uid, written - 10 * second)};
  const std::vector<ProcessInfo> view;
  ProcessFacts above = gather_process(system, 5000, &view);
  CHECK(above.signal_errno == 0);
  REQUIRE(above.info);
  CHECK(above.info->pid == 5000);
  DeathJudgement alive = judge(above);
  CHECK(alive.reason == DeathProof::none);
  CHECK(alive.proof == ProofClass::none);

  // Dead below the ceiling: pid-dead, not out of range.
  CHECK(judge(gather_process(system, 4194303, &view)).reason == DeathProof::pid_dead);

  for (double pid : {4194304.0, 2147483647.0, 2147483648.0, 1e20}) {
    CAPTURE(pid);
    DeathJudgement out = judge(gather_process(system, pid, nullptr));
    CHECK(out.reason == DeathProof::pid_out_of_range);
    CHECK(out.proof == ProofClass::certain);  // no carrier can exist: no view needed
  }
  // 2^31 is not even tried: Node cannot signal it, so Apnea calls it live.
  system.calls.clear();
  ProcessFacts huge = gather_process(system, 2147483648.0, nullptr);
  CHECK(huge.signal_errno == -1);
  CHECK(apnea_alive(huge));
  CHECK(system.calls.empty());
}

TEST_CASE("a carrier in a nested PID namespace keeps the pid alive, whatever the kill says") {
  StagedSystem system;
  // Pid 42 does not exist here, but a containerised Apnea has 42 in its namespace.
  system.namespace_processes = {nested(7000, 42, area_uid), nested(7001, 9, area_uid)};
  const std::vector<ProcessInfo> view = system.namespace_view();
  ProcessFacts facts = gather_process(system, 42, &view);
  CHECK(facts.signal_errno == ESRCH);
  CHECK_FALSE(apnea_alive(facts));
  REQUIRE(facts.ns_carriers.size() == 1);
  CHECK(facts.ns_carriers[0].pid == 7000);
  DeathJudgement judged = judge(facts);
  CHECK(judged.reason == DeathProof::none);
  CHECK(judged.proof == ProofClass::none);
  REQUIRE(judged.blocker);
  CHECK(judged.blocker->pid == 7000);
  CHECK((judged.blocker->nspid == std::vector<std::int64_t>{7000, 42}));

  // Any uid the writer could have written with keeps it: only the real uid differs here.
  ProcessInfo setuid_carrier = nested(7000, 42, 0);
  setuid_carrier.uids = {0, area_uid, area_uid, area_uid};
  facts.ns_carriers = {setuid_carrier};
  CHECK(judge(facts).proof == ProofClass::none);

  // A pid only the first NSpid field holds is ours, not a nested carrier.
  CHECK(namespace_carriers(view, 7000).empty());
  CHECK(namespace_carriers(view, 9).size() == 1);

  // A carrier that is a zombie (the last of its group) is shown not to be the writer.
  ProcessInfo zombie = nested(7000, 42, area_uid);
  zombie.state = 'Z';
  zombie.threads = 1;
  facts.ns_carriers = {zombie};
  DeathJudgement exited = judge(facts);
  CHECK(exited.reason == DeathProof::zombie);
  CHECK(exited.proof == ProofClass::certain);

  // Several carriers: every one must be excluded, and the weakest proof is named.
  ProcessInfo later = nested(7002, 42, area_uid);
  later.start_time_ns = written + 60 * second;
  facts.ns_carriers = {zombie, later};
  DeathJudgement both = judge(facts);
  CHECK(both.reason == DeathProof::pid_reused);
  CHECK(both.proof == ProofClass::evidence);
  facts.ns_carriers = {zombie, nested(7003, 42, area_uid)};
  DeathJudgement one_alive = judge(facts);
  CHECK(one_alive.proof == ProofClass::none);
  REQUIRE(one_alive.blocker);
  CHECK(one_alive.blocker->pid == 7003);

  // Without the view, ESRCH cannot be certain: carriers elsewhere were not looked for.
  ProcessFacts unviewed = gather_process(system, 42, nullptr);
  CHECK_FALSE(unviewed.namespace_view_read);
  DeathJudgement blind = judge(unviewed);
  CHECK(blind.reason == DeathProof::pid_dead);
  CHECK(blind.proof == ProofClass::evidence);
  CHECK(blind.uses_visibility);
}

TEST_CASE("zombie only for the last thread of its group") {
  ProcessFacts owner = alive_process(100, area_uid, written - 10 * second);
  owner.info->state = 'Z';
  owner.info->threads = 3;  // the leader called pthread_exit; two threads still run
  DeathJudgement leader = judge(owner);
  CHECK(leader.reason == DeathProof::none);
  CHECK(leader.proof == ProofClass::none);
  REQUIRE(leader.blocker);
  owner.info->threads = 0;  // unknown
  CHECK(judge(owner).proof == ProofClass::none);
  owner.info->state = 'X';
  owner.info->threads = 1;
  CHECK(judge(owner).reason == DeathProof::zombie);
}

TEST_CASE("pid-other-uid needs all four uids, a non-root area and no idmapped mount") {
  ProcessFacts owner = alive_process(100, area_uid, written - 10 * second);
  ProcessFacts real_only = owner;
  real_only.info->uids = {0, area_uid, area_uid, area_uid};
  real_only.info->uid = 0;
  CHECK(judge(real_only).proof == ProofClass::none);
  for (std::size_t i = 1; i < 4; ++i) {
    ProcessFacts one_left = owner;
    one_left.info->uids = {0, 0, 0, 0};
    one_left.info->uids[i] = area_uid;  // e.g. the filesystem uid still the area's
    CAPTURE(i);
    CHECK(judge(one_left).proof == ProofClass::none);
  }
  ProcessFacts all = owner;
  all.info->uids = {0, 1, 2, 3};
  CHECK(judge(all).reason == DeathProof::pid_other_uid);
  CHECK(judge(all).proof == ProofClass::certain);

  // Root's area: its writer may have dropped privileges since.
  ProcessFacts root_area = alive_process(100, 0, written - 10 * second);
  root_area.info->uids = {65534, 65534, 65534, 65534};
  CHECK(judge(root_area, host, 0).proof == ProofClass::none);

  // An idmapped mount translates the writer's uid: no proof, not even evidence (neither of
  // --force's trusts covers it).
  HostFacts idmapped = host;
  idmapped.idmapped = true;
  CHECK(judge(all, idmapped).proof == ProofClass::none);

  ProcessFacts unknown = all;
  unknown.info->uids_known = false;
  CHECK(judge(unknown).proof == ProofClass::none);

  // In another mount namespace (or one that could not be read) an idmapped mount we cannot
  // see may translate its uid: evidence only, under --force's visibility trust.
  for (const std::optional<std::uint64_t> mounts : {std::optional<std::uint64_t>(4026532999),
                                                     std::optional<std::uint64_t>()}) {
    ProcessFacts elsewhere = all;
    elsewhere.info->mount_namespace = mounts;
    CAPTURE(mounts.has_value());
    const DeathJudgement judged = judge(elsewhere);
    CHECK(judged.reason == DeathProof::pid_other_uid);
    CHECK(judged.proof == ProofClass::evidence);
    CHECK(judged.uses_visibility);
    CHECK_FALSE(apnea_locks::detail::another_account(*elsewhere.info, host, area_uid));
  }
  HostFacts unknown_mounts = host;
  unknown_mounts.mount_namespace.reset();
  CHECK(judge(all, unknown_mounts).proof == ProofClass::evidence);

  // Its namespace unreadable (another account's, to a user without privilege): its own
  // mountinfo, which any account may read, decides. The area's device listed with no
  // idmapped mount: certain. Idmapped, not listed, or cut short: evidence.
  HostFacts on_sda1 = host;
  on_sda1.area_device = makedev(8, 1);
  const std::string root_mount = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n";
  const std::vector<std::pair<std::string, ProofClass>> views = {
      {root_mount, ProofClass::certain},
      {root_mount + "40 22 8:1 /tmp /mnt/t rw,idmapped - ext4 /dev/sda1 rw\n", ProofClass::evidence},
      {"22 1 8:2 / / rw - ext4 /dev/sda2 rw\n", ProofClass::evidence},
      {root_mount.substr(0, 20), ProofClass::evidence},
  };
  for (const auto& [mountinfo, expected] : views) {
    CAPTURE(mountinfo);
    ProcessFacts unreadable_ns = all;
    unreadable_ns.info->mount_namespace.reset();
    unreadable_ns.info->mount_info = mountinfo;
    CHECK(judge(unreadable_ns, on_sda1).reason == DeathProof::pid_other_uid);
    CHECK(judge(unreadable_ns, on_sda1).proof == expected);
    CHECK(apnea_locks::detail::another_account(*unreadable_ns.info, on_sda1, area_uid) ==
          (expected == ProofClass::certain));
  }
  // A readable namespace that differs is not overruled by a mountinfo.
  ProcessFacts other_namespace = all;
  other_namespace.info->mount_namespace = 4026532999;
  other_namespace.info->mount_info = root_mount;
  CHECK(judge(other_namespace, on_sda1).proof == ProofClass::evidence);
}

TEST_CASE("the host's preconditions: namespaces, process table, local filesystem") {
  const ProcessFacts dead = dead_process(100);
  ProcessFacts zombie = alive_process(100, area_uid, written - 10 * second);
  zombie.info->state = 'Z';

  HostFacts container = host;
  container.initial_pid_namespace = false;
  for (const ProcessFacts& facts : {dead, zombie}) {
    DeathJudgement judged = judge(facts, container);
    CHECK(judged.proof == ProofClass::evidence);
    CHECK(judged.uses_visibility);
    CHECK_FALSE(judged.remote_filesystem);
  }
  CHECK(judge(dead, container).reason == DeathProof::pid_dead);
  CHECK(container.why_not_certain() == "apnea-locks runs outside the initial PID namespace");

  HostFacts user_ns = host;
  user_ns.initial_user_namespace = false;
  CHECK(judge(dead, user_ns).proof == ProofClass::evidence);
  CHECK(judge(dead, user_ns).uses_visibility);

  HostFacts hidden = host;
  hidden.process_table_complete = false;
  CHECK(judge(dead, hidden).proof == ProofClass::evidence);
  CHECK(judge(dead, hidden).uses_visibility);
  CHECK_FALSE(hidden.can_be_certain());

  HostFacts remote = host;
  remote.filesystem = "nfs";
  remote.local_filesystem = false;
  DeathJudgement far = judge(dead, remote);
  CHECK(far.remote_filesystem);
  CHECK(far.proof == ProofClass::evidence);
  CHECK(far.reason == DeathProof::pid_dead);
  CHECK(remote.why_not_certain() == "the lock area is on nfs, not a local filesystem");
  CHECK(judge(alive_process(100, area_uid, written - 10 * second), remote).proof == ProofClass::none);

  CHECK(host.can_be_certain());
  CHECK(host.why_not_certain().empty());
  CHECK_FALSE(HostFacts{}.can_be_certain());
  CHECK(judge(dead, HostFacts{}).proof == ProofClass::evidence);
}

TEST_CASE("clock evidence is void when the clock stepped since boot") {
  ProcessFacts reused = alive_process(100, area_uid, written + 30 * second);
  HostFacts stepped = host;
  stepped.dev_birth_ns = host.boot_time_ns - 61 * second;
  CHECK(stepped.clock_void());
  DeathJudgement judged = judge(reused, stepped);
  CHECK(judged.clock_void);
  CHECK(judged.proof == ProofClass::none);
  CHECK(judged.reason == DeathProof::pid_reused);  // named, so it can be shown
  REQUIRE(judged.blocker);
  CHECK(judged.blocker->pid == 100);

  HostFacts forward = host;
  forward.dev_birth_ns = host.boot_time_ns + 61 * second;
  CHECK(forward.clock_void());
  HostFacts unknown = host;
  unknown.dev_birth_ns.reset();
  CHECK(unknown.clock_void());
  CHECK(judge(reused, unknown).proof == ProofClass::none);
  CHECK(judge(reused, unknown).clock_void);

  HostFacts close = host;
  close.dev_birth_ns = host.boot_time_ns - 59 * second;
  CHECK_FALSE(close.clock_void());
  CHECK(judge(reused, close).proof == ProofClass::evidence);

  // Predates-boot is void the same way; certain proofs do not care.
  HostFacts rebooted = healthy_host(written + second);
  rebooted.dev_birth_ns.reset();
  ProcessFacts after_boot = alive_process(100, area_uid, written + 2 * second);
  CHECK(judge_death(after_boot, rebooted, area_uid, written, std::chrono::seconds(10)).proof == ProofClass::none);
  CHECK(judge(dead_process(100), unknown).proof == ProofClass::certain);
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

namespace {

/// Another kernel may reach the area (`why` says how): nothing is certain, and a dead pid is
/// evidence only, under --force's visibility trust.
void check_nothing_certain(const HostFacts& reached, std::string_view why) {
  CHECK_FALSE(reached.can_be_certain());
  CHECK(reached.why_not_certain().find(why) != std::string::npos);
  const DeathJudgement dead = judge(dead_process(100), reached);
  CHECK(dead.reason == DeathProof::pid_dead);
  CHECK(dead.proof == ProofClass::evidence);
  CHECK(dead.uses_visibility);
}

}  // namespace

TEST_CASE("an NFS export of the area: another machine's Apnea may hold its locks, so nothing is certain") {
  const std::string exports =
      "# Version 1.1\n# Path Client(Flags) # IPs\n/srv/nfs\t*(rw,root_squash)\n"
      "/home/with\\040space\t10.0.0.0/8(rw)\n";
  CHECK(apnea_locks::detail::export_covering(exports, "/srv/nfs") == "/srv/nfs");
  CHECK(apnea_locks::detail::export_covering(exports, "/srv/nfs/tmp/apnea-0/operation-locks") == "/srv/nfs");
  CHECK(apnea_locks::detail::export_covering(exports, "/srv/nfsx/locks").empty());  // a sibling
  CHECK(apnea_locks::detail::export_covering(exports, "/srv").empty());             // below it, not above
  CHECK(apnea_locks::detail::export_covering(exports, "/home/with space/t") == "/home/with space");
  CHECK(apnea_locks::detail::export_covering("/\t*(ro)\n", "/tmp/apnea-0") == "/");
  CHECK(apnea_locks::detail::export_covering("", "/tmp").empty());

  HostFacts exported = host;
  exported.exported_by = "/tmp";
  check_nothing_certain(exported, "exported over NFS (/tmp");

  // gather_host reads the exports, against the area's real path.
  apnea_locks::testing::StagedSystem system;
  TempDir area;
  system.staged_nfs_exports = "/nothing/here\t*(rw)\n";
  CHECK(gather_host(system, area.path()).exported_by.empty());
  CHECK(gather_host(system, area.path()).can_be_certain());
  system.staged_nfs_exports = std::filesystem::path(area.path()).parent_path().string() + "\t*(rw)\n";
  CHECK_FALSE(gather_host(system, area.path()).exported_by.empty());
  CHECK_FALSE(gather_host(system, area.path()).can_be_certain());
}

TEST_CASE("a file-server or sync process reaching the area makes every proof evidence (section 9, another kernel)") {
  HostFacts served = host;
  served.served_by = "smbd (pid 812): working directory /";
  CHECK_FALSE(served.sees_every_process());
  check_nothing_certain(served, "a file server or sync process reaches the lock area (smbd (pid 812)");

  // gather_host asks with the area's real path; a table that cannot be listed counts.
  apnea_locks::testing::StagedSystem system;
  TempDir area;
  CHECK(gather_host(system, area.path()).can_be_certain());
  system.staged_file_server = "virtiofsd (pid 90): open descriptor /tmp";
  CHECK(gather_host(system, area.path()).served_by == "virtiofsd (pid 90): open descriptor /tmp");
  CHECK_FALSE(gather_host(system, area.path()).can_be_certain());
  system.staged_file_server = std::nullopt;
  CHECK_FALSE(gather_host(system, area.path()).can_be_certain());
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

TEST_CASE("gather_host reads the staged host") {
  TempDir area;
  StagedSystem system;
  system.staged_area = area.path();
  auto st = system.lstat(area.path());
  REQUIRE(st);
  HostFacts healthy = gather_host(system, area.path(), st->dev);
  CHECK(healthy.initial_pid_namespace);
  CHECK(healthy.initial_user_namespace);
  CHECK(healthy.process_table_complete);
  CHECK(healthy.filesystem == "tmpfs");
  CHECK(healthy.local_filesystem);
  CHECK_FALSE(healthy.idmapped);
  CHECK(healthy.boot_time_ns == system.staged_boot_ns);
  CHECK_FALSE(healthy.clock_void());
  CHECK(healthy.can_be_certain());
  CHECK(gather_host(system, area.path()).can_be_certain());

  SUBCASE("another PID namespace") {
    system.namespace_inodes["pid"] = 4026532200;
    HostFacts facts = gather_host(system, area.path(), st->dev);
    CHECK_FALSE(facts.initial_pid_namespace);
    CHECK(judge(dead_process(100), facts).proof == ProofClass::evidence);
    CHECK(judge(dead_process(100), facts).uses_visibility);
  }
  SUBCASE("another user namespace") {
    system.namespace_inodes.erase("user");  // unreadable counts as not initial
    CHECK_FALSE(gather_host(system, area.path(), st->dev).initial_user_namespace);
  }
  SUBCASE("hidepid: complete for root only") {
    system.staged_proc_options = "rw,relatime,hidepid=invisible";
    system.staged_euid = 1000;
    HostFacts user = gather_host(system, area.path(), st->dev);
    CHECK_FALSE(user.process_table_complete);
    DeathJudgement judged = judge(dead_process(100), user);
    CHECK(judged.proof == ProofClass::evidence);
    CHECK(judged.uses_visibility);
    system.staged_euid = 0;
    CHECK(gather_host(system, area.path(), st->dev).process_table_complete);
  }
  SUBCASE("a remote filesystem") {
    system.staged_filesystem_magic = 0x6969;
    HostFacts facts = gather_host(system, area.path(), st->dev);
    CHECK(facts.filesystem == "nfs");
    CHECK_FALSE(facts.local_filesystem);
    CHECK(judge(dead_process(100), facts).remote_filesystem);
    system.staged_filesystem_magic.reset();
    CHECK(gather_host(system, area.path(), st->dev).filesystem == "unknown");
  }
  SUBCASE("an idmapped mount of the area's device") {
    system.staged_mount_info = StagedSystem::mount_line(*st, "rw,relatime,idmapped");
    CHECK(gather_host(system, area.path(), st->dev).idmapped);
    system.staged_mount_info = "";
    CHECK(gather_host(system, area.path(), st->dev).idmapped);
  }
  SUBCASE("the clock stepped since boot") {
    system.staged_dev_birth_ns = system.staged_boot_ns - 3 * 3600 * second;
    CHECK(gather_host(system, area.path(), st->dev).clock_void());
    system.dev_birth_known = false;
    CHECK(gather_host(system, area.path(), st->dev).clock_void());
  }
}

TEST_CASE("gather_host reads mountinfo once, for both /proc's options and the area's mount") {
  TempDir area;
  StagedSystem system;
  system.staged_area = area.path();
  system.staged_euid = 1000;
  auto st = system.lstat(area.path());
  REQUIRE(st);
  HostFacts facts = gather_host(system, area.path(), st->dev);
  CHECK(system.mount_info_reads == 1);
  CHECK(facts.process_table_complete);
  CHECK_FALSE(facts.idmapped);

  system.staged_proc_options = "rw,hidepid=2";
  system.staged_mount_info = StagedSystem::mount_line(*st, "rw,relatime,idmapped");
  facts = gather_host(system, area.path(), st->dev);
  CHECK(system.mount_info_reads == 2);
  CHECK_FALSE(facts.process_table_complete);
  CHECK(facts.idmapped);

  system.staged_euid = 0;  // root sees every process: only the area's mount is looked up
  CHECK(gather_host(system, area.path(), st->dev).process_table_complete);
  CHECK(system.mount_info_reads == 3);
}

TEST_CASE("gather_process asks only what it needs") {
  StagedSystem system;
  system.processes[10] = StagedProcess{0, ProcessInfo{'S', 10, 0, 0, "apnea"}};

  ProcessFacts live = gather_process(system, 10, nullptr);
  CHECK(live.signal_errno == 0);
  REQUIRE(live.info);
  CHECK(live.info->command == "apnea");
  CHECK_FALSE(live.namespace_view_read);
  CHECK(system.count("kill") == 1);
  CHECK(system.count("proc") == 1);

  system.calls.clear();
  ProcessFacts dead = gather_process(system, 11, nullptr);
  CHECK(dead.signal_errno == ESRCH);
  CHECK_FALSE(dead.info);
  CHECK(system.count("proc") == 0);

  system.calls.clear();
  ProcessFacts huge = gather_process(system, 3e9, nullptr);
  CHECK(huge.signal_errno == -1);
  CHECK(system.calls.empty());

  // The process exits between the signal and the /proc read: the answer is re-asked.
  system.calls.clear();
  system.processes[12] = StagedProcess{0, std::nullopt};
  system.before = [&](std::string_view op, const std::string&) {
    if (op == "proc") system.processes.erase(12);
  };
  const std::vector<ProcessInfo> view;
  ProcessFacts exited = gather_process(system, 12, &view);
  CHECK(exited.signal_errno == ESRCH);
  CHECK(exited.namespace_view_read);
  CHECK(judge(exited).reason == DeathProof::pid_dead);
  CHECK(judge(exited).proof == ProofClass::certain);
}

TEST_CASE("the process cache reads the namespace view once, and only when it matters") {
  StagedSystem system;
  system.processes[10] = StagedProcess{0, running(10, area_uid, written - 10 * second)};
  system.namespace_processes = {nested(7000, 11, area_uid)};
  ProcessCache cache(system, host);
  CHECK(cache.host().can_be_certain());

  // A live owner nothing could exclude: no need to look further.
  ProcessFacts live = cache.get(10, area_uid, written);
  CHECK_FALSE(live.namespace_view_read);
  CHECK(system.count("ns_view") == 0);
  CHECK(judge(live).proof == ProofClass::none);

  // Its own carrier is absent: the view is read, and finds the one in a container.
  ProcessFacts contained = cache.get(11, area_uid, written);
  CHECK(system.count("ns_view") == 1);
  CHECK(contained.namespace_view_read);
  REQUIRE(contained.ns_carriers.size() == 1);
  CHECK(judge(contained).proof == ProofClass::none);

  // From then on every answer carries the carriers, without reading the view again.
  ProcessFacts dead = cache.get(12, area_uid, written);
  CHECK(dead.namespace_view_read);
  CHECK(judge(dead).proof == ProofClass::certain);
  CHECK(cache.get(10, area_uid, written).namespace_view_read);
  CHECK(cache.get(11).ns_carriers.size() == 1);
  CHECK(system.count("ns_view") == 1);
  CHECK(system.count("kill") == 3);  // each pid probed once

  // An own carrier a proof excludes (here: started after the record) also needs the view.
  StagedSystem other;
  other.processes[10] = StagedProcess{0, running(10, area_uid, written + 60 * second)};
  ProcessCache fresh(other, host);
  CHECK(fresh.get(10, area_uid, written).namespace_view_read);
  CHECK(other.count("ns_view") == 1);
  // Out of range needs no carriers.
  StagedSystem range;
  ProcessCache ranged(range, host);
  CHECK_FALSE(ranged.get(5e6, area_uid, written).namespace_view_read);
  CHECK(range.count("ns_view") == 0);
}

TEST_CASE("real processes: this one is alive, a reaped child is dead, an unreaped one a zombie") {
  System& system = real_system();
  const std::int64_t now = system.now_ns();
  const std::vector<ProcessInfo> view = system.namespace_view();
  // The real clock may have stepped since boot: judge on a healthy host with real facts.
  const HostFacts steady = healthy_host(system.boot_time_ns());
  ProcessFacts self = gather_process(system, static_cast<double>(::getpid()), &view);
  CHECK(apnea_alive(self));
  REQUIRE(self.info);
  CHECK(self.info->pid == ::getpid());
  CHECK(self.info->tgid == ::getpid());
  CHECK(self.info->threads >= 1);
  CHECK(self.info->uids_known);
  CHECK(self.info->uids[0] == ::getuid());
  CHECK(self.info->uids[1] == ::geteuid());
  CHECK_FALSE(self.info->nspid.empty());
  CHECK(self.info->start_time_ns <= now);
  CHECK_FALSE(self.info->command.empty());
  // This test process stands in for an Apnea (doctest_main.cc maps a file named node).
  REQUIRE(self.info->runtime_sign);
  CHECK(self.info->runtime_sign->starts_with("maps node"));
  CHECK(judge_death(self, steady, ::getuid(), now, default_reuse_tolerance).proof == ProofClass::none);
  // An owner record written long before this process started: the pid was reused.
  CHECK(judge_death(self, steady, ::getuid(), self.info->start_time_ns - 60 * second,
                    default_reuse_tolerance).reason == DeathProof::pid_reused);

  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  // Not reaped yet: a zombie once it has exited. waitid(WNOWAIT) waits for the exit
  // without reaping.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  ProcessFacts zombie = gather_process(system, child, &view);
  REQUIRE(zombie.info);
  CHECK(zombie.info->state == 'Z');
  CHECK(zombie.info->threads == 1);
  CHECK(judge_death(zombie, steady, ::getuid(), now, default_reuse_tolerance).reason ==
        DeathProof::zombie);
  CHECK(apnea_alive(zombie));
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ProcessFacts reaped = gather_process(system, child, &view);
  const DeathJudgement gone = judge_death(reaped, steady, ::getuid(), now, default_reuse_tolerance);
  CHECK(gone.reason == DeathProof::pid_dead);
  CHECK(gone.proof == ProofClass::certain);
  CHECK_FALSE(apnea_alive(reaped));
}

TEST_CASE("real host facts are read") {
  System& system = real_system();
  TempDir area;
  HostFacts facts = gather_host(system, area.path());
  CHECK_FALSE(facts.filesystem.empty());
  CHECK(facts.boot_time_ns > 0);
  CHECK(facts.can_be_certain() == facts.why_not_certain().empty());
  CHECK_FALSE(system.mount_info().empty());
  CHECK_FALSE(proc_super_options(system.mount_info()).empty());
  CHECK(system.namespace_inode("pid").has_value());
  CHECK_FALSE(system.namespace_inode("no-such-namespace").has_value());
  for (const ProcessInfo& process : system.namespace_view()) CHECK(process.nspid.size() > 1);
  const std::string certainty = facts.can_be_certain() ? std::string("certain proofs possible")
                                                       : "not certain: " + facts.why_not_certain();
  const std::string clock = facts.clock_void() ? "clock evidence void" : "clock evidence counts";
  MESSAGE("this host: " << facts.filesystem << ", " << certainty << ", " << clock);
}

TEST_CASE("the operator's word: PID@START parsed exactly, and it excludes only the process it names") {
  // The form: a pid 1..2^31-1, '@', a UTC second as a refusal prints it.
  const std::int64_t started = written - 10 * second + 123'000'000;  // not on a second boundary
  const std::string stamp = utc_second_text(started);
  CHECK(stamp == "2023-11-14T22:13:10Z");
  CHECK(utc_second_text(0) == "1970-01-01T00:00:00Z");
  CHECK(utc_second_text(951'782'400 * second) == "2000-02-29T00:00:00Z");
  auto word = parse_not_owner("4242@" + stamp);
  REQUIRE(word);
  CHECK(word->pid == 4242);
  CHECK(word->start_s == started / second);
  CHECK(not_owner_text(running(4242, area_uid, started)) == "4242@" + stamp);
  for (const std::string bad :
       {"", "4242", "@2023-11-14T22:13:10Z", "0@2023-11-14T22:13:10Z", "-5@2023-11-14T22:13:10Z",
        "2147483648@2023-11-14T22:13:10Z", "+42@2023-11-14T22:13:10Z", "4242@2023-11-14 22:13:10Z",
        "4242@2023-11-14T22:13:10", "4242@2023-11-14T22:13:10+00:00", "4242@2023-02-29T00:00:00Z",
        "4242@2023-04-31T00:00:00Z", "4242@2023-13-01T00:00:00Z", "4242@2023-11-14T24:00:00Z",
        "4242@1969-12-31T23:59:59Z", "4242@2023-11-14T22:13:1xZ", "42 42@2023-11-14T22:13:10Z"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_not_owner(bad));
  }
  CHECK(parse_not_owner("2147483647@2024-02-29T00:00:00Z"));

  // A live carrier of our uid that started before the write: alive, no proof.
  const ProcessFacts live = alive_process(4242, area_uid, started);
  REQUIRE(judge(live).proof == ProofClass::none);
  const std::vector<NotOwner> named{*word};
  DeathJudgement excused = judge_death(live, host, area_uid, written, tolerance, named);
  CHECK(excused.reason == DeathProof::operator_word);
  CHECK(excused.proof == ProofClass::evidence);  // never certain: only --force acts on it
  REQUIRE(excused.operator_exempt);
  CHECK(excused.operator_exempt->pid == 4242);
  CHECK(proof_name(DeathProof::operator_word) == "operator");
  CHECK_FALSE(proof_is_certain(DeathProof::operator_word));

  // The same pid with another start time (reused since the operator looked): it blocks.
  const ProcessFacts reused = alive_process(4242, area_uid, started + 5 * second);
  DeathJudgement stale = judge_death(reused, host, area_uid, written, tolerance, named);
  CHECK(stale.proof == ProofClass::none);
  REQUIRE(stale.blocker);
  REQUIRE(stale.word_mismatch);
  CHECK(stale.word_mismatch->pid == 4242);

  // Another carrier of the same number (a containerised Apnea with 4242 in its namespace)
  // still blocks: the word names one process, not a number.
  ProcessFacts shared = live;
  shared.ns_carriers = {nested(7000, 4242, area_uid)};
  DeathJudgement other = judge_death(shared, host, area_uid, written, tolerance, named);
  CHECK(other.proof == ProofClass::none);
  REQUIRE(other.blocker);
  CHECK(other.blocker->pid == 7000);
  // Named too, by its pid here and its start: then nothing blocks.
  const std::vector<NotOwner> both{*word, NotOwner{7000, (written - 10 * second) / second}};
  CHECK(judge_death(shared, host, area_uid, written, tolerance, both).reason == DeathProof::operator_word);
}
