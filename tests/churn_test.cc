// No transient false stale (PROTOCOL.md sections 8 to 10): one lock held by a live process
// for the whole test while other processes take and release other repository locks of the
// same area as fast as they can, some of them short-lived (their pids die and others are
// born). `status -J` and `check` run again and again meanwhile; neither may ever report the
// long-held lock as anything but live, and no entry reported stale may turn out to have a
// live owner that still holds it.
//
// Knob: APNEA_CHURN_RUNS status+check rounds (default 150; `scripts/dev soak` runs 3000).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <memory>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "reliability_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {


/// A churner that lives for a few dozen acquire/release cycles of one repository lock and
/// exits; respawned on the next repository of its own set, so its pids keep dying.
class ShortLived {
 public:
  ShortLived(std::string locks, std::vector<std::string> roots)
      : locks_(std::move(locks)), roots_(std::move(roots)) {
    spawn();
  }
  /// Respawns the churner when it has ended; false when it ended with an error.
  bool tend() {
    const auto status = process_->wait(std::chrono::milliseconds(0));
    if (!status) return true;
    const bool ok = *status == 0;
    if (!ok) error_ = process_->out() + process_->err();
    ++generations_;
    spawn();
    return ok;
  }
  long generations() const { return generations_; }
  const std::string& error() const { return error_; }

 private:
  void spawn() {
    const std::string& root = roots_[static_cast<std::size_t>(generations_) % roots_.size()];
    process_ = std::make_unique<SpawnedProcess>(
        std::vector<std::string>{test_env("APNEA_LOCKS_STRESS"), "cycles", locks_, root, "25"});
  }

  std::string locks_;
  std::vector<std::string> roots_;
  std::unique_ptr<SpawnedProcess> process_;
  long generations_ = 0;
  std::string error_;
};

}  // namespace

TEST_CASE("a lock held all along is reported live by every status and check under churn") {
  REQUIRE_FALSE(test_env("APNEA_LOCKS_STRESS").empty());
  REQUIRE_FALSE(locks_bin().empty());
  const long runs = knob("APNEA_CHURN_RUNS", 150, 3000);
  ScratchArea area(std::filesystem::temp_directory_path().string(), "temp dir");
  make_dir(area.locks);

  // The long-lived lock: a real `apnea-locks run` holding it for the whole test.
  LockHolder holder(area.locks, area.repo("held"));
  REQUIRE_MESSAGE(holder.held(), holder.process().err());
  const std::string held = repo_lock(area.locks, area.root + "/held");
  REQUIRE(exists(held));

  // Churn: one long-lived churner over 8 repositories, and two slots of short-lived ones,
  // each over its own 4 repositories (`cycles` treats contention as an error).
  const std::string roots = area.repo("roots");
  SpawnedProcess churner({test_env("APNEA_LOCKS_STRESS"), "churn", area.locks, roots, "8", "86400"});
  const auto started = churner.read_line(Stream::out, 30s);
  REQUIRE_MESSAGE(started, churner.err());
  REQUIRE(started->find("churn-started") != std::string::npos);
  std::vector<std::unique_ptr<ShortLived>> short_lived;
  for (int slot = 0; slot < 2; ++slot) {
    std::vector<std::string> own;
    for (int i = 0; i < 4; ++i) own.push_back(area.repo(fmt::format("short{}-{}", slot, i)));
    short_lived.push_back(std::make_unique<ShortLived>(area.locks, own));
  }

  long not_live = 0, check_blamed = 0, check_not_ok = 0, failed_runs = 0, churn_errors = 0;
  long false_stale = 0, stale_reports = 0, entries_seen = 0;
  std::vector<std::string> examples;
  auto example = [&](std::string text) {
    if (examples.size() < 5) examples.push_back(std::move(text));
  };
  for (long run = 0; run < runs; ++run) {
    for (auto& slot : short_lived)
      if (!slot->tend()) {
        ++churn_errors;
        example("a short-lived churner failed: " + slot->error());
      }

    const StatusRun status = status_json(area.locks);
    if (!status.document.is_object() || !status.finished.status ||
        (*status.finished.status != 0 && *status.finished.status != 1)) {
      ++failed_runs;
      example(fmt::format("status -J exited {}: {} {}", status.finished.status.value_or(-1),
                          status.finished.out, status.finished.err));
      continue;
    }
    bool saw_held = false;
    for (const auto& value : status.document.at("entries").as_array()) {
      const auto& entry = value.as_object();
      ++entries_seen;
      const std::string path = member(entry, "path"), state = member(entry, "state");
      if (path == held) {
        saw_held = true;
        if (state != "live") {
          ++not_live;
          example("the held lock reported: " + boost::json::serialize(entry));
        }
      }
      if (state != "stale") continue;
      ++stale_reports;
      // Re-check at once: a stale entry whose pid is alive and still holds it (same token).
      const auto* pid = entry.if_contains("pid");
      if (pid == nullptr || !pid->is_number()) continue;
      const double number = pid->to_number<double>();
      if (number < 1 || number > 2147483647.0) continue;
      const std::string token = member(entry, "token");
      if (::kill(static_cast<pid_t>(number), 0) == 0 && !token.empty() &&
          token_of(read_bytes(path + "/owner.json")) == token) {
        ++false_stale;
        example("reported stale with its owner alive: " + boost::json::serialize(entry));
      }
    }
    if (!saw_held) {
      ++not_live;
      example("status -J did not list the held lock");
    }

    const Finished check = finish({locks_bin(), "check", "--lock-dir", area.locks}, {}, 60s);
    if (check.status != 0) {
      ++check_not_ok;
      if (check.out.find(held) != std::string::npos) {
        ++check_blamed;
        example(fmt::format("check exited {} naming the held lock: {}", check.status.value_or(-1), check.out));
      } else {
        example(fmt::format("check exited {} (not about the held lock): {}", check.status.value_or(-1), check.out));
      }
    }
  }

  long generations = 0;
  for (const auto& slot : short_lived) generations += slot->generations();
  MESSAGE(fmt::format(
      "{} rounds of status -J + check under churn ({} short-lived churners ended): held lock not "
      "live {} times; check not OK {} times, {} of them naming the held lock; {} stale reports, "
      "{} with an owner alive and still holding; {} failed status runs; {} churner errors; {:.1f} "
      "entries per scan",
      runs, generations, not_live, check_not_ok, check_blamed, stale_reports, false_stale, failed_runs,
      churn_errors, runs ? double(entries_seen) / double(runs) : 0.0));
  for (const auto& text : examples) MESSAGE(text);
  CHECK(not_live == 0);
  CHECK(check_blamed == 0);
  CHECK(false_stale == 0);
  CHECK(failed_runs == 0);
  CHECK(churn_errors == 0);
  CHECK(generations > 0);

  // The holder held all along: it releases its own lock.
  CHECK(holder.release() == 0);
  CHECK_FALSE(exists(held));
  churner.signal(SIGKILL);
}
