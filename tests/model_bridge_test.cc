// The bridge from the Promela model (docs/model/) to the code: steps the model relies on that
// no other test pins down. docs/model/README.md, "The bridge to the code", maps every model
// step to its function and to the test that goes red when the step is deleted; this file
// holds the ones that needed a test of their own.

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "apnea_locks/lock.h"
#include "apnea_locks/lock_area.h"
#include "detail/lock.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::detail;
using apnea_locks::testing::StagedProcess;
using apnea_locks::testing::StagedSystem;
using apnea_locks::testing::TempDir;

namespace {

constexpr std::int64_t live_pid = 6000;  // alive in the staged process table

struct Fixture {
  TempDir temp;
  StagedSystem system;
  std::string dir = temp / "apnea-u/operation-locks";
  std::string repo = temp / "repo";
  LockTarget target;

  Fixture() {
    REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
    system.staged_pid = 5000;
    system.processes[live_pid] = StagedProcess{0, ProcessInfo{'S', live_pid, ::getuid(), 0, "apnea"}};
    auto made = repository_target(system, dir, repo);
    REQUIRE(made);
    target = *made;
    REQUIRE(ensure_lock_directory(system, dir));
    system.calls.clear();
  }
  void plant(const std::string& path, double pid, const std::string& token) {
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
    REQUIRE(system.real().write_new_file(path + "/owner.json", encode_owner({pid, token}), 0600));
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
  std::string token_at(const std::string& path) {
    OwnerRead read = read_owner(system.real(), path, ::getuid());
    return read.owner ? read.owner->token : std::string("<none>");
  }
};

}  // namespace

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
