// reclaim against the reference: locks it leaves behind, locks it holds, guards that block it.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>

#include <boost/json.hpp>

#include "area_builder.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

std::string peer() { return test_env("APNEA_REFERENCE"); }

/// A scratch folder used as TMPDIR by both sides, so they share one lock area.
struct Shared {
  Scratch scratch;
  std::map<std::string, std::string> env{{"TMPDIR", scratch.root}};
  std::string lock;
  Shared() {
    Finished path = finish({peer(), "path", "repo", scratch.repo}, env);
    lock = std::string(boost::json::parse(path.out).at("lock_path").as_string());
  }
  Finished ours(std::vector<std::string> args) {
    args.insert(args.begin(), {locks_bin(), "reclaim", "--repo", scratch.repo});
    return finish(args, env);
  }
  Finished reference(std::vector<std::string> args) {
    args.insert(args.begin(), peer());
    return finish(args, env);
  }
  /// The reference takes the lock and is killed with SIGKILL while holding it.
  void killed_holder() {
    SpawnedProcess holder({peer(), "hold", "repo", scratch.repo}, env);
    auto line = holder.read_line(Stream::out, 120s);
    REQUIRE(line);
    REQUIRE(line->find("\"acquired\"") != std::string::npos);
    holder.signal(SIGKILL);
    REQUIRE(holder.wait(60s));
    REQUIRE(exists(lock));
  }
};

}  // namespace

TEST_CASE("a lock left by a killed reference process is reclaimed; the reference then acquires") {
  Shared s;
  s.killed_holder();
  Finished refused = s.reference({"acquire", "repo", s.scratch.repo});
  CHECK(refused.status == 3);  // Apnea itself: stale, inside the 60 s grace
  CHECK(refused.out.find("\"reason\":\"stale\"") != std::string::npos);

  Finished done = s.ours({"--yes"});
  CAPTURE(done.out);
  CAPTURE(done.err);
  CHECK(done.status == 0);
  CHECK(done.out.find("pid-dead") != std::string::npos);
  CHECK_FALSE(exists(s.lock));
  Finished acquired = s.reference({"acquire", "repo", s.scratch.repo});
  CHECK(acquired.status == 0);
}

TEST_CASE("a live reference lock is refused even with --force --yes") {
  Shared s;
  SpawnedProcess holder({peer(), "hold", "repo", s.scratch.repo}, s.env);
  auto line = holder.read_line(Stream::out, 120s);
  REQUIRE(line);
  const auto pid = boost::json::parse(*line).at("pid").to_number<long long>();
  Finished refused = s.ours({"--force", "--yes"});
  CHECK(refused.status == 1);
  CHECK(refused.out.find("pid " + std::to_string(pid)) != std::string::npos);
  CHECK(refused.out.find("is alive") != std::string::npos);
  CHECK(exists(s.lock));
  holder.close_stdin();
  CHECK(holder.wait(60s) == 0);
  CHECK_FALSE(exists(s.lock));
}

TEST_CASE("a leftover reclaim guard blocks the reference with its own message; reclaim --force clears it") {
  Shared s;
  s.killed_holder();
  age_path(s.lock, 3600);  // past Apnea's grace: it would reclaim this itself...
  make_dir(s.lock + ".reclaim");
  age_path(s.lock + ".reclaim", 3600);  // ...but a crashed reclaimer left its guard
  Finished blocked = s.reference({"acquire", "repo", s.scratch.repo});
  CHECK(blocked.status == 3);
  CHECK(blocked.out.find("Apnea stale-lock reclamation is guarded at " + s.lock + ".reclaim") !=
        std::string::npos);

  Finished plain = s.ours({"--yes"});
  CHECK(plain.status == 1);
  CHECK(exists(s.lock + ".reclaim"));
  Finished forced = s.ours({"--yes", "--force"});
  CAPTURE(forced.out);
  // Aged by its mtime only (its ctime is now; or the clock is void), the guard is not old
  // enough to remove: refused, saying why; its next step (rmdir the guard by hand) lets a
  // plain reclaim finish.
  CHECK(forced.status == 1);
  CHECK(guard_too_young(forced.out));
  CHECK(exists(s.lock + ".reclaim"));
  REQUIRE(::rmdir((s.lock + ".reclaim").c_str()) == 0);
  forced = s.ours({"--yes"});
  CHECK(forced.status == 0);
  CHECK_FALSE(exists(s.lock + ".reclaim"));
  CHECK_FALSE(exists(s.lock));
  CHECK(s.reference({"acquire", "repo", s.scratch.repo}).status == 0);
}
