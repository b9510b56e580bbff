#include "apnea_locks/repair.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "apnea_locks/lock.h"
#include "apnea_locks/survey.h"
#include "cli/entry_report.h"
#include "area_builder.h"
#include "flock_holder.h"
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
  RepairSettings policy;

  Area() {
    make_dir(dir);
    system.processes[staged_live_pid] = StagedProcess{0, ProcessInfo{'S', staged_live_pid, ::getuid(), 0, "apnea"}};
    policy.settings.judge.area_uid = ::getuid();
    policy.settings.judge.host = healthy_host();
    policy.resource = "/fake/repo";
  }
  EntryFacts facts(const std::string& name) {
    return EntryJudge(system, dir, policy.settings).gather(name);
  }
  /// Gathers, judges and decides one entry as reclaim's survey does.
  std::pair<EntryFacts, Decision> plan(const std::string& name, bool force) {
    policy.settings.flags.force = force;
    policy.settings.judge.now_ns = system.now_ns();
    policy.settings.judge.paused = system.paused_processes();
    policy.settings.judge.runtimes = std::vector<ProcessInfo>{};  // the staged table runs no runtime
    EntryFacts scanned = facts(name);
    Decision decision = judge_entry(scanned, policy.settings, nullptr).second;
    return {scanned, decision};
  }
  RepairResult reclaim(const std::string& name, bool force) {
    auto [scanned, decision] = plan(name, force);
    return execute_repair(system, scanned, decision, policy);
  }
  bool exists(const std::string& path) { return system.real().lstat(path).has_value(); }
  /// Makes this area's lock's reclaim guard, left an hour ago; returns its name. Removal
  /// counts from the latest of a guard's mtime and ctime, and a ctime cannot be set back: the
  /// staged clock moves an hour on instead (everything made before is an hour old).
  std::string old_guard() {
    const std::string name = lock_name + ".reclaim";
    make_dir(dir + "/" + name);
    system.clock_offset_ns = 3600 * 1'000'000'000LL;
    return name;
  }
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

constexpr std::int64_t minute = 60'000'000'000;

}  // namespace

TEST_CASE("decide: section 10's table; nothing naming a pid not proven dead, under any flag") {
  using R = EntryRole;
  using S = EntryState;
  using P = ProofClass;
  using A = PlanAction;
  const std::int64_t now = 1'700'000'000'000'000'000;
  enum Record { names_pids, pidless, unknown };
  struct Case {
    const char* what;
    R role;
    S state;
    P proof;
    Record record;
    A without_force;
    A with_force;
  };
  const Case cases[] = {
      {"live owner", R::lock, S::live, P::none, names_pids, A::refuse, A::refuse},
      {"malformed naming a live pid", R::lock, S::live_malformed, P::none, names_pids, A::refuse, A::refuse},
      {"certainly dead owner", R::lock, S::stale, P::certain, names_pids, A::remove, A::remove},
      {"dead by evidence only", R::lock, S::stale, P::evidence, names_pids, A::refuse, A::remove},
      {"malformed, every pid certainly dead", R::lock, S::malformed, P::certain, names_pids, A::refuse, A::remove},
      {"malformed, pids dead by evidence", R::lock, S::malformed, P::evidence, names_pids, A::refuse, A::remove},
      {"malformed, names no pid, old", R::lock, S::malformed, P::none, pidless, A::refuse, A::remove},
      {"malformed, unreadable", R::lock, S::malformed, P::none, unknown, A::refuse, A::refuse},
      {"kept changing", R::lock, S::in_flight, P::none, names_pids, A::refuse, A::refuse},
      {"no lock", R::lock, S::free, P::none, names_pids, A::keep, A::keep},
      {"candidate of a dead writer", R::candidate, S::debris, P::certain, names_pids, A::remove, A::remove},
      {"candidate dead by evidence", R::candidate, S::debris, P::evidence, names_pids, A::refuse, A::remove},
      {"candidate of a live writer", R::candidate, S::in_flight, P::none, names_pids, A::keep, A::keep},
      {"tombstone naming no pid, old", R::tombstone, S::debris, P::none, pidless, A::refuse, A::remove},
      {"tombstone unreadable", R::tombstone, S::debris, P::none, unknown, A::refuse, A::refuse},
      {"leftover guard", R::reclaim_guard, S::leftover, P::none, pidless, A::refuse, A::remove},
      {"unknown entry", R::unknown, S::unknown, P::none, pidless, A::keep, A::keep},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    EntryFacts facts;
    facts.path = "/area/x";
    FileStat st;
    st.type = FileType::directory;
    st.mtime_ns = st.ctime_ns = now - 60 * minute;
    facts.stat = st;
    Verdict verdict;
    verdict.role = c.role;
    verdict.state = c.state;
    verdict.proof_class = c.proof;
    verdict.pidless = c.record == pidless;
    verdict.pids_unknown = c.record == unknown;
    verdict.death.proof = c.proof;
    verdict.death.uses_clock = c.proof == P::evidence;
    verdict.age_ns = 60 * minute;
    verdict.guard_checked = true;
    verdict.reason = "r";
    const Decision plain = decide(facts, verdict, RemovalFlags{false, std::chrono::minutes(5)}, now);
    const Decision forced = decide(facts, verdict, RemovalFlags{true, std::chrono::minutes(5)}, now);
    CHECK(plain.action == c.without_force);
    CHECK(forced.action == c.with_force);
    CHECK_FALSE(plain.why.empty());
    if (plain.action == A::refuse) CHECK_FALSE(plain.next_step.empty());
    if (forced.action == A::remove && plain.action != A::remove) CHECK_FALSE(forced.trusts.empty());
    // The fix command is the one reclaim that would act.
    const auto fix = fix_command(facts, verdict, nullptr, RemovalFlags{false, std::chrono::minutes(5)}, plain, now,
                                 FixContext{}).argv;
    if (c.without_force == A::remove) CHECK(fix == std::vector<std::string>{"apnea-locks", "reclaim", "/area/x"});
    else if (c.with_force == A::remove)
      CHECK(fix == std::vector<std::string>{"apnea-locks", "reclaim", "--force", "/area/x"});
    else CHECK(fix.empty());

    // A remote filesystem, a young ownerless entry and a paused guard holder block every flag.
    Verdict remote = verdict;
    remote.death.remote_filesystem = true;
    if (c.role != R::unknown)
      CHECK(decide(facts, remote, RemovalFlags{true, std::chrono::minutes(5)}, now).action != A::remove);
    if (c.record == pidless && c.role != R::reclaim_guard) {
      EntryFacts young = facts;
      young.stat->ctime_ns = now - minute;
      CHECK(decide(young, verdict, RemovalFlags{true, std::chrono::minutes(5)}, now).action != A::remove);
    }
    if (c.role == R::reclaim_guard) {
      Verdict paused = verdict;
      paused.guard_blocker = ProcessInfo{'T', 42, ::getuid(), 0, "apnea"};
      CHECK(decide(facts, paused, RemovalFlags{true, std::chrono::minutes(5)}, now).action == A::refuse);
      Verdict unchecked = verdict;
      unchecked.guard_checked = false;
      CHECK(decide(facts, unchecked, RemovalFlags{true, std::chrono::minutes(5)}, now).action == A::refuse);
    }
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

// `apnea-locks run` keeps a shared flock on its lock directory in run and in the shim that
// leads its command's session: after a kill -9 of run, the record's pid is dead while the
// session may still run (docs/model/README.md, boundary-run-killed). A flocked lock is in use
// whatever its record says: no removal, with or without --force, and no takeover.
TEST_CASE("a lock another process holds a flock on is not removed, though its owner is dead") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
  FlockHolder shim(a.lock);  // shares the descriptor, as the shim shares run's
  const auto before = snapshot(a.lock);
  for (bool force : {false, true}) {
    CAPTURE(force);
    RepairResult result = a.reclaim(a.lock_name, force);
    CHECK(result.outcome == RepairOutcome::changed);
    CHECK(result.detail.find("flock") != std::string::npos);
    CHECK(a.entries() == std::vector<std::string>{a.lock_name});  // no tombstone, no guard left
    CHECK(snapshot(a.lock) == before);
  }
  shim.release();  // the shim ends: so does its flock
  CHECK(a.reclaim(a.lock_name, false).outcome == RepairOutcome::removed);
  CHECK(a.entries().empty());
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
  CHECK(result.detail.find("pid 6000") != std::string::npos);
  CHECK(snapshot(a.dir) == before);
}

// issue 32 item 2: `kill PID` does nothing to a stopped owner until it goes on, and a traced
// one stays alive even after kill -9 until its tracer detaches: the next step says so, names
// the tracer, and the lock asked about by path needs attention (it is not released by itself).
TEST_CASE("a stopped or traced live owner: the next step says kill -CONT, or names the tracer to detach") {
  for (const char state : {'T', 't', 'S'}) {
    for (const bool tracer_known : {true, false}) {
      CAPTURE(state);
      CAPTURE(tracer_known);
      Area a;
      constexpr std::int64_t paused = 6002;
      ProcessInfo owner{state, paused, ::getuid(), 0, "apnea"};
      if (state == 't' && tracer_known) {
        owner.tracer_pid = 6003;
        owner.tracer_command = "gdb -p 6002";
      }
      a.system.processes[paused] = StagedProcess{0, owner};
      make_entry(a.dir, a.lock_name, owner_json(paused));
      a.policy.settings.judge.now_ns = a.system.now_ns();
      const auto [verdict, decision] = judge_entry(a.facts(a.lock_name), a.policy.settings, nullptr);
      CHECK(verdict.state == EntryState::live);
      // A listing counts it as live; asked about by path (inspect, explain) it needs a human.
      CHECK_FALSE(verdict.needs_attention);
      const EntryFacts facts = a.facts(a.lock_name);
      CHECK(cli::named_needs_attention(facts, verdict) == (state != 'S'));
      CHECK(decision.action == PlanAction::refuse);
      CAPTURE(decision.next_step);
      CHECK((decision.next_step.find("kill 6002; kill -CONT 6002") != std::string::npos) == (state == 'T'));
      CHECK((decision.next_step.find("tracer pid 6003 'gdb -p 6002'") != std::string::npos) ==
            (state == 't' && tracer_known));
      CHECK((decision.next_step.find("TracerPid in /proc/6002/status") != std::string::npos) ==
            (state == 't' && !tracer_known));
      CHECK((decision.next_step.find("stop it (kill 6002)") != std::string::npos) == (state == 'S'));
    }
  }
}

// issue 32: a young guard is kept (a reclamation may be at work), but Apnea is refused while
// it is there: named by its path it needs attention, so its decision says what to do.
TEST_CASE("a young reclaim guard is kept, with the next step for one that stays") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
  const std::string guard = a.lock_name + ".reclaim";
  make_dir(a.dir + "/" + guard);
  a.policy.settings.judge.now_ns = a.system.now_ns();
  const auto [verdict, decision] = judge_entry(a.facts(guard), a.policy.settings, nullptr);
  REQUIRE(verdict.clock_void_why.empty());
  CHECK(verdict.state == EntryState::in_flight);
  CHECK(decision.action == PlanAction::keep);
  CAPTURE(decision.next_step);
  CHECK(decision.next_step.find("rmdir -- " + a.lock + ".reclaim") != std::string::npos);
  CHECK(cli::named_needs_attention(a.facts(guard), verdict));
}

TEST_CASE("race: a replacement published after inspection survives") {
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid, "dead-token"));
  auto [scanned, step] = a.plan(a.lock_name, false);
  REQUIRE(step.removal == RemovalKind::lock_owner);
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
  REQUIRE(step.removal == RemovalKind::lock_owner);
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

TEST_CASE("a malformed lock naming no pid needs --force and --guard-age; one rewritten since is kept") {
  Area a;
  make_entry(a.dir, a.lock_name, "{\"pid\":0,\"token\":\"x\"}");
  CHECK(a.reclaim(a.lock_name, false).outcome == RepairOutcome::refused);
  CHECK(a.reclaim(a.lock_name, true).outcome == RepairOutcome::refused);  // changed just now
  CHECK(a.exists(a.lock));
  a.system.clock_offset_ns = 10 * minute;  // older than --guard-age by ctime

  auto [scanned, step] = a.plan(a.lock_name, true);
  REQUIRE(step.removal == RemovalKind::lock_malformed);
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

TEST_CASE("never-live: a malformed record naming a live pid is kept under every flag") {
  const std::vector<std::pair<std::string, mode_t>> records = {
      {"{\"pid\":6000,\"token\":\"t\"}", 0644},                 // mode Apnea rejects
      {"{\"pid\":6000,\"token\":\"t\"} trailing", 0600},       // bytes after the JSON
      {"\xEF\xBB\xBF{\"pid\":6000,\"token\":\"t\"}", 0600},      // a BOM
      {"{\"pid\":6001,\"pid\":6000,\"token\":\"t\"}", 0644},     // duplicates, live one first
      {"{\"pid\":6000,\"pid\":6001,\"token\":\"t\"}", 0644},     // live one overridden
      {"{\"pid\":\"6000\",\"token\":\"t\"}", 0600},             // a decimal string
      {"{\"pid\":6000,\"token\":\"t\"}" + std::string(5000, ' '), 0600},  // oversized
  };
  for (const auto& [record, mode] : records) {
    CAPTURE(record.substr(0, 60));
    Area a;
    make_entry(a.dir, a.lock_name, record, 0700, mode);
    a.system.clock_offset_ns = 24 * 60 * minute;  // old by every clock
    const auto before = snapshot(a.dir);
    auto [scanned, plain] = a.plan(a.lock_name, false);
    auto [scanned_forced, forced] = a.plan(a.lock_name, true);
    CHECK(plain.action == PlanAction::refuse);
    CHECK(forced.action == PlanAction::refuse);
    CHECK(forced.why.find("6000") != std::string::npos);
    CHECK(execute_repair(a.system, scanned_forced, forced, a.policy).outcome == RepairOutcome::refused);
    CHECK(snapshot(a.dir) == before);
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

TEST_CASE("debris: a dead writer's candidate is removed, never recursively, never through a symlink") {
  Area a;
  const std::string candidate_name = a.lock_name + ".candidate.tok";
  const std::string candidate = make_entry(a.dir, candidate_name, owner_json(staged_dead_pid, "tok"));
  // A symlink inside the debris pointing outside the area: only the link goes.
  const std::string outside = a.temp / "outside";
  make_dir(outside);
  write_file(outside + "/keep", "precious");
  REQUIRE(::symlink(outside.c_str(), (candidate + "/link").c_str()) == 0);

  // Anything but owner.json inside: refused and reported, never a recursive delete.
  CHECK(a.reclaim(candidate_name, true).outcome == RepairOutcome::changed);
  CHECK(a.exists(candidate + "/link"));
  CHECK(a.exists(outside + "/keep"));
  REQUIRE(::unlink((candidate + "/link").c_str()) == 0);
  CHECK(a.reclaim(candidate_name, false).outcome == RepairOutcome::removed);  // certainly dead
  CHECK_FALSE(a.exists(candidate));
  CHECK(a.exists(outside + "/keep"));
}

TEST_CASE("debris replaced or revived since inspection is left alone") {
  Area a;
  const std::string name = a.lock_name + ".tombstone.u";
  make_entry(a.dir, name, owner_json(staged_dead_pid));
  auto [scanned, step] = a.plan(name, true);
  REQUIRE(step.removal == RemovalKind::debris);
  SUBCASE("replaced by another directory") {
    REQUIRE(a.system.real().rename(a.dir + "/" + name, a.temp / "aside"));
    make_entry(a.dir, name, owner_json(staged_dead_pid));
    CHECK(execute_repair(a.system, scanned, step, a.policy).outcome == RepairOutcome::changed);
    CHECK(a.exists(a.dir + "/" + name));
  }
  SUBCASE("a reclamation of its lock is in progress") {
    make_dir(a.lock + ".reclaim");
    RepairResult result = execute_repair(a.system, scanned, step, a.policy);
    CHECK(result.outcome == RepairOutcome::guard_held);
    CHECK(a.exists(a.dir + "/" + name));
    CHECK(a.plan(name, true).second.action == PlanAction::keep);  // the survey says so too
  }
}

TEST_CASE("race: a guard re-made with the removed guard's inode number is not removed") {
  // reclaim --force judged an old leftover guard removable. Before it acts, that guard is
  // removed (by another reclaim) and a live Apnea makes a new guard for its own
  // reclamation; ext4 hands the new directory the old one's inode number at once. Device
  // and inode alone would say "the same guard"; its identity is device, inode, birth time
  // and ctime, and a new guard has a new ctime (and, where the filesystem has one, birth).
  for (const bool has_birth : {true, false}) {
    CAPTURE(has_birth);
    Area a;
    const std::string guard_name = a.old_guard();
    const std::string guard = a.dir + "/" + guard_name;
    if (!has_birth)
      a.system.restat = [&](const std::string&, FileStat& st) { st.birth_ns = 0; };
    auto [judged, decision] = a.plan(guard_name, true);
    REQUIRE(decision.action == PlanAction::remove);
    REQUIRE(decision.removal == RemovalKind::guard);
    const FileStat was = *judged.stat;
    bool remade = false;
    a.system.before = [&](std::string_view op, const std::string&) {
      if (op != "lock_exclusive" || remade) return;
      remade = true;
      REQUIRE(::rmdir(guard.c_str()) == 0);
      REQUIRE(::mkdir(guard.c_str(), 0700) == 0);  // the live holder's guard, made now
      a.system.restat = [&](const std::string& path, FileStat& st) {
        if (!has_birth) st.birth_ns = 0;
        if (path == guard) st.ino = was.ino;
      };
    };
    const RepairResult result = execute_repair(a.system, judged, decision, a.policy);
    CHECK(remade);
    CHECK(result.outcome == RepairOutcome::changed);
    CHECK(a.exists(guard));
    CHECK(a.system.count("rmdir") == 0);
  }
}

TEST_CASE("race: a guard whose holder is paused after the judgement is re-decided under the flock, not removed") {
  // Judged with no paused process, the old guard was removable under --force; by the time
  // reclaim holds the area's flock, a process of this account that started before the
  // guard is stopped: it may be the guard's holder, paused between its token check and its
  // rename. Only the re-decision under the flock (the paused processes read again) sees
  // it; deleting redecide() from carry_out's guard case turns this red.
  Area a;
  const std::string guard_name = a.old_guard();
  const std::string guard = a.dir + "/" + guard_name;
  auto [judged, decision] = a.plan(guard_name, true);
  REQUIRE(decision.action == PlanAction::remove);
  REQUIRE(decision.removal == RemovalKind::guard);
  bool paused = false;
  a.system.before = [&](std::string_view op, const std::string&) {
    if (op != "lock_exclusive" || paused) return;
    paused = true;
    ProcessInfo stopped{'T', 4242, ::getuid(), 1, "node apnea"};
    stopped.pid = 4242;
    a.system.staged_paused = std::vector<ProcessInfo>{stopped};
  };
  const RepairResult result = execute_repair(a.system, judged, decision, a.policy);
  CHECK(paused);
  CHECK(result.outcome == RepairOutcome::changed);
  CHECK(result.detail.find("no longer removable") != std::string::npos);
  CHECK(a.exists(guard));
  CHECK(a.system.count("rmdir") == 0);
}

TEST_CASE("a leftover guard is removed with --force; a guard that is not empty is not") {
  Area a;
  const std::string guard_name = a.old_guard();
  const std::string guard = a.dir + "/" + guard_name;
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
    a.system.clock_offset_ns = 0;
    CHECK(a.reclaim(guard_name, true).outcome == RepairOutcome::skipped);
  }
  SUBCASE("a paused process of this uid started before it: refused, kept") {
    ProcessInfo stopped{'T', 4242, ::getuid(), 1, "apnea"};
    stopped.pid = 4242;
    a.system.staged_paused = std::vector<ProcessInfo>{stopped};
    RepairResult result = a.reclaim(guard_name, true);
    CHECK(result.outcome == RepairOutcome::refused);
    CHECK(result.detail.find("4242") != std::string::npos);
    CHECK(a.exists(guard));
  }
  SUBCASE("the process table cannot be read: refused, kept") {
    a.system.staged_paused.reset();
    CHECK(a.reclaim(guard_name, true).outcome == RepairOutcome::refused);
    CHECK(a.exists(guard));
  }
}

TEST_CASE("race: two reclaims removing one leftover guard never remove the guard taken next") {
  // Found by the model (docs/model/README.md, "two reclaims"): reclaim B judged the leftover
  // guard and saw it by lstat; reclaim A removed it, and a reclamation took a new guard;
  // B's rmdir, by path, then removed that new guard while its holder worked under it.
  Area a;
  const std::string guard_name = a.old_guard();
  const std::string guard = a.dir + "/" + guard_name;
  auto [scanned, decision] = a.plan(guard_name, true);
  REQUIRE(decision.action == PlanAction::remove);
  REQUIRE(decision.removal == RemovalKind::guard);
  std::optional<RepairResult> other;
  bool made_next = false;
  a.system.before = [&](std::string_view op, const std::string& path) {
    if (op != "rmdir" || path != guard || other) return;
    // Between this reclaim's lstat of the old guard and its rmdir: another reclaim of the
    // same guard, then a reclamation that takes the guard.
    StagedSystem second;
    other = execute_repair(second, scanned, decision, a.policy);
    made_next = a.system.real().mkdir(guard, 0700).has_value();
  };
  RepairResult result = execute_repair(a.system, scanned, decision, a.policy);
  REQUIRE(other);
  CHECK(other->outcome == RepairOutcome::guard_held);
  CHECK(other->detail.find("another apnea-locks reclaim is removing a reclaim guard") != std::string::npos);
  CHECK_FALSE(made_next);  // the old guard was still there: nobody could take a new one
  CHECK(result.outcome == RepairOutcome::removed);
  CHECK_FALSE(a.exists(guard));
  a.system.before = nullptr;
  // The area's flock went with the first reclaim: the next one removes the next leftover.
  make_dir(guard);
  age_path(guard, 3600);
  CHECK(a.reclaim(guard_name, true).outcome == RepairOutcome::removed);
}

TEST_CASE("model schedule mutant-no-redecide: a second reclaim of a removed guard never removes the next holder's guard") {
  // The order of system calls of docs/model/trails/mutant-no-redecide.txt, replayed on the
  // real library: a dead lock and a crashed reclamation's guard; reclaims A and B both judge
  // the guard left over (B acts on that judgement later); A takes the area's flock,
  // re-decides, lstats and removes the guard, then reclaims the dead lock and takes a guard
  // of its own, which gets the removed guard's inode number; B then takes the flock,
  // re-decides, lstats the guard and would rmdir it. P2 (the model's property), checked on
  // the real area: while A holds its guard, nobody else removes it.
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
  const std::string guard_name = a.lock_name + ".reclaim";
  const std::string guard = a.dir + "/" + guard_name;
  make_dir(guard);
  // The leftover guard was made an hour ago (a ctime cannot be set back: it is staged).
  bool old_on_disk = true;
  std::optional<std::uint64_t> old_ino;
  const auto stage = [&](const std::string& path, FileStat& st) {
    if (path != guard) return;
    if (old_on_disk) {
      old_ino = st.ino;
      for (std::int64_t* t : {&st.mtime_ns, &st.ctime_ns, &st.birth_ns})
        if (*t != 0) *t -= 3600 * 1'000'000'000LL;
    } else if (old_ino) {
      st.ino = *old_ino;  // ext4 hands the freed number back at once
    }
  };
  a.system.restat = stage;
  // [pid 2] survey, [pid 1] survey: both judge the guard removable.
  auto [b_scanned, b_decision] = a.plan(guard_name, true);
  auto [a_scanned, a_decision] = a.plan(guard_name, true);
  REQUIRE(b_decision.removal == RemovalKind::guard);
  REQUIRE(a_decision.removal == RemovalKind::guard);
  // [pid 1] flock, re-decide, lstat, rmdir <lock>.reclaim.
  a.system.before = [&](std::string_view op, const std::string& path) {
    if (op == "rmdir" && path == guard) old_on_disk = false;
  };
  REQUIRE(execute_repair(a.system, a_scanned, a_decision, a.policy).outcome == RepairOutcome::removed);
  REQUIRE_FALSE(a.exists(guard));
  // [pid 1] survey: the dead lock; mkdir <lock>.reclaim (the same inode number).
  auto [lock_scanned, lock_decision] = a.plan(a.lock_name, true);
  REQUIRE(lock_decision.removal == RemovalKind::lock_owner);
  bool a_holds = false;
  std::optional<RepairResult> b_result;
  bool p2_held = false;
  a.system.before = [&](std::string_view op, const std::string& path) {
    if (op == "mkdir" && path == guard) {
      a_holds = true;
      return;
    }
    if (!a_holds || b_result) return;
    // A holds its new guard: [pid 2] flock, re-decide, lstat, rmdir.
    StagedSystem second;
    second.restat = stage;
    b_result = execute_repair(second, b_scanned, b_decision, a.policy);
    p2_held = a.exists(guard);
  };
  const RepairResult a_result = execute_repair(a.system, lock_scanned, lock_decision, a.policy);
  REQUIRE(b_result);
  CHECK(p2_held);  // P2: A's guard was not removed while A held it
  CHECK(b_result->outcome != RepairOutcome::removed);
  CHECK(a_result.outcome == RepairOutcome::removed);
  CHECK_FALSE(a.exists(a.lock));
  CHECK_FALSE(a.exists(guard));  // A dropped its own guard
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
    again.policy.settings.judge.guard_threshold = {};
    again.policy.settings.flags.guard_age = {};
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

TEST_CASE("race: the lock area swapped for a symlink during a removal: nothing is removed through it") {
  // Removal goes through one descriptor of the area opened with O_NOFOLLOW. A lock judged
  // dead and re-decided under its guard; then, just before the tombstone rename, the area's
  // path becomes a symlink to another directory holding an entry of the same name. A rename
  // by path would follow the symlink and remove that other entry (it did, with the
  // descriptor replaced by path joining); through the descriptor, the judged lock goes.
  Area a;
  make_entry(a.dir, a.lock_name, owner_json(staged_dead_pid));
  auto [judged, decision] = a.plan(a.lock_name, false);
  REQUIRE(decision.action == PlanAction::remove);
  const std::string moved = a.dir + ".moved";
  const std::string elsewhere = a.temp / "elsewhere";
  make_dir(elsewhere);
  make_entry(elsewhere, a.lock_name, owner_json(staged_dead_pid));
  bool swapped = false;
  a.system.before = [&](std::string_view op, const std::string&) {
    if (swapped || op != "rename") return;
    swapped = true;
    REQUIRE(::rename(a.dir.c_str(), moved.c_str()) == 0);
    REQUIRE(::symlink(elsewhere.c_str(), a.dir.c_str()) == 0);
  };
  const RepairResult result = execute_repair(a.system, judged, decision, a.policy);
  CAPTURE(result.detail);
  REQUIRE(swapped);
  CHECK(a.exists(elsewhere + "/" + a.lock_name + "/owner.json"));  // not removed through the link
  CHECK_FALSE(a.exists(moved + "/" + a.lock_name));                // the judged lock went
}
