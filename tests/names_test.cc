#include "apnea_locks/names.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "staged_system.h"

using namespace apnea_locks;
using apnea_locks::testing::StagedSystem;
using apnea_locks::testing::TempDir;

TEST_CASE("sha256_hex matches the standard test vector") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("lock keys are the reference's (values printed by apnea-peer path)") {
  // apnea-peer path repo /tmp/r1 and apnea-peer path global /root, as root.
  CHECK(lock_key(LockKind::repository, "/tmp/r1") ==
        "7e69e12002ed70156d5908063fc1bdd45dbf5ba7d76f99e374ec19d4e6cd6e77");
  CHECK(lock_key(LockKind::global_setup, "/root") ==
        "1a6de987eab088f23c78fa34189f003edd52a3a2f68d90b32d62dddc63885cc2");
  CHECK(lock_name(LockKind::repository, "ab") == "repository-ab.lock");
}

TEST_CASE("lock paths realpath the root: symlinks, trailing slashes and relative roots agree") {
  TempDir temp;
  StagedSystem system;
  const std::string repo = temp / "repo";
  REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
  const std::string link = temp / "link";
  REQUIRE(::symlink(repo.c_str(), link.c_str()) == 0);
  auto direct = repository_lock_path(system, "/locks", repo);
  REQUIRE(direct);
  CHECK(*direct == "/locks/repository-" + lock_key(LockKind::repository, repo) + ".lock");
  CHECK(*repository_lock_path(system, "/locks", link) == *direct);
  CHECK(*repository_lock_path(system, "/locks", repo + "/") == *direct);
  CHECK(*repository_lock_path(system, "/locks", repo + "/.") == *direct);
  auto global = global_setup_lock_path(system, "/locks", link);
  REQUIRE(global);
  CHECK(*global == "/locks/global-setup-" + lock_key(LockKind::global_setup, repo) + ".lock");
  auto missing = repository_lock_path(system, "/locks", temp / "nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == std::errc::no_such_file_or_directory);
}

TEST_CASE("parse_entry_name recognises every protocol entry and nothing else") {
  const std::string key(64, 'a');
  struct Case {
    std::string name;
    LockKind kind;
    EntryRole role;
    std::string suffix;
  };
  const Case cases[] = {
      {"repository-" + key + ".lock", LockKind::repository, EntryRole::lock, ""},
      {"global-setup-" + key + ".lock", LockKind::global_setup, EntryRole::lock, ""},
      {"repository-" + key + ".lock.candidate.1234-tok", LockKind::repository, EntryRole::candidate,
       "1234-tok"},
      {"global-setup-" + key + ".lock.tombstone.u-u-i-d", LockKind::global_setup,
       EntryRole::tombstone, "u-u-i-d"},
      {"repository-" + key + ".lock.reclaim", LockKind::repository, EntryRole::reclaim_guard, ""},
      // Not the protocol's: unknown.
      {"repository-" + key + ".lock.candidate.", LockKind::unknown, EntryRole::unknown, ""},
      {"repository-" + key + ".lock.reclaim.x", LockKind::unknown, EntryRole::unknown, ""},
      {"repository-" + key + ".lockx", LockKind::unknown, EntryRole::unknown, ""},
      {"repository-" + std::string(63, 'a') + ".lock", LockKind::unknown, EntryRole::unknown, ""},
      {"repository-" + std::string(64, 'A') + ".lock", LockKind::unknown, EntryRole::unknown, ""},
      {"repository-" + std::string(63, 'a') + "g.lock", LockKind::unknown, EntryRole::unknown, ""},
      {"other-" + key + ".lock", LockKind::unknown, EntryRole::unknown, ""},
      {"", LockKind::unknown, EntryRole::unknown, ""},
      {"notes.txt", LockKind::unknown, EntryRole::unknown, ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    EntryName parsed = parse_entry_name(c.name);
    CHECK(parsed.kind == c.kind);
    CHECK(parsed.role == c.role);
    CHECK(parsed.suffix == c.suffix);
    if (c.kind != LockKind::unknown) {
      CHECK(parsed.key == key);
      CHECK(parsed.lock_name() == std::string(kind_name(c.kind)) + "-" + key + ".lock");
    } else {
      CHECK(parsed.key.empty());
    }
  }
}

TEST_CASE("lock_name_view: the lock name as a view of the entry's own name, else made") {
  const std::string key(64, 'a');
  const std::string lock = "repository-" + key + ".lock";
  std::string scratch;
  for (const std::string& name : {lock, lock + ".reclaim", lock + ".candidate.t", lock + ".tombstone.u",
                                  "global-setup-" + key + ".lock.tombstone.u"}) {
    CAPTURE(name);
    const EntryName parsed = parse_entry_name(name);
    const std::string_view view = lock_name_view(name, parsed, scratch);
    CHECK(view == parsed.lock_name());
    CHECK(view.data() == name.data());  // no string made
  }
  // Facts whose parsed name is not their name's: the lock name is made, not misread.
  const EntryName other = parse_entry_name("repository-" + std::string(64, 'b') + ".lock");
  CHECK(lock_name_view(lock, other, scratch) == other.lock_name());
  CHECK(lock_name_view("", other, scratch) == other.lock_name());
  CHECK(lock_name_view(lock, parse_entry_name("junk"), scratch).empty());
}
