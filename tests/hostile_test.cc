// Hostile lock areas (issue 8, item 5): every case gets a clear verdict or error from status
// and reclaim, with no hang, no crash, nothing outside the area touched, and nothing with
// malformed metadata removed without --force.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <functional>

#include "area_builder.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// A scratch folder holding the lock area `locks/` and, beside it, `outside/` (files a
/// hostile entry points at), which must never change.
struct Hostile {
  Scratch scratch;
  std::string dir = scratch.locks;
  std::string outside = scratch.root + "/outside";
  std::string name = fake_lock_name("hostile");
  std::string lock = dir + "/" + name;
  Hostile() {
    make_dir(dir);
    make_dir(outside);
    write_file(outside + "/owner.json", owner_json(dead_pid()));
    write_file(outside + "/keep", "precious");
  }
  Finished run(const std::string& command, std::vector<std::string> args) {
    std::vector<std::string> argv{locks_bin(), command, "--lock-dir", dir};
    argv.insert(argv.end(), args.begin(), args.end());
    return finish(argv, {}, 60s);  // a hang fails the test instead of stalling it
  }
  /// The one entry's state and reason as status --json reports them.
  std::pair<std::string, std::string> verdict() {
    Finished status = run("status", {"--json"});
    CAPTURE(status.err);
    REQUIRE(status.status.has_value());
    auto doc = boost::json::parse(status.out).as_object();
    auto& entries = doc.at("entries").as_array();
    REQUIRE(entries.size() == 1);
    auto& entry = entries.at(0).as_object();
    return {std::string(entry.at("state").as_string()), std::string(entry.at("reason").as_string())};
  }
};

struct OwnerCase {
  const char* what;
  std::function<void(Hostile&)> build;
  const char* state;
  const char* reason;
  /// Whether --force removes it: only when every pid the record names is proven dead. A
  /// record that cannot be read (a FIFO, a symlink, a directory, too large to scan) may name
  /// a live pid, so no flag removes it (the refusal says how to check by hand).
  bool force_removes = false;
};

}  // namespace

TEST_CASE("hostile owner records: a verdict each, nothing outside touched, --force needed") {
  const OwnerCase cases[] = {
      {"owner.json is a FIFO", [](Hostile& h) {
         make_dir(h.lock);
         REQUIRE(::mkfifo((h.lock + "/owner.json").c_str(), 0600) == 0);
       }, "malformed", "owner-fifo", false},
      {"owner.json is a symlink out of the area", [](Hostile& h) {
         make_dir(h.lock);
         REQUIRE(::symlink((h.outside + "/owner.json").c_str(), (h.lock + "/owner.json").c_str()) == 0);
       }, "malformed", "owner-symlink", false},
      {"owner.json is a directory", [](Hostile& h) {
         make_dir(h.lock);
         make_dir(h.lock + "/owner.json");
       }, "malformed", "owner-directory", false},
      {"owner.json is a 1 GiB sparse file", [](Hostile& h) {
         make_dir(h.lock);
         write_file(h.lock + "/owner.json", "{");
         REQUIRE(::truncate((h.lock + "/owner.json").c_str(), 1LL << 30) == 0);
       }, "malformed", "owner-too-large", false},
      // 1e400 is no process, but each run of digits in a pid's value is read too (PROTOCOL.md
      // section 10): it names 1, alive, and 400.
      {"pid 1e400", [](Hostile& h) { make_entry(h.dir, h.name, R"({"pid":1e400,"token":"t"})"); },
       "live-malformed", "pid-not-positive-integer", false},
      {"pid -<dead pid>", [](Hostile& h) {
         make_entry(h.dir, h.name, "{\"pid\":-" + std::to_string(dead_pid()) + ",\"token\":\"t\"}");
       }, "malformed", "pid-not-positive-integer", true},  // its digits name only a dead pid
      {"the lock is a symlink to a directory outside", [](Hostile& h) {
         REQUIRE(::symlink(h.outside.c_str(), h.lock.c_str()) == 0);
       }, "malformed", "lock-symlink", false},
      {"the lock is world-readable, naming pid 1 (alive)",
       [](Hostile& h) { make_entry(h.dir, h.name, owner_json(1), 0755); },
       "live-malformed", "lock-mode-0755", false},
      {"the lock is world-readable, naming a dead pid",
       [](Hostile& h) { make_entry(h.dir, h.name, owner_json(dead_pid()), 0755); },
       "malformed", "lock-mode-0755", true},
  };
  for (const OwnerCase& c : cases) {
    CAPTURE(c.what);
    Hostile h;
    c.build(h);
    const auto outside_before = snapshot(h.outside);
    const auto area_before = snapshot(h.dir);
    auto [state, reason] = h.verdict();
    CHECK(state == c.state);
    CHECK(reason == c.reason);

    Finished plain = h.run("reclaim", {"--all", "--yes"});
    CAPTURE(plain.out);
    CHECK(plain.status == 1);  // refused: needs --force
    CHECK(snapshot(h.dir) == area_before);

    Finished forced = h.run("reclaim", {"--all", "--yes", "--force"});
    CAPTURE(forced.out);
    CAPTURE(forced.err);
    if (c.force_removes) {
      // Only while no possible owner runs: this test program is one (PROTOCOL.md section 10).
      CHECK(forced.status == 1);
      CHECK(forced.out.find("--not-owner " + std::to_string(::getpid()) + "@") != std::string::npos);
      CHECK(snapshot(h.dir) == area_before);
      forced = past_possible_owners([&](const std::vector<std::string>& args) { return h.run("reclaim", args); },
                                    {"--yes", "--force", h.lock});
      CAPTURE(forced.out);
      CHECK(forced.status == 0);
      CHECK_FALSE(exists(h.lock));
    } else {
      CHECK(forced.status == 1);
      CHECK(snapshot(h.dir) == area_before);
      CHECK(forced.out.find("next step: ") != std::string::npos);
    }
    CHECK(snapshot(h.outside) == outside_before);
  }
}

TEST_CASE("hostile but acceptable records: Apnea accepts them, so the owner's pid decides") {
  const OwnerCase cases[] = {
      {"invalid UTF-8 in the token", [](Hostile& h) {
         make_entry(h.dir, h.name, "{\"pid\":" + std::to_string(dead_pid()) + ",\"token\":\"\xff\xfe\"}");
       }, "stale", "pid-dead"},
      {"nesting 1900 levels deep", [](Hostile& h) {
         make_entry(h.dir, h.name, "{\"pid\":" + std::to_string(dead_pid()) + ",\"token\":\"t\",\"x\":" +
                                       std::string(1900, '[') + std::string(1900, ']') + "}");
       }, "stale", "pid-dead"},
      {"owner.json hard-linked to a file outside", [](Hostile& h) {
         make_dir(h.lock);
         REQUIRE(::link((h.outside + "/owner.json").c_str(), (h.lock + "/owner.json").c_str()) == 0);
       }, "stale", "pid-dead"},
      {"a pid above pid_max", [](Hostile& h) { make_entry(h.dir, h.name, owner_json(1LL << 40)); },
       "stale", "pid-out-of-range"},
  };
  for (const OwnerCase& c : cases) {
    CAPTURE(c.what);
    Hostile h;
    c.build(h);
    const std::string outside_owner = h.outside + "/owner.json";
    struct stat before {};
    REQUIRE(::stat(outside_owner.c_str(), &before) == 0);
    auto [state, reason] = h.verdict();
    CHECK(state == c.state);
    CHECK(reason == c.reason);
    // A certain proof of death: reclaimed without --force.
    Finished done = h.run("reclaim", {"--all", "--yes"});
    CAPTURE(done.out);
    CHECK(done.status == 0);
    CHECK_FALSE(exists(h.lock));
    // The hard-linked file outside keeps its content; only the area's link went.
    struct stat after {};
    REQUIRE(::stat(outside_owner.c_str(), &after) == 0);
    CHECK(after.st_size == before.st_size);
    CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  }
}

TEST_CASE("zombie owners are proven dead; another account's process in root's area is not") {
  Hostile h;
  Zombie zombie;
  make_entry(h.dir, h.name, owner_json(zombie.pid()));
  auto [state, reason] = h.verdict();
  CHECK(state == "stale");
  CHECK(reason == "zombie");
  CHECK(h.run("reclaim", {"--all", "--yes"}).status == 0);
  CHECK_FALSE(exists(h.lock));

  if (::getuid() == 0) {
    Sleeper other(65534);
    REQUIRE(other.ok());
    make_entry(h.dir, h.name, owner_json(other.pid()));
    // The area is root's: a root writer may have dropped privileges since, so a process of
    // another account may still be it (PROTOCOL.md section 9, pid-other-uid).
    auto [other_state, other_reason] = h.verdict();
    CHECK(other_state == "live");
    CHECK(other_reason == "pid-alive");
    h.run("reclaim", {"--all", "--yes"});
    CHECK(exists(h.lock));
  }
}

TEST_CASE("hostile areas: refused before anything is read, the target left untouched") {
  SUBCASE("the area is a symlink to a directory the test owns") {
    Hostile h;
    make_entry(h.outside, fake_lock_name("x"), owner_json(dead_pid()));
    const auto before = snapshot(h.outside);
    const std::string link = h.scratch.root + "/area-link";
    REQUIRE(::symlink(h.outside.c_str(), link.c_str()) == 0);
    // LINK/ and LINK/. are LINK: lstat of the path as typed would follow the symlink.
    for (const std::string& typed : std::vector<std::string>{link, link + "/", link + "/.", link + "/./"}) {
      CAPTURE(typed);
      for (const std::string command : {"status", "reclaim", "check"}) {
        std::vector<std::string> argv{locks_bin(), command, "--lock-dir", typed};
        if (command == "reclaim") argv.insert(argv.end(), {"--all", "--force", "--yes"});
        Finished result = finish(argv, {}, 60s);
        CHECK(result.status == (command == "check" ? 2 : 3));  // check: CRITICAL, unsafe area
        CHECK(result.out.find("symlink") + result.err.find("symlink") != 2 * std::string::npos);
      }
      // run refuses it too, and its command never starts.
      Finished ran = finish({locks_bin(), "run", "--lock-dir", typed, "--repo", h.scratch.root,
                             "--", "touch", h.scratch.root + "/ran"},
                            {}, 60s);
      CHECK(ran.status == 3);
      CHECK_FALSE(exists(h.scratch.root + "/ran"));
    }
    CHECK(snapshot(h.outside) == before);
    // A '..' component is refused: a/b/.. is not a when b is a symlink.
    for (const std::string command : {"status", "run"}) {
      std::vector<std::string> argv{locks_bin(), command, "--lock-dir", link + "/../area-link"};
      if (command == "run") argv.insert(argv.end(), {"--", "true"});
      Finished result = finish(argv, {}, 60s);
      CHECK(result.status == 2);
      CHECK(result.err.find("'..'") != std::string::npos);
    }
    CHECK(snapshot(h.outside) == before);
  }
  SUBCASE("group- or world-writable") {
    for (mode_t mode : {0770, 0707, 0777}) {
      Hostile h;
      make_entry(h.dir, h.name, owner_json(dead_pid()));
      ::chmod(h.dir.c_str(), mode);
      CHECK(h.run("status", {}).status == 3);
      CHECK(h.run("reclaim", {"--all", "--force", "--yes"}).status == 3);
      CHECK(exists(h.lock));
    }
  }
  SUBCASE("owned by another uid") {
    if (::getuid() != 0) return;  // only root can give a directory away
    Hostile h;
    make_entry(h.dir, h.name, owner_json(dead_pid()));
    REQUIRE(::chown(h.dir.c_str(), 4242, 4242) == 0);
    Finished status = h.run("status", {});
    CHECK(status.status == 3);
    CHECK(status.err.find("4242") != std::string::npos);
    CHECK(h.run("reclaim", {"--all", "--force", "--yes"}).status == 3);
    CHECK(exists(h.lock));
  }
  SUBCASE("another account's own area, and one squatted (root only): whose it is, what to do") {
    if (::getuid() != 0) return;
    const struct passwd* nobody = ::getpwnam("nobody");
    REQUIRE(nobody != nullptr);
    Hostile h;
    // `apnea-<uid>` owned by that uid: an account's own area (issue 32 item 1), for --user.
    for (const auto& [named, owner] : {std::pair{nobody->pw_uid, nobody->pw_uid}, std::pair{uid_t(4243), nobody->pw_uid}}) {
      CAPTURE(named);
      const std::string top = h.scratch.root + "/apnea-" + std::to_string(named);
      const std::string area = top + "/operation-locks";
      make_dir(top);
      make_dir(area);
      make_entry(area, h.name, owner_json(dead_pid()));
      REQUIRE(::chown(top.c_str(), owner, owner) == 0);
      REQUIRE(::chown(area.c_str(), owner, owner) == 0);
      for (const std::string command : {"status", "inspect", "reclaim"}) {
        CAPTURE(command);
        std::vector<std::string> argv{locks_bin(), command};
        if (command == "status") argv.insert(argv.end(), {"--lock-dir", area});
        else argv.push_back(area + "/" + h.name);
        if (command == "reclaim") argv.push_back("--dry-run");
        Finished refused = finish(argv, {}, 60s);
        CAPTURE(refused.err);
        CHECK(refused.status == 3);
        if (named == owner) {
          CHECK(refused.err.find("add --user nobody") != std::string::npos);
          CHECK(refused.err.find("squatted") == std::string::npos);
        } else {
          CHECK(refused.err.find("its name says uid 4243") != std::string::npos);
          CHECK(refused.err.find("--user") == std::string::npos);
        }
      }
      CHECK(exists(area + "/" + h.name));
    }
  }
}

TEST_CASE("inspect never reads through a symlinked lock") {
  Hostile h;
  // The lock is a symlink to a directory outside whose owner.json names a live process.
  write_file(h.outside + "/owner.json", owner_json(::getpid()));
  REQUIRE(::symlink(h.outside.c_str(), h.lock.c_str()) == 0);
  const auto outside_before = snapshot(h.outside);
  Finished inspected = h.run("inspect", {h.lock, "--json"});
  CAPTURE(inspected.out);
  CAPTURE(inspected.err);
  REQUIRE(inspected.status.has_value());
  const auto doc = boost::json::parse(inspected.out).as_object();
  CHECK(doc.at("entry").at("reason").as_string() == "lock-symlink");
  CHECK(doc.at("owner_file").at("raw").is_null());  // nothing read from outside
  CHECK(inspected.out.find(std::to_string(::getpid())) == std::string::npos);
  Finished text = h.run("inspect", {h.lock});
  CHECK(text.out.find(std::to_string(::getpid())) == std::string::npos);
  CHECK(snapshot(h.outside) == outside_before);
}
