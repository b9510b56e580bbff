// `apnea-locks run` against the reference (APNEA_REFERENCE = apnea-peer): both sides use the
// same lock area (TMPDIR points at a scratch folder, no --lock-dir), and each sees the
// other's lock as Apnea's own.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "run_test_util.h"

using namespace apnea_locks::testing;
namespace json = boost::json;

namespace {

std::string peer_bin() { return test_env("APNEA_REFERENCE"); }

/// The first use of apnea-peer may install its npm dependencies.
constexpr auto peer_timeout = 600s;

std::map<std::string, std::string> same_area(const Scratch& scratch) {
  return {{"TMPDIR", scratch.root}};
}

/// `apnea-locks run --repo <repo> OPTIONS -- COMMAND`, in the default (TMPDIR) lock area.
std::vector<std::string> run_args(const Scratch& scratch, const std::vector<std::string>& options,
                                  const std::vector<std::string>& command) {
  std::vector<std::string> argv = {locks_bin(), "run", "--repo", scratch.repo};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

/// The last JSON line a command printed on stdout.
json::object last_json(const std::string& out) {
  const auto end = out.find_last_not_of('\n');
  REQUIRE(end != std::string::npos);
  const auto newline = out.rfind('\n', end);
  const auto start = newline == std::string::npos ? 0 : newline + 1;
  return json::parse(out.substr(start, end + 1 - start)).as_object();
}

}  // namespace

TEST_CASE("both sides name the same lock") {
  Scratch scratch;
  auto peer = finish({peer_bin(), "path", "repo", scratch.repo}, same_area(scratch), peer_timeout);
  REQUIRE(peer.status == 0);
  auto run = finish(run_args(scratch, {"--json"}, {"true"}), same_area(scratch));
  REQUIRE(run.status == 0);
  const auto acquired = json::parse(run.err.substr(0, run.err.find('\n'))).as_object();
  CHECK(acquired.at("lock_path") == last_json(peer.out).at("lock_path"));
}

TEST_CASE("while run holds a repository lock the reference is refused 'live', then acquires") {
  Scratch scratch;
  SpawnedProcess run(run_args(scratch, {}, {"sh", "-c", "echo ready; exec cat"}),
                     same_area(scratch));
  REQUIRE(run.read_line(Stream::out, 30s) == "ready");

  auto refused =
      finish({peer_bin(), "acquire", "repo", scratch.repo}, same_area(scratch), peer_timeout);
  CHECK(refused.status == 3);
  const auto error = last_json(refused.out);
  CHECK(error.at("error") == "OperationLocked");
  CHECK(error.at("reason") == "live");
  CHECK(error.at("pid") == run.pid());

  run.close_stdin();
  REQUIRE(run.wait(30s) == 0);
  auto acquired =
      finish({peer_bin(), "acquire", "repo", scratch.repo}, same_area(scratch), peer_timeout);
  CHECK(acquired.status == 0);
  CHECK(acquired.out.find("\"event\":\"acquired\"") != std::string::npos);
}

TEST_CASE(
    "while the reference holds the lock run --nonblock exits 75 and run --wait succeeds "
    "once it releases") {
  Scratch scratch;
  SpawnedProcess peer({peer_bin(), "hold", "repo", scratch.repo}, same_area(scratch));
  const auto acquired_line = peer.read_line_containing(Stream::out, "\"acquired\"", peer_timeout);
  REQUIRE(acquired_line);
  const auto peer_pid = json::parse(*acquired_line).at("pid");
  CHECK(peer_pid == peer.pid());

  const std::string marker = scratch.root + "/ran";
  auto refused =
      finish(run_args(scratch, {"--nonblock", "--json"}, {"touch", marker}), same_area(scratch));
  CHECK(refused.status == 75);
  CHECK(refused.err.find("\"reason\":\"live\"") != std::string::npos);
  CHECK_FALSE(exists(marker));

  SpawnedProcess waiter(run_args(scratch, {"--wait", "20s", "--json"}, {"touch", marker}),
                        same_area(scratch));
  const auto waiting = waiter.read_line_containing(Stream::err, "\"waiting\"", 30s);
  REQUIRE(waiting);
  CHECK(parse_checked_json(*waiting).at("holder_pid") == peer_pid);
  peer.close_stdin();
  CHECK(peer.read_line_containing(Stream::out, "\"released\"", 60s));
  CHECK(peer.wait(60s) == 0);
  CHECK(waiter.wait(30s) == 0);
  CHECK(exists(marker));
}

TEST_CASE("a run killed with SIGKILL leaves a lock the reference calls stale") {
  Scratch scratch;
  SpawnedProcess run(run_args(scratch, {"--json"}, {"sh", "-c", "echo ready; exec cat"}),
                     same_area(scratch));
  REQUIRE(run.read_line(Stream::out, 30s) == "ready");
  const auto acquired = run.read_line_containing(Stream::err, "\"acquired\"", 5s);
  REQUIRE(acquired);
  const std::string lock(parse_checked_json(*acquired).at("lock_path").as_string());
  run.signal(SIGKILL);
  REQUIRE(run.wait(30s) == 128 + SIGKILL);
  run.close_stdin();

  auto classified = finish({peer_bin(), "classify", lock}, same_area(scratch), peer_timeout);
  REQUIRE(classified.status == 0);
  const auto verdict = last_json(classified.out);
  CHECK(verdict.at("verdict") == "stale");
  CHECK(verdict.at("owner").at("pid") == run.pid());
  auto refused =
      finish({peer_bin(), "acquire", "repo", scratch.repo}, same_area(scratch), peer_timeout);
  CHECK(refused.status == 3);
  CHECK(last_json(refused.out).at("reason") == "stale");
}
