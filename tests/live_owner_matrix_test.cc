// The live-owner matrix (issue "One removal gate"): every way this machine can stage an owner
// that is alive while it looks dead or damaged, crossed with every command and flag that can
// remove a lock or take it over. Each cell: nothing of the live owner's lock is removed or
// changed, and a second holder (`run -n`, `run -w`) is refused without running its command.
// Cells that need root, unshare or a mount run where they can and are counted as skipped,
// with the reason, where they cannot; the counts are printed.
//
// Owners whose record is changed after publication must be changed outside the
// record-changed window (more than 2 s after it was written): those are staged once, all
// together (one wait for all), and every remover runs against that same owner. Each cell
// checks the owner is as it found it, and the case stops at the first cell that changed it.
//
// Assertions are on exit codes and on what exists on disk, never on wording.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <iterator>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "area_builder.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// One live owner, staged: its area, its lock, and what keeps it alive until the end.
struct Owner {
  std::string dir;   ///< the lock area
  std::string lock;  ///< the live owner's lock
  std::string repo;  ///< the repository it locks
  std::function<void()> end;  ///< ends the owner (and undoes the staging)
  /// What must survive unchanged: the lock, and for a paused guard holder its guard too
  /// (the area holds exactly these).
  std::vector<std::string> keep{lock};
  /// Run before each command (e.g. `unshare --time --`: the commands see a void clock).
  std::vector<std::string> prefix{};
};

/// A way an owner can be alive while this machine's view says otherwise. `stage` returns the
/// owner, or a reason it cannot be staged here (then the case's cells are skipped).
struct OwnerCase {
  std::string name;
  std::function<std::variant<Owner, std::string>(Scratch&)> stage;
  /// Done to the staged owner once its record is past the record-changed window (more than
  /// 2 s after it was published): nothing, or why it cannot be done here. A case with one is
  /// shared: staged once, with the others that have one (one wait for all of them), and
  /// every remover runs against that same owner; a wait per cell would cost 2 s a cell.
  std::function<std::optional<std::string>(Owner&)> later{};
};

/// `apnea-locks run` holding `repo`'s lock in `dir` (LockHolder) with `extra` done to it.
std::variant<Owner, std::string> held_by_run(
    Scratch& scratch, const std::string& dir,
    const std::function<std::optional<std::string>(pid_t, const std::string&)>& extra = {}) {
  make_dir(dir);
  auto holder = std::make_shared<LockHolder>(dir, scratch.repo);
  if (!holder->held()) return "apnea-locks run could not take the lock: " + holder->process().err();
  const pid_t pid = holder->pid();
  const std::string lock = repo_lock(dir, scratch.repo);
  if (extra) {
    if (auto why = extra(pid, lock)) {
      ::kill(pid, SIGCONT);
      (void)holder->release();
      return *why;
    }
  }
  age_path(lock, 3600);  // past Apnea's grace
  return Owner{dir, repo_lock(dir, scratch.repo), scratch.repo, [holder, pid] {
                 ::kill(pid, SIGCONT);
                 (void)holder->release();
               }};
}

/// Where the hierarchy of `fstype` (cgroup2, or a v1 `cgroup` with `option`) is mounted, as
/// this process's mountinfo says; "" when it is not.
std::string cgroup_mount(const std::string& fstype, const std::string& option = "") {
  std::istringstream lines(read_bytes("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> words{std::istream_iterator<std::string>(fields), {}};
    const auto dash = std::find(words.begin(), words.end(), "-");
    if (words.size() < 5 || dash == words.end() || words.end() - dash < 4 || dash[1] != fstype) continue;
    if (!option.empty() && ("," + dash[3] + ",").find("," + option + ",") == std::string::npos) continue;
    if (words[3] == "/") return words[4];
  }
  return {};
}

/// A dead owner's lock with a guard an hour old (by mtime), for a paused process staged
/// before it (`end` undoes that): the guard's holder may be paused between its token check
/// and its rename, so neither the guard nor its lock may go. Status must name the paused
/// process as the guard's possible holder, whatever the clock (a void clock refuses every
/// guard anyway, so this is what can fail on such a machine).
std::variant<Owner, std::string> dead_lock_guarded_by(Scratch& s, const std::function<void()>& end,
                                                      const std::string& kind) {
  make_dir(s.locks);
  const std::string lock = repo_lock(s.locks, s.repo);
  make_entry(s.locks, lock.substr(s.locks.size() + 1), owner_json(dead_pid()));
  age_path(lock, 3600);
  const std::string guard = lock + ".reclaim";
  make_dir(guard);
  age_path(guard, 3600);
  const Finished seen = finish({locks_bin(), "status", "--json", "--lock-dir", s.locks}, {}, 60s);
  if (seen.out.find("guard-holder-paused") == std::string::npos) {
    end();
    FAIL_CHECK("status did not see the " << kind << " guard holder: " << seen.out);
    return std::string("not seen as paused (reported above)");
  }
  Owner owner{s.locks, lock, s.repo, end};
  owner.keep = {lock, guard};
  return owner;
}

enum class Freeze { v1_own, v1_parent, v2_own, v2_parent };

/// Writes `text` to an existing kernel file (a cgroup's); false when it cannot.
bool put(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

/// A dead owner's lock with a guard an hour old (by mtime), held by a process that started
/// before the guard and is frozen by `how`: the guard's holder may be paused between its
/// token check and its rename, so neither the guard nor its lock may go. Needs root and a
/// writable cgroup hierarchy.
std::variant<Owner, std::string> paused_guard_holder(Scratch& s, Freeze how) {
  if (::getuid() != 0) return std::string("not root: freezing a cgroup needs root");
  const bool v1 = how == Freeze::v1_own || how == Freeze::v1_parent;
  const std::string mount = v1 ? cgroup_mount("cgroup", "freezer") : cgroup_mount("cgroup2");
  if (mount.empty()) return std::string(v1 ? "no v1 freezer hierarchy mounted" : "no cgroup2 mounted");
  const std::string top = mount + "/apnea-matrix-" + std::to_string(::getpid()) + "-" +
                          std::to_string(reinterpret_cast<std::uintptr_t>(&s) % 100000);
  const bool parent = how == Freeze::v1_parent || how == Freeze::v2_parent;
  const std::string group = parent ? top + "/child" : top;
  if (::mkdir(top.c_str(), 0755) != 0 || (parent && ::mkdir(group.c_str(), 0755) != 0))
    return "cannot make a cgroup under " + mount + ": " + std::strerror(errno);
  auto holder = std::make_shared<SpawnedProcess>(std::vector<std::string>{"sleep", "1000"});
  const auto undo = [holder, top, group, v1, parent] {
    (void)put(top + (v1 ? "/freezer.state" : "/cgroup.freeze"), v1 ? "THAWED" : "0");
    ::kill(holder->pid(), SIGKILL);
    (void)holder->wait(30s);
    if (parent) ::rmdir(group.c_str());
    ::rmdir(top.c_str());
  };
  if (!put(group + (v1 ? "/tasks" : "/cgroup.procs"), std::to_string(holder->pid())) ||
      !put(top + (v1 ? "/freezer.state" : "/cgroup.freeze"), v1 ? "FROZEN" : "1")) {
    undo();
    return "cannot freeze a cgroup under " + mount + ": " + std::strerror(errno);
  }
  // Frozen once the kernel says so (a condition polled with a deadline).
  const std::string state_file = v1 ? group + "/freezer.state" : group + "/cgroup.events";
  bool frozen = false;
  for (int i = 0; i < 3000 && !frozen; ++i) {
    const std::string state = read_bytes(state_file);
    frozen = v1 ? state.starts_with("FROZEN") : state.find("frozen 1") != std::string::npos;
    if (!frozen) (void)holder->wait(1ms);
  }
  if (!frozen) {
    undo();
    return "the cgroup did not freeze: " + read_bytes(state_file);
  }
  return dead_lock_guarded_by(s, undo, "frozen");
}

/// A dead owner's lock whose guard (an hour old) may be held by a process in uninterruptible
/// sleep (state D: lock_stress d-state, a vfork parent), which started before the guard.
std::variant<Owner, std::string> d_state_guard_holder(Scratch& s) {
  const std::string stress = test_env("APNEA_LOCKS_STRESS");
  if (stress.empty()) return std::string("APNEA_LOCKS_STRESS is not set");
  auto holder = std::make_shared<SpawnedProcess>(std::vector<std::string>{stress, "d-state"});
  if (!holder->read_line(Stream::out, 30s)) return "lock_stress d-state did not start: " + holder->err();
  const std::string pid = std::to_string(holder->pid());
  const auto end = [holder, pid] {
    // The vfork child first (its parent then leaves D and exits), then the parent.
    std::istringstream children(read_bytes("/proc/" + pid + "/task/" + pid + "/children"));
    for (long child = 0; children >> child;) ::kill(static_cast<pid_t>(child), SIGKILL);
    ::kill(holder->pid(), SIGKILL);
    (void)holder->wait(30s);
  };
  // In D once the kernel says so (a condition polled with a deadline).
  bool in_d = false;
  for (int i = 0; i < 3000 && !in_d; ++i) {
    in_d = read_bytes("/proc/" + pid + "/status").find("State:\tD") != std::string::npos;
    if (!in_d) (void)holder->wait(1ms);
  }
  if (!in_d) {
    end();
    return std::string("the vfork parent did not show state D");
  }
  return dead_lock_guarded_by(s, end, "D-state");
}

/// The widest record-changed window (PROTOCOL.md section 10) any remover below may use: the
/// default tolerance, 2 s, and no wider whatever --tolerance says (an extreme tolerance must
/// never make a removal more likely). A change to a record inside it cannot be told from its
/// publication, by design; one after it must be seen.
constexpr std::int64_t record_window_ns = 2'000'000'000;

/// statx times of a path (links not followed), nanoseconds since the epoch; birth is 0
/// where the filesystem gives none.
struct Times {
  std::int64_t birth_ns = 0, ctime_ns = 0;
};
std::optional<Times> times_of(const std::string& path) {
  struct statx sx {};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_CTIME | STATX_BTIME, &sx) != 0)
    return std::nullopt;
  const auto ns = [](const struct statx_timestamp& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  };
  return Times{(sx.stx_mask & STATX_BTIME) != 0 ? ns(sx.stx_btime) : 0, ns(sx.stx_ctime)};
}

/// True when `lock`'s record is changed since publication by PROTOCOL.md section 10's test
/// with a tolerance of `record_window_ns` (what the staging of a changed record must get).
bool changed_past_window(const std::string& lock) {
  const auto dir = times_of(lock), file = times_of(lock + "/owner.json");
  if (!dir || !file) return false;
  if (file->ctime_ns > dir->ctime_ns + record_window_ns) return true;
  if (file->birth_ns == 0) return false;
  return file->ctime_ns - file->birth_ns > record_window_ns ||
         (dir->birth_ns != 0 && (dir->birth_ns > file->birth_ns ||
                                 file->birth_ns - dir->birth_ns > record_window_ns));
}

/// Waits until, on each lock's filesystem, the time is more than `record_window_ns` past
/// every timestamp of the lock and its owner.json: a change made then is record-changed. The
/// filesystem's time is read from a probe file (its own path, beside the lock area) touched
/// on each try; the condition is polled with a deadline. False when the deadline passed.
bool wait_past_window(const std::vector<std::pair<std::string, std::string>>& lock_and_probe) {
  constexpr std::int64_t margin_ns = 100'000'000;
  std::vector<std::int64_t> latest;
  for (const auto& [lock, probe] : lock_and_probe) {
    const auto dir = times_of(lock), file = times_of(lock + "/owner.json");
    if (!dir || !file) return false;
    latest.push_back(std::max({dir->birth_ns, dir->ctime_ns, file->birth_ns, file->ctime_ns}));
    write_file(probe, "");
  }
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    bool past = true;
    for (std::size_t i = 0; i < lock_and_probe.size() && past; ++i) {
      const std::string& probe = lock_and_probe[i].second;
      const auto now = ::utimensat(AT_FDCWD, probe.c_str(), nullptr, 0) == 0 ? times_of(probe) : std::nullopt;
      if (!now) return false;
      past = now->ctime_ns - latest[i] > record_window_ns + margin_ns;
    }
    if (past) return true;
    std::this_thread::sleep_for(20ms);  // paces the poll; the condition above decides
  }
  return false;
}

/// `record` ({"pid":N,...}) naming `pid` instead, every other byte as it was.
std::optional<std::string> with_pid(const std::string& record, pid_t pid) {
  const std::string key = "{\"pid\":";
  if (!record.starts_with(key)) return std::nullopt;
  const auto end = record.find_first_not_of("0123456789", key.size());
  if (end == std::string::npos || end == key.size()) return std::nullopt;
  return key + std::to_string(pid) + record.substr(end);
}

/// Replaces `path` by rename, as sed -i, editors, rsync and copy tools do: a new file beside
/// it (its mode) holding `data`, renamed over it. Nothing, or what failed.
std::optional<std::string> replace_by_rename(const std::string& path, std::string_view data) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "lstat " + path + ": " + std::strerror(errno);
  std::string temp = path.substr(0, path.rfind('/') + 1) + ".owner.json.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return "mkstemp beside " + path + ": " + std::strerror(errno);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const bool written = done == data.size() && ::fchmod(fd, st.st_mode & 07777) == 0 && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temp.c_str());
    return "could not replace " + path + " by rename: " + why;
  }
  return std::nullopt;
}

/// How an owner's record is changed after publication (`later`).
enum class Change { dead_pid_in_place, dead_pid_by_rename, emptied_in_place, own_bytes_by_rename };

/// `later` for a live `run` holder (held_by_run, past Apnea's grace): changes its owner.json
/// as `how` says, keeps the lock past the grace (a rename in the lock touches its mtime),
/// and checks the record now counts as changed since publication.
std::optional<std::string> change_record(Owner& owner, Change how) {
  const std::string record = owner.lock + "/owner.json";
  const std::string bytes = read_bytes(record);
  std::optional<std::string> failed;
  if (how == Change::dead_pid_in_place || how == Change::dead_pid_by_rename) {
    const auto dead = with_pid(bytes, dead_pid());
    if (!dead) {
      FAIL_CHECK("the holder's record does not begin {\"pid\":N: " << bytes);
      return std::string("unexpected record (reported above)");
    }
    if (how == Change::dead_pid_in_place) rewrite_in_place(record, *dead);
    else failed = replace_by_rename(record, *dead);
  } else if (how == Change::emptied_in_place) {
    rewrite_in_place(record, "");
  } else {
    failed = replace_by_rename(record, bytes);
  }
  if (failed) {
    FAIL_CHECK(*failed);
    return std::string("the change failed (reported above)");
  }
  if (how == Change::dead_pid_by_rename || how == Change::own_bytes_by_rename) age_path(owner.lock, 3600);
  if (!changed_past_window(owner.lock)) {
    const auto file = times_of(record);
    if (file && file->birth_ns == 0)  // only the ctime test can be made (PROTOCOL.md section 10)
      return std::string("no birth time on this filesystem: a record replaced by rename is "
                         "outside the promise there");
    FAIL_CHECK("the record does not count as changed since publication after the change");
    return std::string("not changed past the window (reported above)");
  }
  return std::nullopt;
}

const std::vector<OwnerCase>& owner_cases() {
  static const std::vector<OwnerCase> cases{
      {"a stopped holder (SIGSTOP, state T)",
       [](Scratch& s) {
         return held_by_run(s, s.locks, [](pid_t pid, const std::string&) -> std::optional<std::string> {
           ::kill(pid, SIGSTOP);
           return std::nullopt;
         });
       }},
      {"a traced holder (strace attached: TracerPid set)",
       [](Scratch& s) -> std::variant<Owner, std::string> {
         std::shared_ptr<SpawnedProcess> tracer;
         auto owner = held_by_run(s, s.locks, [&](pid_t pid, const std::string&) -> std::optional<std::string> {
           tracer = std::make_shared<SpawnedProcess>(std::vector<std::string>{
               "strace", "-o", "/dev/null", "-p", std::to_string(pid)});
           // Attached once the kernel names the tracer (a condition polled with a deadline).
           for (int i = 0; i < 3000; ++i) {
             const std::string status = read_bytes("/proc/" + std::to_string(pid) + "/status");
             const auto at = status.find("TracerPid:\t");
             if (at != std::string::npos && status.compare(at + 11, 2, "0\n") != 0) return std::nullopt;
             if (tracer->wait(1ms).has_value()) break;  // strace could not attach
           }
           return "strace could not attach: " + tracer->err();
         });
         if (Owner* held = std::get_if<Owner>(&owner)) {
           held->end = [tracer, end = held->end] {
             ::kill(tracer->pid(), SIGTERM);
             (void)tracer->wait(30s);
             end();
           };
         }
         return owner;
       }},
      {"a live holder whose record got trailing bytes in place (malformed, names it)",
       [](Scratch& s) {
         return held_by_run(s, s.locks, [](pid_t, const std::string& lock) -> std::optional<std::string> {
           const std::string owner = lock + "/owner.json";
           rewrite_in_place(owner, read_bytes(owner) + "x}");
           return std::nullopt;
         });
       }},
      {"a live holder whose record was truncated in place inside its pid ({\"pid\":NNNN)",
       [](Scratch& s) {
         return held_by_run(s, s.locks, [](pid_t pid, const std::string& lock) -> std::optional<std::string> {
           const std::string digits = std::to_string(pid);
           if (digits.size() < 2) return std::string("the holder's pid has one digit");
           rewrite_in_place(lock + "/owner.json", "{\"pid\":" + digits.substr(0, digits.size() - 1));
           return std::nullopt;
         });
       }},
      {"a live holder whose record was chmod'ed 0644 (malformed, names it)",
       [](Scratch& s) {
         return held_by_run(s, s.locks, [](pid_t, const std::string& lock) -> std::optional<std::string> {
           ::chmod((lock + "/owner.json").c_str(), 0644);
           return std::nullopt;
         });
       }},
      {"a holder in a child PID namespace (its in-namespace pid written, /tmp shared)",
       [](Scratch& s) -> std::variant<Owner, std::string> {
         if (::getuid() != 0) return std::string("not root: unshare --pid needs CAP_SYS_ADMIN");
         make_dir(s.locks);
         // Inside the namespace, pids count from 1: fork until the next pid is one this
         // namespace has no process for (ESRCH here), then start run there.
         pid_t target = 100;
         const auto free_here = [](pid_t first) {
           for (pid_t pid = first; pid < first + 4; ++pid)
             if (::kill(pid, 0) == 0 || errno != ESRCH) return false;
           return true;
         };
         while (target < 5000 && !free_here(target)) ++target;
         if (target >= 5000) return std::string("no free low pid here to stage the namespace's pid on");
         const std::string script =
             "while :; do /bin/true & p=$!; wait $p; [ $p -ge " + std::to_string(target - 1) +
             " ] && break; done; " + locks_bin() + " run --lock-dir " + s.locks + " --repo " +
             s.repo + " -- sh -c 'echo held; exec cat'";
         auto holder = std::make_shared<SpawnedProcess>(
             std::vector<std::string>{"unshare", "--pid", "--fork", "--kill-child", "sh", "-c", script});
         if (holder->read_line(Stream::out, 30s) != std::optional<std::string>("held"))
           return "unshare --pid could not start a holder: " + holder->err();
         const std::string lock = repo_lock(s.locks, s.repo);
         const std::string record = read_bytes(lock + "/owner.json");
         const long long written = std::stoll(record.substr(record.find(':') + 1));
         if (::kill(static_cast<pid_t>(written), 0) == 0 || errno != ESRCH) {
           holder->close_stdin();
           (void)holder->wait(30s);
           return "the in-namespace pid " + std::to_string(written) + " is in use here too";
         }
         age_path(lock, 3600);  // past Apnea's grace: only the proof of death stands between
         return Owner{s.locks, lock, s.repo, [holder] {
                        holder->close_stdin();
                        (void)holder->wait(30s);
                      }};
       }},
      {"an owner on a filesystem outside the local list (ramfs; NFS in the field)",
       [](Scratch& s) -> std::variant<Owner, std::string> {
         if (::getuid() != 0) return std::string("not root: mounting ramfs needs CAP_SYS_ADMIN");
         const std::string mount_point = s.root + "/ramfs";
         make_dir(mount_point);
         if (::mount("none", mount_point.c_str(), "ramfs", 0, "mode=0700") != 0)
           return std::string("mount -t ramfs failed: ") + std::strerror(errno);
         const std::string dir = mount_point + "/locks";
         make_dir(dir);
         // Its writer is on another machine: its pid means nothing here (dead here).
         const std::string lock = repo_lock(dir, s.repo);
         make_entry(dir, lock.substr(dir.size() + 1), owner_json(dead_pid()));
         age_path(lock, 3600);
         return Owner{dir, lock, s.repo, [mount_point] { ::umount2(mount_point.c_str(), MNT_DETACH); }};
       }},
      {"a live holder that only clock evidence calls dead (its record dated an hour before it "
       "started: pid-reused), judged with the clock void (another time namespace)",
       [](Scratch& s) -> std::variant<Owner, std::string> {
         if (::getuid() != 0) return std::string("not root: unshare --time needs CAP_SYS_ADMIN");
         const Finished probe = finish({"unshare", "--time", "--", "true"}, {}, 30s);
         if (probe.status != 0) return "unshare --time does not work here: " + probe.err;
         auto owner = held_by_run(s, s.locks, [](pid_t, const std::string& lock) -> std::optional<std::string> {
           age_path(lock + "/owner.json", 3600);  // written "before" its holder started
           return std::nullopt;
         });
         if (Owner* held = std::get_if<Owner>(&owner)) held->prefix = {"unshare", "--time", "--"};
         return owner;
       }},
      {"a guard held by a process in uninterruptible sleep (state D)", d_state_guard_holder},
      {"a guard held by a process frozen in its own v1 freezer cgroup",
       [](Scratch& s) { return paused_guard_holder(s, Freeze::v1_own); }},
      {"a guard held by a process whose v1 freezer parent cgroup is frozen",
       [](Scratch& s) { return paused_guard_holder(s, Freeze::v1_parent); }},
      {"a guard held by a process frozen in its own cgroup2 cgroup",
       [](Scratch& s) { return paused_guard_holder(s, Freeze::v2_own); }},
      {"a guard held by a process whose cgroup2 parent is frozen (systemctl freeze)",
       [](Scratch& s) { return paused_guard_holder(s, Freeze::v2_parent); }},
      // A live holder's record changed more than 2 s after publication (record-changed):
      // it proves nothing, and the holder, `run`, is a possible owner.
      {"a live holder whose record was rewritten in place > 2 s after publication, valid, "
       "naming a dead pid",
       [](Scratch& s) { return held_by_run(s, s.locks); },
       [](Owner& o) { return change_record(o, Change::dead_pid_in_place); }},
      {"a live holder whose record was replaced by rename > 2 s after publication (sed -i, "
       "an editor, rsync), valid, naming a dead pid",
       [](Scratch& s) { return held_by_run(s, s.locks); },
       [](Owner& o) { return change_record(o, Change::dead_pid_by_rename); }},
      {"a live holder whose record was emptied in place > 2 s after publication",
       [](Scratch& s) { return held_by_run(s, s.locks); },
       [](Owner& o) { return change_record(o, Change::emptied_in_place); }},
      {"a live holder whose record was replaced by rename > 2 s after publication with a copy "
       "of its own bytes (a copy tool restoring it)",
       [](Scratch& s) { return held_by_run(s, s.locks); },
       [](Owner& o) { return change_record(o, Change::own_bytes_by_rename); }},
  };
  return cases;
}

/// A command that may remove or take over, with "LOCK", "DIR" and "REPO" replaced.
struct Remover {
  std::vector<std::string> args;
  bool takes_lock = false;  ///< run: would run its command while holding the lock
};

const std::vector<Remover>& removers() {
  static const std::vector<Remover> all{
      {{"reclaim", "--lock-dir", "DIR", "--yes", "LOCK"}},
      {{"reclaim", "--lock-dir", "DIR", "--force", "--yes", "LOCK"}},
      {{"reclaim", "--lock-dir", "DIR", "--yes", "--all"}},
      {{"reclaim", "--lock-dir", "DIR", "--force", "--yes", "--all"}},
      {{"reclaim", "--lock-dir", "DIR", "--force", "--yes", "--guard-age", "1m", "--all"}},
      {{"reclaim", "--lock-dir", "DIR", "--force", "--yes", "--guard-age", "30d", "--all"}},
      {{"reclaim", "--lock-dir", "DIR", "--force", "--yes", "--tolerance", "1s", "--all"}},
      {{"reclaim", "--lock-dir", "DIR", "--force", "--yes", "--tolerance", "1d", "--all"}},
      {{"run", "--lock-dir", "DIR", "--repo", "REPO", "-n"}, true},
      {{"run", "--lock-dir", "DIR", "--repo", "REPO", "-w", "1"}, true},
  };
  return all;
}

}  // namespace

TEST_CASE("the live-owner matrix: no command or flag removes a live owner's lock or lets a second holder in") {
  int cells = 0, skipped = 0, stopped = 0;
  // One cell: `remover` against the staged `owner`. True when it left the owner as it found
  // it (a shared owner is then fit for the next cell).
  const auto cell = [&](const Remover& remover, const Scratch& scratch, const Owner& owner) {
    std::vector<std::string> argv = owner.prefix;
    argv.push_back(locks_bin());
    std::string line;
    for (const std::string& word : remover.args) {
      argv.push_back(word == "DIR" ? owner.dir : word == "LOCK" ? owner.lock
                     : word == "REPO" ? owner.repo : word);
      line += " " + word;
    }
    const std::string ran = scratch.root + "/second-holder-ran-" + std::to_string(cells);
    if (remover.takes_lock) argv.insert(argv.end(), {"--", "touch", ran});
    CAPTURE(line);
    std::vector<std::map<std::string, PathState>> before;
    for (const std::string& path : owner.keep) before.push_back(snapshot(path));
    const Finished done = finish(argv, {}, 60s);
    CAPTURE(done.out);
    CAPTURE(done.err);
    REQUIRE(done.status.has_value());
    ++cells;
    bool intact = true;
    for (std::size_t i = 0; i < owner.keep.size(); ++i) {
      CAPTURE(owner.keep[i]);
      const bool kept = exists(owner.keep[i]);
      CHECK_MESSAGE(kept, "what the live owner holds was removed");
      const bool same = snapshot(owner.keep[i]) == before[i];
      CHECK(same);
      intact = intact && kept && same;
    }
    if (remover.takes_lock) {
      // Held (75: a live owner, or one not proven dead), or malformed to Apnea (76).
      CHECK((*done.status == 75 || *done.status == 76));
      CHECK_FALSE(exists(ran));
    }
    // Nothing left beside the lock: no tombstone, guard or candidate.
    int entries = 0;
    for (const auto& entry : std::filesystem::directory_iterator(owner.dir)) {
      (void)entry;
      ++entries;
    }
    CHECK(entries == static_cast<int>(owner.keep.size()));
    return intact && entries == static_cast<int>(owner.keep.size());
  };

  std::vector<const OwnerCase*> shared;
  for (const OwnerCase& owner_case : owner_cases()) {
    if (owner_case.later) {
      shared.push_back(&owner_case);
      continue;
    }
    CAPTURE(owner_case.name);
    for (const Remover& remover : removers()) {
      Scratch scratch;
      auto staged = owner_case.stage(scratch);
      if (const std::string* why = std::get_if<std::string>(&staged)) {
        MESSAGE("skipped: " << owner_case.name << ": " << *why);
        ++skipped;
        continue;
      }
      Owner& owner = std::get<Owner>(staged);
      (void)cell(remover, scratch, owner);
      owner.end();
    }
  }

  // The shared owners: all staged first, one wait for all until their records are past
  // the record-changed window, then each changed and run against every remover in turn.
  struct Shared {
    const OwnerCase* owner_case;
    std::unique_ptr<Scratch> scratch;
    std::variant<Owner, std::string> staged;
  };
  std::vector<Shared> staged;
  std::vector<std::pair<std::string, std::string>> waiting;
  for (const OwnerCase* owner_case : shared) {
    auto scratch = std::make_unique<Scratch>();
    auto owner = owner_case->stage(*scratch);
    if (const Owner* held = std::get_if<Owner>(&owner))
      waiting.emplace_back(held->lock, scratch->root + "/clock-probe");
    staged.push_back({owner_case, std::move(scratch), std::move(owner)});
  }
  const bool past = waiting.empty() || wait_past_window(waiting);
  CHECK_MESSAGE(past, "the filesystem's clock did not pass the record-changed window in 30 s");
  for (Shared& one : staged) {
    const OwnerCase& owner_case = *one.owner_case;
    CAPTURE(owner_case.name);
    std::optional<std::string> why;
    if (const std::string* not_staged = std::get_if<std::string>(&one.staged)) why = *not_staged;
    else if (!past) why = "not past the record-changed window (reported above)";
    else why = owner_case.later(std::get<Owner>(one.staged));
    if (why) {
      MESSAGE("skipped: " << owner_case.name << ": " << *why);
      skipped += static_cast<int>(removers().size());
      if (Owner* owner = std::get_if<Owner>(&one.staged)) owner->end();
      continue;
    }
    Owner& owner = std::get<Owner>(one.staged);
    for (std::size_t i = 0; i < removers().size(); ++i) {
      if (cell(removers()[i], *one.scratch, owner)) continue;
      // The owner was changed: the cells after this one would not test what they say.
      stopped += static_cast<int>(removers().size() - i - 1);
      MESSAGE("stopped: " << owner_case.name << ": " << removers().size() - i - 1
                          << " cells not run after a cell changed the owner");
      break;
    }
    owner.end();
  }
  MESSAGE("live-owner matrix: " << cells << " cells run, " << skipped << " skipped, " << stopped
                                << " not run after a cell changed their owner");
  CHECK(cells > 0);
}

TEST_CASE("other areas: run refuses while the same lock is held where another Apnea of this account locks") {
  // An Apnea whose TMPDIR differs (set in a shell, not for the desktop session) computes
  // another area and holds the same repository's lock there: run must not take its own.
  Scratch s;
  const std::string uid = std::to_string(::getuid());
  const std::string theirs = s.root + "/their-tmp", mine = s.root + "/my-tmp";
  make_dir(theirs);
  make_dir(mine);
  make_dir(theirs + "/apnea-" + uid);
  const std::string their_area = theirs + "/apnea-" + uid + "/operation-locks";
  auto holder = std::make_unique<LockHolder>(their_area, s.repo, std::vector<std::string>{},
                                             std::vector<std::string>{},
                                             std::map<std::string, std::string>{{"TMPDIR", theirs}});
  REQUIRE_MESSAGE(holder->held(), holder->process().err());
  const std::string ran = s.root + "/ran";
  const std::vector<std::string> argv{locks_bin(), "run", "--repo", s.repo, "-n", "--", "touch", ran};
  Finished done = finish(argv, {{"TMPDIR", mine}}, 60s);
  CAPTURE(done.err);
  CHECK(done.status == 75);
  CHECK(done.err.find(their_area) != std::string::npos);
  CHECK_FALSE(exists(ran));
  // Released there, the lock is run's to take.
  CHECK(holder->release() == 0);
  done = finish(argv, {{"TMPDIR", mine}}, 60s);
  CHECK(done.status == 0);
  CHECK(exists(ran));
}
