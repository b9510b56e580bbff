// labels: hashing candidate paths to name locks, and finding repositories under a folder.
#include "apnea_locks/labels.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

TEST_CASE("a labelled repository is found by its lock name, through symlinks") {
  TempDir tree;
  StagedSystem system;
  make_dir(tree / "repo");
  REQUIRE(::symlink((tree / "repo").c_str(), (tree / "link").c_str()) == 0);
  LabelIndex labels;
  auto name = labels.add_repository(system, tree / "link/");
  REQUIRE(name);
  const std::string canonical = *system.real().realpath(tree / "repo");
  CHECK(*name == lock_name(LockKind::repository, lock_key(LockKind::repository, canonical)));
  const EntryLabel* label = labels.find(*name);
  REQUIRE(label);
  CHECK(label->path == canonical);
  CHECK(label->kind == LockKind::repository);

  auto home = labels.add_home(system, tree / "repo");
  REQUIRE(home);
  CHECK(home->starts_with("global-setup-"));
  CHECK(labels.find(*home)->kind == LockKind::global_setup);
  CHECK(labels.size() == 2);
  CHECK(labels.find(fake_lock_name("other")) == nullptr);

  auto missing = labels.add_repository(system, tree / "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == std::errc::no_such_file_or_directory);
}

TEST_CASE("a lazily added label resolves at the first lookup, and only then") {
  TempDir tree;
  StagedSystem system;
  make_dir(tree / "repo");
  LabelIndex labels;
  labels.add_repository_lazily(system, tree / "repo");
  labels.add_home_lazily(system, tree / "repo");
  labels.add_repository_lazily(system, tree / "nope");  // does not resolve: no label
  CHECK(std::count_if(system.calls.begin(), system.calls.end(),
                      [](const std::string& call) { return call.starts_with("realpath"); }) == 0);
  const std::string canonical = *system.real().realpath(tree / "repo");
  const EntryLabel* label =
      labels.find(lock_name(LockKind::repository, lock_key(LockKind::repository, canonical)));
  REQUIRE(label);
  CHECK(label->path == canonical);
  CHECK(labels.size() == 2);
}

TEST_CASE("find_repositories finds folders holding .apnea/ within the depth bound") {
  TempDir tree;
  StagedSystem system;
  for (const char* dir : {"a", "a/.apnea", "b", "b/c", "b/c/d", "b/c/d/.apnea", "e", "e/f"})
    make_dir(tree / dir);
  write_file(tree / "e/f/.apnea", "a file, not a folder");
  make_dir(tree / ".apnea");
  REQUIRE(::symlink((tree / "a").c_str(), (tree / "link").c_str()) == 0);

  auto found = [&](int depth) {
    std::vector<std::string> out;
    REQUIRE(find_repositories(system, tree.path(), depth, [&](const std::string& p) { out.push_back(p); }));
    std::sort(out.begin(), out.end());
    return out;
  };
  CHECK(found(0) == std::vector<std::string>{tree.path()});
  CHECK(found(1) == std::vector<std::string>{tree.path(), tree / "a"});
  CHECK(found(3) == std::vector<std::string>{tree.path(), tree / "a", tree / "b/c/d"});
  CHECK_FALSE(find_repositories(system, tree / "nope", 4, [](const std::string&) {}));
}
