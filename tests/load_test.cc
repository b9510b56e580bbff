// Load (issue 8, item 6): `status` while 4 processes churn acquire/release on 100 locks
// (lock_stress churn), alternating with `reclaim --all --force`, which must find nothing to
// remove: every owner is alive. Every status run completes, reports no malformed (nor anything
// needing attention: every owner is alive), and its counts are plausible: every entry
// belongs to one of the 100 locks, every lock's owner is one of the churners, and a
// churner, which holds one lock at a time, is never seen holding a lock it took before
// one already seen in the same scan.
//
// Knobs: APNEA_LOAD_SECONDS per file system (default 2; 10 under APNEA_SOAK=1).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <set>

#include "apnea_locks/lock.h"
#include "reliability_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

constexpr int churners = 4;
constexpr int lock_count = 100;

struct LoadStats {
  long scans = 0, entries = 0, max_entries = 0, live = 0, max_live = 0, in_flight = 0;
  long smeared_scans = 0;  ///< scans showing one churner on two locks (taken one after the other)
  long cycles = 0, contended = 0;
  long reclaims = 0;  ///< `reclaim --all --force` runs, each finding nothing to do
};

/// Checks one status document; the problems found.
std::vector<std::string> check_status(const StatusRun& run, const std::set<std::string>& names,
                                      const std::set<long>& pids, LoadStats& stats) {
  std::vector<std::string> problems;
  if (!run.finished.status || *run.finished.status != 0 || !run.document.is_object()) {
    problems.push_back(fmt::format("status exited {}: {} {}", run.finished.status.value_or(-1),
                                   run.finished.out, run.finished.err));
    return problems;
  }
  const auto& document = run.document.as_object();
  const auto& entries = document.at("entries").as_array();
  const auto& summary = document.at("summary").as_object();
  if (summary.at("entries").as_int64() != static_cast<std::int64_t>(entries.size()) ||
      summary.at("needs_attention").as_int64() != 0)
    problems.push_back("summary does not match the entries: " + boost::json::serialize(summary));
  std::int64_t by_state = 0;
  for (const auto& [state, n] : summary.at("states").as_object()) by_state += n.as_int64();
  if (by_state != static_cast<std::int64_t>(entries.size()))
    problems.push_back("summary.states does not add up: " + boost::json::serialize(summary));

  long live = 0;
  std::map<long, std::string> last_written;  // per churner pid: its last lock's owner.json mtime
  bool smeared = false;
  for (const auto& value : entries) {
    const auto& entry = value.as_object();
    const std::string role = member(entry, "role"), state = member(entry, "state"),
                      reason = member(entry, "reason");
    auto wrong = [&](const char* why) {
      problems.push_back(fmt::format("{}: {}", why, boost::json::serialize(entry)));
    };
    if (!names.contains(member(entry, "lock_name"))) wrong("an entry of a lock nobody takes");
    if (role == "lock") {
      if (state == "live") {
        ++live;
        const long pid = static_cast<long>(entry.at("pid").to_number<double>());
        if (!pids.contains(pid)) wrong("a live lock not owned by a churner");
        // One lock at a time: locks of one churner, in scan order, were taken in that order.
        const std::string written = member(entry, "written");
        if (auto seen = last_written.find(pid); seen != last_written.end()) {
          smeared = true;
          if (written < seen->second) wrong("a churner holds two locks at once");
        }
        last_written[pid] = written;
      } else if (state == "in-flight") {
        ++stats.in_flight;  // replaced on every read: a legitimate race
      } else {
        wrong("a lock that is neither live nor in flight");
      }
    } else if (role == "candidate" || role == "tombstone") {
      if (state != "in-flight") wrong("a candidate or tombstone not in flight");
      else ++stats.in_flight;
    } else {
      wrong("an unexpected entry");
    }
  }
  ++stats.scans;
  stats.entries += static_cast<long>(entries.size());
  stats.max_entries = std::max(stats.max_entries, static_cast<long>(entries.size()));
  stats.live += live;
  stats.max_live = std::max(stats.max_live, live);
  if (smeared) ++stats.smeared_scans;
  return problems;
}

/// `reclaim --all --force` while every owner is alive: exit 0, nothing acted on.
std::vector<std::string> check_reclaim(const std::string& lock_dir, LoadStats& stats) {
  const Finished run = finish(
      {locks_bin(), "reclaim", "--all", "--force", "--yes", "--json", "--lock-dir", lock_dir}, {}, 60s);
  ++stats.reclaims;
  boost::system::error_code error;
  const auto document = boost::json::parse(run.out, error);
  if (run.status != 0 || error || !document.is_object() ||
      !document.at("targets").as_array().empty())
    return {fmt::format("reclaim --all --force under load exited {}: {} {}",
                        run.status.value_or(-1), run.out, run.err)};
  return {};
}

void churn_and_watch(const ScratchArea& area, double seconds) {
  const std::string roots = area.repo("roots");
  std::vector<std::unique_ptr<SpawnedProcess>> workers;
  for (int i = 0; i < churners; ++i)
    workers.push_back(std::make_unique<SpawnedProcess>(std::vector<std::string>{
        test_env("APNEA_LOCKS_STRESS"), "churn", area.locks, roots, std::to_string(lock_count),
        fmt::format("{}", seconds)}));
  std::set<long> pids;
  for (auto& worker : workers) {
    auto started = worker->read_line(Stream::out, 30s);
    REQUIRE_MESSAGE(started, worker->err());
    REQUIRE(started->find("churn-started") != std::string::npos);
    pids.insert(worker->pid());
  }
  std::set<std::string> names;
  for (int i = 0; i < lock_count; ++i) {
    auto target = repository_target(real_system(), area.locks, fmt::format("{}/r{}", roots, i));
    REQUIRE(target);
    names.insert(target->lock_path.substr(target->lock_path.rfind('/') + 1));
  }

  // Status, again and again, until every churner has said it is done (it then holds
  // nothing and stays alive until its stdin closes, so no scan can see a dead owner).
  LoadStats stats;
  std::vector<bool> done(workers.size(), false);
  long failed_scans = 0, round = 0;
  for (;;) {
    for (std::size_t i = 0; i < workers.size(); ++i) {
      if (done[i]) continue;
      auto line = workers[i]->read_line(Stream::out, 5ms);
      if (!line) continue;
      done[i] = true;
      auto report = boost::json::parse(*line).as_object();
      CHECK_MESSAGE(member(report, "event") == "churn-done", *line);
      if (member(report, "event") != "churn-done") continue;
      stats.cycles += report.at("cycles").as_int64();
      stats.contended += report.at("contended").as_int64();
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    // Every other round, a forced reclaim of the whole area instead: with every owner alive
    // it must find nothing to remove.
    const auto problems = ++round % 2 == 0 ? check_reclaim(area.locks, stats)
                                           : check_status(status_json(area.locks), names, pids, stats);
    if (!problems.empty() && ++failed_scans <= 3) {
      std::string text;
      for (const auto& problem : problems) text += "\n  " + problem;
      FAIL_CHECK("status under load (" << area.label << "):" << text);
    }
  }
  for (auto& worker : workers) {
    worker->close_stdin();
    CHECK_MESSAGE(worker->wait(30s) == 0, worker->out() << worker->err());
  }
  // Everything was released: the area is empty and status says so.
  CHECK(area.listing().empty());
  const StatusRun last = status_json(area.locks);
  CHECK(last.finished.status == 0);
  CHECK(last.document.at("entries").as_array().empty());

  CHECK(failed_scans == 0);
  CHECK(stats.scans > 0);
  MESSAGE(fmt::format(
      "load on {} ({} churners x {} locks, {:.1f} s): {} acquire/release cycles ({} contended "
      "tries); {} status runs, all exit 0, no malformed; entries per scan mean {:.1f} max {}; "
      "live locks per scan mean {:.2f} max {}; {} scans caught a churner on two locks taken in "
      "turn; {} in-flight rows; {} `reclaim --all --force` runs found nothing to remove",
      area.label, churners, lock_count, seconds, stats.cycles, stats.contended, stats.scans,
      stats.scans ? double(stats.entries) / double(stats.scans) : 0.0, stats.max_entries,
      stats.scans ? double(stats.live) / double(stats.scans) : 0.0, stats.max_live,
      stats.smeared_scans, stats.in_flight, stats.reclaims));
}

}  // namespace

TEST_CASE("status while 4 processes churn 100 locks: every run completes, nothing malformed") {
  REQUIRE_FALSE(test_env("APNEA_LOCKS_STRESS").empty());
  REQUIRE_FALSE(locks_bin().empty());
  const double seconds = static_cast<double>(knob("APNEA_LOAD_SECONDS", 2, 10));
  for (const auto& [parent, label] : area_parents()) {
    CAPTURE(label);
    ScratchArea area(parent, label);
    churn_and_watch(area, seconds);
  }
}
