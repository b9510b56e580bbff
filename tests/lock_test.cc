#include "apnea_locks/lock.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "apnea_locks/lock_area.h"
#include "detail/lock.h"
#include "flock_holder.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::detail;
using apnea_locks::testing::FlockHolder;
using apnea_locks::testing::StagedProcess;
using apnea_locks::testing::StagedSystem;
using apnea_locks::testing::TempDir;

namespace {

constexpr std::int64_t live_pid = 6000;  // alive in every staged process table below
constexpr std::int64_t dead_pid = 6001;  // never in the table: ESRCH
constexpr std::int64_t minute_and_more = 61'000'000'000;

/// A lock area in a temp folder, a repository and a staged system acting as pid 5000.
struct Fixture {
  TempDir temp;
  StagedSystem system;
  std::string dir = temp / "apnea-u/operation-locks";
  std::string repo = temp / "repo";
  LockTarget target;

  explicit Fixture(LockKind kind = LockKind::repository) {
    REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
    system.staged_pid = 5000;
    system.processes[live_pid] = StagedProcess{0, ProcessInfo{'S', live_pid, ::getuid(), 0, "apnea"}};
    auto made = kind == LockKind::repository ? repository_target(system, dir, repo)
                                             : global_setup_target(system, dir, repo);
    REQUIRE(made);
    target = *made;
    REQUIRE(ensure_lock_directory(system, dir));
    system.calls.clear();
  }

  /// Plants a lock (or any protocol directory) owned by `pid` with `token`.
  void plant(const std::string& path, double pid, const std::string& token) {
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    REQUIRE(system.real().write_new_file(path + "/owner.json", encode_owner({pid, token}), 0600));
  }
  std::string token_at(const std::string& path) {
    OwnerRead read = read_owner(system.real(), path, ::getuid());
    return read.owner ? read.owner->token : std::string("<") + read.owner.error().reason() + ">";
  }
  /// The names in the lock directory, sorted.
  std::vector<std::string> entries() {
    std::vector<std::string> names;
    (void)system.real().list_directory(dir, [&](const DirEntry& e) {
      names.push_back(e.name);
      return true;
    });
    std::sort(names.begin(), names.end());
    return names;
  }
  bool exists(const std::string& path) { return system.real().lstat(path).has_value(); }
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Lowercase 8-4-4-4-12 hex with version 4 and the RFC 4122 variant.
bool is_uuid_v4(const std::string& text) {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return text[14] == '4' && std::string_view("89ab").find(text[19]) != std::string_view::npos;
}

std::uint32_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("acquire publishes Apnea's exact owner record; release removes it") {
  Fixture f;
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE(held);
  const std::string& token = held->owner().token;
  CHECK(is_uuid_v4(token));
  CHECK(held->owner().pid == 5000);
  CHECK(file_bytes(f.target.lock_path + "/owner.json") ==
        "{\"pid\":5000,\"token\":\"" + token + "\"}");
  CHECK(mode_of(f.target.lock_path) == 0700);
  CHECK(mode_of(f.target.lock_path + "/owner.json") == 0600);
  CHECK(mode_of(f.dir) == 0700);
  CHECK(mode_of(node_dirname(f.dir)) == 0700);
  // The candidate was published by rename: nothing else is left, and nothing was cleaned up
  // (the renamed candidate is gone by the rename itself).
  CHECK(f.entries() == std::vector<std::string>{node_normalize(f.target.lock_path).substr(f.dir.size() + 1)});
  CHECK(f.system.count("remove_tree") == 0);
  // The candidate's owner.json and the candidate directory were both fsynced before publishing.
  CHECK(f.system.count("write_new_file") == 1);
  CHECK(f.system.count("fsync_directory") == 1);

  auto released = held->release();
  REQUIRE(released);
  CHECK(*released);
  CHECK(f.entries().empty());
}

TEST_CASE("a held lock is released when its handle is destroyed") {
  Fixture f;
  {
    auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
    REQUIRE(held);
    CHECK(f.exists(f.target.lock_path));
  }
  CHECK(f.entries().empty());
}

TEST_CASE("release never removes a lock that is no longer ours") {
  Fixture f;
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE(held);
  // Someone else's lock now stands at the path (ours was displaced by hand).
  REQUIRE(f.system.real().remove_tree(f.target.lock_path));
  f.plant(f.target.lock_path, live_pid, "someone-else");
  auto released = held->release();
  REQUIRE(released);
  CHECK_FALSE(*released);
  CHECK(f.token_at(f.target.lock_path) == "someone-else");
  CHECK(f.entries().size() == 1);
}

TEST_CASE("a live owner: OperationLocked live with the reference's text") {
  Fixture f;
  f.plant(f.target.lock_path, live_pid, "theirs");
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE_FALSE(held);
  CHECK(held.error().is(LockedReason::live));
  CHECK(held.error().pid == live_pid);
  CHECK(held.error().resource == f.target.resource);
  CHECK(held.error().message == "another Apnea operation holds " + f.target.lock_path + " for " +
                                    f.target.resource + " (pid 6000)");
  CHECK(held.error().headline == held.error().message);  // no advice to leave out
  // EPERM (another account's process) is alive to Apnea too.
  f.system.processes[live_pid].signal_errno = EPERM;
  CHECK(acquire(f.system, f.target, apnea_options(LockKind::repository)).error().is(LockedReason::live));
  CHECK(f.token_at(f.target.lock_path) == "theirs");
  // The contender's candidate never outlives the attempt.
  CHECK(f.entries().size() == 1);
}

TEST_CASE("a dead owner: stale inside the grace, reclaimed after it") {
  Fixture f;
  f.plant(f.target.lock_path, dead_pid, "dead");
  auto young = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE_FALSE(young);
  CHECK(young.error().is(LockedReason::stale));
  CHECK(young.error().pid == dead_pid);
  CHECK(young.error().message ==
        "Apnea lock owner pid 6001 is not live at " + f.target.lock_path +
            ". Automatic stale cleanup is disabled. Verify no Apnea process owns it, then Remove "
            "this lock directory manually: " + f.target.lock_path);
  // The headline is the message without Apnea's advice to remove the lock by hand.
  CHECK(young.error().headline == "Apnea lock owner pid 6001 is not live at " + f.target.lock_path);
  CHECK(f.token_at(f.target.lock_path) == "dead");

  f.system.clock_offset_ns = minute_and_more;
  AcquireOptions options = apnea_options(LockKind::repository);
  std::vector<std::pair<std::string, std::string>> reclaimed;  // token, lock
  options.on_reclaimed = [&](const Owner& owner, const std::string& lock) {
    reclaimed.emplace_back(owner.token, lock);
  };
  auto held = acquire(f.system, f.target, options);
  REQUIRE(held);
  // The takeover is reported once, with the dead owner it removed.
  REQUIRE(reclaimed.size() == 1);
  CHECK(reclaimed[0].first == "dead");
  CHECK(reclaimed[0].second == f.target.lock_path);
  CHECK(f.token_at(f.target.lock_path) == held->owner().token);
  // The guard and the tombstone are gone.
  CHECK(f.entries().size() == 1);
  CHECK(f.system.count("mkdir") >= 1);
}

// The takeover goes through the removal gate, which refuses a lock directory another
// process holds a flock on (run's shim after a kill -9 of run: docs/run.md).
TEST_CASE("taking over is removing: a dead owner's lock that a process holds a flock on is not taken over") {
  Fixture f;
  f.plant(f.target.lock_path, dead_pid, "dead");
  f.system.clock_offset_ns = minute_and_more;
  FlockHolder shim(f.target.lock_path);  // shares the descriptor, as the shim shares run's
  auto refused = acquire(f.system, f.target, apnea_options(LockKind::repository));
  CHECK_FALSE(refused);
  CHECK(f.token_at(f.target.lock_path) == "dead");
  shim.release();
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE(held);
  CHECK(f.token_at(f.target.lock_path) == held->owner().token);
}

TEST_CASE("taking over is removing: acquire takes over only where reclaim without --force would") {
  // Each case: the owner's pid answers ESRCH here and the lock is past Apnea's grace, as in
  // the takeover above, but the owner is not proven dead, so it may be alive where this
  // process cannot see it. Nothing of its lock is touched and acquire says `live`.
  struct Case {
    std::string name;
    std::function<void(StagedSystem&)> stage;
  };
  const Case cases[] = {
      {"a holder in a child PID namespace (its in-namespace pid written)",
       [](StagedSystem& system) {
         ProcessInfo carrier{'S', 7000, ::getuid(), 0, "node apnea (container)"};
         carrier.nspid = {7000, static_cast<std::int64_t>(dead_pid)};
         system.namespace_processes = {carrier};
       }},
      {"run inside a container (not the initial PID namespace)",
       [](StagedSystem& system) { system.namespace_inodes["pid"] = 4026532999; }},
      {"a network filesystem (NFS)",
       [](StagedSystem& system) { system.staged_filesystem_magic = 0x6969; }},
      {"a filesystem outside the local list (ramfs)",
       [](StagedSystem& system) { system.staged_filesystem_magic = 0x858458f6; }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Fixture f;
    f.plant(f.target.lock_path, dead_pid, "dead");
    f.system.clock_offset_ns = minute_and_more;
    c.stage(f.system);
    bool reclaimed = false;
    AcquireOptions options = apnea_options(LockKind::repository);
    options.on_reclaimed = [&](const Owner&, const std::string&) { reclaimed = true; };
    auto held = acquire(f.system, f.target, options);
    REQUIRE_FALSE(held);
    CHECK(held.error().is(LockedReason::live));
    CHECK(held.error().pid == dead_pid);
    CHECK(held.error().message.find("pid 6001") != std::string::npos);
    CHECK_FALSE(reclaimed);
    CHECK(f.token_at(f.target.lock_path) == "dead");
    CHECK(f.entries().size() == 1);  // no tombstone, guard or candidate left
    CHECK(f.system.count("rename") == 0);
  }
}

TEST_CASE("the global setup lock is never reclaimed and waits while its owner is live") {
  Fixture f(LockKind::global_setup);
  CHECK(f.target.resource.starts_with("global setup at "));
  f.plant(f.target.lock_path, dead_pid, "dead");
  f.system.clock_offset_ns = 3600 * 1'000'000'000LL;
  auto dead = acquire(f.system, f.target, apnea_options(LockKind::global_setup));
  REQUIRE_FALSE(dead);
  CHECK(dead.error().is(LockedReason::stale));
  CHECK(f.token_at(f.target.lock_path) == "dead");

  REQUIRE(f.system.real().remove_tree(f.target.lock_path));
  f.plant(f.target.lock_path, live_pid, "live");
  // The owner releases during the third wait.
  f.system.on_sleep = [&] {
    if (f.system.sleeps.size() == 3) REQUIRE(f.system.real().remove_tree(f.target.lock_path));
  };
  auto held = acquire(f.system, f.target, apnea_options(LockKind::global_setup));
  REQUIRE(held);
  CHECK(f.system.sleeps.size() == 3);
  CHECK(f.system.sleeps[0] == std::chrono::milliseconds(25));

  // With a deadline, waiting ends with the live error.
  held->abandon();
  REQUIRE(f.system.real().remove_tree(f.target.lock_path));
  f.plant(f.target.lock_path, live_pid, "live");
  f.system.sleeps.clear();
  f.system.on_sleep = nullptr;
  f.system.fixed_now_ns = 1'000'000'000'000;
  AcquireOptions options = apnea_options(LockKind::global_setup);
  options.deadline_ns = *f.system.fixed_now_ns + 100'000'000;  // 100 ms
  int waits_reported = 0;
  options.on_wait = [&](const LockError& error) {
    CHECK(error.pid == live_pid);
    ++waits_reported;
  };
  auto timed_out = acquire(f.system, f.target, options);
  REQUIRE_FALSE(timed_out);
  CHECK(timed_out.error().is(LockedReason::live));
  CHECK(f.system.sleeps.size() == 4);
  CHECK(waits_reported == 4);
}

TEST_CASE("malformed metadata: OperationLocked malformed with the reference's text") {
  Fixture f;
  f.plant(f.target.lock_path, live_pid, "x");
  ::chmod((f.target.lock_path + "/owner.json").c_str(), 0644);
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE_FALSE(held);
  CHECK(held.error().is(LockedReason::malformed));
  CHECK(held.error().pid == 0);
  CHECK(held.error().message ==
        "Apnea lock metadata is malformed at " + f.target.lock_path +
            ". Automatic cleanup is disabled. Verify no Apnea process owns it, then Remove this "
            "lock directory manually: " + f.target.lock_path);
  CHECK(held.error().headline == "Apnea lock metadata is malformed at " + f.target.lock_path);
}

TEST_CASE("race: a release between 'lock exists' and the owner read is a retry, not malformed") {
  Fixture f;
  f.plant(f.target.lock_path, live_pid, "releasing");
  const std::string owner_file = f.target.lock_path + "/owner.json";
  bool released = false;
  f.system.before = [&](std::string_view op, const std::string& path) {
    if (op == "open" && path == owner_file && !released) {
      released = true;  // the owner renames its lock away and removes it, right now
      REQUIRE(f.system.real().rename(f.target.lock_path, f.target.lock_path + ".tombstone.x"));
      REQUIRE(f.system.real().remove_tree(f.target.lock_path + ".tombstone.x"));
    }
  };
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  CHECK(released);
  REQUIRE(held);
  CHECK(f.token_at(f.target.lock_path) == held->owner().token);
}

TEST_CASE("race: a lock replaced while its owner was read is re-examined, not malformed") {
  Fixture f;
  f.plant(f.target.lock_path, live_pid, "first");
  const std::string owner_file = f.target.lock_path + "/owner.json";
  int stage = 0;
  f.system.before = [&](std::string_view op, const std::string& path) {
    if (stage == 0 && op == "open" && path == owner_file) {
      stage = 1;  // the first owner releases...
      REQUIRE(f.system.real().remove_tree(f.target.lock_path));
    } else if (stage == 1 && op == "lstat" && path == f.target.lock_path) {
      stage = 2;  // ...and another process publishes a new lock before we look again
      f.plant(f.target.lock_path, live_pid, "second");
    }
  };
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  CHECK(stage == 2);
  REQUIRE_FALSE(held);
  CAPTURE(held.error().message);
  CHECK(held.error().is(LockedReason::live));
  CHECK(f.token_at(f.target.lock_path) == "second");
}

TEST_CASE("race: a lock that keeps changing ends in raced with the reference's text") {
  Fixture f;
  const std::string owner_file = f.target.lock_path + "/owner.json";
  f.system.before = [&](std::string_view op, const std::string& path) {
    if (op == "write_new_file" && !f.exists(f.target.lock_path))
      f.plant(f.target.lock_path, live_pid, "flicker");  // published before our rename
    if (op == "open" && path == owner_file)
      REQUIRE(f.system.real().remove_tree(f.target.lock_path));  // and gone before our read
  };
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE_FALSE(held);
  CHECK(held.error().is(LockedReason::raced));
  CHECK(held.error().message ==
        "Apnea lock changed repeatedly at " + f.target.lock_path + "; retry the operation");
  CHECK(f.system.count("write_new_file") == 3);
}

TEST_CASE("race: a replacement published during stale reclamation is never removed") {
  Fixture f;
  f.plant(f.target.lock_path, dead_pid, "dead");
  f.system.clock_offset_ns = minute_and_more;
  const std::string guard = f.target.lock_path + ".reclaim";
  bool replaced = false;
  f.system.before = [&](std::string_view op, const std::string& path) {
    if (op == "mkdir" && path == guard && !replaced) {
      replaced = true;  // another reclaimer finished first and a new owner published
      REQUIRE(f.system.real().remove_tree(f.target.lock_path));
      f.plant(f.target.lock_path, live_pid, "replacement");
    }
  };
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  CHECK(replaced);
  REQUIRE_FALSE(held);
  CHECK(held.error().is(LockedReason::live));
  CHECK(f.token_at(f.target.lock_path) == "replacement");
  CHECK_FALSE(f.exists(guard));
  CHECK(f.entries().size() == 1);
}

TEST_CASE("race: a second reclaimer blocked by the guard fails with the reference's stale reason") {
  Fixture f;
  f.plant(f.target.lock_path, dead_pid, "dead");
  f.system.clock_offset_ns = minute_and_more;
  const std::string guard = f.target.lock_path + ".reclaim";
  REQUIRE(::mkdir(guard.c_str(), 0700) == 0);
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE_FALSE(held);
  CHECK(held.error().is(LockedReason::stale));
  CHECK(held.error().guarded);
  CHECK(held.error().message ==
        "Apnea stale-lock reclamation is guarded at " + guard +
            ". Retry after the other operation completes. If the guard persists, stop all Apnea "
            "processes using " + f.target.lock_path + ", then remove this guard directory manually: " +
            guard);
  CHECK(held.error().headline == "Apnea stale-lock reclamation is guarded at " + guard);
  CHECK(f.exists(guard));
  CHECK(f.token_at(f.target.lock_path) == "dead");
}

TEST_CASE("guarded reclamation of a malformed lock re-validates identity and bytes") {
  Fixture f;
  f.plant(f.target.lock_path, live_pid, "x");
  const std::string owner_file = f.target.lock_path + "/owner.json";
  ::chmod(owner_file.c_str(), 0644);
  OwnerRead inspected = read_owner(f.system, f.target.lock_path, ::getuid());
  REQUIRE_FALSE(inspected.owner);
  ReclaimExpectation expect;
  expect.identity = inspected.lock_stat;
  expect.owner_identity = inspected.owner_stat;
  expect.owner_bytes = inspected.bytes;
  REQUIRE(expect.owner_bytes == "{\"pid\":6000,\"token\":\"x\"}");

  SUBCASE("rewritten since inspection: kept") {
    ::unlink(owner_file.c_str());
    REQUIRE(f.system.real().write_new_file(owner_file, "{\"pid\":1,\"token\":\"new\"}", 0644));
    auto outcome = reclaim_guarded(f.system, f.target.lock_path, f.target.resource, expect);
    REQUIRE(outcome);
    CHECK_FALSE(outcome->removed);
    CHECK_FALSE(outcome->changed.empty());
    CHECK(f.exists(f.target.lock_path));
  }
  SUBCASE("replaced by another directory with the same bytes: kept") {
    // The old one is moved aside first so the new one cannot reuse its inode number.
    REQUIRE(f.system.real().rename(f.target.lock_path, f.temp / "old"));
    f.plant(f.target.lock_path, live_pid, "x");
    ::chmod(owner_file.c_str(), 0644);
    auto outcome = reclaim_guarded(f.system, f.target.lock_path, f.target.resource, expect);
    REQUIRE(outcome);
    CHECK_FALSE(outcome->removed);
    CHECK(f.exists(f.target.lock_path));
  }
  SUBCASE("repaired into a valid owner since inspection: kept") {
    ::chmod(owner_file.c_str(), 0600);
    auto outcome = reclaim_guarded(f.system, f.target.lock_path, f.target.resource, expect);
    REQUIRE(outcome);
    CHECK_FALSE(outcome->removed);
    CHECK(f.token_at(f.target.lock_path) == "x");
  }
  SUBCASE("unchanged: removed, guard dropped") {
    auto outcome = reclaim_guarded(f.system, f.target.lock_path, f.target.resource, expect);
    REQUIRE(outcome);
    CHECK(outcome->removed);
    CHECK(f.entries().empty());
  }
  SUBCASE("unchanged, --keep-tombstone: the tombstone stays for forensics") {
    auto outcome = reclaim_guarded(f.system, f.target.lock_path, f.target.resource, expect, true);
    REQUIRE(outcome);
    CHECK(outcome->removed);
    CHECK(f.exists(outcome->tombstone));
    CHECK(f.entries().size() == 1);
  }
}

TEST_CASE("ensure_lock_directory refuses what Apnea refuses and forces mode 0700") {
  TempDir temp;
  StagedSystem system;
  const std::string parent = temp / "apnea-u";
  const std::string dir = parent + "/operation-locks";
  REQUIRE(::mkdir(parent.c_str(), 0755) == 0);
  ::chmod(parent.c_str(), 0755);
  REQUIRE(ensure_lock_directory(system, dir));
  CHECK(mode_of(parent) == 0700);
  CHECK(mode_of(dir) == 0700);
  // Forced only when it is not already 0700: an acquire in an area as Apnea leaves it
  // changes no mode (two chmod calls, each an inode write, fewer per acquire).
  const int chmods = system.count("chmod");
  REQUIRE(ensure_lock_directory(system, dir));
  CHECK(system.count("chmod") == chmods);
  for (const mode_t loose : {0770, 02700, 01700}) {
    CAPTURE(loose);
    REQUIRE(::chmod(dir.c_str(), loose) == 0);
    REQUIRE(ensure_lock_directory(system, dir));
    CHECK(mode_of(dir) == 0700);
    CHECK(mode_of(parent) == 0700);
  }

  const std::string elsewhere = temp / "elsewhere";
  REQUIRE(::mkdir(elsewhere.c_str(), 0700) == 0);
  const std::string linked = temp / "linked";
  REQUIRE(::symlink(elsewhere.c_str(), linked.c_str()) == 0);
  auto refused = ensure_lock_directory(system, linked + "/operation-locks");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().kind == LockError::Kind::config_error);
  CHECK(refused.error().message == "unsafe Apnea lock directory: " + linked);
  CHECK(refused.error().path == linked);
  // Nothing was created through the symlink.
  CHECK_FALSE(system.real().lstat(elsewhere + "/operation-locks"));

  auto missing = ensure_lock_directory(system, temp / "no/such/dir");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.starts_with("could not acquire Apnea operation lock: ENOENT"));
}

TEST_CASE("ensure_lock_directory for an explicit directory: creates only it, chmods nothing else") {
  TempDir temp;
  StagedSystem system;
  const std::string parent = temp / "shared";
  REQUIRE(::mkdir(parent.c_str(), 0700) == 0);
  REQUIRE(::chmod(parent.c_str(), 0755) == 0);

  // A new leaf: created (0700), its parent untouched.
  const std::string leaf = parent + "/leaf";
  REQUIRE(ensure_lock_directory(system, leaf, AreaMode::explicit_directory));
  CHECK(mode_of(leaf) == 0700);
  CHECK(mode_of(parent) == 0755);

  // An existing private directory: used as it is, never chmod'ed.
  system.calls.clear();
  REQUIRE(ensure_lock_directory(system, leaf, AreaMode::explicit_directory));
  CHECK(system.count("chmod") == 0);

  // An existing open one: refused, naming it, its mode unchanged.
  system.calls.clear();
  auto open = ensure_lock_directory(system, parent, AreaMode::explicit_directory);
  REQUIRE_FALSE(open);
  CHECK(open.error().kind == LockError::Kind::config_error);
  CHECK(open.error().path == parent);
  CHECK(open.error().message.starts_with("unsafe Apnea lock directory: " + parent + ": mode 0755"));
  CHECK(system.count("chmod") == 0);
  CHECK(mode_of(parent) == 0755);

  // A missing parent is never created.
  const std::string deep = temp / "absent/leaf";
  auto missing = ensure_lock_directory(system, deep, AreaMode::explicit_directory);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("ENOENT") != std::string::npos);
  CHECK(missing.error().message.find(deep) != std::string::npos);
  CHECK_FALSE(system.real().lstat(temp / "absent"));

  // A symlink, even to a private directory: refused, nothing created through it.
  const std::string linked = temp / "linked";
  REQUIRE(::symlink(leaf.c_str(), linked.c_str()) == 0);
  auto symlinked = ensure_lock_directory(system, linked, AreaMode::explicit_directory);
  REQUIRE_FALSE(symlinked);
  CHECK(symlinked.error().message == "unsafe Apnea lock directory: " + linked);

  // Another uid's directory.
  if (::getuid() == 0) {
    const std::string foreign = temp / "foreign";
    REQUIRE(::mkdir(foreign.c_str(), 0700) == 0);
    REQUIRE(::chown(foreign.c_str(), 4242, 4242) == 0);
    auto refused = ensure_lock_directory(system, foreign, AreaMode::explicit_directory);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.starts_with("Apnea lock directory is not owned by the current user"));
  }

  // acquire follows the target's mode: a lock in a new leaf, the parent still 0755.
  auto target = repository_target(system, parent + "/other", temp.path(), AreaMode::explicit_directory);
  REQUIRE(target);
  auto held = acquire(system, *target, apnea_options(LockKind::repository));
  REQUIRE(held);
  CHECK(mode_of(parent + "/other") == 0700);
  CHECK(mode_of(parent) == 0755);
  REQUIRE(held->release());
}

namespace {
/// Entries left by a crash must be explicable: our lock, our candidates, our tombstones.
void check_leftovers(Fixture& f, const std::set<std::string>& tokens) {
  int locks = 0;
  for (const std::string& name : f.entries()) {
    CAPTURE(name);
    const std::string path = f.dir + "/" + name;
    EntryName entry = parse_entry_name(name);
    REQUIRE(entry.role != EntryRole::unknown);
    if (entry.role == EntryRole::lock) ++locks;
    if (entry.role == EntryRole::reclaim_guard) continue;
    // A candidate can be caught before its owner.json was written.
    const std::string token = f.token_at(path);
    if (token != "<owner-missing>") CHECK(tokens.count(token) == 1);
  }
  CHECK(locks <= 1);
}
}  // namespace

TEST_CASE("crash injection: acquire/release abandoned after every step is recoverable") {
  // Count the steps of one full acquire + release.
  int steps = 0;
  {
    Fixture f;
    auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
    REQUIRE(held);
    REQUIRE(held->release());
    steps = static_cast<int>(f.system.calls.size());
  }
  REQUIRE(steps > 10);
  for (int crash = 0; crash < steps; ++crash) {
    CAPTURE(crash);
    Fixture f;
    f.system.crash_after = crash;
    std::set<std::string> tokens;
    {
      auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
      if (held) {
        tokens.insert(held->owner().token);
        (void)held->release();
      }
    }
    // Tokens of candidates written before the crash.
    for (const std::string& name : f.entries())
      if (auto entry = parse_entry_name(name); entry.role == EntryRole::candidate) tokens.insert(entry.suffix);
    check_leftovers(f, tokens);

    // The crashed process (pid 5000) is dead now; a later Apnea run past the grace recovers.
    StagedSystem later;
    later.staged_pid = 7000;
    later.clock_offset_ns = minute_and_more;
    auto recovered = acquire(later, f.target, apnea_options(LockKind::repository));
    REQUIRE(recovered);
    REQUIRE(recovered->release());
    for (const std::string& name : f.entries()) {
      CAPTURE(name);
      auto role = parse_entry_name(name).role;
      CHECK((role == EntryRole::candidate || role == EntryRole::tombstone));  // debris, no lock
    }
  }
}

TEST_CASE("crash injection: a reclamation abandoned after every step never removes a live lock") {
  int steps = 0;
  {
    Fixture f;
    f.plant(f.target.lock_path, dead_pid, "dead");
    f.system.clock_offset_ns = minute_and_more;
    auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
    REQUIRE(held);
    held->abandon();
    steps = static_cast<int>(f.system.calls.size());
  }
  for (int crash = 0; crash < steps; ++crash) {
    CAPTURE(crash);
    Fixture f;
    f.plant(f.target.lock_path, dead_pid, "dead");
    f.system.clock_offset_ns = minute_and_more;
    f.system.crash_after = crash;
    {
      auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
      if (held) held->abandon();
    }
    StagedSystem later;
    later.staged_pid = 7000;
    later.clock_offset_ns = minute_and_more;
    auto recovered = acquire(later, f.target, apnea_options(LockKind::repository));
    if (recovered) {
      REQUIRE(recovered->release());
    } else {
      // Only a guard left by the crash may block, exactly as in Apnea; it is reported.
      CHECK(recovered.error().guarded);
      CHECK(f.exists(f.target.lock_path + ".reclaim"));
    }
  }
}

TEST_CASE("remove_entry: owner.json through the descriptor, then rmdir; never recursive") {
  Fixture f;
  const std::string entry = f.target.lock_path + ".tombstone.t1";
  f.plant(entry, dead_pid, "x");
  const FileStat judged = *f.system.real().lstat(entry);

  SUBCASE("only owner.json inside: removed") {
    CHECK(entry_removable(f.system, entry, judged).has_value());
    CHECK(f.exists(entry));  // the check changes nothing
    CHECK(remove_entry(f.system, entry, judged).has_value());
    CHECK_FALSE(f.exists(entry));
  }
  SUBCASE("anything else inside: refused, everything kept") {
    REQUIRE(::mkdir((entry + "/nested").c_str(), 0700) == 0);
    auto removed = remove_entry(f.system, entry, judged);
    REQUIRE_FALSE(removed);
    CHECK(removed.error().find("nested") != std::string::npos);
    CHECK(f.exists(entry + "/owner.json"));
    CHECK(f.exists(entry + "/nested"));
  }
  SUBCASE("owner.json that is a directory: refused") {
    REQUIRE(::unlink((entry + "/owner.json").c_str()) == 0);
    REQUIRE(::mkdir((entry + "/owner.json").c_str(), 0700) == 0);
    CHECK_FALSE(remove_entry(f.system, entry, judged).has_value());
    CHECK(f.exists(entry + "/owner.json"));
  }
  SUBCASE("replaced since it was judged: refused") {
    REQUIRE(f.system.real().rename(entry, f.temp / "aside"));
    f.plant(entry, dead_pid, "x");
    CHECK_FALSE(remove_entry(f.system, entry, judged).has_value());
    CHECK(f.exists(entry + "/owner.json"));
  }
  SUBCASE("a symlink to a directory: refused, the target untouched") {
    REQUIRE(f.system.real().rename(entry, f.temp / "target"));
    REQUIRE(::symlink((f.temp / "target").c_str(), entry.c_str()) == 0);
    const FileStat target = *f.system.real().lstat(f.temp / "target");
    CHECK_FALSE(remove_entry(f.system, entry, target).has_value());
    CHECK(f.exists(f.temp / "target/owner.json"));
  }
  SUBCASE("an empty directory (crash before owner.json): removed") {
    REQUIRE(::unlink((entry + "/owner.json").c_str()) == 0);
    CHECK(remove_entry(f.system, entry, judged).has_value());
    CHECK_FALSE(f.exists(entry));
  }
}

TEST_CASE("list_directory_at lists a directory whole from its start, on every call") {
  Fixture f;
  const std::string entry = f.temp / "many";
  REQUIRE(::mkdir(entry.c_str(), 0700) == 0);
  std::set<std::string> made;
  for (int i = 0; i < 600; ++i) {  // some 40 KiB of records: several getdents64 buffers
    const std::string name = "entry-with-a-long-name-" + std::to_string(i) + std::string(40, 'x');
    REQUIRE(f.system.real().write_new_file(entry + "/" + name, "x", 0600));
    made.insert(name);
  }
  auto fd = f.system.real().open_directory(entry);
  REQUIRE(fd);
  for (int pass = 0; pass < 2; ++pass) {  // the second from the start again
    std::vector<std::string> names;
    auto listed = f.system.real().list_directory_at(*fd, [&](const DirEntry& entry) {
      names.push_back(entry.name);
      return true;
    });
    REQUIRE(listed);
    CHECK(names.size() == made.size());
    CHECK(std::set<std::string>(names.begin(), names.end()) == made);
  }
  f.system.real().close(*fd);
}

TEST_CASE("a dead owner's lock that cannot be removed whole is not renamed to a tombstone") {
  Fixture f;
  f.plant(f.target.lock_path, dead_pid, "dead");
  REQUIRE(::mkdir((f.target.lock_path + "/extra").c_str(), 0700) == 0);
  ReclaimExpectation expect;
  expect.token = "dead";
  auto outcome = reclaim_guarded(f.system, f.target.lock_path, f.target.resource, expect);
  REQUIRE(outcome);
  CHECK_FALSE(outcome->removed);
  CHECK(outcome->changed.find("extra") != std::string::npos);
  CHECK(f.entries() == std::vector<std::string>{f.target.lock_path.substr(f.dir.size() + 1)});
}

// Model: P3 ("nobody deletes another owner's lock") and the boundary P3R. The release reads
// its token at <lock>, then renames <lock> to a tombstone: a human's rm -r of the lock and a
// new owner's publication between the two make it rename the new owner's lock (P3R, the
// documented boundary, trails/boundary-release-rename.txt). What keeps P3 is the re-read of
// the tombstone's token after the rename: the tombstone is another's, so it is kept, never
// deleted (mutant-release-notoken deletes it). Deleting that re-read from remove_if_owned
// (src/removal.cc) turns this red; nothing else in the suite did.
TEST_CASE("model P3: a release whose lock was replaced after its token check keeps the successor's lock") {
  Fixture f;
  auto held = acquire(f.system, f.target, apnea_options(LockKind::repository));
  REQUIRE(held);
  const std::string lock = f.target.lock_path;
  bool replaced = false;
  f.system.before = [&](std::string_view op, const std::string& path) {
    if (op != "rename" || replaced || path.find(".tombstone.") == std::string::npos) return;
    replaced = true;  // between the token read and the rename: rm -r by hand, a new owner
    REQUIRE(f.system.real().remove_tree(lock));
    f.plant(lock, live_pid, "successor");
  };
  auto released = held->release();
  CHECK(replaced);
  REQUIRE(released);
  CHECK_FALSE(*released);  // nothing of ours was removed
  // P3R, the boundary: the successor's lock was renamed away, to a tombstone that is kept
  // whole, its owner record intact (a reader sees a free name, `status` a tombstone).
  const std::vector<std::string> left = f.entries();
  REQUIRE(left.size() == 1);
  CHECK(left[0].find(".tombstone.") != std::string::npos);
  CHECK(f.token_at(f.dir + "/" + left[0]) == "successor");
}
