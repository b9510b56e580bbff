// docs/runbook.md followed literally: each incident the runbook describes is staged with
// Apnea's own lock code (the reference, APNEA_REFERENCE = apnea-peer), Apnea's message is
// taken from it, the commands of the runbook's marked code blocks run word for word (only
// LOCKPATH is replaced, by the path in that message) through /bin/sh with the built
// apnea-locks first in PATH, and Apnea must acquire afterwards. For the live Apnea, its lock
// must survive every command. Skipped, loudly, without APNEA_REFERENCE.
//
// A block is marked by an HTML comment on the line before its ```sh fence:
//   <!-- runbook-test: INCIDENT [INCIDENT...] [after=Ns] -->
// `after=Ns`: the runbook says to wait until the entry is that old; the test waits (the
// time is the policy's threshold, not a synchronisation) and runs the block then.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <fmt/format.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apnea_incident.h"
#include "area_builder.h"
#include "process_util.h"
#include "run_test_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
namespace json = boost::json;

namespace {

/// One marked code block of the runbook.
struct Block {
  std::set<std::string> incidents;
  int after_s = 0;             ///< wait until the incident is this old before running it
  std::vector<std::string> commands;
  int line = 0;                ///< of the marker, for messages
};

/// The marked blocks of docs/runbook.md, in document order.
std::vector<Block> runbook_blocks() {
  const std::string path = test_env("APNEA_LOCKS_SOURCE") + "/docs/runbook.md";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, "cannot read " << path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::string open = "<!-- runbook-test:";
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].starts_with(open)) continue;
    Block block;
    block.line = static_cast<int>(i + 1);
    const auto close = lines[i].find("-->");
    REQUIRE_MESSAGE(close != std::string::npos, "runbook.md:" << block.line << ": unterminated marker");
    std::istringstream words(lines[i].substr(open.size(), close - open.size()));
    for (std::string word; words >> word;) {
      if (word.starts_with("after=")) {
        REQUIRE_MESSAGE(word.ends_with("s"), "runbook.md:" << block.line << ": after=Ns");
        block.after_s = std::stoi(word.substr(6, word.size() - 7));
      } else {
        block.incidents.insert(word);
      }
    }
    REQUIRE_MESSAGE(i + 1 < lines.size(), "runbook.md:" << block.line);
    REQUIRE_MESSAGE(lines[i + 1] == "```sh", "runbook.md:" << block.line << ": the marker must precede a ```sh block");
    std::size_t j = i + 2;
    for (; j < lines.size() && lines[j] != "```"; ++j)
      if (!lines[j].empty() && !lines[j].starts_with("#")) block.commands.push_back(lines[j]);
    REQUIRE_MESSAGE(j < lines.size(), "runbook.md:" << block.line << ": unterminated block");
    REQUIRE_MESSAGE(!block.commands.empty(), "runbook.md:" << block.line << ": empty block");
    blocks.push_back(block);
    i = j;
  }
  return blocks;
}

/// Runs one block's commands literally, LOCKPATH replaced; each must exit 0 or 1.
void run_block(Incident& incident, const Block& block) {
  if (block.after_s > 0) {
    const auto ready = incident.staged + std::chrono::seconds(block.after_s + 2);
    std::this_thread::sleep_until(ready);  // the runbook's "wait until it is N s old"
  }
  for (const std::string& command : block.commands) {
    std::string line = command;
    for (auto at = line.find("LOCKPATH"); at != std::string::npos; at = line.find("LOCKPATH", at)) {
      const std::string quoted = shell_quote(incident.lock);
      line.replace(at, 8, quoted);
      at += quoted.size();
    }
    Finished done = finish({"sh", "-c", "cd " + shell_quote(incident.cwd) + " && " + line}, incident.env);
    incident.transcript += fmt::format("$ {}\n[exit {}]\n{}{}", command, done.status.value_or(-1), done.out, done.err);
    CAPTURE(incident.transcript);
    CHECK_MESSAGE((done.status == 0 || done.status == 1),
                  incident.name << ": runbook.md:" << block.line << ": '" << command << "' exited "
                       << done.status.value_or(-1));
  }
}

void run_blocks(Incident& incident, const std::vector<Block>& blocks, bool delayed) {
  for (const Block& block : blocks)
    if (block.incidents.count(incident.name) != 0 && (block.after_s > 0) == delayed) run_block(incident, block);
}

}  // namespace

TEST_CASE("the runbook's blocks are marked for the seven incidents") {
  const auto blocks = runbook_blocks();
  std::set<std::string> seen;
  for (const Block& block : blocks) {
    seen.insert(block.incidents.begin(), block.incidents.end());
    for (const std::string& command : block.commands) {
      CAPTURE(command);
      // Only apnea-locks and the two hand steps of section 4a; never a hand removal.
      CHECK((command.starts_with("apnea-locks ") || command.starts_with("stat ") ||
             command.starts_with("chmod ")));
      CHECK(command.find("rm ") == std::string::npos);
    }
  }
  CHECK(seen == std::set<std::string>{"dead-lock", "global-lock", "live-malformed", "empty-owner",
                                      "live-apnea", "guard", "subdirectory"});
}

TEST_CASE("the runbook, followed literally, unblocks Apnea in each incident") {
  const auto blocks = runbook_blocks();
  BinDir bin;

  // The two incidents whose fix waits for a minute are staged first, so the others run
  // meanwhile.
  Incident empty("empty-owner", bin);
  empty.crash();
  {  // power loss: the record is empty
    Incident& i = empty;
    const std::string lock =
        last_json(i.apnea({"path", "repo", i.target}).out).at("lock_path").as_string().c_str();
    const int fd = ::open((lock + "/owner.json").c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW);
    REQUIRE(fd >= 0);
    ::close(fd);
  }
  empty.refused("malformed");
  run_blocks(empty, blocks, false);
  CHECK(exists(empty.lock));  // not yet: it names no pid and is younger than a minute

  Incident guard("guard", bin);
  guard.crash();
  {
    const std::string lock =
        last_json(guard.apnea({"path", "repo", guard.target}).out).at("lock_path").as_string().c_str();
    age_path(lock, 120);  // past Apnea's grace: Apnea tries to reclaim it and meets the guard
    make_dir(lock + ".reclaim");  // left by a reclaimer that crashed a moment ago
  }
  guard.refused("stale");
  CHECK(text(guard.refusal.at("message")).find("reclamation is guarded at " + guard.lock + ".reclaim") != std::string::npos);
  // A guard that blocks Apnea is never OK: status exits 1, check is CRITICAL.
  CHECK(guard.locks({"status"}).status == 1);
  Finished check = guard.locks({"check"});
  CHECK(check.status == 2);
  CHECK(check.out.find("APNEA-LOCKS CRITICAL - 1 reclaim guard blocking Apnea") == 0);
  run_blocks(guard, blocks, false);
  CHECK(exists(guard.lock + ".reclaim"));  // too young to remove yet

  {  // A crashed Apnea's lock, inside the 60 s grace.
    Incident i("dead-lock", bin);
    i.crash();
    i.refused("stale");
    run_blocks(i, blocks, false);
    i.apnea_acquires();
  }
  {  // The global setup lock of a crashed Apnea.
    Incident i("global-lock", bin);
    i.kind = "global";
    i.target = i.scratch.home;
    i.crash();
    i.refused("stale");
    run_blocks(i, blocks, false);
    i.apnea_acquires();
  }
  {  // From a subdirectory of the repository whose lock Apnea is blocked on.
    Incident i("subdirectory", bin);
    make_dir(i.scratch.repo + "/.git");
    make_dir(i.scratch.repo + "/src");
    i.cwd = i.scratch.repo + "/src";
    i.crash();
    i.refused("stale");
    // Without the message, reclaim from there names the lock Apnea is blocked on.
    Finished hint = finish({"sh", "-c", "cd " + shell_quote(i.cwd) + " && apnea-locks reclaim --dry-run"}, i.env);
    CHECK(hint.status == 1);
    CHECK(hint.out.find(i.lock + " of " + i.scratch.repo + " is stale (pid-dead)") != std::string::npos);
    run_blocks(i, blocks, false);
    i.apnea_acquires();
  }
  {  // A live Apnea: nothing the runbook says may remove its lock.
    Incident i("live-apnea", bin);
    i.hold();
    i.refused("live");
    const std::string before = read_bytes(i.lock + "/owner.json");
    run_blocks(i, blocks, false);
    CHECK(read_bytes(i.lock + "/owner.json") == before);
    i.release_holder();
    i.apnea_acquires();
  }
  {  // owner.json 0644 under a live Apnea: the mode is repaired by hand, nothing removed.
    Incident i("live-malformed", bin);
    i.hold();
    const std::string lock =
        last_json(i.apnea({"path", "repo", i.target}).out).at("lock_path").as_string().c_str();
    REQUIRE(::chmod((lock + "/owner.json").c_str(), 0644) == 0);
    i.refused("malformed");
    const std::string before = read_bytes(i.lock + "/owner.json");
    run_blocks(i, blocks, false);
    CHECK(read_bytes(i.lock + "/owner.json") == before);
    Finished classify = i.apnea({"classify", i.lock});
    CHECK(text(last_json(classify.out).at("verdict")) == "live");  // Apnea sees its owner again
    // The holder can release its own lock again (a 0644 record would have kept it forever).
    CHECK(json::parse(i.release_holder()).at("exists_after") == false);
    i.apnea_acquires();
  }

  // A minute after the first two were staged: the runbook's waits are over.
  if (machine_clock_void(guard.lock.substr(0, guard.lock.rfind('/')))) {
    // No age counts while the clock is void: the runbook's `reclaim --force` after the wait
    // is refused, saying so, and its next step is done by hand (no Apnea runs here).
    MESSAGE("the clock is void: the empty-record and guard incidents end by the refusal's next step");
    for (Incident* i : {&empty, &guard}) {
      const Finished refused = finish(
          {"sh", "-c", "apnea-locks reclaim --force --yes --guard-age 1m " + shell_quote(i->lock)}, i->env);
      CAPTURE(refused.out);
      CHECK(refused.status == 1);
      CHECK(refused.out.find("the clock is void") != std::string::npos);
    }
    std::filesystem::remove_all(empty.lock);
    REQUIRE(::rmdir((guard.lock + ".reclaim").c_str()) == 0);
  } else {
    run_blocks(empty, blocks, true);
    run_blocks(guard, blocks, true);
    // Section 4c's last step: the refusal names the possible owners (this test program is
    // one: it counts as a runtime that started before the lock), and the reader, having
    // checked them, adds the refusal's --not-owner words.
    if (exists(empty.lock)) {
      const Finished removed = past_possible_owners(
          [&](const std::vector<std::string>& args) { return empty.locks(args); },
          {"reclaim", "--force", "--guard-age", "1m", "--yes", empty.lock});
      CAPTURE(removed.out);
      CHECK(removed.status == 0);
    }
  }
  empty.apnea_acquires();
  CHECK_FALSE(exists(guard.lock + ".reclaim"));
  guard.apnea_acquires();
}
