// What the files of a /proc tree say about processes (detail/procfs.h), read from fixture
// trees built in a temp folder.
#include "detail/procfs.h"

#include <doctest/doctest.h>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "detail/probe.h"
#include "temp_dir.h"

using namespace apnea_locks;
using namespace apnea_locks::detail;
using apnea_locks::testing::TempDir;

namespace {

constexpr std::int64_t boot_ns = 1'700'000'000'000'000'000;

/// Nanoseconds after boot of a start time of `ticks` clock ticks.
std::int64_t after_boot(std::int64_t ticks) {
  return boot_ns + ticks * (1'000'000'000 / ::sysconf(_SC_CLK_TCK));
}

void write_file(const std::string& path, std::string_view data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  REQUIRE(out.good());
}

/// A stat line as the kernel writes it: 52 fields, `flags` the 9th and `start` the 22nd.
std::string stat_line(std::int64_t pid, std::string_view comm, char state,
                      std::int64_t start = 4200, std::int64_t flags = 0x400100) {
  return std::to_string(pid) + " (" + std::string(comm) + ") " + state + " 1 " +
         std::to_string(pid) + " " + std::to_string(pid) + " 0 -1 " + std::to_string(flags) +
         " 120 0 0 0 3 1 0 0 20 0 1 0 " + std::to_string(start) +
         " 9211904 830 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 "
         "0 0\n";
}

/// A status file with the fields the proofs read.
std::string status_text(std::string_view name, std::int64_t tgid, std::string_view uids,
                        std::string_view nspid, std::int64_t threads = 1) {
  const std::string_view pid = nspid.substr(0, nspid.find('\t'));
  return "Name:\t" + std::string(name) + "\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t" +
         std::to_string(tgid) + "\nNgid:\t0\nPid:\t" + std::string(pid) +
         "\nPPid:\t1\nTracerPid:\t0\nUid:\t" + std::string(uids) +
         "\nGid:\t1000\t1000\t1000\t1000\nNSpid:\t" + std::string(nspid) + "\nThreads:\t" +
         std::to_string(threads) + "\n";
}

/// A /proc fixture tree in a temp folder, with the cgroup hierarchies beside it.
struct ProcTree {
  TempDir dir;
  std::string root = dir / "proc";
  std::string cgroups = dir / "cgroup";

  ProcTree() {
    std::filesystem::create_directories(root);
    std::filesystem::create_directories(cgroups);
    // The hierarchies as mountinfo shows them: cgroup2 at `cgroups`, a v1 freezer below it.
    mounts("30 1 0:26 / " + cgroups + " rw,nosuid - cgroup2 cgroup2 rw\n" +
           "31 30 0:27 / " + cgroups + "/freezer rw - cgroup cgroup rw,freezer\n");
  }
  /// `<root>/self/mountinfo`.
  void mounts(const std::string& text) { write_file(root + "/self/mountinfo", text); }
  void file(std::int64_t pid, std::string_view name, std::string_view data) {
    write_file(root + "/" + std::to_string(pid) + "/" + std::string(name), data);
  }
  /// A process: its stat, status and cmdline (NUL-separated arguments).
  void process(std::int64_t pid, const std::string& stat, const std::string& status,
               std::string_view cmdline) {
    file(pid, "stat", stat);
    file(pid, "status", status);
    file(pid, "cmdline", cmdline);
  }
  /// Its `ns/pid` link, naming the PID namespace of inode `inode`.
  void pid_namespace(std::int64_t pid, std::uint64_t inode) {
    std::filesystem::create_directories(root + "/" + std::to_string(pid) + "/ns");
    std::filesystem::create_symlink("pid:[" + std::to_string(inode) + "]",
                                    root + "/" + std::to_string(pid) + "/ns/pid");
  }
  std::optional<ProcessInfo> read(std::int64_t pid) const {
    return read_process(root, pid, boot_ns);
  }
};

std::vector<std::int64_t> pids_of(const std::vector<ProcessInfo>& processes) {
  std::vector<std::int64_t> pids;
  for (const ProcessInfo& process : processes) pids.push_back(process.pid);
  std::sort(pids.begin(), pids.end());
  return pids;
}

using namespace std::string_literals;

}  // namespace

TEST_CASE("a normal process: state, start time, ids, threads, NSpid and its command line") {
  ProcTree tree;
  tree.process(4242, stat_line(4242, "node", 'S', 4200),
               status_text("node", 4242, "1000\t1001\t1002\t1003", "4242", 7),
               "node\0/usr/bin/apnea\0--flag\0"s);
  auto info = tree.read(4242);
  REQUIRE(info);
  CHECK(info->pid == 4242);
  CHECK(info->state == 'S');
  CHECK(info->start_time_ns == after_boot(4200));
  CHECK(info->tgid == 4242);
  CHECK(info->threads == 7);
  CHECK(info->uids_known);
  CHECK(info->uids == std::array<std::uint32_t, 4>{1000, 1001, 1002, 1003});
  CHECK(info->uid == 1000);
  CHECK(info->nspid == std::vector<std::int64_t>{4242});
  CHECK(info->command == "node /usr/bin/apnea --flag");
}

TEST_CASE("a traced process: its tracer's pid and command line; none when TracerPid is 0") {
  ProcTree tree;
  std::string status = status_text("node", 4242, "1000\t1000\t1000\t1000", "4242");
  status.replace(status.find("TracerPid:\t0"), 12, "TracerPid:\t4300");
  tree.process(4242, stat_line(4242, "node", 't', 4200), status, "node\0apnea\0"s);
  tree.process(4300, stat_line(4300, "gdb", 'S', 4250),
               status_text("gdb", 4300, "1000\t1000\t1000\t1000", "4300"), "gdb\0-p\0" "4242\0"s);
  auto traced = tree.read(4242);
  REQUIRE(traced);
  CHECK(traced->tracer_pid == 4300);
  CHECK(traced->tracer_command == "gdb -p 4242");
  auto tracer = tree.read(4300);
  REQUIRE(tracer);
  CHECK(tracer->tracer_pid == 0);
  CHECK(tracer->tracer_command.empty());
}

TEST_CASE("its mount namespace, or when that cannot be read its mountinfo (proof 4)") {
  ProcTree tree;
  for (const std::int64_t pid : {50, 51}) {
    tree.process(pid, stat_line(pid, "node", 'S', 4200), status_text("node", pid, "2000\t2000\t2000\t2000", std::to_string(pid)),
                 "node\0"s);
    tree.file(pid, "mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
  }
  std::filesystem::create_directories(tree.root + "/50/ns");
  write_file(tree.root + "/50/ns/mnt", "");  // readable: its inode is the namespace
  const auto readable = tree.read(50);
  REQUIRE(readable);
  CHECK(readable->mount_namespace.has_value());
  CHECK_FALSE(readable->mount_info.has_value());
  const auto unreadable = tree.read(51);  // no ns/mnt: its mountinfo is read instead
  REQUIRE(unreadable);
  CHECK_FALSE(unreadable->mount_namespace.has_value());
  CHECK(unreadable->mount_info == "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
}

TEST_CASE("a file read whole or not at all: a mount table cut at a line's end would read as complete") {
  TempDir dir;
  const std::string path = dir / "mountinfo";
  const std::string text = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" + std::string(8000, 'x') + "\n";
  write_file(path, text);
  CHECK(read_limited_at(AT_FDCWD, path.c_str(), text.size(), true) == text);
  CHECK_FALSE(read_limited_at(AT_FDCWD, path.c_str(), text.size() - 1, true));
  const auto partial = read_limited_at(AT_FDCWD, path.c_str(), 100, false);  // what a small file reader keeps
  REQUIRE(partial);
  CHECK(partial->size() > 100);
  CHECK(partial->size() < text.size());
  CHECK(text.starts_with(*partial));
  CHECK_FALSE(read_limited_at(AT_FDCWD, (dir / "none").c_str(), 100, true));
}

TEST_CASE("a command holding spaces and parentheses ends at the last ')'") {
  const std::string line = stat_line(77, "a) (b c) R 9", 'D', 31337, 0x40);
  auto parsed = parse_stat_line(line);
  REQUIRE(parsed);
  REQUIRE(parsed->comm);
  CHECK(*parsed->comm == "a) (b c) R 9");
  CHECK(parsed->state == 'D');
  CHECK(parsed->flags == 0x40);
  CHECK(parsed->start_ticks == 31337);

  ProcTree tree;
  tree.process(77, line, status_text("a) (b c) R 9", 77, "0\t0\t0\t0", "77"), "");
  auto info = tree.read(77);
  REQUIRE(info);
  CHECK(info->state == 'D');
  CHECK(info->start_time_ns == after_boot(31337));
  CHECK(info->command == "[a) (b c) R 9]");  // no command line: the stat name, bracketed
}

TEST_CASE("a stat line without a closing ')' or cut before the start time is no process") {
  CHECK_FALSE(parse_stat_line("12 (name S 1 12"));
  CHECK_FALSE(parse_stat_line(""));
  auto cut = parse_stat_line("12 (name) S 1 12 12 0 -1 4194560");
  REQUIRE(cut);
  CHECK(cut->state == 'S');
  CHECK(cut->flags == 4194560);
  CHECK_FALSE(cut->start_ticks);
  auto bare = parse_stat_line("12 name)");
  REQUIRE(bare);
  CHECK_FALSE(bare->comm);
  CHECK(bare->state == '?');

  ProcTree tree;
  tree.process(12, "12 (name) S 1 12 12 0 -1 4194560\n",
               status_text("name", 12, "0\t0\t0\t0", "12"), "name\0"s);
  CHECK_FALSE(tree.read(12));
  CHECK_FALSE(tree.read(13));  // no entry
  CHECK_FALSE(tree.read(0));
  CHECK_FALSE(tree.read(-5));
}

TEST_CASE("a thread: its Tgid names its leader") {
  ProcTree tree;
  tree.process(5001, stat_line(5001, "worker", 'R'),
               status_text("worker", 5000, "1000\t1000\t1000\t1000", "5001", 4), "node\0app\0"s);
  auto info = tree.read(5001);
  REQUIRE(info);
  CHECK(info->pid == 5001);
  CHECK(info->tgid == 5000);
  CHECK(info->threads == 4);
  CHECK(info->state == 'R');
}

TEST_CASE("a kernel thread: PF_KTHREAD, no command line, never paused") {
  const std::int64_t kthread = kernel_thread_flag | 0x8040;
  ProcTree tree;
  tree.process(9, stat_line(9, "kworker/0:1-events", 'I', 12, kthread),
               status_text("kworker/0:1-events", 9, "0\t0\t0\t0", "9"), "");
  auto parsed = parse_stat_line(stat_line(9, "kworker/0:1-events", 'I', 12, kthread));
  REQUIRE(parsed);
  CHECK(parsed->flags == kthread);
  auto info = tree.read(9);
  REQUIRE(info);
  CHECK(info->command == "[kworker/0:1-events]");
  CHECK(info->kernel_thread);

  // Stopped, a kernel thread is passed over; a user process calling itself one is not.
  tree.process(10, stat_line(10, "kthreadd", 'T', 12, kthread),
               status_text("kthreadd", 10, "0\t0\t0\t0", "10"), "");
  tree.process(11, stat_line(11, "kworker/1:0", 'T', 99, 0x400000),
               status_text("kworker/1:0", 11, "1000\t1000\t1000\t1000", "11"), "");
  auto paused = read_paused_processes(tree.root, boot_ns);
  REQUIRE(paused);
  CHECK(pids_of(*paused) == std::vector<std::int64_t>{11});
  CHECK(paused->front().command == "[kworker/1:0]");
  // A user process whose name says kworker is no kernel thread: only the flag tells.
  CHECK_FALSE(tree.read(11)->kernel_thread);
}

TEST_CASE("a zombie: state Z, its last thread, its name bracketed") {
  ProcTree tree;
  tree.process(6000, stat_line(6000, "apnea run", 'Z', 500),
               status_text("apnea run", 6000, "1000\t1000\t1000\t1000", "6000", 1), "");
  auto info = tree.read(6000);
  REQUIRE(info);
  CHECK(info->state == 'Z');
  CHECK(info->threads == 1);
  CHECK(info->command == "[apnea run]");
  CHECK(info->start_time_ns == after_boot(500));
}

TEST_CASE("NSpid with several fields: a process in nested PID namespaces") {
  ProcTree tree;
  tree.process(7000, stat_line(7000, "node", 'S'),
               status_text("node", 7000, "100000\t100000\t100000\t100000", "7000\t42\t1"),
               "node\0apnea\0"s);
  tree.pid_namespace(7000, 4026532200);
  // Our namespace only: left out, whether its link says so or its status does.
  tree.process(300, stat_line(300, "bash", 'S'), status_text("bash", 300, "0\t0\t0\t0", "300"),
               "bash\0"s);
  tree.process(301, stat_line(301, "init", 'S'), status_text("init", 301, "0\t0\t0\t0", "301\t1"),
               "init\0"s);
  tree.pid_namespace(301, initial_pid_namespace_inode);  // the link is trusted over status
  auto info = tree.read(7000);
  REQUIRE(info);
  CHECK(info->nspid == std::vector<std::int64_t>{7000, 42, 1});
  CHECK(info->uid == 100000);

  const std::vector<ProcessInfo> view = read_namespace_view(tree.root, boot_ns);
  REQUIRE(pids_of(view) == std::vector<std::int64_t>{7000});
  CHECK(view.front().nspid == std::vector<std::int64_t>{7000, 42, 1});
  CHECK(view.front().command == "node apnea");
}

TEST_CASE("a missing status file leaves its fields unknown") {
  ProcTree tree;
  tree.file(8000, "stat", stat_line(8000, "node", 'S', 77));
  tree.file(8000, "cmdline", "node\0"s);
  auto info = tree.read(8000);
  REQUIRE(info);
  CHECK(info->state == 'S');
  CHECK(info->start_time_ns == after_boot(77));
  CHECK(info->tgid == 0);
  CHECK(info->threads == 0);
  CHECK(info->uid == 0);
  CHECK_FALSE(info->uids_known);
  CHECK(info->nspid.empty());
  CHECK(info->command == "node");
}

TEST_CASE("a Uid line that is not four uids is not known") {
  ProcTree tree;
  tree.process(8100, stat_line(8100, "node", 'S'),
               status_text("node", 8100, "1000\t1000\t1000", "8100"), "node\0"s);
  auto info = tree.read(8100);
  REQUIRE(info);
  CHECK_FALSE(info->uids_known);
  CHECK(info->uid == 1000);  // the real uid still read
}

TEST_CASE("paused: stopped, traced, D, frozen at any level, inspected or unreadable; not running ones") {
  ProcTree tree;
  auto user = [&](std::int64_t pid, char state, std::string_view cgroup,
                  std::string_view cmdline = "node\0apnea\0"s, std::int64_t tracer = 0) {
    std::string status = status_text("node", pid, "1000\t1000\t1000\t1000", std::to_string(pid));
    status.replace(status.find("TracerPid:\t0"), 12, "TracerPid:\t" + std::to_string(tracer));
    tree.process(pid, stat_line(pid, "node", state, pid), status, cmdline);
    if (!cgroup.empty()) tree.file(pid, "cgroup", cgroup);
  };
  const std::string v2 = tree.cgroups;
  for (const char* group : {"/user.slice/a", "/user.slice/frozen", "/frozen-parent/child",
                            "/freezing/child", "/in-progress/child"})
    write_file(v2 + group + "/cgroup.events", "populated 1\nfrozen 0\n");
  write_file(v2 + "/user.slice/cgroup.freeze", "0\n");
  write_file(v2 + "/user.slice/a/cgroup.freeze", "0\n");
  write_file(v2 + "/user.slice/frozen/cgroup.freeze", "1\n");
  write_file(v2 + "/user.slice/frozen/cgroup.events", "populated 1\nfrozen 1\n");
  // A frozen parent: the child's own cgroup.freeze is 0, its events say frozen.
  write_file(v2 + "/frozen-parent/cgroup.freeze", "1\n");
  write_file(v2 + "/frozen-parent/child/cgroup.freeze", "0\n");
  write_file(v2 + "/frozen-parent/child/cgroup.events", "populated 1\nfrozen 1\n");
  // A freeze of the parent in progress: nothing says frozen yet but the parent's freeze.
  write_file(v2 + "/in-progress/cgroup.freeze", "1\n");
  write_file(v2 + "/in-progress/child/cgroup.freeze", "0\n");
  write_file(v2 + "/freezing/cgroup.freeze", "0\n");
  write_file(v2 + "/freezing/child/cgroup.freeze", "0\n");
  write_file(v2 + "/freezer/box/freezer.state", "FROZEN\n");
  write_file(v2 + "/freezer/thawed/freezer.state", "THAWED\n");
  write_file(v2 + "/freezer/parent/freezer.state", "FREEZING\n");
  write_file(v2 + "/freezer/parent/child/freezer.state", "THAWED\n");

  user(100, 'T', "0::/user.slice/a\n");         // stopped (SIGSTOP)
  user(101, 't', "0::/user.slice/a\n");         // stopped by a tracer
  user(102, 'S', "0::/user.slice/frozen\n");    // cgroup v2, frozen
  user(103, 'S', "12:freezer:/box\n0::/\n");    // cgroup v1 freezer
  user(104, 'S', "0::/user.slice/a\n");         // running
  user(105, 'R', "12:freezer:/thawed\n");       // v1, thawed
  user(106, 'S', "0::/user.slice/../frozen\n"); // a path that climbs: outside our view
  user(107, 'D', "0::/user.slice/a\n");         // uninterruptible sleep
  user(108, 'S', "0::/user.slice/a\n", "node\0apnea\0"s, 4242);  // traced while running
  user(109, 'S', "0::/frozen-parent/child\n");  // a frozen parent
  user(110, 'S', "0::/in-progress/child\n");    // the parent's freeze in progress
  user(111, 'S', "12:freezer:/parent/child\n"); // a v1 parent FREEZING
  user(112, 'S', "0::/user.slice/a\n", "node\0--inspect-brk=9229\0apnea\0"s);  // inspector
  user(113, 'S', "0::/user.slice/a\n");
  tree.file(113, "environ", "HOME=/h\0NODE_OPTIONS=--max-old-space-size=99 --inspect\0"s);
  user(114, 'S', "");                           // no cgroup file: unreadable
  user(115, 'S', "0::/no-such-group\n");        // a group with no events: unreadable
  user(116, 'S', "0::/\n");                     // the root cgroup: never frozen
  std::filesystem::create_directories(tree.root + "/117");  // there, but nothing readable
  user(118, 'S', "0::/freezing/child\n");       // nothing frozen on its path

  auto paused = read_paused_processes(tree.root, boot_ns);
  REQUIRE(paused);
  CHECK(pids_of(*paused) == std::vector<std::int64_t>{100, 101, 102, 103, 106, 107, 108, 109, 110,
                                                      111, 112, 113, 114, 115, 117});
  std::map<std::int64_t, const ProcessInfo*> by_pid;
  for (const ProcessInfo& process : *paused) by_pid[process.pid] = &process;
  CHECK(by_pid.at(100)->pause == Pause::stopped);
  CHECK(by_pid.at(101)->pause == Pause::traced);
  CHECK(by_pid.at(102)->pause == Pause::frozen);
  CHECK(by_pid.at(102)->frozen_cgroup == v2 + "/user.slice/frozen");
  CHECK(by_pid.at(103)->pause == Pause::frozen);
  CHECK(by_pid.at(103)->frozen_cgroup == v2 + "/freezer/box");
  CHECK(by_pid.at(106)->pause == Pause::unreadable);
  CHECK(by_pid.at(107)->pause == Pause::disk_sleep);
  CHECK(by_pid.at(108)->pause == Pause::traced);
  CHECK(by_pid.at(108)->tracer_pid == 4242);
  CHECK(by_pid.at(109)->pause == Pause::frozen);
  CHECK(by_pid.at(110)->pause == Pause::frozen);
  CHECK(by_pid.at(110)->frozen_cgroup == v2 + "/in-progress");
  CHECK(by_pid.at(111)->pause == Pause::frozen);
  CHECK(by_pid.at(111)->frozen_cgroup == v2 + "/freezer/parent");
  CHECK(by_pid.at(112)->pause == Pause::inspector);
  CHECK(by_pid.at(113)->pause == Pause::inspector);
  CHECK(by_pid.at(114)->pause == Pause::unreadable);
  CHECK(by_pid.at(115)->pause == Pause::unreadable);
  CHECK(by_pid.at(117)->pause == Pause::unreadable);
  CHECK(by_pid.at(117)->start_time_ns == 0);  // unknown: counts as started in time
  for (const ProcessInfo& process : *paused) {
    if (process.pid == 117) continue;
    CHECK(process.command.find("node") == 0);
    CHECK(process.start_time_ns == after_boot(process.pid));
  }
  CHECK_FALSE(read_paused_processes(tree.dir / "no-proc", boot_ns));
}

TEST_CASE("paused: cgroup2 found wherever mountinfo mounts it, a sub-cgroup mount included") {
  ProcTree tree;
  const std::string elsewhere = tree.dir / "my cgroups";  // mountinfo escapes the space
  const std::string container = tree.dir / "container";
  tree.mounts("41 1 0:26 /machine.slice/box " + container + " rw - cgroup2 cgroup2 rw\n" +
              "40 1 0:26 / " + (tree.dir / "my\\040cgroups") + " rw - cgroup2 cgroup2 rw\n");
  write_file(elsewhere + "/user.slice/x/cgroup.events", "frozen 1\n");
  write_file(container + "/inner/cgroup.events", "frozen 0\n");
  write_file(container + "/inner/cgroup.freeze", "0\n");
  write_file(container + "/cgroup.freeze", "1\n");  // the mounted cgroup itself, freezing
  auto user = [&](std::int64_t pid, std::string_view cgroup) {
    tree.process(pid, stat_line(pid, "node", 'S', pid),
                 status_text("node", pid, "1000\t1000\t1000\t1000", std::to_string(pid)), "node\0"s);
    tree.file(pid, "cgroup", cgroup);
  };
  user(200, "0::/user.slice/x\n");
  user(201, "0::/machine.slice/box/inner\n");
  auto paused = read_paused_processes(tree.root, boot_ns);
  REQUIRE(paused);
  REQUIRE(pids_of(*paused) == std::vector<std::int64_t>{200, 201});
  for (const ProcessInfo& process : *paused) CHECK(process.pause == Pause::frozen);

  // No cgroup2 mount at all: a process's cgroup cannot be looked at, so it counts.
  tree.mounts("");
  paused = read_paused_processes(tree.root, boot_ns);
  REQUIRE(paused);
  CHECK(pids_of(*paused) == std::vector<std::int64_t>{200, 201});
  for (const ProcessInfo& process : *paused) CHECK(process.pause == Pause::unreadable);
}

TEST_CASE("boot time is the btime of <root>/stat") {
  ProcTree tree;
  write_file(tree.root + "/stat", "cpu  1 2 3 4\nintr 5\nctxt 6\nbtime 1700000000\nprocesses 7\n");
  CHECK(read_boot_time_ns(tree.root) == 1'700'000'000'000'000'000);
  CHECK(read_boot_time_ns(tree.dir / "none") == 0);
}

TEST_CASE("the kernel's /proc reads as this process") {
  auto self = read_process(default_proc_root, ::getpid(), read_boot_time_ns(default_proc_root));
  REQUIRE(self);
  CHECK(self->pid == ::getpid());
  CHECK(self->tgid == ::getpid());
  CHECK(self->state == 'R');
  CHECK(self->uid == ::getuid());
  CHECK(self->uids_known);
  CHECK_FALSE(self->nspid.empty());
  CHECK(self->command.starts_with(program_invocation_name));
}

TEST_CASE("possible owners: a runtime by its exe, maps, open files, neighbours or environment; unreadable counts") {
  ProcTree tree;
  const auto process = [&](std::int64_t pid, std::string_view uids, std::string_view exe,
                           std::string_view maps, std::string_view environ) {
    tree.process(pid, stat_line(pid, "proc", 'S', pid),
                 status_text("proc", pid, uids, std::to_string(pid)), "proc\0"s);
    std::filesystem::create_directories(tree.root + "/" + std::to_string(pid) + "/fd");
    if (!exe.empty())
      std::filesystem::create_symlink(std::string(exe), tree.root + "/" + std::to_string(pid) + "/exe");
    if (!maps.empty()) tree.file(pid, "maps", maps);
    tree.file(pid, "environ", environ);
    std::filesystem::create_symlink("/home/ann/code/site", tree.root + "/" + std::to_string(pid) + "/cwd");
  };
  const std::string ours = "1000\t1000\t1000\t1000";
  const std::string plain_maps = "5581-5582 r--p 0 08:01 12 /usr/bin/bash\n7f00-7f01 r-xp 0 08:01 13 /usr/lib/libc.so.6\n";
  process(300, ours, "/usr/bin/node", plain_maps, "HOME=/h\0"s);                        // exe
  process(301, ours, "/usr/bin/code-helper", plain_maps + "7f02-7f03 r-xp 0 08:01 14 /usr/lib/libnode.so.108\n",
          "HOME=/h\0"s);                                                                  // maps libnode
  process(302, ours, "/opt/app/bin/x", plain_maps + "7f02-7f03 r--p 0 08:01 15 /opt/app/snapshot_blob.bin\n",
          "HOME=/h\0"s);                                                                  // maps a snapshot
  process(303, ours, "/usr/bin/bash", plain_maps, "HOME=/h\0"s);                        // not a runtime
  std::filesystem::create_symlink("/opt/editor/resources/app.asar", tree.root + "/303/fd/7");  // ... but an asar open
  process(304, ours, "/usr/bin/bash", plain_maps, "A=1\0ELECTRON_RUN_AS_NODE=1\0"s);     // environment
  const std::string editor = tree.dir / "editor";
  write_file(editor + "/resources/app.asar", "asar");
  process(305, ours, editor + "/code", plain_maps, "HOME=/h\0"s);                       // beside resources/app.asar
  process(306, ours, "/usr/bin/bash", "", "HOME=/h\0"s);                                 // maps unreadable
  process(307, "2000\t2000\t2000\t2000", "/usr/bin/node", plain_maps, "HOME=/h\0"s);    // another account
  process(308, "2000\t1000\t2000\t2000", "/usr/bin/node", plain_maps, "HOME=/h\0"s);    // ours by one uid
  process(309, ours, "/usr/bin/bash", plain_maps, "HOME=/h\0"s);                        // nothing
  process(310, ours, "/usr/lib/node_modules/.bin/deno (deleted)", plain_maps, "HOME=/h\0"s);  // deleted runtime

  auto found = read_runtime_processes(tree.root, 1000);
  REQUIRE(found);
  std::map<std::int64_t, std::string> signs;
  for (const RuntimeProcess& p : *found) signs[p.pid] = p.sign;
  CHECK(signs == std::map<std::int64_t, std::string>{
                     {300, "exe node"}, {301, "maps libnode.so.108"}, {302, "maps snapshot_blob.bin"},
                     {303, "fd *.asar"}, {304, "environ ELECTRON_RUN_AS_NODE"},
                     {305, "beside resources/app.asar"}, {306, "unreadable: maps"}, {308, "exe node"},
                     {310, "exe deno"}});
  for (const RuntimeProcess& p : *found) CHECK(p.cwd == "/home/ann/code/site");
  // Its environment is kept whatever the sign: run computes the area it would lock from it.
  for (const RuntimeProcess& p : *found)
    if (p.pid == 300) CHECK(p.environment == "HOME=/h\0"s);
  // Root's area: another account's process counts too (proof 4 excludes nothing there).
  auto as_root = read_runtime_processes(tree.root, 0);
  REQUIRE(as_root);
  CHECK(std::ranges::any_of(*as_root, [](const RuntimeProcess& p) { return p.pid == 307; }));
  CHECK_FALSE(read_runtime_processes(tree.dir / "no-proc", 1000));
  // One process's sign, by the same tests (a carrier's pid-not-runtime): "" for none, nothing
  // for a pid with no entry.
  CHECK(read_runtime_sign(tree.root, 300) == std::optional<std::string>("exe node"));
  CHECK(read_runtime_sign(tree.root, 306) == std::optional<std::string>("unreadable: maps"));
  CHECK(read_runtime_sign(tree.root, 309) == std::optional<std::string>(""));
  CHECK(read_runtime_sign(tree.root, 307) == std::optional<std::string>("exe node"));
  CHECK_FALSE(read_runtime_sign(tree.root, 999));
}

TEST_CASE("file servers: by name, reaching the area by working directory or descriptor, above, at or inside it") {
  ProcTree tree;
  const std::string area = "/tmp/apnea-1000/operation-locks";
  const auto process = [&](std::int64_t pid, std::string_view comm, std::string_view cwd,
                           std::vector<std::string> fds = {}, std::string_view cmdline = "") {
    const std::string directory = tree.root + "/" + std::to_string(pid);
    tree.file(pid, "comm", std::string(comm) + "\n");
    tree.file(pid, "cmdline", cmdline);
    if (!cwd.empty()) std::filesystem::create_symlink(std::string(cwd), directory + "/cwd");
    std::filesystem::create_directories(directory + "/fd");
    for (std::size_t fd = 0; fd < fds.size(); ++fd)
      std::filesystem::create_symlink(fds[fd], directory + "/fd/" + std::to_string(fd));
  };
  const auto reaching = [&] { return read_file_server_reaching(tree.root, area); };
  process(10, "bash", "/");                                  // not a file server
  process(11, "sshd", "/tmp/apnea-1000");                    // not one either
  process(12, "smbd", "/srv/share", {"socket:[77]", "/srv/share/a.txt"});  // elsewhere
  process(13, "qemu-system-x86", "/", {}, "qemu\0-m\0" "2G\0"s);  // qemu without a 9p share
  REQUIRE(reaching());
  CHECK(*reaching() == "");

  SUBCASE("its working directory above the area") {
    process(20, "smbd-notifyd", "/tmp");
    CHECK(*reaching() == "smbd-notifyd (pid 20): working directory /tmp");
  }
  SUBCASE("the root: every daemon that changed to /") {
    process(20, "sftp-server", "/");
    CHECK(*reaching() == "sftp-server (pid 20): working directory /");
  }
  SUBCASE("a descriptor inside the area") {
    process(20, "syncthing", "/home/ann", {"pipe:[5]", area + "/repository-x.lock/owner.json (deleted)"});
    CHECK(*reaching() == "syncthing (pid 20): open descriptor " + area + "/repository-x.lock/owner.json (deleted)");
  }
  SUBCASE("qemu with a 9p share") {
    process(20, "qemu-system-x86", "/var/lib/vm", {"/tmp"}, "qemu\0-virtfs\0local,path=/tmp\0"s);
    CHECK(*reaching() == "qemu-system-x86 (pid 20): open descriptor /tmp");
  }
  SUBCASE("a sibling directory whose name begins the same does not reach it") {
    process(20, "unison", "/tmp/apnea-1000/operation-locksX");
    CHECK(*reaching() == "");
  }
  SUBCASE("a working directory that cannot be read counts") {
    process(20, "virtiofsd", "");
    CHECK(*reaching() == "virtiofsd (pid 20): its working directory cannot be read");
  }
  CHECK_FALSE(read_file_server_reaching(tree.dir / "no-proc", area));
}
