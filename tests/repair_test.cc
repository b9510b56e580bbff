#include "apnea_locks/repair.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "apnea_locks/lock.h"
#include "area_builder.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

constexpr std::int64_t staged_live_pid = 6000;  // alive in the staged table
constexpr std::int64_t staged_dead_pid = 6001;  // ESRCH

struct Area {
  TempDir temp;
  StagedSystem system;
  std::string dir = temp / "locks";
  std::string lock_name = fake_lock_name("repo");
  std::string lock = dir + "/" + lock_name;
  RepairPolicy policy;

  Area() {
    make_dir(dir);
    system.processes[staged_live_pid] = StagedProcess{0, ProcessInfo{'S', staged_live_pid, ::getuid(), 0, "apnea"}};
    policy.classify.area_uid = ::getuid();
    policy.classify.host = healthy_host();
    policy.resource = "/fake/repo";
  }
  EntryFacts facts(const std::string& name) {
    ProcessCache cache(system);
    return gather_entry(system, dir, name, ::getuid(), cache);
  }
  /// Scans, judges and plans one entry as reclaim does.
  std::pair<EntryFacts, RepairStep> plan(const std::string& name, bool force) {
    policy.force = force;
    policy.classify.now_ns = system.now_ns();
    EntryFacts scanned = facts(name);
    const Verdict verdict = classify(scanned, policy.classify, nullptr);
    return {scanned, plan_repair(scanned, verdict, force)};
  }
  RepairResult reclaim(const std::string& name, bool force) {
    auto [scanned, step] = plan(name, force);
    return execute_repair(system, scanned, step, policy);
  }
  bool exists(const std::string& path) { return system.real().lstat(path).has_value(); }
  std::vector<std::string> entries() {
    std::vector<std::string> names;
    (void)system.real().list_directory(dir, [&](const DirEntry& e) {
      names.push_back(e.name);
      return true;
    });
    std::sort(names.begin(), names.end());
    return names;
  }
};

Verdict verdict_of(EntryRole role, EntryState state, bool certain = true) {
  Verdict v;
  v.role = role;
  v.state = state;
  v.certain = certain;
  v.reason = "r";
  return v;
}

}  // namespace

TEST_CASE("plan_repair: never a live owner; --force only where the issue allows") {
  EntryFacts none;
  using R = EntryRole;
  using S = EntryState;
  using A = RepairAction;
  struct Case {
    R role;
    S state;
    bool certain;
    A without_force;
    A with_force;
  };
  const Case cases[] = {
      {R::lock, S::live, false, A::refuse, A::refuse},
      {R::lock, S::stale, true, A::reclaim_owner, A::reclaim_owner},
      {R::lock, S::stale, false, A::refuse, A::reclaim_owner},  // pid-reused / predates-boot
      {R::lock, S::malformed, false, A::refuse, A::reclaim_malformed},
      {R::lock, S::in_flight, false, A::refuse, A::refuse},
      {R::lock, S::free, false, A::skip, A::skip},
      {R::candidate, S::debris, true, A::refuse, A::remove_debris},
      {R::candidate, S::in_flight, false, A::skip, A::skip},
      {R::tombstone, S::debris, true, A::refuse, A::remove_debris},
      {R::tombstone, S::in_flight, false, A::skip, A::skip},
      {R::reclaim_guard, S::leftover, false, A::refuse, A::remove_guard},
      {R::reclaim_guard, S::in_flight, false, A::skip, A::skip},
      {R::unknown, S::unknown, false, A::skip, A::skip},
  };
  for (const Case& c : cases) {
    CAPTURE(role_name(c.role));
    CAPTURE(state_name(c.state));
    CAPTURE(c.certain);
    const Verdict verdict = verdict_of(c.role, c.state, c.certain);
    const RepairStep plain = plan_repair(none, verdict, false);
    CHECK(plain.action == c.without_force);
    CHECK(plan_repair(none, verdict, true).action == c.with_force);
    CHECK(plain.force_would_help == (c.without_force == A::refuse && c.with_force != A::refuse));
    if (plain.action == A::refuse || plain.action == A::skip) CHECK_FALSE(plain.why.empty());
  }
}

TEST_CASE("a lock whose owner is proven dead is reclaimed; nothing else is left") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
  RepairResult result = a.reclaim(a.lock_name, false);
  CHECK(result.outcome == RepairOutcome::removed);
  CHECK(result.tombstone.starts_with(a.lock + ".tombstone."));
  CHECK(a.entries().empty());  // no lock, no tombstone, no guard
}

TEST_CASE("--keep-tombstone leaves the renamed lock for forensics") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
  a.policy.keep_tombstone = true;
  RepairResult result = a.reclaim(a.lock_name, false);
  CHECK(result.outcome == RepairOutcome::removed);
  CHECK(a.entries() == std::vector<std::string>{result.tombstone.substr(a.dir.size() + 1)});
}

TEST_CASE("a live owner is refused even with --force, and nothing is touched") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_live_pid));
  const auto before = snapshot(a.dir);
  RepairResult result = a.reclaim(a.lock_name, true);
  CHECK(result.outcome == RepairOutcome::refused);
  CHECK(result.detail.find("pid 6000 is alive (apnea") != std::string::npos);
  CHECK(snapshot(a.dir) == before);
}

TEST_CASE("race: a replacement published after inspection survives") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid, "dead-token"));
  auto [scanned, step] = a.plan(a.lock_name, false);
  REQUIRE(step.action == RepairAction::reclaim_owner);
  // Apnea reclaimed it itself and a new owner published, after our inspection.
  REQUIRE(a.system.real().remove_tree(a.lock));
  make_entry(a.dir, a.lock_name, owner_json(staged_live_pid, "new-token"));
  RepairResult result = execute_repair(a.system, scanned, step, a.policy);
  CHECK(result.outcome == RepairOutcome::changed);
  OwnerRead read = read_owner(a.system.real(), a.lock, ::getuid());
  REQUIRE(read.owner);
  CHECK(read.owner->token == "new-token");
  CHECK(a.entries() == std::vector<std::string>{a.lock_name});
}

TEST_CASE("race: an owner that is no longer provably dead under the guard is left alone") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
  auto [scanned, step] = a.plan(a.lock_name, false);
  REQUIRE(step.action == RepairAction::reclaim_owner);
  // While we take the guard, the pid answers again as a process started long ago: a fresh
  // probe under the guard finds no proof, so the lock stays.
  a.system.before = [&](std::string_view op, const std::string& path) {
    if (op == "mkdir" && path == a.lock + ".reclaim")
      a.system.processes[staged_dead_pid] = StagedProcess{0, ProcessInfo{'S', staged_dead_pid, ::getuid(), 0, "x"}};
  };
  RepairResult result = execute_repair(a.system, scanned, step, a.policy);
  CHECK(result.outcome == RepairOutcome::changed);
  CHECK(a.exists(a.lock));
  CHECK_FALSE(a.exists(a.lock + ".reclaim"));
}

TEST_CASE("race: a second reclaimer is blocked by the guard with Apnea's message") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
  auto [scanned, step] = a.plan(a.lock_name, false);
  make_dir(a.lock + ".reclaim");  // another reclamation started after our inspection
  RepairResult result = execute_repair(a.system, scanned, step, a.policy);
  CHECK(result.outcome == RepairOutcome::guard_held);
  CHECK(result.detail.starts_with("Apnea stale-lock reclamation is guarded at " + a.lock + ".reclaim"));
  CHECK(a.exists(a.lock));
  CHECK(a.exists(a.lock + ".reclaim"));
}

TEST_CASE("a malformed lock needs --force, and one rewritten since inspection is kept") {
  Area a;
  make_entry(a.dir, a.lock_name, "{\"pid\":0,\"token\":\"x\"}");
  CHECK(a.reclaim(a.lock_name, false).outcome == RepairOutcome::refused);
  CHECK(a.exists(a.lock));

  auto [scanned, step] = a.plan(a.lock_name, true);
  REQUIRE(step.action == RepairAction::reclaim_malformed);
  SUBCASE("rewritten: kept") {
    write_file(a.lock + "/owner.json", "{\"pid\":0,\"token\":\"y\"}");
    CHECK(execute_repair(a.system, scanned, step, a.policy).outcome == RepairOutcome::changed);
    CHECK(a.exists(a.lock));
  }
  SUBCASE("unchanged: removed") {
    CHECK(execute_repair(a.system, scanned, step, a.policy).outcome == RepairOutcome::removed);
    CHECK(a.entries().empty());
  }
}

TEST_CASE("clock-only proofs need --force") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_live_pid));
  // The pid now belongs to a process that started an hour after the record was written.
  age_path(a.lock + "/owner.json", 7200);
  a.system.processes[staged_live_pid].info->start_time_ns = a.system.now_ns() - 3600'000'000'000LL;
  RepairResult plain = a.reclaim(a.lock_name, false);
  CHECK(plain.outcome == RepairOutcome::refused);
  CHECK(plain.detail.find("pid-reused") != std::string::npos);
  CHECK(a.exists(a.lock));
  CHECK(a.reclaim(a.lock_name, true).outcome == RepairOutcome::removed);
  CHECK_FALSE(a.exists(a.lock));
}

TEST_CASE("debris: a dead writer's candidate is removed with --force, never through a symlink") {
  Area a;
  const std::string candidate_name = a.lock_name + ".candidate.tok";
  const std::string candidate = make_entry(a.dir, candidate_name, owner_json(staged_dead_pid, "tok"));
  // A symlink inside the debris pointing outside the area: only the link goes.
  const std::string outside = a.temp / "outside";
  make_dir(outside);
  write_file(outside + "/keep", "precious");
  REQUIRE(::symlink(outside.c_str(), (candidate + "/link").c_str()) == 0);

  CHECK(a.reclaim(candidate_name, false).outcome == RepairOutcome::refused);
  CHECK(a.exists(candidate));
  CHECK(a.reclaim(candidate_name, true).outcome == RepairOutcome::removed);
  CHECK_FALSE(a.exists(candidate));
  CHECK(a.exists(outside + "/keep"));
}

TEST_CASE("debris replaced or revived since inspection is left alone") {
  Area a;
  const std::string name = a.lock_name + ".tombstone.u";
  make_entry(a.dir, name, owner_json(staged_dead_pid));
  auto [scanned, step] = a.plan(name, true);
  REQUIRE(step.action == RepairAction::remove_debris);
  SUBCASE("replaced by another directory") {
    REQUIRE(a.system.real().rename(a.dir + "/" + name, a.temp / "aside"));
    make_entry(a.dir, name, owner_json(staged_dead_pid));
    CHECK(execute_repair(a.system, scanned, step, a.policy).outcome == RepairOutcome::changed);
    CHECK(a.exists(a.dir + "/" + name));
  }
  SUBCASE("a reclamation of its lock is in progress") {
    make_dir(a.lock + ".reclaim");
    RepairResult result = execute_repair(a.system, scanned, step, a.policy);
    CHECK(result.outcome == RepairOutcome::changed);
    CHECK(result.detail.find("in progress") != std::string::npos);
    CHECK(a.exists(a.dir + "/" + name));
  }
}

TEST_CASE("a leftover guard is removed with --force; a guard that is not empty is not") {
  Area a;
  const std::string guard_name = a.lock_name + ".reclaim";
  const std::string guard = a.dir + "/" + guard_name;
  make_dir(guard);
  age_path(guard, 3600);
  CHECK(a.reclaim(guard_name, false).outcome == RepairOutcome::refused);
  SUBCASE("empty: removed") {
    CHECK(a.reclaim(guard_name, true).outcome == RepairOutcome::removed);
    CHECK_FALSE(a.exists(guard));
  }
  SUBCASE("not empty: rmdir refuses, nothing removed") {
    write_file(guard + "/note", "x");
    age_path(guard, 3600);
    RepairResult result = a.reclaim(guard_name, true);
    CHECK(result.outcome == RepairOutcome::failed);
    CHECK(a.exists(guard + "/note"));
  }
  SUBCASE("recent: in flight, skipped") {
    age_path(guard, 1);
    CHECK(a.reclaim(guard_name, true).outcome == RepairOutcome::skipped);
  }
}

TEST_CASE("crash injection: reclaim abandoned after every step is explained and completed by a rerun") {
  int steps = 0;
  {
    Area a;
    make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
    auto [scanned, step] = a.plan(a.lock_name, false);
    a.system.calls.clear();
    REQUIRE(execute_repair(a.system, scanned, step, a.policy).outcome == RepairOutcome::removed);
    steps = static_cast<int>(a.system.calls.size());
  }
  REQUIRE(steps > 5);
  for (int crash = 0; crash < steps; ++crash) {
    CAPTURE(crash);
    Area a;
    make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
    auto [scanned, step] = a.plan(a.lock_name, false);
    a.system.calls.clear();
    a.system.crash_after = crash;
    (void)execute_repair(a.system, scanned, step, a.policy);
    // Every leftover is an entry status explains: the lock, its guard, a tombstone.
    for (const std::string& name : a.entries()) {
      CAPTURE(name);
      CHECK(parse_entry_name(name).role != EntryRole::unknown);
    }
    // A rerun with --force (a guard left by the crash counts as left over at once here)
    // completes: guards first, then the lock, then debris, as reclaim orders them.
    Area& again = a;
    again.system.crash_after.reset();
    again.policy.classify.guard_threshold_ns = 0;
    std::vector<std::string> names = again.entries();
    std::stable_sort(names.begin(), names.end(), [](const std::string& x, const std::string& y) {
      auto rank = [](const std::string& n) {
        auto role = parse_entry_name(n).role;
        return role == EntryRole::reclaim_guard ? 0 : role == EntryRole::lock ? 1 : 2;
      };
      return rank(x) < rank(y);
    });
    for (const std::string& name : names) {
      CAPTURE(name);
      RepairResult result = again.reclaim(name, true);
      CHECK((result.outcome == RepairOutcome::removed || result.outcome == RepairOutcome::skipped));
    }
    CHECK(again.entries().empty());
  }
}
