// apnea-locks reclaim as a user runs it: real areas, the real binary, checked on disk.
#include <doctest/doctest.h>

#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "process_util.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// A lock area (`<scratch>/locks`, 0700) and a repository whose lock lives there.
struct Area {
  Scratch scratch;
  std::string dir = scratch.locks;
  std::string lock;  ///< the repository's lock path
  Area() {
    make_dir(dir);
    lock = dir + "/" + lock_name(LockKind::repository, lock_key(LockKind::repository, scratch.repo));
  }
  Finished reclaim(std::vector<std::string> args) {
    std::vector<std::string> argv{locks_bin(), "reclaim", "--lock-dir", dir};
    argv.insert(argv.end(), args.begin(), args.end());
    return finish(argv);
  }
  std::string entry(const std::string& suffix) const { return lock + suffix; }
};

boost::json::object parse_object(const std::string& text) {
  CAPTURE(text);
  return boost::json::parse(text).as_object();
}

}  // namespace

TEST_CASE("a dead owner's lock: --dry-run changes nothing, no terminal needs --yes, --yes removes") {
  Area a;
  const pid_t dead = dead_pid();
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead));
  const auto before = snapshot(a.scratch.root);

  Finished dry = a.reclaim({"--repo", a.scratch.repo, "--dry-run"});
  CAPTURE(dry.err);
  CHECK(dry.status == 0);
  CHECK(dry.out.find("would reclaim " + a.lock) != std::string::npos);
  CHECK(dry.out.find("pid-dead") != std::string::npos);
  CHECK(snapshot(a.scratch.root) == before);

  Finished unconfirmed = a.reclaim({"--repo", a.scratch.repo});
  CHECK(unconfirmed.status == 2);
  CHECK(unconfirmed.err.find("not a terminal") != std::string::npos);
  CHECK(snapshot(a.scratch.root) == before);

  Finished done = a.reclaim({"--repo", a.scratch.repo, "--yes", "--json"});
  CAPTURE(done.err);
  CHECK(done.status == 0);
  auto report = parse_object(done.out);
  auto& target = report.at("targets").as_array().at(0).as_object();
  CHECK(target.at("outcome").as_string() == "removed");
  CHECK(target.at("proof").as_string() == "certain");
  CHECK(target.at("proof_name").as_string() == "pid-dead");
  CHECK(target.at("owner").at("pid").to_number<double>() == dead);
  CHECK(target.at("owner").at("token").as_string() == test_token);
  CHECK_FALSE(exists(a.lock));
  CHECK_FALSE(exists(a.entry(".reclaim")));
}

TEST_CASE("a live owner is refused even with --force --yes, naming the process") {
  Area a;
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(::getpid()));
  const auto before = snapshot(a.scratch.root);
  Finished refused = a.reclaim({"--repo", a.scratch.repo, "--force", "--yes"});
  CHECK(refused.status == 1);
  CHECK(refused.out.find("pid " + std::to_string(::getpid())) != std::string::npos);
  CHECK(refused.out.find("is alive") != std::string::npos);
  CHECK(refused.out.find("next step: ") != std::string::npos);
  CHECK(refused.out.find(program_invocation_short_name) != std::string::npos);  // its command line
  CHECK(snapshot(a.scratch.root) == before);
}

TEST_CASE("a malformed lock needs --force; the printed record carries its bytes") {
  Area a;
  const pid_t dead = dead_pid();
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead), 0700, 0644);
  Finished plain = a.reclaim({"--repo", a.scratch.repo, "--yes"});
  CHECK(plain.status == 1);
  CHECK(plain.out.find("owner-mode-0644") != std::string::npos);
  CHECK(exists(a.lock));
  // --force removes it only while no possible owner runs (PROTOCOL.md section 10): this test
  // program is one (it counts as a runtime and started before the lock), so it is named.
  Finished refused = a.reclaim({"--repo", a.scratch.repo, "--yes", "--force"});
  CHECK(refused.status == 1);
  CHECK(refused.out.find("is malformed (owner-mode-0644), and ") != std::string::npos);
  CHECK(refused.out.find("may be its owner") != std::string::npos);
  CHECK(refused.out.find("--not-owner " + std::to_string(::getpid()) + "@") != std::string::npos);
  CHECK(exists(a.lock));
  Finished forced = past_possible_owners([&](const std::vector<std::string>& args) { return a.reclaim(args); },
                                         {"--yes", "--force", "-J", a.lock});
  CAPTURE(forced.out);
  CHECK(forced.status == 0);
  auto target = parse_object(forced.out).at("targets").as_array().at(0).as_object();
  CHECK(target.at("action").as_string() == "reclaim-malformed");
  // Escaped as inspect shows raw bytes: quotes and backslashes escaped, other bytes as \xNN.
  std::string escaped;
  for (char c : owner_json(dead)) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
  CHECK(target.at("owner_bytes").as_string() == escaped);
  CHECK_FALSE(exists(a.lock));
}

TEST_CASE("never-live: a malformed lock naming a live pid is refused by every flag") {
  Area a;
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(::getpid()), 0700, 0644);
  const auto before = snapshot(a.scratch.root);
  for (const auto& flags : {std::vector<std::string>{"--yes"}, std::vector<std::string>{"--yes", "--force"},
                            std::vector<std::string>{"--yes", "--force", "--all"}}) {
    std::vector<std::string> args = flags;
    if (std::find(args.begin(), args.end(), "--all") == args.end()) {
      args.push_back("--repo");
      args.push_back(a.scratch.repo);
    }
    Finished refused = a.reclaim(args);
    CAPTURE(refused.out);
    CHECK(refused.status == 1);
    CHECK(refused.out.find(std::to_string(::getpid())) != std::string::npos);
    CHECK(snapshot(a.scratch.root) == before);
  }
}

TEST_CASE("--all --force cleans every dead entry and leaves live and unknown ones") {
  Area a;
  const pid_t dead = dead_pid();
  const std::string name = a.lock.substr(a.dir.size() + 1);
  make_entry(a.dir, name, owner_json(dead));                                      // stale
  make_entry(a.dir, name + ".candidate.c1", owner_json(dead, "c1"));              // debris
  make_entry(a.dir, name + ".tombstone.t1", owner_json(dead));                    // debris
  const std::string other = fake_lock_name("other");
  make_entry(a.dir, other, "{\"pid\":" + std::to_string(dead) + ",\"tok", 0700, 0600);  // malformed
  make_dir(a.dir + "/" + other + ".reclaim");                                     // leftover guard
  age_path(a.dir + "/" + other + ".reclaim", 3600);
  const std::string live = fake_lock_name("live");
  make_entry(a.dir, live, owner_json(::getpid()));                                // live
  write_file(a.dir + "/notes.txt", "mine");                                       // unknown

  Finished plain = a.reclaim({"--all", "--yes"});
  CHECK(plain.status == 1);  // the malformed lock and the guard need --force
  CHECK_FALSE(exists(a.lock));  // but the dead owner's lock went, and its debris
  CHECK_FALSE(exists(a.dir + "/" + name + ".candidate.c1"));
  CHECK(exists(a.dir + "/" + other));

  Finished forced = a.reclaim({"--all", "--yes", "--force"});
  CAPTURE(forced.out);
  CAPTURE(forced.err);
  // The guard, aged by its mtime (its ctime is now), is not old enough to remove (nor is any
  // on a machine whose clock is void): it, and the lock it guards, stay, and the refusal says
  // why.
  CHECK(forced.status == 1);
  CHECK(guard_too_young(forced.out));
  std::vector<std::string> left;
  (void)real_system().list_directory(a.dir, [&](const DirEntry& e) {
    left.push_back(e.name);
    return true;
  });
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected{live, "notes.txt", other, other + ".reclaim"};
  std::sort(expected.begin(), expected.end());
  CHECK(left == expected);
}

TEST_CASE("a leftover guard blocks reclamation with Apnea's message until --force removes it") {
  Area a;
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  make_dir(a.entry(".reclaim"));
  age_path(a.entry(".reclaim"), 3600);
  Finished blocked = a.reclaim({"--repo", a.scratch.repo, "--yes"});
  CHECK(blocked.status == 1);
  CHECK(exists(a.lock));
  CHECK(exists(a.entry(".reclaim")));
  Finished forced = a.reclaim({"--repo", a.scratch.repo, "--yes", "--force"});
  CAPTURE(forced.out);
  // Aged by its mtime only (its ctime is now; or the clock is void): not old enough to
  // remove. Refused, saying why; its next step is done by hand.
  CHECK(forced.status == 1);
  CHECK(guard_too_young(forced.out));
  CHECK(exists(a.lock));
  CHECK(exists(a.entry(".reclaim")));
  REQUIRE(::rmdir(a.entry(".reclaim").c_str()) == 0);  // as its next step says
  REQUIRE(a.reclaim({"--repo", a.scratch.repo, "--yes"}).status == 0);
  CHECK_FALSE(exists(a.lock));
  CHECK_FALSE(exists(a.entry(".reclaim")));

  // A guard in flight (fresh) is someone's reclamation: it is not removed, and its lock is
  // reported as guarded with Apnea's text.
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  make_dir(a.entry(".reclaim"));
  Finished held = a.reclaim({"--repo", a.scratch.repo, "--yes", "--force"});
  CHECK(held.status == 1);
  CHECK(held.out.find("Apnea stale-lock reclamation is guarded at " + a.entry(".reclaim")) != std::string::npos);
  CHECK(exists(a.entry(".reclaim")));
}

TEST_CASE("--keep-tombstone keeps the renamed lock") {
  Area a;
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  Finished done = a.reclaim({"--repo", a.scratch.repo, "--yes", "--keep-tombstone"});
  CHECK(done.status == 0);
  CHECK_FALSE(exists(a.lock));
  CHECK(count(done.out, "kept as " + a.lock + ".tombstone.") == 1);
}

TEST_CASE("usage and unsafe areas: distinct exit codes, nothing changed") {
  Area a;
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  const auto before = snapshot(a.scratch.root);
  Finished outside = a.reclaim({a.scratch.root + "/elsewhere/" + a.lock.substr(a.dir.size() + 1), "--yes"});
  CHECK(outside.status == 2);
  CHECK(outside.err.find("not an entry of the lock area") != std::string::npos);
  Finished unknown = a.reclaim({a.dir + "/notes.txt", "--yes"});
  CHECK(unknown.status == 2);
  Finished both = a.reclaim({"--all", "--repo", a.scratch.repo});
  CHECK(both.status == 2);
  Finished bad = a.reclaim({"--frobnicate"});
  CHECK(bad.status == 2);
  CHECK(snapshot(a.scratch.root) == before);

  // A symlinked lock area is refused before anything is read or removed.
  const std::string link = a.scratch.root + "/link";
  REQUIRE(::symlink(a.dir.c_str(), link.c_str()) == 0);
  Finished unsafe = finish({locks_bin(), "reclaim", "--lock-dir", link, "--all", "--force", "--yes"});
  CHECK(unsafe.status == 3);
  CHECK(unsafe.err.find(link) != std::string::npos);
  ::chmod(a.dir.c_str(), 0777);
  Finished open = a.reclaim({"--all", "--force", "--yes"});
  CHECK(open.status == 3);
  ::chmod(a.dir.c_str(), 0700);
  CHECK(exists(a.lock));
}

TEST_CASE("--user drops to the account before touching its area (root only)") {
  if (::getuid() != 0) {
    Area a;
    CHECK(a.reclaim({"--user", "nobody"}).status == 2);
    return;
  }
  Area a;
  CHECK(a.reclaim({"--user", "no-such-account-here", "--yes"}).status == 2);
  // nobody's area inside our scratch folder, which nobody must be able to traverse.
  ::chmod(a.scratch.root.c_str(), 0711);
  const std::uint32_t nobody = 65534;
  REQUIRE(::chown(a.dir.c_str(), nobody, nobody) == 0);
  const std::string name = a.lock.substr(a.dir.size() + 1);
  make_entry(a.dir, name, owner_json(dead_pid()));
  REQUIRE(::chown(a.lock.c_str(), nobody, nobody) == 0);
  REQUIRE(::chown((a.lock + "/owner.json").c_str(), nobody, nobody) == 0);
  // An entry root left there is, to nobody, another account's: malformed, not theirs.
  const std::string roots = fake_lock_name("root-owned");
  make_entry(a.dir, roots, owner_json(dead_pid()));

  Finished done = a.reclaim({"--user", "nobody", "--all", "--yes"});
  CAPTURE(done.out);
  CAPTURE(done.err);
  CHECK(done.status == 1);  // the root-owned lock is malformed to nobody: needs --force
  CHECK_FALSE(exists(a.lock));
  CHECK(exists(a.dir + "/" + roots));
  CHECK(done.out.find("lock-foreign-owner") != std::string::npos);
}

// issue 32 item 1: root helping another account, as the runbook's commands are typed.
TEST_CASE("--user NAME with a LOCKPATH, root for itself, the account's area and its fixes (root only)") {
  if (::getuid() != 0) return;
  Area a;
  ::chmod(a.scratch.root.c_str(), 0711);
  const std::uint32_t nobody = 65534;
  REQUIRE(::chown(a.dir.c_str(), nobody, nobody) == 0);
  const std::string name = a.lock.substr(a.dir.size() + 1);
  make_entry(a.dir, name, owner_json(dead_pid()));
  for (const std::string& path : {a.lock, a.lock + "/owner.json"}) REQUIRE(::chown(path.c_str(), nobody, nobody) == 0);
  // The LOCKPATH names nobody's area (not /tmp/apnea-65534): it is the area, as without --user.
  Finished dry = finish({locks_bin(), "reclaim", "--user", "nobody", "--dry-run", a.lock});
  CAPTURE(dry.out);
  CAPTURE(dry.err);
  CHECK(dry.status == 0);
  CHECK(dry.out.find("would reclaim " + a.lock) != std::string::npos);
  // inspect's fix acts for the account too.
  Finished inspected = finish({locks_bin(), "inspect", "--user", "nobody", a.lock});
  CAPTURE(inspected.out);
  CHECK(inspected.out.find("--user nobody") != std::string::npos);
  Finished done = finish({locks_bin(), "reclaim", "--user", "nobody", "--yes", a.lock});
  CHECK(done.status == 0);
  CHECK_FALSE(exists(a.lock));

  // Root naming itself is root: no privileges to drop.
  Finished self = finish({locks_bin(), "status", "--user", "root", "--lock-dir", a.scratch.root + "/roots"});
  CAPTURE(self.err);
  CHECK(self.err.find("cannot become") == std::string::npos);

  // The account's own area is /tmp/apnea-<uid>/operation-locks whatever root's TMPDIR says;
  // when it does not exist, --all says where to look instead of "nothing to reclaim", exit 1.
  const std::string own = "/tmp/apnea-4244/operation-locks";
  REQUIRE_FALSE(exists(own));
  Finished missing = finish({"/usr/bin/env", "TMPDIR=" + a.scratch.root, locks_bin(), "reclaim", "--user", "4244",
                             "--all", "--dry-run"});
  CAPTURE(missing.out);
  CHECK(missing.status == 1);
  CHECK(missing.out.find("no lock area " + own) != std::string::npos);
  CHECK(missing.out.find("pass the lock path from its message") != std::string::npos);
}

TEST_CASE("on a terminal it lists the targets and asks; only yes removes") {
  // script(1) gives the command a pseudo-terminal and types our answer into it.
  Area a;
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  const std::string command = shell_quote(locks_bin()) + " reclaim --lock-dir " + shell_quote(a.dir) +
                              " --repo " + shell_quote(a.scratch.repo);
  Finished no = finish({"sh", "-c", "echo n | script -qec \"$0\" /dev/null", command});
  CAPTURE(no.out);
  CHECK(no.status == 1);
  CHECK(no.out.find("will reclaim " + a.lock) != std::string::npos);
  CHECK(no.out.find("[y/N]") != std::string::npos);
  CHECK(exists(a.lock));
  Finished yes = finish({"sh", "-c", "echo y | script -qec \"$0\" /dev/null", command});
  CAPTURE(yes.out);
  CHECK(yes.status == 0);
  CHECK(yes.out.find("removed " + a.lock) != std::string::npos);
  CHECK_FALSE(exists(a.lock));
}

namespace {

/// `argv` run in the folder `cwd` (through sh), with `env` added.
Finished finish_in(const std::string& cwd, std::vector<std::string> argv,
                   const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> shell{"sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", cwd};
  shell.insert(shell.end(), argv.begin(), argv.end());
  return finish(shell, env);
}

}  // namespace

TEST_CASE("from a subdirectory, reclaim finds no lock there, names the enclosing repository's, exits 1") {
  Area a;
  make_dir(a.scratch.repo + "/.git");
  make_dir(a.scratch.repo + "/src");
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  const auto before = snapshot(a.scratch.root);
  const std::map<std::string, std::string> env{{"HOME", a.scratch.home}};

  Finished here = finish_in(a.scratch.repo + "/src", {locks_bin(), "reclaim", "--lock-dir", a.dir, "--yes"}, env);
  CAPTURE(here.out);
  CAPTURE(here.err);
  CHECK(here.status == 1);  // nothing where it looked: never a clean 0
  CHECK(here.out.find("no lock at ") == 0);
  CHECK(here.out.find("the lock is probably the enclosing repository's") != std::string::npos);
  CHECK(here.out.find(a.lock + " of " + a.scratch.repo + " is stale (pid-dead)") != std::string::npos);
  const std::string fix = "apnea-locks reclaim --lock-dir " + a.dir + " --repo " + a.scratch.repo;
  CHECK(here.out.find(fix + " --dry-run") != std::string::npos);
  CHECK(here.out.find(fix + " --yes") != std::string::npos);
  CHECK(snapshot(a.scratch.root) == before);

  // issue 32 item 5: from a nested repository (a submodule with its own .git) the lock is
  // still the enclosing one, whose lock is there; inspect hints at it too and exits 1.
  make_dir(a.scratch.repo + "/src/vendored");
  make_dir(a.scratch.repo + "/src/vendored/.git");
  Finished nested = finish_in(a.scratch.repo + "/src/vendored", {locks_bin(), "reclaim", "--lock-dir", a.dir, "--dry-run"}, env);
  CAPTURE(nested.out);
  CHECK(nested.status == 1);
  CHECK(nested.out.find(a.lock + " of " + a.scratch.repo + " is stale (pid-dead)") != std::string::npos);
  for (const std::string& where : {a.scratch.repo + "/src", a.scratch.repo + "/src/vendored"}) {
    CAPTURE(where);
    Finished inspected = finish_in(where, {locks_bin(), "inspect", "--lock-dir", a.dir}, env);
    CAPTURE(inspected.out);
    CHECK(inspected.status == 1);
    CHECK(inspected.out.find("is inside the repository " + a.scratch.repo) != std::string::npos);
  }

  // The JSON says the same: nothing found, and where.
  Finished json = finish_in(a.scratch.repo + "/src", {locks_bin(), "reclaim", "--lock-dir", a.dir, "--json", "--dry-run"}, env);
  CHECK(json.status == 1);
  auto report = parse_object(json.out);
  CHECK(report.at("found").as_bool() == false);
  auto& hint = report.at("hints").as_array().at(0).as_object();
  CHECK(hint.at("kind").as_string() == "enclosing-repository");
  CHECK(hint.at("lock_path").as_string() == a.lock);
  CHECK(hint.at("message").as_string().starts_with("the lock is probably the enclosing repository's"));
  CHECK(hint.at("state").as_string() == "stale");
  CHECK(hint.at("fix_argv").as_array().back().as_string() == a.scratch.repo);

  // The suggested command works from there.
  Finished fixed = finish_in(a.scratch.repo + "/src",
                             {locks_bin(), "reclaim", "--lock-dir", a.dir, "--repo", a.scratch.repo, "--yes"}, env);
  CHECK(fixed.status == 0);
  CHECK_FALSE(exists(a.lock));

  // No lock anywhere: it says so, names how to pass Apnea's lock path, and exits 1.
  Finished nothing = finish_in(a.scratch.repo + "/src", {locks_bin(), "reclaim", "--lock-dir", a.dir, "--yes"}, env);
  CHECK(nothing.status == 1);
  CHECK(nothing.out.find("the enclosing repository " + a.scratch.repo + " has no lock either") != std::string::npos);
  CHECK(nothing.out.find("apnea-locks reclaim --dry-run LOCKPATH") != std::string::npos);
}

TEST_CASE("a dead global setup lock is named by every reclaim that does not remove it") {
  Area a;
  const std::map<std::string, std::string> env{{"HOME", a.scratch.home}};
  const std::string global_name =
      lock_name(LockKind::global_setup, lock_key(LockKind::global_setup, a.scratch.home));
  const std::string global = a.dir + "/" + global_name;
  make_entry(a.dir, global_name, owner_json(dead_pid()));
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  const std::string fix = "apnea-locks reclaim --lock-dir " + a.dir + " --home " + a.scratch.home;

  Finished dry = finish({locks_bin(), "reclaim", "--lock-dir", a.dir, "--repo", a.scratch.repo, "--dry-run"}, env);
  CAPTURE(dry.out);
  CHECK(dry.status == 1);  // Apnea stays blocked
  CHECK(dry.out.find("would reclaim " + a.lock) != std::string::npos);
  CHECK(dry.out.find("the global setup lock of " + a.scratch.home + " blocks every Apnea run") != std::string::npos);
  CHECK(dry.out.find(global + " is stale (pid-dead)") != std::string::npos);
  CHECK(dry.out.find(fix + " --dry-run") != std::string::npos);
  CHECK(dry.out.find(fix + " --yes") != std::string::npos);

  Finished repo = finish({locks_bin(), "reclaim", "--lock-dir", a.dir, "--repo", a.scratch.repo, "--yes"}, env);
  CHECK(repo.status == 1);
  CHECK_FALSE(exists(a.lock));
  CHECK(repo.out.find("blocks every Apnea run") != std::string::npos);
  CHECK(exists(global));

  Finished json = finish({locks_bin(), "reclaim", "--lock-dir", a.dir, "--all", "--dry-run", "--json"}, env);
  auto report = parse_object(json.out);
  auto& hint = report.at("hints").as_array().at(0).as_object();
  CHECK(hint.at("kind").as_string() == "global-setup");
  CHECK(hint.at("message").as_string().find("blocks every Apnea run") != std::string::npos);
  CHECK(hint.at("fix").as_string() == fix);

  // The command it names removes it; then nothing is named and the exit status is 0.
  Finished removed = finish({locks_bin(), "reclaim", "--lock-dir", a.dir, "--home", a.scratch.home, "--yes"}, env);
  CAPTURE(removed.out);
  CHECK(removed.status == 0);
  CHECK_FALSE(exists(global));
  CHECK(removed.out.find("blocks every Apnea run") == std::string::npos);
}

TEST_CASE("the lock path from Apnea's message works without --lock-dir, wherever its area is") {
  Area a;
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  // The area is not this process's default one: the path names it.
  Finished dry = finish({locks_bin(), "reclaim", "--dry-run", a.lock + "/"});
  CAPTURE(dry.out);
  CAPTURE(dry.err);
  CHECK(dry.status == 0);
  CHECK(dry.out.find("would reclaim " + a.lock) != std::string::npos);
  // Copied with the sentence's punctuation ("... manually: LOCK."): no entry name ends in
  // it, so the entry is the one without it, for every command taking a LOCKPATH.
  for (const std::string& copied : {a.lock + ".", a.lock + "),", a.lock + "'."}) {
    CAPTURE(copied);
    Finished again = finish({locks_bin(), "reclaim", "--dry-run", copied});
    CHECK(again.status == 0);
    CHECK(again.out.find("would reclaim " + a.lock + " (") != std::string::npos);
    Finished inspected = finish({locks_bin(), "inspect", copied, "--json"});
    CHECK(parse_object(inspected.out).at("entry").at("path").as_string() == a.lock);
  }
  // An entry name with something else after it is still no entry name.
  CHECK(finish({locks_bin(), "reclaim", "--dry-run", a.lock + ".x"}).status == 2);
  Finished done = finish({locks_bin(), "reclaim", "--yes", a.lock + "."});
  CHECK(done.status == 0);
  CHECK_FALSE(exists(a.lock));
  // Two areas at once are a usage error; a path whose area does not exist is a bad path.
  Finished two = finish({locks_bin(), "reclaim", "--dry-run", a.lock, a.scratch.root + "/other/" + a.lock.substr(a.dir.size() + 1)});
  CHECK(two.status == 2);
  Finished missing = finish({locks_bin(), "reclaim", "--dry-run", a.scratch.root + "/nope/" + a.lock.substr(a.dir.size() + 1)});
  CHECK(missing.status == 3);
}

// issue 32 item 5: a name as the table and the footers cut it, copied with the sentence's '.'.
TEST_CASE("a LOCKPATH cut with '…' names the one entry it matches, in every command") {
  Area a;
  const std::string name = a.lock.substr(a.dir.size() + 1);
  make_entry(a.dir, name, owner_json(dead_pid()));
  const std::string cut = a.dir + "/" + name.substr(0, 24) + "\u2026.lock";
  Finished inspected = finish({locks_bin(), "inspect", cut + "."});
  CAPTURE(inspected.out);
  CAPTURE(inspected.err);
  CHECK(inspected.status == 1);
  CHECK(inspected.out.find("path:        " + a.lock + "\n") != std::string::npos);
  Finished listed = finish({locks_bin(), "status", "-n", "-o", "name", cut});
  CAPTURE(listed.err);
  CHECK(listed.status == 1);
  CHECK(listed.out == name + "\n");
  // Another entry with the same start: the cut is ambiguous, and nothing is removed.
  const std::string twin = name.substr(0, 24) + std::string(name.size() - 29, 'f') + ".lock";
  REQUIRE(twin.size() == name.size());
  make_entry(a.dir, twin, owner_json(dead_pid()));
  Finished ambiguous = finish({locks_bin(), "reclaim", "--yes", cut});
  CAPTURE(ambiguous.err);
  CHECK(ambiguous.status == 2);
  CHECK(ambiguous.err.find("2 entries of " + a.dir + " match it (" + name + ", " + twin + ")") != std::string::npos);
  CHECK(exists(a.lock));
  // Given more of the name it is one again, and reclaim removes that one only.
  const std::string longer = a.dir + "/" + name.substr(0, 40) + "\u2026";
  Finished removed = finish({locks_bin(), "reclaim", "--yes", longer});
  CAPTURE(removed.out);
  CAPTURE(removed.err);
  CHECK(removed.status == 0);
  CHECK_FALSE(exists(a.lock));
  CHECK(exists(a.dir + "/" + twin));
  Finished gone = finish({locks_bin(), "inspect", longer});
  CHECK(gone.status == 2);
  CHECK(gone.err.find("no entry of " + a.dir + " matches it") != std::string::npos);
  // Where the locale is not UTF-8 status cuts with "...": that form too, the sentence's '.'
  // after it. A cut that leaves no start names nothing.
  Finished ascii = finish({locks_bin(), "inspect", a.dir + "/" + twin.substr(0, 30) + "...."});
  CAPTURE(ascii.err);
  CHECK(ascii.status == 1);
  CHECK(ascii.out.find("path:        " + a.dir + "/" + twin + "\n") != std::string::npos);
  Finished bare = finish({locks_bin(), "inspect", a.dir + "/\u2026"});
  CHECK(bare.status == 2);
  CHECK(bare.err.find("the name's start is cut away") != std::string::npos);
  // An area that is not safe is never listed to match a cut name: its check says why.
  const std::string link = a.scratch.root + "/link-area";
  REQUIRE(::symlink(a.dir.c_str(), link.c_str()) == 0);
  Finished unsafe = finish({locks_bin(), "inspect", link + "/" + twin.substr(0, 30) + "\u2026"});
  CAPTURE(unsafe.err);
  CHECK(unsafe.status == 3);
  CHECK(unsafe.err.find("symlink") != std::string::npos);
}

// issue 32 item 3: the paths Apnea's message prints, passed as they are.
TEST_CASE("Apnea's paths as given: a guard that stays needs attention; a lock gone since is no failure") {
  Area a;
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(dead_pid()));
  make_dir(a.entry(".reclaim"));  // fresh: a reclamation at work, or one that crashed just now
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--dry-run"}, std::vector<std::string>{"--yes"}}) {
    std::vector<std::string> argv{locks_bin(), "reclaim", a.entry(".reclaim")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Finished guarded = finish(argv);
    CAPTURE(guarded.out);
    CHECK(guarded.status == 1);  // Apnea fails while it exists
    // "skip" (a reclamation may be at work), or "refuse" where the clock is void (no age
    // counts: tests/status_cli_test.cc); either way with what to do next.
    CHECK(guarded.out.find(" " + a.entry(".reclaim") + ": ") != std::string::npos);
    CHECK(guarded.out.find("  next step: ") != std::string::npos);
    CHECK(exists(a.entry(".reclaim")));
  }
  // inspect of the same path: in flight for a survey, but it needs attention (exit 1).
  Finished inspected = finish({locks_bin(), "inspect", a.entry(".reclaim")});
  CAPTURE(inspected.out);
  CHECK(inspected.status == 1);
  CHECK(inspected.out.find("attention:   yes\n") != std::string::npos);
  CHECK(inspected.out.find("next step:   ") != std::string::npos);
  REQUIRE(::rmdir(a.entry(".reclaim").c_str()) == 0);
  REQUIRE(finish({locks_bin(), "reclaim", "--yes", a.lock}).status == 0);
  // Released (here: removed) since the message named it: nothing blocks Apnea there.
  for (const std::string& path : {a.lock, a.entry(".reclaim")}) {
    CAPTURE(path);
    Finished gone = finish({locks_bin(), "reclaim", "--dry-run", path});
    CAPTURE(gone.out);
    CHECK(gone.status == 0);
    CHECK(gone.out.find("is gone") != std::string::npos);
    CHECK(gone.out.find("pass that path") == std::string::npos);
  }
}

TEST_CASE("the operator's word: --not-owner PID@START, as the refusal prints it, for that one process") {
  Area a;
  // An unrelated long-lived process of ours, started before the record naming it was written
  // (so no clock evidence either), that runs a runtime (so not pid-not-runtime): alive, and
  // no flag alone removes the lock.
  SpawnedProcess unrelated({node_named_sleep(), "1000"});
  const std::string pid = std::to_string(unrelated.pid());
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(unrelated.pid()));
  Finished refused = a.reclaim({"--force", "--yes", a.lock});
  CAPTURE(refused.out);
  CHECK(refused.status == 1);
  CHECK(exists(a.lock));
  // The refusal names the process with its start time and the command that says it is not
  // the owner.
  const std::string marker = "--not-owner " + pid + "@";
  const std::size_t at = refused.out.find(marker);
  REQUIRE(at != std::string::npos);
  const std::string word = refused.out.substr(at + 12, refused.out.find(' ', at + 12) - at - 12);
  CAPTURE(word);
  REQUIRE(parse_not_owner(word));
  CHECK(refused.out.find("started " + word.substr(word.find('@') + 1)) != std::string::npos);

  // Usage errors change nothing: without --force, with --all or two paths, a malformed word.
  CHECK(a.reclaim({"--yes", "--not-owner", word, a.lock}).status == 2);
  CHECK(a.reclaim({"--force", "--yes", "--all", "--not-owner", word}).status == 2);
  CHECK(a.reclaim({"--force", "--yes", "--not-owner", word, a.lock, a.lock + "x"}).status == 2);
  CHECK(a.reclaim({"--force", "--yes", "--not-owner", pid + "@yesterday", a.lock}).status == 2);
  CHECK(exists(a.lock));

  // A stale start time (the pid reused since): refused, and it says so.
  const auto parsed = *parse_not_owner(word);
  const std::string stale = pid + "@" + utc_second_text((parsed.start_s - 3600) * 1'000'000'000);
  Finished mismatch = a.reclaim({"--force", "--yes", "--not-owner", stale, a.lock});
  CAPTURE(mismatch.out);
  CHECK(mismatch.status == 1);
  CHECK(mismatch.out.find("not the one given to --not-owner") != std::string::npos);
  CHECK(exists(a.lock));

  // The word as printed: removed, the proof is the operator's, and the output names the
  // process it was about. The process itself is untouched.
  Finished removed = a.reclaim({"--force", "--yes", "--not-owner", word, a.lock});
  CAPTURE(removed.out);
  CHECK(removed.status == 0);
  CHECK_FALSE(exists(a.lock));
  CHECK(removed.out.find("operator") != std::string::npos);
  CHECK(removed.out.find("the operator's word (--not-owner) that pid " + pid) != std::string::npos);
  CHECK_FALSE(unrelated.wait(std::chrono::milliseconds(0)).has_value());
}

TEST_CASE("pid-not-runtime: a lock naming a live process that runs no runtime needs --force, which names the trust") {
  Area a;
  // A plain `sleep` (exec'ed: no runtime's file mapped), started before the record naming it
  // was written: no clock evidence, only the runtime's.
  // "ready" comes once it runs sh: until its exec the child is this test program, a runtime.
  SpawnedProcess plain({"sh", "-c", "echo ready; exec sleep 1000"});
  REQUIRE(plain.read_line(Stream::out, 30s) == "ready");
  const std::string pid = std::to_string(plain.pid());
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(plain.pid()));

  Finished refused = a.reclaim({"--yes", "--json", a.lock});
  CAPTURE(refused.out);
  CHECK(refused.status == 1);
  CHECK(exists(a.lock));
  const auto report = parse_object(refused.out);
  const auto& target = report.at("targets").as_array().at(0).as_object();
  CHECK(target.at("proof").as_string() == "evidence");
  CHECK(target.at("proof_name").as_string() == "pid-not-runtime");

  Finished removed = a.reclaim({"--force", "--yes", a.lock});
  CAPTURE(removed.out);
  CHECK(removed.status == 0);
  CHECK_FALSE(exists(a.lock));
  CHECK(removed.out.find("pid-not-runtime (evidence)") != std::string::npos);
  CHECK(removed.out.find("Apnea runs only in a recognised runtime") != std::string::npos);
  CHECK_FALSE(plain.wait(std::chrono::milliseconds(0)).has_value());  // untouched

  // The same process under a runtime's name: alive and maybe the writer, so --force refuses.
  SpawnedProcess node({node_named_sleep(), "1000"});
  make_entry(a.dir, a.lock.substr(a.dir.size() + 1), owner_json(node.pid()));
  Finished kept = a.reclaim({"--force", "--yes", a.lock});
  CAPTURE(kept.out);
  CHECK(kept.status == 1);
  CHECK(exists(a.lock));
  CHECK(kept.out.find("pid " + std::to_string(node.pid())) != std::string::npos);
}
