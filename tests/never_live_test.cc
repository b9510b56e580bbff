// PROTOCOL.md section 10, the never-live rule, through the real binary and real processes:
// no command, with any flag, removes an entry whose owner record names a pid that is alive,
// however malformed the record, however old the entry. Also: duration options cannot be
// abused to widen what --force removes, an unreadable (mode 0000) lock leaves no tombstone,
// and a reclaim guard whose holder may be paused (a stopped process of the area's uid that
// started before the guard) is not removed.
//
// Assertions are on exit codes, on what exists on disk and on JSON keys that already exist
// (`status -J`'s `path`, `state`, `fix`), never on wording.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "pid_spellings.h"
#include "reliability_util.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {


/// A lock area (`<scratch>/locks`) and a live `apnea-locks run` holding the lock of
/// `<scratch>/repo` in it.
struct LiveLock {
  Scratch scratch;
  std::string dir = scratch.locks;
  std::unique_ptr<LockHolder> holder;
  std::string lock, owner, original;

  LiveLock() {
    make_dir(dir);
    holder = std::make_unique<LockHolder>(dir, scratch.repo);
    REQUIRE_MESSAGE(holder->held(), holder->process().err());
    lock = repo_lock(dir, scratch.repo);
    owner = lock + "/owner.json";
    original = read_bytes(owner);
    REQUIRE(original == owner_json(holder->pid(), token_of(original)));
  }

  Finished reclaim(std::vector<std::string> args) const {
    std::vector<std::string> argv{locks_bin(), "reclaim", "--lock-dir", dir};
    argv.insert(argv.end(), args.begin(), args.end());
    return finish(argv, {}, 60s);
  }

  /// Puts the record back as `run` wrote it (bytes in place, modes, owner).
  void restore() const {
    ::chmod(lock.c_str(), 0700);
    if (!exists(owner)) return;
    REQUIRE(::chown(owner.c_str(), ::getuid(), ::getgid()) == 0);
    ::chmod(owner.c_str(), 0600);
    rewrite_in_place(owner, original);
  }
};

/// The entry of `status -J` whose `path` is `path`, or null.
boost::json::value status_entry(const std::string& dir, const std::string& path) {
  const StatusRun run = status_json(dir);
  if (!run.document.is_object()) {
    FAIL_CHECK("status -J is not JSON: " << run.finished.out << run.finished.err);
    return nullptr;
  }
  for (const auto& entry : run.document.at("entries").as_array())
    if (member(entry.as_object(), "path") == path) return entry;
  return nullptr;
}

/// The check every case of the never-live rule ends with: status does not call the entry
/// stale and offers no fix (nothing may remove it).
void check_status_not_removable(const std::string& dir, const std::string& path) {
  const boost::json::value entry = status_entry(dir, path);
  REQUIRE_MESSAGE(entry.is_object(), "status -J does not list " << path);
  CAPTURE(boost::json::serialize(entry));
  CHECK(member(entry.as_object(), "state") != "stale");
  const auto* fix = entry.as_object().if_contains("fix");
  CHECK_MESSAGE((fix == nullptr || fix->is_null()), "status offers a fix for a live writer's entry");
}

struct Variant {
  const char* what;
  std::function<void(const LiveLock&, long long live, long long dead)> apply;
  bool root_only = false;
  /// Apnea accepts the record and its pid is the live one: a plain live lock, which
  /// `--all` skips (not a target, exit 0) while a named target is refused.
  bool plain_live = false;
};

}  // namespace

TEST_CASE("a live holder's lock, its record mutated in place, survives every reclaim") {
  const Variant variants[] = {
      {"owner.json mode 0644", [](const LiveLock& l, long long, long long) { ::chmod(l.owner.c_str(), 0644); }},
      {"owner.json mode 0640", [](const LiveLock& l, long long, long long) { ::chmod(l.owner.c_str(), 0640); }},
      {"trailing bytes after the JSON",
       [](const LiveLock& l, long long, long long) { rewrite_in_place(l.owner, l.original + "x}"); }},
      {"a BOM before the JSON",
       [](const LiveLock& l, long long, long long) { rewrite_in_place(l.owner, "\xef\xbb\xbf" + l.original); }},
      {"the lock directory mode 0755", [](const LiveLock& l, long long, long long) { ::chmod(l.lock.c_str(), 0755); }},
      {"owner.json chowned to another uid",
       [](const LiveLock& l, long long, long long) { REQUIRE(::chown(l.owner.c_str(), 4242, 4242) == 0); }, true},
      {"oversized: the JSON padded with spaces past 4096 bytes",
       [](const LiveLock& l, long long, long long) {
         rewrite_in_place(l.owner, std::string(2100, ' ') + l.original + std::string(2100, ' '));
       }},
      {"duplicate pid keys, dead then live (JSON.parse keeps the live one)",
       [](const LiveLock& l, long long live, long long dead) {
         rewrite_in_place(l.owner, "{\"pid\":" + std::to_string(dead) + ",\"pid\":" + std::to_string(live) +
                                       ",\"token\":\"" + token_of(l.original) + "\"}");
       }, false, true},
      {"duplicate pid keys, live then dead (JSON.parse keeps the dead one)",
       [](const LiveLock& l, long long live, long long dead) {
         rewrite_in_place(l.owner, "{\"pid\":" + std::to_string(live) + ",\"pid\":" + std::to_string(dead) +
                                       ",\"token\":\"" + token_of(l.original) + "\"}");
       }},
      {"the pid as a decimal string",
       [](const LiveLock& l, long long live, long long) {
         rewrite_in_place(l.owner, "{\"pid\":\"" + std::to_string(live) + "\",\"token\":\"" +
                                       token_of(l.original) + "\"}");
       }},
  };
  const std::vector<std::vector<std::string>> commands{
      {"--force", "--yes", "--repo", "REPO"}, {"--force", "--yes", "--all"}, {"--force", "--yes", "LOCK"},
      {"--yes", "--repo", "REPO"}, {"--yes", "--all"}};
  for (const Variant& v : variants) {
    const std::string what = v.what;
    CAPTURE(what);
    if (v.root_only && ::getuid() != 0) {
      MESSAGE("not root: skipping \"" << what << "\" (only root can give a file away)");
      continue;
    }
    {  // status: not stale, no fix offered
      LiveLock l;
      v.apply(l, l.holder->pid(), dead_pid());
      check_status_not_removable(l.dir, l.lock);
      l.restore();
      CHECK(l.holder->release() == 0);
    }
    // Each command on a fresh holder, so that one removal does not hide the next command.
    for (const std::vector<std::string>& command : commands) {
      LiveLock l;
      v.apply(l, l.holder->pid(), dead_pid());
      const auto before = snapshot(l.lock);
      const std::string bytes = read_bytes(l.owner);
      std::vector<std::string> args;
      std::string line = "reclaim";
      for (const auto& word : command) {
        args.push_back(word == "REPO" ? l.scratch.repo : word == "LOCK" ? l.lock : word);
        line += " " + word;
      }
      CAPTURE(line);
      CAPTURE(bytes);
      const Finished done = l.reclaim(args);
      CAPTURE(done.out);
      CAPTURE(done.err);
      REQUIRE(done.status.has_value());
      if (!(v.plain_live && command.back() == "--all"))
        CHECK_MESSAGE(*done.status != 0, "reclaim did not refuse: " << what << ": " << line);
      CHECK_MESSAGE(exists(l.lock), "the live holder's lock was removed: " << what << ": " << line);
      CHECK(snapshot(l.lock) == before);
      CHECK(read_bytes(l.owner) == bytes);
      CHECK_MESSAGE(l.holder->alive(), "the holder ended");
      // Nothing in the area but the lock: no tombstone, candidate or guard left behind.
      std::vector<std::string> left;
      for (const auto& e : std::filesystem::directory_iterator(l.dir)) left.push_back(e.path().filename().string());
      CHECK(left == std::vector<std::string>{l.lock.substr(l.dir.size() + 1)});

      // The holder still holds: with its record restored it releases its own lock.
      const bool intact = exists(l.lock) && snapshot(l.lock).begin()->second == before.begin()->second;
      l.restore();
      const auto released = l.holder->release();
      if (intact) {
        CHECK(released == 0);
        CHECK_FALSE(exists(l.lock));
      }
    }
  }
}

TEST_CASE("a lock naming a live process in any damaged spelling survives reclaim --force") {
  // PROTOCOL.md section 10: a record names every pid it could mean. Each spelling names a
  // live process that is no possible owner (a child of this test, not a runtime), started
  // before the locks were written (so no clock calls its pid reused). Each spelling is
  // written twice: as it is, and followed by a member naming a dead pid, so that the record
  // names a pid however it is read and a missed live pid would let --force remove the lock
  // at once (a record naming no pid waits for --guard-age instead). The refusal may name
  // another blocker: each run of digits is a pid too (0x501a names 501 as well).
  Sleeper live;
  REQUIRE(live.ok());
  const pid_t dead = dead_pid();
  const std::string dead_member = "{\"pid\":" + std::to_string(dead) + "}";
  Scratch scratch;
  const std::string dir = scratch.locks;
  make_dir(dir);
  auto reclaim = [&](const std::string& lock) {
    return finish({locks_bin(), "reclaim", "--lock-dir", dir, "--force", "--yes", lock}, {}, 60s);
  };

  // The control: a malformed record naming only the dead pid is removed by --force. Were it
  // refused (a possible owner alive on this machine), the rows below would be refused
  // whatever named_pids read.
  const std::string control = dir + "/" + fake_lock_name("control");
  make_entry(dir, control.substr(dir.size() + 1), dead_member);
  const Finished removed = reclaim(control);
  const bool discriminating = removed.status == 0 && !exists(control);
  if (!discriminating)
    MESSAGE("reclaim --force kept a lock naming only a dead pid (a possible owner alive?): the rows "
            "below cannot tell a missed pid from another refusal\n"
            << removed.out << removed.err);

  int rows = 0;
  for (const PidSpelling& spelling : pid_spellings(live.pid())) {
    for (const bool with_dead : {false, true}) {
      const std::string what = std::string(spelling.what) + (with_dead ? ", then a dead pid" : "");
      CAPTURE(what);
      const std::string bytes = with_dead ? spelling.bytes + dead_member : spelling.bytes;
      const std::string lock = dir + "/" + fake_lock_name(what);
      make_entry(dir, lock.substr(dir.size() + 1), bytes);
      const Finished done = reclaim(lock);
      CAPTURE(done.out);
      CAPTURE(done.err);
      REQUIRE(done.status.has_value());
      CHECK_MESSAGE(*done.status != 0, "reclaim --force did not refuse: " << what);
      CHECK_MESSAGE(exists(lock), "a live process's lock was removed: " << what);
      ++rows;
    }
  }
  MESSAGE(rows << " locks naming live pid " << live.pid() << ", discriminating: " << discriminating);
}

TEST_CASE("durations cannot be abused: out-of-range values are usage errors that remove nothing") {
  Scratch scratch;
  const std::string dir = scratch.locks;
  make_dir(dir);
  // Entries that --force removes with sane durations: a dead owner's lock, a dead
  // candidate, an old guard. A usage error must leave every one of them.
  const std::string lock = repo_lock(dir, scratch.repo);
  make_entry(dir, lock.substr(dir.size() + 1), owner_json(dead_pid()));
  make_entry(dir, lock.substr(dir.size() + 1) + ".candidate.c1", owner_json(dead_pid(), "c1"));
  make_dir(dir + "/" + fake_lock_name("guarded") + ".reclaim");
  age_path(dir + "/" + fake_lock_name("guarded") + ".reclaim", 7200);
  const auto before = snapshot(scratch.root);
  for (const std::vector<std::string>& option :
       {std::vector<std::string>{"--guard-age", "0"},
        {"--guard-age", "0s"},
        {"--tolerance", "0"},
        {"--tolerance", "99999999999999999999"},
        {"--guard-age", "99999999999999999999d"},
        {"--guard-age", "99999999999999999999"},
        {"--tolerance", "18446744073709551617s"}}) {
    CAPTURE(option[0] + " " + option[1]);
    std::vector<std::string> argv{locks_bin(), "reclaim", "--lock-dir", dir, "--all", "--force", "--yes"};
    argv.insert(argv.end(), option.begin(), option.end());
    const Finished done = finish(argv, {}, 60s);
    CAPTURE(done.out);
    CAPTURE(done.err);
    CHECK(done.status == 2);
    CHECK(snapshot(scratch.root) == before);
    argv.insert(argv.begin() + 4, scratch.repo);
    argv.insert(argv.begin() + 4, "--repo");
    argv.erase(std::find(argv.begin(), argv.end(), "--all"));
    const Finished by_repo = finish(argv, {}, 60s);
    CHECK(by_repo.status == 2);
    CHECK(snapshot(scratch.root) == before);
  }
}

TEST_CASE("a live acquirer's candidate is never removed, whatever its age") {
  Scratch scratch;
  const std::string dir = scratch.locks;
  make_dir(dir);
  Sleeper acquirer;
  REQUIRE(acquirer.ok());
  const std::string token = "0b7e2d8c-5f1a-4c3e-9d2b-7a6f5e4d3c2b";
  const std::string candidate = repo_lock(dir, scratch.repo) + ".candidate." + token;
  make_entry(dir, candidate.substr(dir.size() + 1), owner_json(acquirer.pid(), token));
  // The entry's age is its directory's mtime. owner.json keeps "now", after the acquirer
  // started: backdating it too would make a clock-based proof (pid-reused) that --force
  // may act on.
  for (double age : {600.0, 86400.0, 400.0 * 86400.0}) {
    CAPTURE(age);
    age_path(candidate, age);
    const auto before = snapshot(dir);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--force", "--yes", "--all"},
          {"--force", "--yes", candidate},
          {"--force", "--yes", "--repo", scratch.repo}}) {
      CAPTURE(args.back());
      std::vector<std::string> argv{locks_bin(), "reclaim", "--lock-dir", dir};
      argv.insert(argv.end(), args.begin(), args.end());
      const Finished done = finish(argv, {}, 60s);
      CAPTURE(done.out);
      CAPTURE(done.err);
      REQUIRE(done.status.has_value());
      CHECK_MESSAGE(exists(candidate), "a live acquirer's candidate was removed");
      CHECK(snapshot(dir) == before);
    }
    check_status_not_removable(dir, candidate);
  }
}

TEST_CASE("a mode-0000 lock of a dead owner: reclaim --force leaves no tombstone") {
  // Root reads through mode 0000, so the command runs as another account when we are root
  // (setpriv), or as ourselves otherwise.
  const bool root = ::getuid() == 0;
  const uid_t nobody = 65534;
  if (root && ::access("/usr/bin/setpriv", X_OK) != 0) {
    MESSAGE("root without /usr/bin/setpriv: cannot run as another account; skipped");
    return;
  }
  for (const std::vector<std::string>& target :
       {std::vector<std::string>{"--all"}, {"LOCK"}, {"--all", "--guard-age", "1m"}}) {
    Scratch scratch;
    const std::string dir = scratch.locks;
    make_dir(dir);
    const std::string lock = repo_lock(dir, scratch.repo);
    make_entry(dir, lock.substr(dir.size() + 1), owner_json(dead_pid()));
    std::vector<std::string> argv;
    if (root) {
      // nobody's area inside our scratch folder, which nobody must be able to traverse.
      REQUIRE(::chmod(scratch.root.c_str(), 0711) == 0);
      for (const std::string& path : {dir, lock, lock + "/owner.json"})
        REQUIRE(::chown(path.c_str(), nobody, nobody) == 0);
      argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
    }
    REQUIRE(::chmod(lock.c_str(), 0000) == 0);
    argv.insert(argv.end(), {locks_bin(), "reclaim", "--lock-dir", dir, "--force", "--yes"});
    for (const std::string& word : target) argv.push_back(word == "LOCK" ? lock : word);
    CAPTURE(target.front());
    const Finished done = finish(argv, {{"HOME", scratch.home}}, 60s);
    CAPTURE(done.out);
    CAPTURE(done.err);
    REQUIRE(done.status.has_value());
    std::vector<std::string> left;
    for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().filename().string());
    CAPTURE(left.size());
    for (const std::string& name : left) {
      CHECK_MESSAGE(name.find(".tombstone.") == std::string::npos, "left a tombstone: " << name);
      CHECK_MESSAGE(!name.ends_with(".reclaim"), "left a reclaim guard: " << name);
    }
    // Either removed cleanly (exit 0, nothing left) or refused with the lock in place.
    if (exists(lock)) CHECK(*done.status != 0);
    else CHECK(*done.status == 0);
    ::chmod(lock.c_str(), 0700);  // so that the scratch folder can be removed
  }
}

namespace {

/// Processes of `uid` (not kernel threads) that are stopped or traced, other than `except`.
std::vector<pid_t> stopped_processes(uid_t uid, pid_t except) {
  std::vector<pid_t> out;
  std::error_code error;
  for (const auto& e : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == except) continue;
    std::ifstream status(e.path() / "status");
    std::string line, state;
    long owner = -1;
    bool kernel = false;
    while (std::getline(status, line)) {
      if (line.starts_with("State:")) state = line.substr(6);
      if (line.starts_with("Uid:")) owner = std::stol(line.substr(4));
      if (line.starts_with("Kthread:")) kernel = line.find('1') != std::string::npos;
    }
    if (owner == static_cast<long>(uid) && !kernel &&
        (state.find('T') != std::string::npos || state.find('t') != std::string::npos))
      out.push_back(pid);
  }
  return out;
}

}  // namespace

TEST_CASE("a reclaim guard whose holder may be paused is not removed until the pause ends") {
  Scratch scratch;
  const std::string dir = scratch.locks;
  make_dir(dir);
  // A process of our uid, stopped, started before the guard: it may be the guard's holder,
  // paused between its token check and its rename.
  SpawnedProcess paused({"sleep", "1000"});
  paused.signal(SIGSTOP);
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(paused.pid()), &info, WSTOPPED | WNOWAIT) == 0);
  const std::string guard = repo_lock(dir, scratch.repo) + ".reclaim";
  make_dir(guard);
  age_path(guard, 600);  // mtime 10 min ago (past the 5 min default); its ctime stays now

  const std::vector<std::string> argv{locks_bin(), "reclaim", "--lock-dir", dir, "--force", "--yes", guard};
  const Finished refused = finish(argv, {}, 60s);
  CAPTURE(refused.out);
  CAPTURE(refused.err);
  REQUIRE(refused.status.has_value());
  CHECK_MESSAGE(*refused.status != 0, "reclaim did not refuse a guard a paused process may hold");
  CHECK_MESSAGE(exists(guard), "the guard of a paused holder was removed");
  CHECK(refused.out.find("pid " + std::to_string(paused.pid())) != std::string::npos);
  CHECK(refused.out.find("(stopped)") != std::string::npos);

  paused.signal(SIGKILL);
  REQUIRE(paused.wait(30s).has_value());
  if (!exists(guard)) return;  // already reported above
  const auto others = stopped_processes(::getuid(), paused.pid());
  if (!others.empty()) {
    MESSAGE("another stopped process of this uid (pid " << others.front()
                                                        << ") may hold the guard: the removal after the "
                                                           "pause ends is not checked");
    return;
  }
  const Finished removed = finish(argv, {}, 60s);
  CAPTURE(removed.out);
  CAPTURE(removed.err);
  // The paused holder is gone, so it no longer blocks; the guard (aged by its mtime, its
  // ctime now) is still too young to remove, or the clock is void: refused for that alone.
  CHECK(removed.status == 1);
  CHECK(guard_too_young(removed.out));
  CHECK(removed.out.find("may be paused") == std::string::npos);
  CHECK(exists(guard));
}
