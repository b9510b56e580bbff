// The runbook's "Start here" followed on ten real incidents (issue 32): each is staged with
// Apnea's own lock code (the reference, APNEA_REFERENCE = apnea-peer), Apnea's message is
// taken from its refusal and pasted into `apnea-locks explain` on standard input, in a
// directory unrelated to the repository and with another TMPDIR. The first judgement is
// checked, then explain is followed as an operator would: run the next command it prints,
// paste again, until it says nothing the text names needs attention. Apnea must acquire
// afterwards, and no live Apnea's lock may be broken on the way. Skipped, loudly, without
// APNEA_REFERENCE.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apnea_incident.h"
#include "area_builder.h"
#include "process_util.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
namespace json = boost::json;

namespace {

/// Every "key: value" line of explain's text output for `key`, in order.
std::vector<std::string> values(const std::string& out, const std::string& key) {
  std::vector<std::string> found;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(key + ":")) continue;
    std::string value = line.substr(key.size() + 1);
    value.erase(0, value.find_first_not_of(' '));
    found.push_back(value);
  }
  return found;
}

std::string first(const std::string& out, const std::string& key) {
  const auto found = values(out, key);
  return found.empty() ? std::string() : found.front();
}

/// Whether `at` is inside a ' ...' of `text`: a process's command line quoted by a step
/// (" 'node cli.js'"), whose quote opens after a space and closes before a space or the
/// sentence's punctuation; an apostrophe ("lock's") does neither.
bool quoted(const std::string& text, std::size_t at) {
  bool inside = false;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] != '\'') continue;
    if (!inside && (i == 0 || text[i - 1] == ' ')) inside = true;
    else if (inside && (i + 1 == text.size() || std::string_view(" ;),:").find(text[i + 1]) != std::string_view::npos))
      inside = false;
  }
  return inside;
}

/// The first occurrence of `word` in `text` outside quotes.
std::size_t find_unquoted(const std::string& text, const std::string& word) {
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1))
    if (!quoted(text, at)) return at;
  return std::string::npos;
}

/// The command this test's operator runs on a next step, having made the checks the step
/// names (the test knows each incident: the pids it lists as possible owners are not the
/// crashed Apnea, a stopped Apnea is to go on). An apnea-locks command runs to the end of the
/// step; of the hand commands only the harmless ones are taken, with their operand: give
/// the record its mode back, remove a guard no Apnea holds, let a stopped Apnea go on. Never
/// anything inside a quoted command line the step shows.
std::optional<std::string> command_of(const std::string& next) {
  std::optional<std::string> found;
  std::size_t earliest = find_unquoted(next, "apnea-locks ");
  if (earliest != std::string::npos) found = next.substr(earliest);
  for (const std::string prefix : {"chmod 600 -- ", "rmdir -- ", "kill -CONT "}) {
    const std::size_t at = find_unquoted(next, prefix);
    if (at == std::string::npos || at > earliest) continue;
    std::string operand = next.substr(at + prefix.size());
    operand = operand.substr(0, operand.find(' '));
    while (!operand.empty() && std::string_view("):;,.").find(operand.back()) != std::string_view::npos)
      operand.pop_back();
    earliest = at;
    found = prefix + operand;
  }
  return found;
}

/// The words of a command line that holds no quoting (the scratch paths hold none).
std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

/// Where the operator sits: a folder unrelated to any repository, with a TMPDIR of its own.
class Desk {
 public:
  explicit Desk(const BinDir& bin) : bin_(bin) {}

  Finished sh(Incident& incident, const std::string& command) const {
    const std::map<std::string, std::string> env{
        {"TMPDIR", dir_.path()},
        {"HOME", incident.scratch.home},
        {"PATH", bin_.path() + ":" + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin")}};
    Finished done = finish({"sh", "-c", "cd " + shell_quote(dir_.path()) + " && " + command}, env);
    incident.transcript +=
        fmt::format("$ {}\n[exit {}]\n{}{}", command, done.status.value_or(-1), done.out, done.err);
    return done;
  }

  /// `apnea-locks explain [OPTIONS]`, `pasted` on its standard input.
  Finished explain(Incident& incident, const std::string& pasted, const std::string& options = "") const {
    const std::string file = dir_.path() + "/pasted-" + incident.name + ".txt";
    std::ofstream(file) << pasted;
    return sh(incident, "apnea-locks explain " + options + " < " + shell_quote(file));
  }

  /// explain on the incident's message (or `pasted`) as the operator first looks: it must
  /// exit with `status`.
  Finished first_look(Incident& incident, int status, const std::string& pasted = "") const {
    const Finished looked = explain(incident, pasted.empty() ? text(incident.refusal.at("message")) : pasted);
    CHECK_MESSAGE(looked.status == status, incident.name << ": explain exited " << looked.status.value_or(-1)
                                                         << "\n" << incident.transcript);
    return looked;
  }

  /// Runs what a next step says: an apnea-locks reclaim with --yes (no terminal to ask on),
  /// adding the --not-owner words its refusal gives when this machine runs other programs
  /// that could be the writer (PROTOCOL.md section 10, as the runbook's section 4c says).
  Finished run(Incident& incident, const std::string& command) const {
    if (!command.starts_with("apnea-locks reclaim ")) return sh(incident, command);
    std::vector<std::string> args = words_of(command);
    args.erase(args.begin());  // apnea-locks
    args.insert(args.begin() + 1, "--yes");
    return past_possible_owners(
        [&](const std::vector<std::string>& words) {
          std::string line = "apnea-locks";
          for (const std::string& word : words) line += " " + shell_quote(word);
          return sh(incident, line);
        },
        args);
  }

  /// Follows explain as the runbook's "Start here" says: paste, run the next command, paste
  /// again, until nothing the text names needs attention (exit 0).
  void follow(Incident& incident, const std::string& pasted, const std::string& options = "") const {
    for (int round = 0; round < 4; ++round) {
      const Finished explained = explain(incident, pasted, options);
      CAPTURE(incident.transcript);
      REQUIRE(explained.status.has_value());
      if (*explained.status == 0) return;
      REQUIRE_MESSAGE(*explained.status == 1, incident.name << ": explain exited " << *explained.status);
      std::optional<std::string> command;
      for (const std::string& next : values(explained.out, "next"))
        if ((command = command_of(next))) break;
      REQUIRE_MESSAGE(command, incident.name << ": no command to run in explain's next steps");
      // Only this incident's own Apnea is ever continued: a process another test stopped
      // (one that may hold the guard, by its start time) is named, never touched.
      if (command->starts_with("kill -CONT "))
        REQUIRE_MESSAGE((incident.holder && command->substr(11) == std::to_string(incident.holder->pid())),
                        incident.name << ": explain asks to continue a process that is not this incident's "
                                         "Apnea (another test's stopped process?): " << *command);
      const Finished done = run(incident, *command);
      CHECK_MESSAGE(done.status == 0, incident.name << ": '" << *command << "' exited " << done.status.value_or(-1));
    }
    CAPTURE(incident.transcript);
    FAIL(incident.name << ": explain still says something needs attention after four of its commands");
  }

 private:
  const BinDir& bin_;
  TempDir dir_;
};

std::string message_of(const Incident& incident) { return text(incident.refusal.at("message")); }

/// The lock path Apnea uses for the incident's target.
std::string lock_of(Incident& incident) {
  return text(last_json(incident.apnea({"path", incident.kind, incident.target}).out).at("lock_path"));
}

/// Waits until `pid` is in state `state` (/proc/PID/stat), for a signal's effect.
bool reaches_state(pid_t pid, char state) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string stat = read_bytes("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == state) return true;
    std::this_thread::yield();
  }
  return false;
}

/// A ticket around Apnea's message: greeting, the message quoted and re-wrapped at 70
/// columns, the sentence's '.' after it.
std::string ticket_of(const std::string& message) {
  std::string ticket = "Hi support,\n\nsince this morning every run fails with:\n\n";
  std::string line = ">";
  for (const std::string& word : words_of(message)) {
    if (line.size() > 1 && line.size() + 1 + word.size() > 70) {
      ticket += line + "\n";
      line = ">";
    }
    line += " " + word;
  }
  return ticket + line + ".\n\nCan you have a look?\n";
}

/// Copies the reference's installed packages where another account can read them.
std::optional<std::string> shared_peer_cache(const std::string& into) {
  std::error_code error;
  std::filesystem::create_directories(into, error);
  for (const auto& entry : std::filesystem::directory_iterator(peer_cache(), error))
    if (std::filesystem::exists(entry.path() / ".ready"))
      std::filesystem::copy(entry.path(), into + "/" + entry.path().filename().string(),
                            std::filesystem::copy_options::recursive, error);
  if (error) return std::nullopt;
  if (finish({"chmod", "-R", "a+rX", into}).status != 0) return std::nullopt;
  return into;
}

}  // namespace

TEST_CASE("Start here: each incident's message, pasted into explain elsewhere, leads Apnea back") {
  if (peer().empty()) {
    MESSAGE("SKIPPED: APNEA_REFERENCE is not set (the ten incidents are not staged)");
    return;
  }
  BinDir bin;
  Desk desk(bin);

  // Old and fresh guards: a reclaim guard left beside a dead owner's lock past Apnea's
  // grace. Explained now it is fresh; explained and followed a minute later it is old.
  Incident guard("guard", bin);
  guard.crash();
  age_path(lock_of(guard), 120);  // past the grace: Apnea tries to reclaim and meets the guard
  make_dir(lock_of(guard) + ".reclaim");
  guard.refused("stale");
  {
    const Finished fresh = desk.first_look(guard, 1);
    CAPTURE(guard.transcript);
    CHECK(fresh.out.find("Apnea's error: guarded") != std::string::npos);
    CHECK(values(fresh.out, "path") == std::vector<std::string>{guard.lock, guard.lock + ".reclaim"});
    CHECK(first(fresh.out, "state") == "stale (pid-dead; certain proof)");
    CHECK(values(fresh.out, "attention") == std::vector<std::string>{"yes", "yes"});  // the guard too
    CHECK(exists(guard.lock + ".reclaim"));
  }

  {  // 1. A crashed Apnea's lock, inside the 60 s grace.
    Incident i("dead-lock", bin);
    i.crash();
    i.refused("stale");
    const Finished first_look = desk.first_look(i, 1);
    CAPTURE(i.transcript);
    CHECK(first_look.out.find("Apnea's error: stale") != std::string::npos);
    CHECK(first(first_look.out, "state") == "stale (pid-dead; certain proof)");
    CHECK(first(first_look.out, "next").starts_with("apnea-locks reclaim "));
    desk.follow(i, message_of(i));
    CHECK_FALSE(exists(i.lock));
    i.apnea_acquires();
  }
  {  // 2. The global setup lock of a crashed Apnea.
    Incident i("global-lock", bin);
    i.kind = "global";
    i.target = i.scratch.home;
    i.crash();
    i.refused("stale");
    CHECK(i.lock.find("/global-setup-") != std::string::npos);
    const Finished first_look = desk.first_look(i, 1);
    CAPTURE(i.transcript);
    CHECK(first(first_look.out, "entry") == "lock (global-setup)");
    CHECK(first(first_look.out, "state") == "stale (pid-dead; certain proof)");
    desk.follow(i, message_of(i));
    i.apnea_acquires();
  }
  {  // 3. owner.json chmod'ed 0644 under a live Apnea: the mode is repaired, nothing removed.
    Incident i("live-malformed", bin);
    i.hold();
    REQUIRE(::chmod((lock_of(i) + "/owner.json").c_str(), 0644) == 0);
    i.refused("malformed");
    const std::string before = read_bytes(i.lock + "/owner.json");
    const Finished first_look = desk.first_look(i, 1);
    CAPTURE(i.transcript);
    CHECK(first(first_look.out, "state") == "live-malformed (owner-mode-0644)");
    CHECK(command_of(first(first_look.out, "next")) == "chmod 600 -- " + i.lock + "/owner.json");
    desk.follow(i, message_of(i));
    CHECK(read_bytes(i.lock + "/owner.json") == before);
    CHECK(text(last_json(i.apnea({"classify", i.lock}).out).at("verdict")) == "live");
    i.release_holder();
    i.apnea_acquires();
  }
  {  // 4. A damaged record (an empty token) of a crashed Apnea: malformed, its pid dead.
    Incident i("damaged-record", bin);
    i.crash();
    const std::string record = lock_of(i) + "/owner.json";
    const json::object owner = json::parse(read_bytes(record)).as_object();
    const int fd = ::open(record.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW);
    REQUIRE(fd >= 0);
    const std::string damaged = fmt::format("{{\"pid\":{},\"token\":\"\"}}", owner.at("pid").as_int64());
    REQUIRE(::write(fd, damaged.data(), damaged.size()) == static_cast<ssize_t>(damaged.size()));
    ::close(fd);
    i.refused("malformed");
    const Finished first_look = desk.first_look(i, 1);
    CAPTURE(i.transcript);
    CHECK(first_look.out.find("Apnea's error: malformed") != std::string::npos);
    CHECK(first(first_look.out, "state").starts_with("malformed ("));
    // The --force command, or, when a process that could be the writer runs here, --force's
    // refusal with the command that says it is not this lock's Apnea.
    CHECK(command_of(first(first_look.out, "next")).value_or("").starts_with("apnea-locks reclaim --force "));
    desk.follow(i, message_of(i));
    i.apnea_acquires();
  }
  {  // 5. A live Apnea: explain says so, and nothing may remove its lock.
    Incident i("live-apnea", bin);
    i.hold();
    i.refused("live");
    const std::string before = read_bytes(i.lock + "/owner.json");
    const Finished first_look = desk.first_look(i, 0);
    CAPTURE(i.transcript);
    CHECK(first(first_look.out, "state") == "live (pid-alive)");
    CHECK(first(first_look.out, "attention") == "no");
    CHECK(first(first_look.out, "next").find(std::to_string(i.holder->pid())) != std::string::npos);
    desk.follow(i, message_of(i));
    CHECK(read_bytes(i.lock + "/owner.json") == before);
    i.release_holder();
    i.apnea_acquires();
  }
  {  // 7. Apnea blocked while the operator stands in a subdirectory of the repository.
    Incident i("subdirectory", bin);
    make_dir(i.scratch.repo + "/.git");
    make_dir(i.scratch.repo + "/src");
    i.cwd = i.scratch.repo + "/src";
    i.crash();
    i.refused("stale");
    const Finished first_look = desk.first_look(i, 1);
    CAPTURE(i.transcript);
    CHECK(first(first_look.out, "path") == i.lock);
    desk.follow(i, message_of(i));
    i.apnea_acquires();
  }
  {  // 8. A live Apnea stopped (SIGSTOP, Ctrl-Z): it needs attention; kill -CONT lets it go on.
    Incident i("stopped-owner", bin);
    i.hold();
    i.holder->signal(SIGSTOP);
    REQUIRE(reaches_state(i.holder->pid(), 'T'));
    i.refused("live");
    const std::string before = read_bytes(i.lock + "/owner.json");
    const Finished first_look = desk.first_look(i, 1);
    CAPTURE(i.transcript);
    CHECK(first(first_look.out, "state") == "live (pid-alive)");
    CHECK(first(first_look.out, "attention") == "yes");
    const std::string pid = std::to_string(i.holder->pid());
    CHECK(command_of(first(first_look.out, "next")) == "kill -CONT " + pid);
    desk.follow(i, message_of(i));
    CHECK(read_bytes(i.lock + "/owner.json") == before);
    i.release_holder();
    i.apnea_acquires();
  }
  {  // 9. Root helping another account: the lock is nobody's, explain judges it as nobody.
    constexpr uid_t nobody = 65534;
    Incident i("other-account", bin);
    const std::string tmp = i.scratch.root + "/tmp";
    std::optional<std::string> cache;
    if (::getuid() == 0) {
      REQUIRE(::chmod(i.scratch.root.c_str(), 0755) == 0);
      std::filesystem::create_directory(tmp);
      REQUIRE(::chmod(tmp.c_str(), 01777) == 0);
      for (const std::string& path : {i.scratch.home, i.scratch.repo})
        REQUIRE(::chown(path.c_str(), nobody, nobody) == 0);
      cache = shared_peer_cache(i.scratch.root + "/peer-cache");
    }
    i.as = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
    i.env["TMPDIR"] = tmp;
    if (cache) i.env["APNEA_PEER_CACHE"] = *cache;
    if (!cache || i.apnea({"path", "repo", i.target}).status != 0) {
      MESSAGE("SKIPPED: the other-account incident needs root and a reference another account can run");
    } else {
      i.crash();
      i.refused("stale");
      CHECK(i.lock.find("/apnea-65534/") != std::string::npos);
      const Finished first_look = desk.first_look(i, 1);
      CAPTURE(i.transcript);
      CHECK(first_look.out.find("Judged as: nobody") != std::string::npos);
      const std::string next = first(first_look.out, "next");
      CHECK(next.starts_with("apnea-locks reclaim --user nobody "));
      CHECK(next.ends_with(" " + i.lock));
      desk.follow(i, message_of(i));
      i.apnea_acquires();
    }
  }
  {  // 10. Only the message, in a ticket: quoted, re-wrapped, the sentence's '.' after it.
    Incident i("ticket", bin);
    i.crash();
    i.refused("stale");
    const std::string ticket = ticket_of(message_of(i));
    const Finished first_look = desk.first_look(i, 1, ticket);
    CAPTURE(ticket);
    CAPTURE(i.transcript);
    CHECK(first(first_look.out, "path") == i.lock);
    CHECK(first(first_look.out, "state") == "stale (pid-dead; certain proof)");
    desk.follow(i, ticket);
    i.apnea_acquires();
  }

  // 6. The guard, a minute after it was made: old for --guard-age 1m, as the runbook's
  // section 5 uses (the wait is that threshold, not a synchronisation). explain's next step
  // is then reclaim --force with that age; where the clock is void no age counts, and it
  // says to check by hand and rmdir it. Either way following explain frees Apnea.
  std::this_thread::sleep_until(guard.staged + 62s);
  {
    const Finished old = desk.sh(guard, "apnea-locks explain --guard-age 1m " + shell_quote(message_of(guard)));
    CAPTURE(guard.transcript);
    CHECK(old.status == 1);
    if (!machine_clock_void(guard.lock.substr(0, guard.lock.rfind('/')))) {
      const std::string next = first(old.out, "next");
      CHECK(next.starts_with("apnea-locks reclaim --force "));
      CHECK(next.find(" --guard-age 1m ") != std::string::npos);
    }
  }
  desk.follow(guard, message_of(guard), "--guard-age 1m");
  CHECK_FALSE(exists(guard.lock + ".reclaim"));
  guard.apnea_acquires();
}
