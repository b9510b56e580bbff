// Crash injection with real processes (issue 8, item 3): processes that acquire, release
// and reclaim (lock_stress crash-loop, through the core, reclaiming dead owners at once with
// reclaim_guarded), `apnea-locks run` and `apnea-locks reclaim` are SIGKILLed at random
// moments (seeded). After every kill: no two owners ever (the workers check mutual exclusion
// themselves, and a live holder's lock keeps its token), `status` explains every leftover
// entry, no lock is malformed, and one `reclaim --all --force` plus one normal acquire
// leaves the area clean.
//
// Knobs: APNEA_CRASH_TRIALS (default 500, 200 in a sanitizer build; 5000 under
// APNEA_SOAK=1), APNEA_CRASH_SEED (default 8).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "apnea_locks/lock.h"
#include "apnea_locks/names.h"
#include "area_builder.h"
#include "reliability_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

// Sanitized processes start several times slower: the sanitizer pass (scripts/dev test
// --sanitize) looks for memory errors with fewer trials; the plain pass runs 500.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif

/// A second, live owner sharing the area: `apnea-locks run --repo R2 -- cat`, which holds
/// R2's lock until its stdin is closed.
struct Holder {
  std::unique_ptr<SpawnedProcess> process;
  std::string lock_path, token;
};

Holder start_holder(const std::string& lock_dir, const std::string& repo) {
  Holder holder;
  holder.process = std::make_unique<SpawnedProcess>(std::vector<std::string>{
      locks_bin(), "run", "--lock-dir", lock_dir, "--repo", repo, "--print-token", "--", "cat"});
  auto line = holder.process->read_line_containing(Stream::err, "holding", 30s);
  REQUIRE(line);
  // "apnea-locks run: holding LOCK as pid PID, token TOKEN"
  const auto from = line->find("holding ") + 8;
  holder.lock_path = line->substr(from, line->find(" as pid ") - from);
  holder.token = line->substr(line->rfind(' ') + 1);
  return holder;
}

/// The token of the lock at `path`, or "" when it has no valid owner.
std::string token_at(const std::string& path) {
  OwnerRead read = read_owner(real_system(), path, ::getuid());
  return read.owner ? read.owner->token : std::string();
}

/// The repository lock path of `root` in `lock_dir`.
std::string lock_path_of(const std::string& lock_dir, const std::string& root) {
  auto target = repository_target(real_system(), lock_dir, root);
  REQUIRE(target);
  return target->lock_path;
}

struct Stats {
  long trials = 0, workers_killed = 0, runs = 0, reclaims = 0, holder_trials = 0, reclaimed = 0;
  long dirty_trials = 0;  ///< trials that left at least one entry for reclaim
  std::map<std::string, long> seen;  ///< "role state reason" of leftover entries
};

/// One trial; the problems found (empty: all good).
std::vector<std::string> trial(const ScratchArea& area, const std::string& r1, const std::string& r2,
                               const Holder* holder, std::mt19937_64& random, Stats& stats) {
  std::vector<std::string> problems;
  const std::string stress = test_env("APNEA_LOCKS_STRESS");
  const int workers = 1 + static_cast<int>(random() % 3);
  const bool with_run = random() % 4 == 0;
  const bool with_reclaim = random() % 4 == 0;
  std::vector<std::unique_ptr<SpawnedProcess>> processes;
  for (int i = 0; i < workers; ++i)
    processes.push_back(std::make_unique<SpawnedProcess>(
        std::vector<std::string>{stress, "crash-loop", area.locks, r1, r2}));
  for (auto& process : processes) {
    auto ready = process->read_line(Stream::out, 30s);
    if (!ready || ready->find("\"ready\"") == std::string::npos)
      problems.push_back(fmt::format("a worker did not start (exit {}): {} {}",
                                     process->wait(30s).value_or(-1), process->out(), process->err()));
  }
  if (!problems.empty()) return problems;
  // `run` itself, and `reclaim` racing the workers, killed anywhere between start and exit.
  const std::size_t run_index = with_run ? processes.size() : SIZE_MAX;
  if (with_run)
    processes.push_back(std::make_unique<SpawnedProcess>(std::vector<std::string>{
        locks_bin(), "run", "--lock-dir", area.locks, "--repo", r1, "-n", "--json", "--", "true"}));
  const std::size_t reclaim_index = with_reclaim ? processes.size() : SIZE_MAX;
  if (with_reclaim)
    processes.push_back(std::make_unique<SpawnedProcess>(std::vector<std::string>{
        locks_bin(), "reclaim", "--all", "--yes", "--lock-dir", area.locks}));

  // Kill every process, in random order, each after a random delay (randomness, not
  // synchronisation: nothing below depends on where a kill landed).
  std::vector<std::size_t> order(processes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), random);
  static constexpr long max_delay_us[] = {300, 3'000, 25'000};
  const long max_us = max_delay_us[random() % 3];
  for (std::size_t index : order) {
    std::this_thread::sleep_for(std::chrono::microseconds(random() % (max_us + 1)));
    SpawnedProcess& process = *processes[index];
    process.signal(SIGKILL);
    const auto status = process.wait(30s);
    if (!status) {
      problems.push_back("a killed process did not end");
    } else if (index == reclaim_index) {
      ++stats.reclaims;
      // It may have finished first: 0, or 1 (refused debris without --force, or a race).
      if (*status != 0 && *status != 1 && *status != 128 + SIGKILL)
        problems.push_back(fmt::format("reclaim exited {}: {} {}", *status, process.out(), process.err()));
      if (process.out().find("malformed") != std::string::npos)
        problems.push_back("reclaim saw a malformed lock: " + process.out());
    } else if (index == run_index) {
      ++stats.runs;
      // It may have finished first: 0, or 75/76 refused (live / dead owner in the grace).
      if (*status != 0 && *status != 75 && *status != 76 && *status != 128 + SIGKILL)
        problems.push_back(fmt::format("run exited {}: {}", *status, process.err()));
      if (process.err().find("malformed") != std::string::npos)
        problems.push_back("run reported malformed: " + process.err());
    } else {
      ++stats.workers_killed;
      if (*status != 128 + SIGKILL)  // 3: a lock error, 4: two owners
        problems.push_back(
            fmt::format("worker exited {} before the kill: {} {}", *status, process.out(), process.err()));
    }
  }

  // Every leftover entry is explained; nothing is malformed; the live holder is live.
  const std::set<std::string> names{lock_path_of(area.locks, r1), lock_path_of(area.locks, r2)};
  const StatusRun status = status_json(area.locks);
  if (!status.finished.status || (*status.finished.status != 0 && *status.finished.status != 1) ||
      !status.document.is_object()) {
    problems.push_back(fmt::format("status failed ({}): {} {}", status.finished.status.value_or(-1),
                                   status.finished.out, status.finished.err));
    return problems;
  }
  bool dirty = false;
  for (const auto& value : status.document.at("entries").as_array()) {
    const auto& entry = value.as_object();
    const std::string role = member(entry, "role"), state = member(entry, "state"),
                      reason = member(entry, "reason"), path = member(entry, "path");
    const std::string lock_path = area.locks + "/" + member(entry, "lock_name");
    const bool held_by_holder = holder != nullptr && path == holder->lock_path;
    if (!held_by_holder) {
      ++stats.seen[role + " " + state + " " + reason];
      dirty = true;
    }
    auto wrong = [&](const char* why) {
      problems.push_back(fmt::format("{}: {} {} {} {}", why, path, role, state, reason));
    };
    if (state == "unknown" || state == "malformed") wrong("unexplained or malformed entry");
    if (!names.contains(lock_path)) wrong("an entry of a lock nobody took");
    if (role == "lock") {
      if (held_by_holder) {
        if (state != "live" || member(entry, "token") != holder->token) wrong("the live holder's lock");
      } else if (state != "stale" || reason != "pid-dead") {
        wrong("a dead worker's lock is not stale/pid-dead");
      }
    } else if (role == "candidate" || role == "tombstone") {
      if ((state != "debris" && state != "in-flight") || reason == "pid-alive")
        wrong("a dead worker's candidate or tombstone");
    } else if (role == "reclaim-guard") {
      if (state != "in-flight" && state != "leftover") wrong("a reclaim guard");
    } else {
      wrong("an unexpected role");
    }
  }
  if (dirty) ++stats.dirty_trials;

  // One reclaim --force and one normal acquire return the area to a clean state. What the
  // killed processes left is aged past the smallest --guard-age (1m), as it is by the time
  // a human runs reclaim: a younger guard or pid-less entry may still be in flight.
  for (const std::string& name : area.listing()) {
    const std::string path = area.locks + "/" + name;
    if (holder == nullptr || path != holder->lock_path) age_path(path, 120);
  }
  const std::vector<std::string> reclaim_all{locks_bin(), "reclaim", "--all", "--force", "--yes", "--json",
                                            "--guard-age", "1m", "--lock-dir", area.locks};
  Finished reclaim = finish(reclaim_all, {}, 60s);
  if (reclaim.status == 1) {
    // A guard aged by its mtime is not old enough to remove (its ctime is now, or the clock
    // is void): each refusal says so, and its next step (no Apnea process runs: every worker
    // is dead) is to rmdir the guard by hand.
    bool removed_guard = false;
    for (const std::string& name : area.listing()) {
      if (!name.ends_with(".reclaim")) continue;
      if (!guard_too_young(reclaim.out))
        problems.push_back("a guard refused without saying it is too young: " + reclaim.out);
      removed_guard = ::rmdir((area.locks + "/" + name).c_str()) == 0 || removed_guard;
      ++stats.seen["leftover guard, too young by ctime or clock: rmdir by hand"];
    }
    if (removed_guard) reclaim = finish(reclaim_all, {}, 60s);
  }
  if (reclaim.status != 0) {
    problems.push_back(fmt::format("reclaim exited {}: {} {}", reclaim.status.value_or(-1),
                                   reclaim.out, reclaim.err));
  } else {
    const auto summary = boost::json::parse(reclaim.out).at("summary").as_object();
    if (const auto* removed = summary.if_contains("removed")) stats.reclaimed += removed->as_int64();
  }
  {  // a normal acquire (Apnea's options) and release, in this process
    auto target = repository_target(real_system(), area.locks, r1);
    auto held = acquire(real_system(), *target, apnea_options(LockKind::repository));
    if (!held) problems.push_back("a normal acquire after reclaim failed: " + held.error().message);
    else if (!held->release().value_or(false)) problems.push_back("its release failed");
  }
  // A candidate or tombstone naming no pid (a crash between creating it and writing its
  // owner.json, or between unlinking owner.json and rmdir) is removed only once its ctime is
  // older than --guard-age, which an mtime set back cannot fake: until then it may be in flight
  // and must be reported so.
  std::set<std::string> young_pidless;
  if (!area.listing().empty()) {
    const Finished status = finish({locks_bin(), "status", "--json", "--lock-dir", area.locks}, {}, 60s);
    const auto doc = boost::json::parse(status.out).as_object();
    for (const auto& value : doc.at("entries").as_array()) {
      const auto& entry = value.as_object();
      const std::string role(entry.at("role").as_string());
      const auto& named = entry.at("named_pids");
      if ((role == "candidate" || role == "tombstone") && entry.at("state").as_string() == "in-flight" &&
          named.is_array() && named.as_array().empty())
        young_pidless.insert(std::string(entry.at("name").as_string()));
    }
  }
  for (const std::string& name : area.listing()) {
    if (holder != nullptr && area.locks + "/" + name == holder->lock_path) continue;
    if (young_pidless.count(name) != 0) {
      ++stats.seen["young pid-less (kept until --guard-age by ctime)"];
      continue;
    }
    problems.push_back("left after reclaim and acquire: " + name);
  }
  // Nothing of the live owner was removed, nor replaced.
  if (holder != nullptr && token_at(holder->lock_path) != holder->token)
    problems.push_back("the live holder's lock lost its owner record");
  if (holder != nullptr && holder->process->wait(0ms))
    problems.push_back("the live holder ended: " + holder->process->err());
  return problems;
}

}  // namespace

TEST_CASE("SIGKILL at random moments: no two owners, every leftover explained, one reclaim cleans up") {
  REQUIRE_FALSE(test_env("APNEA_LOCKS_STRESS").empty());
  REQUIRE_FALSE(locks_bin().empty());
  const long trials = knob("APNEA_CRASH_TRIALS", sanitized ? 200 : 500, 5000);
  const long seed = knob("APNEA_CRASH_SEED", 8, 8);
  std::mt19937_64 random(static_cast<std::uint64_t>(seed));

  // Trials alternate between the file systems; on each, a live holder shares the area for
  // the first half of its trials.
  std::vector<std::unique_ptr<ScratchArea>> areas;
  for (const auto& [parent, label] : area_parents())
    areas.push_back(std::make_unique<ScratchArea>(parent, label));
  std::vector<Holder> holders;
  std::vector<std::string> r1s, r2s;
  for (auto& area : areas) {
    r1s.push_back(area->repo("r1"));
    r2s.push_back(area->repo("r2"));
    holders.push_back(start_holder(area->locks, r2s.back()));
  }

  Stats stats;
  const auto started = std::chrono::steady_clock::now();
  long failed = 0;
  for (long t = 0; t < trials && failed < 3; ++t) {
    const std::size_t a = static_cast<std::size_t>(t) % areas.size();
    const bool holding = t < trials / 2;
    if (!holding && holders[a].process) {  // the holder releases; its lock goes with it
      holders[a].process->close_stdin();
      CHECK(holders[a].process->wait(30s) == 0);
      CHECK_FALSE(exists(holders[a].lock_path));
      holders[a].process.reset();
    }
    const std::vector<std::string> problems =
        trial(*areas[a], r1s[a], r2s[a], holding ? &holders[a] : nullptr, random, stats);
    ++stats.trials;
    if (holding) ++stats.holder_trials;
    if (!problems.empty()) {
      ++failed;
      std::string text;
      for (const auto& problem : problems) text += "\n  " + problem;
      FAIL_CHECK("trial " << t << " (" << areas[a]->label << ", seed " << seed << "):" << text);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string seen;
  for (const auto& [what, n] : stats.seen) seen += fmt::format("\n  {:6} {}", n, what);
  MESSAGE(fmt::format(
      "{} crash trials in {:.1f} s (seed {}, {} areas): {} workers, {} `run`s and {} `reclaim`s "
      "SIGKILLed (or ended first); "
      "{} trials with a live holder; {} trials left debris; reclaim removed {} entries; "
      "leftovers seen (role state reason):{}",
      stats.trials, seconds, seed, areas.size(), stats.workers_killed, stats.runs, stats.reclaims,
      stats.holder_trials, stats.dirty_trials, stats.reclaimed, seen));
  CHECK(failed == 0);
  CHECK(stats.trials == trials);
}
