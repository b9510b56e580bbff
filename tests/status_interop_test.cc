// `status`/`inspect` apnea_verdict and `path` against the reference (apnea-peer), on the same
// inputs. Skipped, loudly, without APNEA_REFERENCE.
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
namespace json = boost::json;

namespace {

std::string peer() { return test_env("APNEA_REFERENCE"); }
std::string bin() { return test_env("APNEA_LOCKS_BIN"); }

std::string text(const json::value& value) {
  return value.is_string() ? std::string(value.as_string()) : json::serialize(value);
}

/// Every JSON line a command printed.
std::vector<json::object> json_lines(const std::string& out) {
  std::vector<json::object> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(json::parse(line).as_object());
  return lines;
}


long long kernel_pid_max() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  long long value = 0;
  in >> value;
  return value;
}

}  // namespace

TEST_CASE("apnea_verdict is the reference's on every hand-made lock") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  Zombie zombie;
  WaitingThread thread;
  const long long me = ::getpid();
  const long long dead = dead_pid();
  int seed = 0;
  auto lock = [&](std::string_view owner, mode_t dir_mode = 0700, mode_t file_mode = 0600) {
    return make_entry(area, fake_lock_name(std::to_string(seed++)), owner, dir_mode, file_mode);
  };
  const std::string token = std::string(test_token);
  // Accepted owners, alive or not by kill(pid, 0).
  lock(owner_json(me));
  lock(owner_json(dead));
  lock(owner_json(2147483648LL));
  lock("{\"pid\":1e20,\"token\":\"t\"}");
  lock(owner_json(kernel_pid_max() + 1));
  lock(owner_json(zombie.pid()));
  lock(owner_json(thread.tid()));
  lock(owner_json(1));
  lock("{\"pid\":5.0,\"token\":\"t\"}");
  lock("{\"pid\":\"x\",\"pid\":" + std::to_string(me) + ",\"token\":\"t\"}");
  lock(" \n{\"token\":\"\\u0000\",\"pid\":" + std::to_string(dead) + "}\t ");
  lock("{\"pid\":" + std::to_string(me) + ",\"token\":\"\xff\xfe\"}");
  lock("{\"deep\":" + std::string(1500, '[') + std::string(1500, ']') + ",\"pid\":" + std::to_string(me) +
       ",\"token\":\"t\"}");
  // Rejected owners: malformed for both.
  lock(owner_json(me), 0700, 0644);
  lock(owner_json(me), 0750);
  lock("\xef\xbb\xbf" + owner_json(me));
  lock("{\"pid\":1,");
  lock("{\"pid\":1,\"token\":\"t\"} x");
  lock("{\"pid\":1}");
  lock("{\"pid\":1,\"token\":\"\"}");
  lock("{\"pid\":1,\"token\":7}");
  lock("{\"pid\":0,\"token\":\"t\"}");
  lock("{\"pid\":-1,\"token\":\"t\"}");
  lock("{\"pid\":1.5,\"token\":\"t\"}");
  lock("{\"pid\":\"12\",\"token\":\"t\"}");
  lock("[1,2]");
  lock(std::string(4097 - owner_json(me).size(), ' ') + owner_json(me));
  lock("");
  {
    const std::string dir = area + "/" + fake_lock_name(std::to_string(seed++));
    make_dir(dir);
    write_file(root / "target.json", owner_json(me));
    REQUIRE(::symlink((root / "target.json").c_str(), (dir + "/owner.json").c_str()) == 0);
  }
  {
    const std::string dir = area + "/" + fake_lock_name(std::to_string(seed++));
    make_dir(dir);
    REQUIRE(::mkfifo((dir + "/owner.json").c_str(), 0600) == 0);
  }
  make_dir(area + "/" + fake_lock_name(std::to_string(seed++)));  // no owner.json
  {
    make_dir(root / "real");
    write_file(root / "real/owner.json", owner_json(me));
    REQUIRE(::symlink((root / "real").c_str(), (area + "/" + fake_lock_name(std::to_string(seed++))).c_str()) == 0);
  }
  write_file(area + "/" + fake_lock_name(std::to_string(seed++)), owner_json(me));  // a file

  CommandResult ours = run_command({bin(), "status", "--lock-dir", area, "--json"});
  const json::object doc = json::parse(ours.out).as_object();
  std::map<std::string, std::string> our_verdicts;
  for (const auto& entry : doc.at("entries").as_array())
    if (text(entry.at("role")) == "lock") our_verdicts[text(entry.at("path"))] = text(entry.at("apnea_verdict"));

  CommandResult theirs = run_command({peer(), "classify-all", area});
  REQUIRE(theirs.status == 0);
  std::map<std::string, std::string> peer_verdicts;
  for (const auto& line : json_lines(theirs.out)) peer_verdicts[text(line.at("lock"))] = text(line.at("verdict"));

  CHECK(our_verdicts.size() == static_cast<std::size_t>(seed));
  CHECK(peer_verdicts.size() == our_verdicts.size());
  std::map<std::string, int> tally;
  for (const auto& [path, verdict] : our_verdicts) {
    CAPTURE(path);
    REQUIRE(peer_verdicts.count(path) == 1);
    CHECK(verdict == peer_verdicts.at(path));
    ++tally[verdict];
  }
  // The inputs cover every verdict.
  CHECK(tally["live"] >= 5);
  CHECK(tally["stale"] >= 3);
  CHECK(tally["malformed"] >= 15);

  // `classify LOCK` (one lock) agrees with `inspect` too, including a lock that is not there.
  for (const std::string& name : {fake_lock_name("0"), fake_lock_name("1"), fake_lock_name("13"),
                                 fake_lock_name("absent")}) {
    CAPTURE(name);
    const std::string path = area + "/" + name;
    auto one = json_lines(run_command({peer(), "classify", path}).out);
    REQUIRE(one.size() == 1);
    CommandResult inspected = run_command({bin(), "inspect", "--lock-dir", area, name, "--json"});
    const json::object inspect_doc = json::parse(inspected.out).as_object();
    CHECK(text(inspect_doc.at("entry").at("apnea_verdict")) == text(one.front().at("verdict")));
  }
}

TEST_CASE("path is the reference's for every root form and TMPDIR") {
  TempDir cwd;  // the reference's loader caches under a relative TMPDIR: keep it here
  make_dir(cwd / "repo");
  make_dir(cwd / "home");
  REQUIRE(::symlink((cwd / "repo").c_str(), (cwd / "link").c_str()) == 0);
  const std::vector<std::string> roots = {cwd / "repo", cwd / "link", cwd / "repo/", "repo", "./link/",
                                          cwd / "repo/../repo"};
  const std::vector<std::string> tmpdirs = {"", "/tmp//x/../y/", "rel/./dir"};
  for (const std::string& tmpdir : tmpdirs) {
    const std::string env = "cd " + shell_quote(cwd.path()) + " && env -u TMPDIR -u TMP -u TEMP " +
                            (tmpdir.empty() ? "" : "TMPDIR=" + shell_quote(tmpdir) + " ");
    for (const std::string& root : roots) {
      CAPTURE(tmpdir);
      CAPTURE(root);
      auto theirs = json_lines(run_command({peer(), "path", "repo", root}, env).out);
      REQUIRE(theirs.size() == 1);
      CommandResult ours = run_command({bin(), "path", "--repo", root}, env);
      CHECK(ours.status == 0);
      CHECK(ours.out == text(theirs.front().at("lock_path")) + "\n");
    }
    CAPTURE(tmpdir);
    auto global = json_lines(run_command({peer(), "path", "global", "home"}, env).out);
    REQUIRE(global.size() == 1);
    CHECK(run_command({bin(), "path", "--home", "home"}, env).out == text(global.front().at("lock_path")) + "\n");
    // Without --repo: the current directory, as Apnea uses it.
    auto here = json_lines(run_command({peer(), "path", "repo", "."}, env).out);
    REQUIRE(here.size() == 1);
    CHECK(run_command({bin(), "path"}, env).out == text(here.front().at("lock_path")) + "\n");
  }
}
