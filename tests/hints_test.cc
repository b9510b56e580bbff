// hints: the enclosing repository of a folder and its lock, and the global setup lock as the
// survey judges it.
#include "apnea_locks/hints.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

constexpr std::int64_t staged_live = 6100;
constexpr std::int64_t staged_dead = 6101;

SurveySettings healthy_settings(StagedSystem& system) {
  SurveySettings settings;
  settings.judge.now_ns = system.now_ns();
  settings.judge.area_uid = ::getuid();
  settings.judge.host = healthy_host();
  return settings;
}

void stage_live(StagedSystem& system, std::int64_t pid) {
  ProcessInfo info{'S', pid, ::getuid(), 0, "node apnea"};
  info.pid = pid;
  info.threads = 1;
  info.uids = {::getuid(), ::getuid(), ::getuid(), ::getuid()};
  info.uids_known = true;
  system.processes[pid] = StagedProcess{0, info};
}

}  // namespace

TEST_CASE("the enclosing repository is the nearest ancestor holding .apnea/ or .git") {
  TempDir tree;
  StagedSystem system;
  for (const char* dir : {"repo", "repo/.git", "repo/src", "repo/src/deep", "repo/pkg",
                          "repo/pkg/.apnea", "repo/pkg/lib", "plain", "wt", "odd", "odd/sub"})
    make_dir(tree / dir);
  write_file(tree / "wt/.git", "gitdir: /elsewhere\n");     // a worktree: .git is a file
  write_file(tree / "odd/.apnea", "a file, not a folder");  // not a marker
  REQUIRE(::symlink((tree / "repo/src").c_str(), (tree / "link").c_str()) == 0);
  const std::string area = tree / "locks";
  const std::string repo = *system.real().realpath(tree / "repo");

  auto from = [&](const std::string& dir) { return enclosing_repository(system, area, dir); };
  auto deep = from(tree / "repo/src/deep");
  REQUIRE(deep);
  CHECK(deep->kind == LockKind::repository);
  CHECK(deep->root == repo);
  CHECK(deep->name == lock_name(LockKind::repository, lock_key(LockKind::repository, repo)));
  CHECK(deep->path == *repository_lock_path(system, area, repo));  // what `path` prints
  CHECK(from(tree / "repo")->root == repo);                         // itself counts
  CHECK(from(tree / "link")->root == repo);                         // resolved like Apnea
  CHECK(from(tree / "repo/pkg/lib")->root == *system.real().realpath(tree / "repo/pkg"));
  CHECK(from(tree / "wt")->root == *system.real().realpath(tree / "wt"));
  CHECK_FALSE(from(tree / "plain"));       // no marker up to /
  CHECK_FALSE(from(tree / "odd/sub"));     // a file named .apnea is no repository
  CHECK_FALSE(from(tree / "nope"));        // does not resolve
}

TEST_CASE("the global setup lock is named by the home's realpath") {
  TempDir tree;
  StagedSystem system;
  make_dir(tree / "home");
  REQUIRE(::symlink((tree / "home").c_str(), (tree / "h").c_str()) == 0);
  const std::string home = *system.real().realpath(tree / "home");
  auto lock = global_setup_lock(system, tree / "locks", tree / "h");
  REQUIRE(lock);
  CHECK(lock->kind == LockKind::global_setup);
  CHECK(lock->root == home);
  CHECK(lock->path == *global_setup_lock_path(system, tree / "locks", home));
  CHECK(lock->name.starts_with("global-setup-"));
  auto missing = global_setup_lock(system, tree / "locks", tree / "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == std::errc::no_such_file_or_directory);
}

TEST_CASE("a dead global setup lock needs attention with the policy's one fix; live and absent do not") {
  TempDir tree;
  StagedSystem system;
  make_dir(tree / "home");
  const std::string area = tree / "locks";
  make_dir(area);
  auto lock = global_setup_lock(system, area, tree / "home");
  REQUIRE(lock);
  const SurveySettings settings = healthy_settings(system);

  SUBCASE("absent") {
    const GlobalSetupHint hint = global_setup_hint(system, area, *lock, settings);
    CHECK_FALSE(hint.present);
    CHECK_FALSE(hint.needs_attention);
    CHECK(hint.fix.argv.empty());
  }
  SUBCASE("dead") {
    make_entry(area, lock->name, owner_json(staged_dead));
    const GlobalSetupHint hint = global_setup_hint(system, area, *lock, settings);
    CHECK(hint.present);
    CHECK(hint.state == EntryState::stale);
    CHECK(hint.reason == "pid-dead");
    CHECK(hint.pid == doctest::Approx(staged_dead));
    CHECK(hint.needs_attention);
    CHECK(hint.fix.argv == std::vector<std::string>{"apnea-locks", "reclaim", "--home", lock->root});
  }
  SUBCASE("live") {
    stage_live(system, staged_live);
    make_entry(area, lock->name, owner_json(staged_live));
    const GlobalSetupHint hint = global_setup_hint(system, area, *lock, settings);
    CHECK(hint.present);
    CHECK(hint.state == EntryState::live);
    CHECK_FALSE(hint.needs_attention);
    CHECK(hint.fix.argv.empty());
  }
  SUBCASE("from an entry a survey judged") {
    make_entry(area, lock->name, owner_json(staged_dead));
    make_entry(area, fake_lock_name("other"), owner_json(staged_dead));
    LabelIndex labels;
    REQUIRE(labels.add_home(system, tree / "home"));
    std::vector<GlobalSetupHint> hints;
    REQUIRE(survey_area(system, area, settings, labels, {}, [&](const JudgedEntry& entry) {
      if (auto hint = global_setup_hint(*lock, entry)) hints.push_back(*hint);
    }));
    REQUIRE(hints.size() == 1);
    CHECK(hints[0].needs_attention);
    CHECK(hints[0].fix.argv == std::vector<std::string>{"apnea-locks", "reclaim", "--home", lock->root});
  }
}

TEST_CASE("from a subdirectory, the enclosing repository's lock is judged with its --repo fix") {
  TempDir tree;
  StagedSystem system;
  for (const char* dir : {"repo", "repo/.apnea", "repo/src", "locks"}) make_dir(tree / dir);
  const std::string area = tree / "locks";
  auto lock = enclosing_repository(system, area, tree / "repo/src");
  REQUIRE(lock);
  const SurveySettings settings = healthy_settings(system);
  CHECK_FALSE(lock_hint(system, area, *lock, settings).present);

  make_entry(area, lock->name, owner_json(staged_dead));
  const LockHint hint = lock_hint(system, area, *lock, settings);
  CHECK(hint.present);
  CHECK(hint.state == EntryState::stale);
  CHECK(hint.needs_attention);  // inside Apnea's grace: Apnea refuses it
  CHECK(hint.fix.argv == std::vector<std::string>{"apnea-locks", "reclaim", "--repo", lock->root});
  CHECK(hint.why.find("pid-dead") != std::string::npos);
}
