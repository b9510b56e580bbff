// Interoperability with the reference (Apnea 0.2.2's operation-lock.ts under Node.js), run
// as APNEA_REFERENCE (shared/peer/apnea-peer). Skipped, loudly, when it is not set.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <fstream>
#include <memory>

#include "apnea_locks/lock.h"
#include "apnea_locks/lock_area.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

const std::string& peer() {
  static const std::string path = test_env("APNEA_REFERENCE");
  return path;
}

/// Runs the peer with `env` ("NAME=value" words) and returns its first JSON line.
boost::json::object peer_json(const std::vector<std::string>& args, const std::string& env,
                              int* status = nullptr) {
  std::vector<std::string> words{peer()};
  words.insert(words.end(), args.begin(), args.end());
  CommandResult result = run_command(words, env);
  if (status != nullptr) *status = result.status;
  CAPTURE(result.out);
  auto parsed = boost::json::parse(result.out.substr(0, result.out.find('\n')));
  return parsed.as_object();
}

std::string text(const boost::json::value& value) { return std::string(value.as_string()); }

/// A clean environment prefix for /bin/sh with only the temp variables given.
std::string temp_env(const std::string& tmpdir, const std::string& tmp = "",
                     const std::string& temp = "") {
  return "env -u TMPDIR -u TMP -u TEMP TMPDIR=" + shell_quote(tmpdir) + " TMP=" + shell_quote(tmp) +
         " TEMP=" + shell_quote(temp) + " ";
}

/// The core's lock directory under the same variables.
std::string core_lock_dir(const std::string& tmpdir, const std::string& tmp = "",
                          const std::string& temp = "") {
  StagedSystem system;
  system.environment["TMPDIR"] = tmpdir;
  system.environment["TMP"] = tmp;
  system.environment["TEMP"] = temp;
  return default_lock_directory(system);
}


}  // namespace

TEST_CASE("the lock directory is the reference's for every TMPDIR/TMP/TEMP form") {
  struct Case {
    std::string tmpdir, tmp, temp;
  };
  const Case cases[] = {
      {"", "", ""},                 {"/tmp//x/../y/", "", ""}, {"", "rel/./dir", "/ignored"},
      {"", "", "/var//tmp/"},       {"/", "", ""},             {"/a//", "", ""},
      {"../up/./down", "", ""},
  };
  // Run from a temp folder: the reference's loader (tsx) keeps a cache under a relative
  // TMPDIR too.
  TempDir cwd;
  for (const Case& c : cases) {
    CAPTURE(c.tmpdir);
    CAPTURE(c.tmp);
    CAPTURE(c.temp);
    CommandResult result = run_command({"sh", "-c", "cd \"$0\" && exec \"$1\" lock-dir", cwd.path(), peer()},
                                       temp_env(c.tmpdir, c.tmp, c.temp));
    CAPTURE(result.out);
    auto out = boost::json::parse(result.out.substr(0, result.out.find('\n'))).as_object();
    CHECK(text(out.at("lock_dir")) == core_lock_dir(c.tmpdir, c.tmp, c.temp));
  }
}

TEST_CASE("a TMPDIR that is not UTF-8 names the reference's lock directory (U+FFFD)") {
  // Node decodes the environment as UTF-8, each maximal invalid subpart becoming U+FFFD.
  const std::string cases[] = {
      "/tmp/bad\xff" "dir",   "/tmp/\xe2\x82" "cut",  "/tmp/\xf0\x80\x80" "over",
      "/tmp/\xed\xa0\x80" "sur", "/tmp/\xc3\xa9t\xe9", "/tmp/\x80\xbf\xfe\xff/",
  };
  TempDir cwd;
  for (const std::string& tmpdir : cases) {
    CAPTURE(tmpdir);
    CommandResult result = run_command({"sh", "-c", "cd \"$0\" && exec \"$1\" lock-dir", cwd.path(), peer()},
                                       temp_env(tmpdir));
    CAPTURE(result.out);
    auto out = boost::json::parse(result.out.substr(0, result.out.find('\n'))).as_object();
    CHECK(text(out.at("lock_dir")) == core_lock_dir(tmpdir));
    CHECK(text(out.at("lock_dir")).find("\xef\xbf\xbd") != std::string::npos);
  }
}

TEST_CASE("lock paths are the reference's: plain, symlinked, trailing slash, relative, home") {
  TempDir temp;
  const std::string repo = temp / "repo";
  REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
  const std::string link = temp / "link";
  REQUIRE(::symlink(repo.c_str(), link.c_str()) == 0);
  const std::string env = temp_env(temp.path());
  StagedSystem system;
  const std::string lock_dir = core_lock_dir(temp.path());

  for (const std::string& root : {repo, link, repo + "/", link + "/.", repo + "/../repo"}) {
    CAPTURE(root);
    auto out = peer_json({"path", "repo", root}, env);
    auto core = repository_lock_path(system, lock_dir, root);
    REQUIRE(core);
    CHECK(text(out.at("lock_path")) == *core);
    auto global = peer_json({"path", "global", root}, env);
    CHECK(text(global.at("lock_path")) == *global_setup_lock_path(system, lock_dir, root));
  }
  // A relative root, resolved against the working directory by both.
  CommandResult relative =
      run_command({"sh", "-c", "cd \"$0\" && \"$1\" path repo ./link/", temp.path(), peer()}, env);
  auto core = repository_lock_path(system, lock_dir, repo);
  REQUIRE(core);
  CHECK(text(boost::json::parse(relative.out).at("lock_path")) == *core);
}

TEST_CASE("a lock held by the reference is live to the core; once released the core acquires") {
  TempDir temp;
  const std::string repo = temp / "repo";
  REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
  Child holder({peer(), "hold", "repo", repo}, {{"TMPDIR", temp.path()}});
  auto line = holder.read_line();
  REQUIRE(line);
  auto acquired = boost::json::parse(*line).as_object();
  REQUIRE(text(acquired.at("event")) == "acquired");
  const double peer_pid = acquired.at("pid").to_number<double>();

  System& system = real_system();
  auto target = repository_target(system, core_lock_dir(temp.path()), repo);
  REQUIRE(target);
  CHECK(text(acquired.at("lock_path")) == target->lock_path);
  OwnerRead read = read_owner(system, target->lock_path, ::getuid());
  REQUIRE(read.owner);
  CHECK(read.owner->pid == peer_pid);
  CHECK(read.owner->token == text(acquired.at("owner").at("token")));

  auto refused = acquire(system, *target, apnea_options(LockKind::repository));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().is(LockedReason::live));
  CHECK(refused.error().pid == peer_pid);

  holder.close_stdin();
  auto released = holder.read_line();
  REQUIRE(released);
  CHECK(text(boost::json::parse(*released).at("event")) == "released");
  CHECK(holder.wait() == 0);
  auto held = acquire(system, *target, apnea_options(LockKind::repository));
  REQUIRE(held);
  CHECK(held->release().value_or(false));
}

TEST_CASE("a lock held by the core is live to the reference; once released the reference acquires") {
  TempDir temp;
  const std::string repo = temp / "repo";
  REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
  const std::string env = temp_env(temp.path());
  System& system = real_system();
  auto target = repository_target(system, core_lock_dir(temp.path()), repo);
  REQUIRE(target);
  auto held = acquire(system, *target, apnea_options(LockKind::repository));
  REQUIRE(held);

  auto classified = peer_json({"classify", target->lock_path}, env);
  CHECK(text(classified.at("verdict")) == "live");
  CHECK(text(classified.at("owner").at("token")) == held->owner().token);

  int status = 0;
  auto refused = peer_json({"acquire", "repo", repo}, env, &status);
  CHECK(status == 3);
  CHECK(text(refused.at("error")) == "OperationLocked");
  CHECK(text(refused.at("reason")) == "live");
  CHECK(refused.at("pid").to_number<double>() == double(::getpid()));
  CHECK(text(refused.at("message")) == "another Apnea operation holds " + target->lock_path +
                                           " for " + target->resource + " (pid " +
                                           std::to_string(::getpid()) + ")");

  REQUIRE(held->release().value_or(false));
  auto acquired = peer_json({"acquire", "repo", repo}, env, &status);
  CHECK(status == 0);
  CHECK(text(acquired.at("event")) == "acquired");
  CHECK_FALSE(real_system().lstat(target->lock_path).has_value());
}

TEST_CASE("mixed stress: 2 reference + 2 core processes on one counter lose no update") {
  const std::string stress = test_env("APNEA_LOCKS_STRESS");
  REQUIRE_FALSE(stress.empty());
  TempDir temp;
  const std::string repo = temp / "repo";
  REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
  const std::string counter = temp / "counter";
  std::ofstream(counter) << 0;
  const std::string lock_dir = core_lock_dir(temp.path());
  constexpr int cycles = 150;

  std::vector<std::unique_ptr<Child>> peers, cores;
  for (int i = 0; i < 2; ++i) {
    peers.push_back(std::make_unique<Child>(
        std::vector<std::string>{peer(), "stress", "repo", repo, counter, std::to_string(cycles)},
        std::vector<std::pair<std::string, std::string>>{{"TMPDIR", temp.path()}}));
    cores.push_back(std::make_unique<Child>(
        std::vector<std::string>{stress, "stress", lock_dir, repo, counter, std::to_string(cycles)}));
  }
  long peer_malformed = 0, peer_contended = 0, core_contended = 0;
  for (auto& child : peers) {
    child->close_stdin();
    const std::string out = child->read_rest();
    CAPTURE(out);
    CHECK(child->wait() == 0);
    auto report = boost::json::parse(out.substr(0, out.find('\n'))).as_object();
    REQUIRE(text(report.at("event")) == "stress-done");
    CHECK(report.at("acquired").as_int64() == cycles);
    peer_malformed += report.at("spurious_malformed").as_int64();
    peer_contended += report.at("contended").as_int64();
  }
  for (auto& child : cores) {
    child->close_stdin();
    const std::string out = child->read_rest();
    CAPTURE(out);
    CHECK(child->wait() == 0);
    auto report = boost::json::parse(out.substr(0, out.find('\n'))).as_object();
    REQUIRE(text(report.at("event")) == "stress-done");
    CHECK(report.at("acquired").as_int64() == cycles);
    CHECK(report.at("spurious_malformed").as_int64() == 0);
    core_contended += report.at("contended").as_int64();
  }
  CHECK(read_number(counter) == 4 * cycles);
  MESSAGE("mixed stress, 2 reference + 2 core x " << cycles << " cycles: counter "
                                                  << read_number(counter) << " (expected "
                                                  << 4 * cycles << "), reference contended "
                                                  << peer_contended << " spurious malformed "
                                                  << peer_malformed << "; core contended "
                                                  << core_contended << " spurious malformed 0");
}
