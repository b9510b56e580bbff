// scan: one pass over a real temp area through a StagedSystem, including staged races.
#include "apnea_locks/scan.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "area_builder.h"
#include "detail/scan.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
using namespace apnea_locks::detail;

namespace {

constexpr std::int64_t live_pid = 1000;
constexpr std::int64_t dead_pid_number = 2000;

void stage_live(StagedSystem& system, std::int64_t pid) {
  ProcessInfo info;
  info.state = 'S';
  info.tgid = pid;
  info.uid = system.uid();
  info.start_time_ns = 1;  // long before any record was written
  info.command = "node apnea";
  system.processes[pid] = StagedProcess{0, info};
}

std::map<std::string, EntryFacts> scan_all(StagedSystem& system, const std::string& area) {
  std::map<std::string, EntryFacts> seen;
  auto scanned = scan_area(system, area, system.uid(), [&](const EntryFacts& facts) {
    CHECK_MESSAGE(seen.count(facts.name) == 0, "visited twice: " << facts.name);
    seen[facts.name] = facts;
    return true;
  });
  REQUIRE(scanned);
  return seen;
}

int count_call(const StagedSystem& system, const std::string& call) {
  return static_cast<int>(std::count(system.calls.begin(), system.calls.end(), call));
}

}  // namespace

TEST_CASE("every kind of entry is visited once with its facts") {
  TempDir area;
  StagedSystem system;
  stage_live(system, live_pid);
  const std::string live = fake_lock_name("live");
  const std::string dead = fake_lock_name("dead");
  const std::string bad = fake_lock_name("bad");
  make_entry(area.path(), live, owner_json(live_pid));
  make_entry(area.path(), dead, owner_json(dead_pid_number));
  make_entry(area.path(), bad, owner_json(live_pid), 0700, 0644);
  make_entry(area.path(), live + ".candidate.abc", owner_json(live_pid));
  make_entry(area.path(), dead + ".tombstone.def", owner_json(dead_pid_number));
  make_dir(area / (dead + ".reclaim"));
  write_file(area / "README", "not a lock");

  auto seen = scan_all(system, area.path());
  REQUIRE(seen.size() == 7);

  const EntryFacts& l = seen.at(live);
  CHECK(l.parsed.role == EntryRole::lock);
  REQUIRE(l.owner);
  REQUIRE(l.owner->owner);
  CHECK(l.owner->owner->token == test_token);
  REQUIRE(l.process);
  CHECK(l.process->signal_errno == 0);
  CHECK_FALSE(l.guard);

  const EntryFacts& d = seen.at(dead);
  REQUIRE(d.process);
  CHECK(d.process->signal_errno == ESRCH);
  CHECK(d.guard);  // its reclaim guard exists

  const EntryFacts& b = seen.at(bad);
  REQUIRE(b.owner);
  REQUIRE_FALSE(b.owner->owner);
  CHECK(b.owner->owner.error().reason() == "owner-mode-0644");
  CHECK_FALSE(b.process);

  CHECK(seen.at(live + ".candidate.abc").parsed.role == EntryRole::candidate);
  CHECK(seen.at(live + ".candidate.abc").process);
  CHECK(seen.at(dead + ".tombstone.def").parsed.role == EntryRole::tombstone);
  CHECK(seen.at(dead + ".reclaim").stat);
  CHECK_FALSE(seen.at(dead + ".reclaim").owner);
  CHECK(seen.at("README").parsed.role == EntryRole::unknown);
  CHECK(seen.at("README").stat->type == FileType::regular);

  // Only reads: nothing was created, renamed or removed.
  for (const auto& call : system.calls) {
    const std::string op = call.substr(0, call.find(' '));
    CHECK_MESSAGE((op == "lstat" || op == "open" || op == "fstat" || op == "pread" ||
                   op == "list_directory" || op == "kill" || op == "proc" || op == "runtime" || op == "ns_view"),
                  call);
  }
}

TEST_CASE("each distinct pid is probed once per scan") {
  TempDir area;
  StagedSystem system;
  stage_live(system, live_pid);
  for (int i = 0; i < 5; ++i) make_entry(area.path(), fake_lock_name("l" + std::to_string(i)), owner_json(live_pid));
  for (int i = 0; i < 4; ++i)
    make_entry(area.path(), fake_lock_name("d" + std::to_string(i)), owner_json(dead_pid_number));
  for (int i = 0; i < 3; ++i)
    make_entry(area.path(), fake_lock_name("c" + std::to_string(i)) + ".candidate.x", owner_json(live_pid));
  // Beyond 2^31: Node cannot signal it, so nothing is probed at all.
  make_entry(area.path(), fake_lock_name("huge"), "{\"pid\":1e20,\"token\":\"t\"}");

  auto seen = scan_all(system, area.path());
  CHECK(seen.size() == 13);
  CHECK(system.count("kill") == 2);
  CHECK(count_call(system, "kill 1000") == 1);
  CHECK(count_call(system, "kill 2000") == 1);
  CHECK(system.count("proc") == 1);
  CHECK(system.count("ns_view") == 1);  // once, for the first dead owner
  for (const auto& [name, facts] : seen) {
    REQUIRE(facts.process);
    if (name.find("-" + lock_key(LockKind::repository, "/fake/huge")) != std::string::npos) continue;
    CHECK(facts.process->signal_errno == (facts.owner->owner->pid == live_pid ? 0 : ESRCH));
  }
}

TEST_CASE("the process cache answers like gather_process") {
  StagedSystem system;
  stage_live(system, live_pid);
  ProcessCache cache(system);
  for (int round = 0; round < 3; ++round) {
    ProcessFacts alive = cache.get(live_pid);
    CHECK(alive.signal_errno == 0);
    REQUIRE(alive.info);
    CHECK(alive.info->command == "node apnea");
    ProcessFacts dead = cache.get(dead_pid_number);
    CHECK(dead.pid == dead_pid_number);
    CHECK(dead.signal_errno == ESRCH);
    CHECK_FALSE(dead.info);
    ProcessFacts beyond = cache.get(double(system.staged_pid_max) + 5);  // above pid_max
    CHECK(beyond.signal_errno == ESRCH);
  }
  CHECK(system.count("kill") == 3);
}

TEST_CASE("an entry that vanishes between the listing and its read is skipped") {
  TempDir area;
  StagedSystem system;
  const std::string gone = fake_lock_name("gone");
  const std::string stays = fake_lock_name("stays");
  make_entry(area.path(), gone, owner_json(dead_pid_number));
  make_entry(area.path(), stays, owner_json(dead_pid_number));
  make_dir(area / (gone + ".reclaim"));
  system.before = [&](std::string_view op, const std::string& path) {
    if (op != "lstat") return;
    if (path == area / gone) (void)system.real().remove_tree(path);
    if (path == area / (gone + ".reclaim")) (void)system.real().rmdir(path);
  };
  auto seen = scan_all(system, area.path());
  CHECK(seen.size() == 1);
  CHECK(seen.count(stays) == 1);
}

TEST_CASE("a release racing the owner read is not reported malformed") {
  TempDir area;
  TempDir elsewhere;
  StagedSystem system;
  const std::string name = fake_lock_name("racing");
  const std::string lock = make_entry(area.path(), name, owner_json(dead_pid_number));
  bool renamed = false;
  // Between read_owner's lstat of the lock and its open of owner.json, the owner releases:
  // the lock is renamed away (to a tombstone outside the listing).
  system.before = [&](std::string_view op, const std::string& path) {
    if (op == "open" && path == lock + "/owner.json" && !renamed) {
      renamed = true;
      REQUIRE(system.real().rename(lock, elsewhere / "tombstone"));
    }
  };
  auto seen = scan_all(system, area.path());
  CHECK(renamed);
  CHECK(seen.empty());  // gone, so skipped; never malformed
}

TEST_CASE("a lock replaced during the owner read is read again") {
  TempDir area;
  TempDir elsewhere;
  StagedSystem system;
  stage_live(system, live_pid);
  const std::string name = fake_lock_name("replaced");
  const std::string lock = make_entry(area.path(), name, owner_json(dead_pid_number));
  int step = 0;
  system.before = [&](std::string_view op, const std::string& path) {
    if (op == "open" && path == lock + "/owner.json" && step == 0) {
      step = 1;  // the old owner releases: the lock vanishes under the reader
      REQUIRE(system.real().rename(lock, elsewhere / "tombstone"));
    } else if (op == "lstat" && path == lock && step == 1) {
      step = 2;  // a new owner publishes its lock before the re-check
      make_entry(elsewhere.path(), "candidate", owner_json(live_pid, "new-token"));
      REQUIRE(system.real().rename(elsewhere / "candidate", lock));
    }
  };
  auto seen = scan_all(system, area.path());
  REQUIRE(seen.size() == 1);
  const EntryFacts& facts = seen.at(name);
  CHECK_FALSE(facts.kept_changing);
  REQUIRE(facts.owner->owner);
  CHECK(facts.owner->owner->token == "new-token");
  CHECK(facts.process->pid == live_pid);
}

TEST_CASE("a genuinely malformed lock is read once, found unchanged after the probe, and reported") {
  TempDir area;
  StagedSystem system;
  const std::string name = fake_lock_name("broken");
  const std::string lock = make_entry(area.path(), name, "{\"pid\":12,");
  auto seen = scan_all(system, area.path());
  REQUIRE(seen.size() == 1);
  const EntryFacts& facts = seen.at(name);
  CHECK_FALSE(facts.kept_changing);
  CHECK(facts.confirmed_after_probe);
  REQUIRE_FALSE(facts.owner->owner);
  CHECK(facts.owner->owner.error().reason() == "json-syntax");
  // One whole read, then one lstat after the probe of pid 12 finding the same directory
  // with the same ctime and mtime: a race (release, new owner) cannot look like this.
  CHECK(count_call(system, "lstat " + lock) == 2);
  CHECK(count_call(system, "open " + lock + "/owner.json") == 1);
  const auto& calls = system.calls;
  const auto probe = std::find(calls.begin(), calls.end(), "kill 12");
  REQUIRE(probe != calls.end());
  CHECK(std::find(probe, calls.end(), "lstat " + lock) != calls.end());
}

TEST_CASE("a malformed lock whose directory changed before the re-check is read whole until two reads agree") {
  TempDir area;
  StagedSystem system;
  const std::string name = fake_lock_name("touched");
  const std::string lock = make_entry(area.path(), name, "{\"pid\":12,");
  int lstats = 0;
  system.before = [&](std::string_view op, const std::string& path) {
    if (op == "lstat" && path == lock && ++lstats == 2) age_path(lock, 60);  // a new mtime
  };
  auto seen = scan_all(system, area.path());
  REQUIRE(seen.size() == 1);
  const EntryFacts& facts = seen.at(name);
  CHECK_FALSE(facts.kept_changing);
  CHECK_FALSE(facts.confirmed_after_probe);
  CHECK(facts.owner->owner.error().reason() == "json-syntax");
  CHECK(count_call(system, "open " + lock + "/owner.json") == 3);  // the first, then two that agree
}

TEST_CASE("a lock that changes on every read is reported as changing, not malformed") {
  TempDir area;
  TempDir elsewhere;
  StagedSystem system;
  const std::string name = fake_lock_name("churn");
  const std::string lock = make_entry(area.path(), name, owner_json(dead_pid_number));
  int replaced = 0;
  system.before = [&](std::string_view op, const std::string& path) {
    if (op == "open" && path == lock + "/owner.json") {
      // Replace the lock by a fresh directory whose owner.json is not there yet.
      REQUIRE(system.real().rename(lock, elsewhere / ("old" + std::to_string(replaced++))));
      make_dir(lock);
    }
  };
  auto seen = scan_all(system, area.path());
  REQUIRE(seen.size() == 1);
  const EntryFacts& facts = seen.at(name);
  CHECK(facts.kept_changing);
  CHECK(replaced == 1 + default_reread_limit);
  JudgingSettings policy;
  policy.area_uid = system.uid();
  Verdict verdict = classify(facts, policy, nullptr);
  CHECK(verdict.state == EntryState::in_flight);
  CHECK(verdict.apnea_verdict == ApneaVerdict::raced);
}

TEST_CASE("scan stops when the visitor says so, and fails on an unlistable area") {
  TempDir area;
  StagedSystem system;
  for (int i = 0; i < 4; ++i) make_entry(area.path(), fake_lock_name(std::to_string(i)), owner_json(dead_pid_number));
  int visited = 0;
  REQUIRE(scan_area(system, area.path(), system.uid(), [&](const EntryFacts&) { return ++visited < 2; }));
  CHECK(visited == 2);
  auto missing = scan_area(system, area / "nope", system.uid(), [](const EntryFacts&) { return true; });
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == std::errc::no_such_file_or_directory);
}

TEST_CASE("gather_owner_file shows bytes Apnea refuses to read") {
  TempDir area;
  StagedSystem system;
  const std::string big(5000, 'x');
  const std::string lock = make_entry(area.path(), fake_lock_name("big"), big);
  OwnerFileDetails details = gather_owner_file(system, lock);
  REQUIRE(details.lstat);
  CHECK(details.lstat->size == 5000);
  REQUIRE(details.raw);
  CHECK(details.raw->size() == 4096);
  CHECK(details.raw_truncated);

  const std::string fifo_lock = area / fake_lock_name("fifo");
  make_dir(fifo_lock);
  REQUIRE(::mkfifo((fifo_lock + "/owner.json").c_str(), 0600) == 0);
  OwnerFileDetails fifo = gather_owner_file(system, fifo_lock);  // must not block
  REQUIRE(fifo.lstat);
  CHECK(fifo.lstat->type == FileType::fifo);
  CHECK_FALSE(fifo.raw);

  OwnerFileDetails none = gather_owner_file(system, area / "absent");
  CHECK_FALSE(none.lstat);
  CHECK(none.lstat_error == std::errc::no_such_file_or_directory);
}
