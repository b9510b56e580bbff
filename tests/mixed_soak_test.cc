// Mixed contention, long version (issue 8, item 4), for `scripts/dev soak` only: 2 reference
// (apnea-peer) + 2 core (lock_stress) processes on one lock, each doing a slow
// read-modify-write of a shared counter under the lock. Zero lost updates, zero `malformed`
// from the core; the reference's own spurious `malformed` are counted for comparison.
// The short version (2+2 x 150) runs in every `scripts/dev test` (interop_test.cc).
//
// Knobs: APNEA_MIXED_CYCLES per process (default: skipped; 2500 under APNEA_SOAK=1),
// APNEA_MIXED_PEERS / APNEA_MIXED_CORES (default 2 each).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <fstream>
#include <memory>

#include "apnea_locks/lock_area.h"
#include "process_util.h"
#include "reliability_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {


/// The report line (`stress-done`) a stress process printed, after it ended with 0.
boost::json::object report_of(Child& child) {
  child.close_stdin();
  const std::string out = child.read_rest();
  CAPTURE(out);
  CHECK(child.wait() == 0);
  boost::json::object report;
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t end = std::min(out.find('\n', at), out.size());
    boost::system::error_code error;
    auto line = boost::json::parse(out.substr(at, end - at), error);
    if (!error && line.is_object() && line.as_object().contains("event")) report = line.as_object();
    at = end + 1;
  }
  REQUIRE(member(report, "event") == "stress-done");
  return report;
}

}  // namespace

TEST_CASE("mixed contention, long: reference and core processes on one counter lose no update") {
  const long cycles = knob("APNEA_MIXED_CYCLES", 0, 2500);
  REQUIRE(cycles > 0);  // soak_main runs this only under APNEA_SOAK=1
  const long peers = knob("APNEA_MIXED_PEERS", 2, 2), cores = knob("APNEA_MIXED_CORES", 2, 2);
  const std::string peer = test_env("APNEA_REFERENCE");
  const std::string stress = test_env("APNEA_LOCKS_STRESS");
  REQUIRE_FALSE(stress.empty());
  TempDir temp;
  const std::string repo = temp / "repo";
  REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
  const std::string counter = temp / "counter";
  std::ofstream(counter) << 0;
  StagedSystem staged;
  staged.environment["TMPDIR"] = temp.path();
  const std::string lock_dir = default_lock_directory(staged);

  const auto started = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<Child>> peer_children, core_children;
  for (long i = 0; i < std::max(peers, cores); ++i) {
    if (i < peers)
      peer_children.push_back(std::make_unique<Child>(
          std::vector<std::string>{peer, "stress", "repo", repo, counter, std::to_string(cycles)},
          std::vector<std::pair<std::string, std::string>>{{"TMPDIR", temp.path()}}));
    if (i < cores)
      core_children.push_back(std::make_unique<Child>(
          std::vector<std::string>{stress, "stress", lock_dir, repo, counter, std::to_string(cycles)}));
  }
  long peer_malformed = 0, peer_contended = 0, core_malformed = 0, core_contended = 0;
  for (auto& child : peer_children) {
    const auto report = report_of(*child);
    CHECK(report.at("acquired").as_int64() == cycles);
    peer_malformed += report.at("spurious_malformed").as_int64();
    peer_contended += report.at("contended").as_int64();
  }
  for (auto& child : core_children) {
    const auto report = report_of(*child);
    CHECK(report.at("acquired").as_int64() == cycles);
    core_malformed += report.at("spurious_malformed").as_int64();
    core_contended += report.at("contended").as_int64();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(core_malformed == 0);
  CHECK(read_number(counter) == (peers + cores) * cycles);
  // Everything was released.
  int left = 0;
  (void)real_system().list_directory(lock_dir, [&](const DirEntry&) {
    ++left;
    return true;
  });
  CHECK(left == 0);
  MESSAGE("mixed contention, " << peers << " reference + " << cores << " core x " << cycles
                               << " cycles in " << seconds << " s: counter " << read_number(counter)
                               << " (expected " << (peers + cores) * cycles
                               << "); reference contended " << peer_contended
                               << ", spurious malformed " << peer_malformed << "; core contended "
                               << core_contended << ", spurious malformed " << core_malformed);
}
