#include "apnea_locks/lock_area.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "detail/split.h"
#include "staged_system.h"

using namespace apnea_locks;
using apnea_locks::testing::StagedSystem;
using apnea_locks::testing::TempDir;

TEST_CASE("split_parts yields every part between separators, empty ones kept") {
  auto parts = [](std::string_view text, char separator) {
    std::vector<std::string> out;
    for (std::string_view part : detail::split_parts(text, separator)) out.emplace_back(part);
    return out;
  };
  CHECK(parts("a,b", ',') == std::vector<std::string>{"a", "b"});
  CHECK(parts("a,,b", ',') == std::vector<std::string>{"a", "", "b"});
  CHECK(parts("a,", ',') == std::vector<std::string>{"a", ""});
  CHECK(parts(",a", ',') == std::vector<std::string>{"", "a"});
  CHECK(parts("", ',') == std::vector<std::string>{""});
  CHECK(parts("/", '/') == std::vector<std::string>{"", ""});
  CHECK(parts("abc", ',') == std::vector<std::string>{"abc"});
}

TEST_CASE("node_normalize folds like Node's path.posix.normalize") {
  CHECK(node_normalize("/tmp//x/../y/") == "/tmp/y/");
  CHECK(node_normalize("/tmp//x/../y") == "/tmp/y");
  CHECK(node_normalize("rel/./dir") == "rel/dir");
  CHECK(node_normalize("/") == "/");
  CHECK(node_normalize("/..") == "/");
  CHECK(node_normalize("../a/../../b") == "../../b");
  CHECK(node_normalize("a/..") == ".");
  CHECK(node_normalize("") == ".");
  CHECK(node_normalize("./") == "./");
}

TEST_CASE("node_join and node_dirname") {
  CHECK(node_join("/tmp", "apnea-0") == "/tmp/apnea-0");
  CHECK(node_join("/", "apnea-0") == "/apnea-0");
  CHECK(node_join("", "x") == "x");
  CHECK(node_dirname("/tmp/apnea-0/operation-locks") == "/tmp/apnea-0");
  CHECK(node_dirname("/apnea-0") == "/");
  CHECK(node_dirname("rel") == ".");
  CHECK(node_dirname("a//b//") == "a/");  // Node keeps the extra slash
  CHECK(node_dirname("//a") == "//");
}

namespace {
std::string lock_dir_with(std::optional<std::string> tmpdir, std::optional<std::string> tmp,
                          std::optional<std::string> temp) {
  StagedSystem system;
  system.environment["TMPDIR"] = tmpdir;
  system.environment["TMP"] = tmp;
  system.environment["TEMP"] = temp;
  return default_lock_directory(system);
}
}  // namespace

TEST_CASE("the lock directory follows os.tmpdir() and path.join") {
  const std::string uid = std::to_string(::getuid());
  CHECK(lock_dir_with(std::nullopt, std::nullopt, std::nullopt) ==
        "/tmp/apnea-" + uid + "/operation-locks");
  CHECK(lock_dir_with("/tmp//x/../y/", std::nullopt, std::nullopt) ==
        "/tmp/y/apnea-" + uid + "/operation-locks");
  CHECK(lock_dir_with("", "rel/./dir", "/ignored") == "rel/dir/apnea-" + uid + "/operation-locks");
  CHECK(lock_dir_with("", "", "/var/tmp") == "/var/tmp/apnea-" + uid + "/operation-locks");
  CHECK(lock_dir_with("/", std::nullopt, std::nullopt) == "/apnea-" + uid + "/operation-locks");
  // Only one trailing slash is removed by os.tmpdir(); path.join folds the rest.
  CHECK(lock_dir_with("/a//", std::nullopt, std::nullopt) == "/a/apnea-" + uid + "/operation-locks");
}

TEST_CASE("TMPDIR, TMP, TEMP and HOME that are not UTF-8 are decoded as Node decodes them") {
  // Node reads the environment as UTF-8 with U+FFFD for each maximal invalid subpart.
  const std::string uid = std::to_string(::getuid());
  const std::string fffd = "\xef\xbf\xbd";
  CHECK(lock_dir_with("/tmp/bad\xff" "dir", std::nullopt, std::nullopt) ==
        "/tmp/bad" + fffd + "dir/apnea-" + uid + "/operation-locks");
  CHECK(lock_dir_with("", "/t\xe2\x82/", std::nullopt) ==
        "/t" + fffd + "/apnea-" + uid + "/operation-locks");
  CHECK(lock_dir_with(std::nullopt, std::nullopt, "/\xc3\xa9t\xe9") ==
        "/\xc3\xa9t" + fffd + "/apnea-" + uid + "/operation-locks");

  StagedSystem system;
  system.environment["HOME"] = "/home/\xfe\xff";
  CHECK(node_homedir(system) == "/home/" + fffd + fffd);
  system.environment["HOME"] = std::nullopt;
  system.staged_passwd_home = "/home/p\x80";
  CHECK(node_homedir(system) == "/home/p" + fffd);
}

TEST_CASE("node_homedir prefers a non-empty HOME, else the passwd entry") {
  StagedSystem system;
  system.staged_passwd_home = "/home/from-passwd";
  system.environment["HOME"] = "/home/env";
  CHECK(node_homedir(system) == "/home/env");
  system.environment["HOME"] = "";
  CHECK(node_homedir(system) == "/home/from-passwd");
  system.environment["HOME"] = std::nullopt;
  CHECK(node_homedir(system) == "/home/from-passwd");
}

TEST_CASE("check_area names the unsafe component") {
  TempDir temp;
  StagedSystem system;
  const std::string parent = temp / "apnea-0";
  const std::string area = parent + "/operation-locks";
  const std::uint32_t uid = ::getuid();

  CHECK(check_area(system, area, uid).problem == AreaProblem::missing);
  CHECK(check_area(system, area, uid).path == parent);

  REQUIRE(::mkdir(parent.c_str(), 0700) == 0);
  REQUIRE(::mkdir(area.c_str(), 0700) == 0);
  CHECK(check_area(system, area, uid).safe());

  ::chmod(area.c_str(), 0770);
  AreaCheck open = check_area(system, area, uid);
  CHECK(open.problem == AreaProblem::open_mode);
  CHECK(open.path == area);
  CHECK(open.message().find(area) != std::string::npos);
  CHECK(open.message().find("0770") != std::string::npos);
  ::chmod(area.c_str(), 0700);

  CHECK(check_area(system, area, uid + 1).problem == AreaProblem::foreign_owner);
  CHECK(check_area(system, area, uid + 1).path == parent);

  // A symlinked area is refused even though its target is a fine directory.
  const std::string real = temp / "real";
  REQUIRE(::mkdir(real.c_str(), 0700) == 0);
  const std::string linked = temp / "linked";
  REQUIRE(::symlink(real.c_str(), linked.c_str()) == 0);
  CHECK(check_area(system, linked, uid, false).problem == AreaProblem::symlink);

  const std::string file = temp / "file";
  REQUIRE(system.real().write_new_file(file, "x", 0600));
  CHECK(check_area(system, file, uid, false).problem == AreaProblem::not_directory);
}

TEST_CASE("check_area of a foreign-owned area (needs root to chown)") {
  if (::getuid() != 0) {
    MESSAGE("not root: foreign-owner via chown is covered by the uid+1 check above");
    return;
  }
  TempDir temp;
  StagedSystem system;
  const std::string area = temp / "area";
  REQUIRE(::mkdir(area.c_str(), 0700) == 0);
  REQUIRE(::chown(area.c_str(), 4242, 4242) == 0);
  AreaCheck check = check_area(system, area, 0, false);
  CHECK(check.problem == AreaProblem::foreign_owner);
  CHECK(check.message().find("4242") != std::string::npos);
}

// status/check --all-users: which <tmpdir>/apnea-* entries are an account's area. Accounts
// are staged (lookup_uid), the directories real ones of this process's uid.
TEST_CASE("find_account_areas: a decimal uid name, a real directory that uid owns") {
  TempDir tmp;
  StagedSystem system;
  system.environment["TMPDIR"] = tmp.path();
  const std::uint32_t me = ::getuid();
  const std::uint32_t other = me == 0 ? 1 : 0;
  system.accounts["me"] = Account{"me", me, me, "/home/me"};
  system.accounts["other"] = Account{"other", other, other, "/home/other"};
  auto dir = [&](const std::string& name) { REQUIRE(::mkdir((tmp.path() + "/" + name).c_str(), 0700) == 0); };
  dir("apnea-" + std::to_string(me));         // ours: an account's area
  dir("apnea-" + std::to_string(other));      // named for another uid, but ours
  dir("apnea-3999999");                       // no such account (and ours: checked first)
  dir("apnea-007");                           // not as Node prints a uid
  dir("apnea-4294967295");                    // (uid_t)-1 is no uid
  dir("apnea-x");
  dir("unrelated");
  REQUIRE(::symlink((tmp.path() + "/apnea-" + std::to_string(me)).c_str(), (tmp.path() + "/apnea-12").c_str()) == 0);
  REQUIRE(::close(::creat((tmp.path() + "/apnea-13").c_str(), 0600)) == 0);

  auto found = find_account_areas(system);
  REQUIRE(found);
  std::map<std::string, std::string> judged;
  for (const AccountArea& area : *found) judged[area.top.substr(tmp.path().size() + 1)] = std::string(area.name());
  const std::string mine = "apnea-" + std::to_string(me);
  CHECK(judged[mine] == "ok");
  CHECK(judged["apnea-" + std::to_string(other)] == "owner-mismatch");
  CHECK(judged["apnea-3999999"] == (me == 3999999 ? "ok" : "owner-mismatch"));
  CHECK(judged["apnea-007"] == "bad-name");
  CHECK(judged["apnea-4294967295"] == "bad-name");
  CHECK(judged["apnea-x"] == "bad-name");
  CHECK(judged["apnea-12"] == "symlink");
  CHECK(judged["apnea-13"] == "not-directory");
  CHECK(judged.count("unrelated") == 0);
  CHECK(judged.size() == 8);
  // Sorted by uid, the names that are no uid last; the surveyable one has its account.
  for (const AccountArea& area : *found)
    if (area.surveyable()) {
      CHECK(area.account->name == "me");
      CHECK(area.lock_directory == tmp.path() + "/" + mine + "/operation-locks");
    }
  CHECK_FALSE(found->back().uid.has_value());
  for (std::size_t i = 1; i < found->size(); ++i)
    if ((*found)[i].uid && (*found)[i - 1].uid) CHECK(*(*found)[i - 1].uid < *(*found)[i].uid);

  // A uid with no passwd entry (a DynamicUser's), owning its directory: only that uid could
  // have made it, so it is an area to survey, as an account of that uid with no name.
  if (me == 0) {
    REQUIRE(::chown((tmp.path() + "/apnea-3999999").c_str(), 3999999, 3999999) == 0);
    auto again = find_account_areas(system);
    REQUIRE(again);
    bool seen = false;
    for (const AccountArea& area : *again)
      if (area.uid == 3999999u) {
        seen = true;
        CHECK(area.surveyable());
        REQUIRE(area.account);
        CHECK(area.account->uid == 3999999u);
        CHECK(area.account->gid == no_account_gid);  // never a gid that may be a real group's
        CHECK(area.account->name.empty());
        CHECK(area.entry_name() == "apnea-3999999");
      }
    CHECK(seen);
  }
}

TEST_CASE("find_account_areas fails when the temp dir cannot be listed") {
  StagedSystem system;
  system.environment["TMPDIR"] = "/nonexistent-apnea-tmp";
  auto found = find_account_areas(system);
  REQUIRE_FALSE(found);
  CHECK(found.error() == std::errc::no_such_file_or_directory);
}
