// The built `apnea-locks status`, `inspect` and `path` against real lock areas: every state
// and reason built as real directories, checked in the table, the JSON and the exit status.
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <cerrno>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/names.h"
#include "area_builder.h"
#include "detail/probe.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
using apnea_locks::detail::pid_max_limit;
namespace json = boost::json;

namespace {

/// A value as raw output escapes it (space and backslash as \xNN).
std::string raw_escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == ' ') out += "\\x20";
    else if (c == '\\') out += "\\x5c";
    else out += c;
  }
  return out;
}

std::string bin() { return test_env("APNEA_LOCKS_BIN"); }

CommandResult tool(std::vector<std::string> args, const std::string& env_prefix = "") {
  args.insert(args.begin(), bin());
  return run_command(args, env_prefix);
}

/// Runs with standard error folded into the captured output.
CommandResult tool_with_stderr(std::vector<std::string> args, const std::string& env_prefix = "") {
  return tool(std::move(args), "exec 2>&1; " + env_prefix);
}

CommandResult status(const std::string& area, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"status", "--lock-dir", area};
  args.insert(args.end(), more.begin(), more.end());
  return tool(args);
}

json::object status_json(const std::string& area, std::vector<std::string> more = {}) {
  more.push_back("--json");
  CommandResult result = status(area, more);
  json::error_code error;
  json::value doc = json::parse(result.out, error);
  REQUIRE_MESSAGE(!error, result.out);
  return doc.as_object();
}

std::map<std::string, json::object> entries_by_name(const json::object& doc) {
  std::map<std::string, json::object> out;
  for (const auto& entry : doc.at("entries").as_array()) {
    const auto& object = entry.as_object();
    out[std::string(object.at("name").as_string())] = object;
  }
  return out;
}

std::string text(const json::value& value) {
  if (value.is_null()) return "null";
  if (value.is_string()) return std::string(value.as_string());
  return json::serialize(value);
}

std::int64_t boot_seconds() {
  std::ifstream in("/proc/stat");
  std::string word;
  while (in >> word)
    if (word == "btime") {
      std::int64_t value = 0;
      in >> value;
      return value;
    }
  return 0;
}

std::int64_t pid_max() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  std::int64_t value = 0;
  in >> value;
  return value;
}


/// What one entry of the zoo must show.
struct Expect {
  std::string name;
  std::string state;
  std::string reason;
  std::string apnea;  ///< "null" for entries that are not locks
  bool attention;
  bool self_heals = false;
  std::string fix_prefix;  ///< "" for no fix
};

/// An area holding one entry for every state and reason status can show with real processes.
struct Zoo {
  TempDir root;
  std::string area = root / "locks";
  std::vector<Expect> expect;
  Zombie zombie;
  Sleeper fresh;                 // started now: reuse of a pid written earlier
  std::optional<Sleeper> other;  // another uid (root only)
  WaitingThread thread;

  std::string lock(const std::string& seed, std::string_view owner, mode_t dir_mode = 0700,
                   mode_t file_mode = 0600, LockKind kind = LockKind::repository) {
    const std::string name = fake_lock_name(seed, kind);
    make_entry(area, name, owner, dir_mode, file_mode);
    return name;
  }

  Zoo() {
    make_dir(area);
    const std::string reclaim = "apnea-locks reclaim --lock-dir " + area + " ";
    const std::string force = "apnea-locks reclaim --force --lock-dir " + area + " ";
    const long long me = ::getpid();
    const long long dead = dead_pid();
    // Certain proofs need a host that shows every process (PROTOCOL.md section 9); elsewhere
    // they are evidence, which only --force acts on.
    const HostFacts host = gather_host(real_system(), area);
    if (!host.can_be_certain()) MESSAGE("no certain proofs on this host: " << host.why_not_certain());
    const std::string certain = host.can_be_certain() ? reclaim : force;

    expect.push_back({lock("live", owner_json(me)), "live", "pid-alive", "live", false, false, ""});
    expect.push_back({lock("dead", owner_json(dead)), "stale", "pid-dead", "stale", true, false, certain});
    const std::string healing = lock("healing", owner_json(dead));
    age_path(area + "/" + healing, 120);
    expect.push_back({healing, "stale", "pid-dead", "stale", false, true, certain});
    const std::string global = lock("global", owner_json(dead), 0700, 0600, LockKind::global_setup);
    age_path(area + "/" + global, 120);  // Apnea never reclaims a global setup lock
    expect.push_back({global, "stale", "pid-dead", "stale", true, false, certain});
    expect.push_back({lock("huge", owner_json(2147483648LL)), "stale", "pid-out-of-range", "live", true, false, certain});
    expect.push_back({lock("limit", owner_json(pid_max_limit)), "stale", "pid-out-of-range", "stale", true, false, certain});
    // Above the current pid_max but below PID_MAX_LIMIT: pid_max may have been lowered while
    // it ran, so only kill's ESRCH proves it dead.
    expect.push_back({lock("max", owner_json(pid_max() + 1)), "stale",
                      pid_max() + 1 >= pid_max_limit ? "pid-out-of-range" : "pid-dead", "stale", true, false, certain});
    expect.push_back({lock("zombie", owner_json(zombie.pid())), "stale", "zombie", "live", true, false, certain});
    expect.push_back({lock("thread", owner_json(thread.tid())), "stale", "pid-is-thread", "live", true, false, certain});

    const std::int64_t now = static_cast<std::int64_t>(::time(nullptr));
    const std::int64_t since_boot = now - boot_seconds();
    if (since_boot > 10) {
      const std::string reused = lock("reused", owner_json(fresh.pid()));
      age_path(area + "/" + reused + "/owner.json", static_cast<double>(std::min<std::int64_t>(60, since_boot / 2)));
      if (host.clock_void()) {
        // btime and the birth of /dev disagree: the clock stepped, its evidence is void.
        MESSAGE("the clock stepped since boot: pid-reused does not count");
        expect.push_back({reused, "live", "clock-void", "live", false, false, ""});
      } else {
        expect.push_back({reused, "stale", "pid-reused", "live", true, false, force});
      }
    } else {
      MESSAGE("booted less than 10 s ago: no pid-reused case");
    }
    if (::getuid() == 0) {
      other.emplace(65534);
      REQUIRE(other->ok());
      // The area is root's (we run as root): a root writer may have dropped privileges
      // since, so another uid proves nothing.
      expect.push_back({lock("other", owner_json(other->pid())), "live", "pid-alive", "live", false, false, ""});
    } else {
      MESSAGE("not root: no pid-other-uid case");
    }

    // Malformed: every kind of rejected owner record. One naming a pid that may be alive is
    // live-malformed and no flag removes it; one naming no pid is removed only by --force and
    // only once older than --guard-age by ctime (these were just made: no fix yet); one that
    // cannot be read may name a live pid, so it gets no fix either.
    auto malformed = [&](const std::string& name, const std::string& reason) {
      expect.push_back({name, "malformed", reason, "malformed", true, false, ""});
    };
    auto live_malformed = [&](const std::string& name, const std::string& reason) {
      expect.push_back({name, "live-malformed", reason, "malformed", true, false, ""});
    };
    live_malformed(lock("mode", owner_json(me), 0700, 0644), "owner-mode-0644");
    live_malformed(lock("dirmode", owner_json(me), 0755), "lock-mode-0755");
    live_malformed(lock("syntax", "{\"pid\":1,"), "json-syntax");
    live_malformed(lock("notoken", "{\"pid\":1}"), "token-missing");
    // -0 names no pid however it is read (each run of digits too: -1 would name pid 1).
    malformed(lock("badpid", "{\"pid\":-0,\"token\":\"t\"}"), "pid-not-positive-integer");
    live_malformed(lock("toolarge", std::string(5000, ' ') + owner_json(me)), "owner-too-large");
    // Its pid is dead, but --force removes a malformed lock only while no possible owner runs
    // (PROTOCOL.md section 10), and this test program is one: no command removes it unasked.
    expect.push_back({lock("deadmode", owner_json(dead), 0700, 0644), "malformed", "owner-mode-0644",
                      "malformed", true, false, ""});
    malformed(lock("empty", ""), "owner-empty");
    {
      const std::string name = fake_lock_name("symlinked-owner");
      make_dir(area + "/" + name);
      write_file(root / "real-owner.json", owner_json(me));
      REQUIRE(::symlink((root / "real-owner.json").c_str(), (area + "/" + name + "/owner.json").c_str()) == 0);
      malformed(name, "owner-symlink");
    }
    {
      const std::string name = fake_lock_name("fifo");
      make_dir(area + "/" + name);
      REQUIRE(::mkfifo((area + "/" + name + "/owner.json").c_str(), 0600) == 0);
      malformed(name, "owner-fifo");
    }
    {
      const std::string name = fake_lock_name("nofile");
      make_dir(area + "/" + name);
      malformed(name, "owner-missing");
    }
    {
      const std::string name = fake_lock_name("symlinked-lock");
      make_dir(root / "elsewhere");
      write_file(root / "elsewhere/owner.json", owner_json(me));
      REQUIRE(::symlink((root / "elsewhere").c_str(), (area + "/" + name).c_str()) == 0);
      malformed(name, "lock-symlink");
    }

    // Candidates and tombstones: in flight while their writer runs, else debris; a certainly
    // dead writer's is removed by a plain reclaim.
    const std::string base = fake_lock_name("transient");
    make_entry(area, base + ".candidate.live", owner_json(me));
    expect.push_back({base + ".candidate.live", "in-flight", "pid-alive", "null", false, false, ""});
    make_entry(area, base + ".candidate.dead", owner_json(dead));
    expect.push_back({base + ".candidate.dead", "debris", "pid-dead", "null", true, false, certain});
    make_entry(area, base + ".tombstone.dead", owner_json(dead));
    expect.push_back({base + ".tombstone.dead", "debris", "pid-dead", "null", true, false, certain});
    // Naming no pid and changed just now (ctime: an mtime set back does not count).
    make_dir(area + "/" + base + ".tombstone.emptied");
    age_path(area + "/" + base + ".tombstone.emptied", 600);
    expect.push_back({base + ".tombstone.emptied", "in-flight", "owner-missing", "null", false, false, ""});

    // Reclaim guards: recent ones are in flight, old ones are left over.
    make_dir(area + "/" + fake_lock_name("guarded") + ".reclaim");
    expect.push_back({fake_lock_name("guarded") + ".reclaim", "in-flight", "guard-recent", "null", false, false, ""});
    make_dir(area + "/" + fake_lock_name("abandoned") + ".reclaim");
    age_path(area + "/" + fake_lock_name("abandoned") + ".reclaim", 600);  // past the 5 min default
    // Its fix is reclaim --force, unless the clock is void: then no age is old enough.
    expect.push_back({fake_lock_name("abandoned") + ".reclaim", "leftover", "guard-abandoned", "null", true, false,
                      host.clock_void() ? "" : force});

    write_file(area + "/notes.txt", "hello");
    expect.push_back({"notes.txt", "unknown", "unrecognised-name", "null", false, false, ""});
  }
};

}  // namespace

TEST_CASE("status: every state and reason, in JSON") {
  Zoo zoo;
  const json::object doc = status_json(zoo.area);
  CHECK(text(doc.at("lock_dir")) == zoo.area);
  CHECK(text(doc.at("area").at("check")) == "ok");
  CHECK(doc.at("error").is_null());
  const auto entries = entries_by_name(doc);
  CHECK(entries.size() == zoo.expect.size());
  for (const Expect& e : zoo.expect) {
    CAPTURE(e.name);
    REQUIRE(entries.count(e.name) == 1);
    const json::object& entry = entries.at(e.name);
    CHECK(text(entry.at("state")) == e.state);
    CHECK(text(entry.at("reason")) == e.reason);
    CHECK(text(entry.at("apnea_verdict")) == e.apnea);
    CHECK(entry.at("needs_attention").as_bool() == e.attention);
    CHECK(entry.at("apnea_self_heals").as_bool() == e.self_heals);
    CHECK(text(entry.at("path")) == zoo.area + "/" + e.name);
    if (e.fix_prefix.empty()) {
      CHECK(entry.at("fix").is_null());
    } else {
      CHECK(text(entry.at("fix")) == e.fix_prefix + shell_word(zoo.area + "/" + e.name));
    }
  }
  const auto& summary = doc.at("summary").as_object();
  std::int64_t attention = 0;
  for (const auto& e : zoo.expect) attention += e.attention ? 1 : 0;
  CHECK(summary.at("entries").as_int64() == static_cast<std::int64_t>(zoo.expect.size()));
  CHECK(summary.at("scanned").as_int64() == static_cast<std::int64_t>(zoo.expect.size()));
  CHECK(summary.at("needs_attention").as_int64() == attention);
  CHECK(summary.at("states").at("malformed").as_int64() == 7);
  CHECK(summary.at("states").at("live-malformed").as_int64() == 5);
  CHECK(summary.at("roles").at("reclaim-guard").as_int64() == 2);

  // Live owners show their process.
  const json::object& live = entries.at(zoo.expect.front().name);
  CHECK(live.at("pid").as_int64() == ::getpid());
  CHECK(text(live.at("token")) == test_token);
  CHECK(text(live.at("process").at("signal")) == "ok");
  CHECK(live.at("process").at("exists").as_bool());
  CHECK(text(live.at("process").at("command")).find(program_invocation_short_name) != std::string::npos);
  CHECK(text(live.at("kind")) == "repository");
  CHECK(text(live.at("guard")) == "none");
}

TEST_CASE("status: the table puts what needs attention first and the exit status says so") {
  Zoo zoo;
  CommandResult result = status(zoo.area);
  CHECK(result.status == 1);
  std::istringstream lines(result.out);
  std::string header;
  std::getline(lines, header);
  CHECK(header.starts_with("KIND"));
  for (const char* column : {"KEY", "ROLE", "STATE", "REASON", "APNEA", "PID", "TOKEN", "AGE", "COMMAND",
                             "STARTED", "LABEL", "FIX"})
    CHECK(header.find(column) != std::string::npos);
  CHECK(result.out.find("\x1b[") == std::string::npos);  // not a terminal: no colour

  // The rows end at the blank line before the footer.
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line) && !line.empty();) rows.push_back(line);
  REQUIRE(rows.size() == zoo.expect.size());
  bool calm = false;
  for (const std::string& row : rows) {
    // Find the entry of this row by its short key and role, and check its state and reason.
    const Expect* match = nullptr;
    for (const Expect& e : zoo.expect) {
      const EntryName parsed = parse_entry_name(e.name);
      const std::string key = parsed.key;  // not a terminal: the whole key
      if (parsed.role == EntryRole::unknown ? row.starts_with("-") && row.find("unknown") != std::string::npos
                                            : row.find(" " + key + " ") != std::string::npos &&
                                                  row.find(" " + std::string(role_name(parsed.role)) + " ") != std::string::npos &&
                                                  row.find(" " + e.reason + " ") != std::string::npos)
        match = &e;
    }
    REQUIRE_MESSAGE(match != nullptr, row);
    CHECK(row.find(" " + match->state + " ") != std::string::npos);
    if (!match->attention) calm = true;
    else CHECK_MESSAGE(!calm, "attention row after a calm one: " << row);
  }
}

TEST_CASE("status: a clean area exits 0, Apnea's missing one lists nothing, a missing --lock-dir is an error") {
  TempDir root;
  const std::string area = root / "locks";
  // Apnea's own area before any lock was taken: nothing to list.
  CommandResult missing = tool({"status", "--json"}, "TMPDIR=" + shell_quote(root.path()) + " ");
  CHECK(missing.status == 0);
  json::object doc = json::parse(missing.out).as_object();
  CHECK(text(doc.at("area").at("check")) == "missing");
  CHECK(doc.at("entries").as_array().empty());

  // A directory the user named is a promise: its absence is an error naming it.
  CommandResult typo = status(area, {"--json"});
  CHECK(typo.status == 3);
  json::object error = json::parse(typo.out).as_object();
  CHECK(text(error.at("area").at("check")) == "unreadable");
  CHECK(text(error.at("error")).find(area + ": ENOENT") != std::string::npos);

  make_dir(area);
  make_entry(area, fake_lock_name("mine"), owner_json(::getpid()));
  make_entry(area, fake_lock_name("mine") + ".candidate.x", owner_json(::getpid()));
  CommandResult clean = status(area);
  CHECK(clean.status == 0);
  CHECK(clean.out.find("live") != std::string::npos);
  CHECK(clean.out.find("in-flight") != std::string::npos);
}

TEST_CASE("status: an unsafe lock area is one prominent line and exit 3") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area, 0755);
  make_entry(area, fake_lock_name("x"), owner_json(::getpid()));
  CommandResult open_mode = tool_with_stderr({"status", "--lock-dir", area});
  CHECK(open_mode.status == 3);
  CHECK(open_mode.out == "apnea-locks status: unsafe Apnea lock directory: " + area +
                             ": mode 0755 has group/other bits\n");

  const std::string link = root / "link";
  REQUIRE(::chmod(area.c_str(), 0700) == 0);
  REQUIRE(::symlink(area.c_str(), link.c_str()) == 0);
  CommandResult symlinked = tool_with_stderr({"status", "--lock-dir", link});
  CHECK(symlinked.status == 3);
  CHECK(symlinked.out.find(link + ": is a symlink") != std::string::npos);

  CommandResult as_json = status(link, {"-J"});
  CHECK(as_json.status == 3);
  json::object doc = json::parse(as_json.out).as_object();
  CHECK(text(doc.at("area").at("check")) == "symlink");
  CHECK(text(doc.at("area").at("path")) == link);
  CHECK(doc.at("entries").as_array().empty());
  CHECK(text(doc.at("error")).find("symlink") != std::string::npos);

  // The default area's parent is checked too.
  TempDir tmp;
  const std::string account = tmp / ("apnea-" + std::to_string(::getuid()));
  make_dir(account, 0777);
  make_dir(account + "/operation-locks");
  CommandResult parent = tool_with_stderr({"status"}, "TMPDIR=" + shell_quote(tmp.path()) + " ");
  CHECK(parent.status == 3);
  CHECK(parent.out == "apnea-locks status: unsafe Apnea lock directory: " + account +
                          ": mode 0777 has group/other bits\n");
}

TEST_CASE("status: usage errors exit 2 with util-linux's two lines") {
  TempDir root;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"status", "--bogus"},
           {"status", "--json", "--raw"},
           {"status", "-o", "kind,nonsense"},
           {"status", "--state", "dead"},
           {"status", "--kind", "lockish"},
           {"status", "--tolerance", "-1"},
           {"status", "--tolerance", "soon"},
           {"status", "--tolerance", "1.5"},
           {"status", "--guard-age", "30s"},
           {"status", "--pid", "0"},
           {"status", "extra"}}) {
    CAPTURE(args.back());
    CommandResult result = tool_with_stderr(args);
    CHECK(result.status == 2);
    CHECK(result.out.starts_with("apnea-locks status: "));
    CHECK(std::count(result.out.begin(), result.out.end(), '\n') == 2);
    CHECK(result.out.ends_with("\nTry 'apnea-locks status --help' for more information.\n"));
  }
  CHECK(tool({"status", "--help"}).status == 0);
}

TEST_CASE("status: columns, raw lines, headings and truncation") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  const std::string name = fake_lock_name("one");
  make_entry(area, name, owner_json(::getpid()));
  const std::string key = parse_entry_name(name).key;

  CommandResult chosen = status(area, {"-o", "name,state,pid", "-n"});
  CHECK(chosen.out == name + " live " + std::to_string(::getpid()) + "\n");

  CommandResult extended = status(area, {"-o", "+path,attention"});
  CHECK(extended.out.find("PATH") != std::string::npos);
  CHECK(extended.out.find(area + "/" + name) != std::string::npos);

  // Not a terminal: nothing is shortened (tests/terminal_test.cc shows the terminal).
  CommandResult table = status(area, {"-n"});
  CHECK(table.out.find(key + " ") != std::string::npos);
  CHECK(table.out.find(std::string(test_token)) != std::string::npos);
  CommandResult full = status(area, {"-n", "--notruncate"});
  CHECK(full.out.find(key) != std::string::npos);
  CHECK(full.out.find(std::string(test_token)) != std::string::npos);

  make_dir(root / "my repo");
  make_dir(root / "my repo/.apnea");
  const std::string spaced = *real_system().realpath(root / "my repo");
  make_entry(area, lock_name(LockKind::repository, lock_key(LockKind::repository, spaced)), owner_json(::getpid()));
  CommandResult raw = status(area, {"-r", "-o", "role,state,label,fix", "--scan", root.path()});
  std::istringstream lines(raw.out);
  std::string header;
  std::getline(lines, header);
  CHECK(header == "ROLE STATE LABEL FIX");
  std::vector<std::string> rows;
  for (std::string row; std::getline(lines, row);) rows.push_back(row);
  std::sort(rows.begin(), rows.end());
  // Spaces inside a value are escaped, so every line has exactly four fields; an empty one
  // is nothing, as in lslocks --raw.
  CHECK(rows == std::vector<std::string>{"lock live  ", "lock live " + raw_escaped(spaced) + " "});
}

TEST_CASE("status: lslocks' habits: -u is --notruncate, -H --list-columns, -p PID the entries naming PID") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  const std::string mine = fake_lock_name("mine");
  const std::string dead = fake_lock_name("dead");
  const std::string damaged = fake_lock_name("damaged");
  make_entry(area, mine, owner_json(::getpid()));
  const pid_t gone = dead_pid();
  make_entry(area, dead, owner_json(gone));
  // A malformed record (owner.json 0644) still names this process's pid.
  make_entry(area, damaged, owner_json(::getpid()), 0700, 0644);
  // A record that cannot be read may name any pid; one truncated inside its pid's digits
  // names every pid they begin (`{"pid":2050` is 20506 too): both match any -p they may name.
  const std::string unreadable = fake_lock_name("fifo");
  make_dir(area + "/" + unreadable);
  REQUIRE(::mkfifo((area + "/" + unreadable + "/owner.json").c_str(), 0600) == 0);
  const std::string truncated = fake_lock_name("truncated");
  make_entry(area, truncated, "{\"pid\":2050");

  const CommandResult columns = tool({"status", "-H"});
  CHECK(columns.status == 0);
  CHECK(columns.out.find("next-step") != std::string::npos);
  CHECK(columns.out == tool({"status", "--list-columns"}).out);

  // Off a terminal nothing is shortened anyway (tests/terminal_test.cc shows -u there).
  const CommandResult whole = status(area, {"-u", "-n", "-o", "name,state,pid"});
  CHECK((whole.status == 0 || whole.status == 1));
  CHECK(whole.out == status(area, {"--notruncate", "-n", "-o", "name,state,pid"}).out);

  auto names = [&](std::vector<std::string> more) {
    more.insert(more.end(), {"-n", "-o", "name"});
    std::istringstream lines(status(area, more).out);
    std::set<std::string> out;
    for (std::string line; std::getline(lines, line);) out.insert(line);
    return out;
  };
  const std::string self = std::to_string(::getpid());
  const bool self_truncated = self.starts_with("2050");
  auto with = [&](std::set<std::string> named, bool truncated_too) {
    named.insert(unreadable);
    if (truncated_too) named.insert(truncated);
    return named;
  };
  CHECK(names({"-p", self}) == with({mine, damaged}, self_truncated));
  CHECK(names({"--pid", std::to_string(gone)}) == with({dead}, std::to_string(gone).starts_with("2050")));
  CHECK(names({"--pid=" + std::to_string(gone), "--state", "live"}).empty());
  CHECK(names({"-p", "2147483647"}) == with({}, false));
  CHECK(names({"-p", "20506"}) == with({}, true));
  CHECK(names({"-p", "2050"}) == with({}, true));
  CHECK(names({"-p", "2051"}) == with({}, false));
  // The filter applies to the JSON and to the exit status too.
  const auto entries = entries_by_name(status_json(area, {"-p", self}));
  CHECK(entries.size() == (self_truncated ? 4 : 3));
  CHECK(entries.count(damaged) == 1);
  CHECK(status(area, {"-p", "1"}).status == 1);  // the unreadable record needs attention

  for (const char* bad : {"0", "-1", "x", "2147483648", "1.0", " 7", "+7", "99999999999999999999999"}) {
    CAPTURE(bad);
    const CommandResult refused = tool_with_stderr({"status", "--lock-dir", area, "-p", bad});
    CHECK(refused.status == 2);
    CHECK(refused.out == "apnea-locks status: --pid '" + std::string(bad) +
                             "': must be a whole number from 1 to 2147483647\n"
                             "Try 'apnea-locks status --help' for more information.\n");
  }
  CHECK(tool_with_stderr({"status", "--lock-dir", area, "-p", ""}).status == 2);
}

TEST_CASE("status: filters and labels") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  make_dir(root / "work");
  make_dir(root / "work/app");
  make_dir(root / "work/app/.apnea");
  make_dir(root / "work/free");
  const std::string app = *real_system().realpath(root / "work/app");
  const std::string app_lock = lock_name(LockKind::repository, lock_key(LockKind::repository, app));
  make_entry(area, app_lock, owner_json(dead_pid()));
  make_entry(area, fake_lock_name("g", LockKind::global_setup), owner_json(::getpid()));
  make_entry(area, fake_lock_name("other"), owner_json(::getpid()));

  auto names = [](const json::object& doc) {
    std::vector<std::string> out;
    for (const auto& [name, entry] : entries_by_name(doc)) out.push_back(name);
    return out;
  };
  CHECK(names(status_json(area, {"--state", "stale"})) == std::vector<std::string>{app_lock});
  CHECK(names(status_json(area, {"--kind", "global-setup"})) ==
        std::vector<std::string>{fake_lock_name("g", LockKind::global_setup)});
  CHECK(names(status_json(area, {"--state", "live,stale"})).size() == 3);

  // --scan labels every repository under a folder.
  auto scanned = entries_by_name(status_json(area, {"--scan", root / "work"}));
  CHECK(text(scanned.at(app_lock).at("label")) == app);
  CHECK(text(scanned.at(app_lock).at("fix")) ==
        "apnea-locks reclaim --lock-dir " + area + " --repo " + shell_word(app));
  CHECK(scanned.at(fake_lock_name("other")).at("label").is_null());
  CHECK(names(status_json(area, {"--scan", root / "work", "--only-labelled"})) == std::vector<std::string>{app_lock});
  CHECK(names(status_json(area, {"--scan", root / "work", "--scan-depth", "0"})).size() == 3);
  CHECK(entries_by_name(status_json(area, {"--scan", root / "work", "--scan-depth", "0"})).at(app_lock).at("label").is_null());

  // --repo labels and keeps only that repository's entries; a repository without a lock is free.
  const json::object repo_doc = status_json(area, {"--repo", root / "work/app", "--repo", root / "work/free"});
  auto repo = entries_by_name(repo_doc);
  REQUIRE(repo.size() == 2);
  CHECK(text(repo.at(app_lock).at("label")) == app);
  const std::string free_name =
      lock_name(LockKind::repository, lock_key(LockKind::repository, *real_system().realpath(root / "work/free")));
  CHECK(text(repo.at(free_name).at("state")) == "free");
  CHECK(text(repo.at(free_name).at("apnea_verdict")) == "free");
  CHECK(repo_doc.at("summary").at("scanned").as_int64() == 3);
  CHECK(status(area, {"--repo", root / "work/free"}).status == 0);
  CHECK(status(area, {"--repo", root / "work/app"}).status == 1);

  // The current directory is labelled.
  CommandResult from_app = tool({"status", "--lock-dir", area, "--json", "--only-labelled"},
                                "cd " + shell_quote(root / "work/app") + " && ");
  auto here = entries_by_name(json::parse(from_app.out).as_object());
  REQUIRE(here.size() == 1);
  CHECK(text(here.at(app_lock).at("label")) == app);
}

TEST_CASE("status and inspect change nothing") {
  Zoo zoo;
  const auto before = snapshot(zoo.root.path());
  CHECK(status(zoo.area).status == 1);
  CHECK(status(zoo.area, {"--json"}).status == 1);
  CHECK(status(zoo.area, {"-r", "--scan", zoo.root.path()}).status == 1);
  for (const Expect& e : zoo.expect) tool({"inspect", "--lock-dir", zoo.area, e.name});
  const auto after = snapshot(zoo.root.path());
  CHECK(before.size() > zoo.expect.size());
  CHECK(before == after);
}

// issue 32 item 4: what inspect says Apnea will do must be what Apnea does.
TEST_CASE("inspect: a dead owner's repository lock inside the grace is reclaimed by Apnea once 60 s old") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  const std::string repo = fake_lock_name("repo");
  const std::string global = fake_lock_name("home", LockKind::global_setup);
  make_entry(area, repo, owner_json(dead_pid()));
  make_entry(area, global, owner_json(dead_pid()));
  const CommandResult young = tool({"inspect", area + "/" + repo});
  CAPTURE(young.out);
  CHECK(young.out.find("Apnea reclaims it on its first run once it is ") != std::string::npos);
  CHECK(young.out.find("will not reclaim it by itself") == std::string::npos);
  const CommandResult setup = tool({"inspect", area + "/" + global});
  CAPTURE(setup.out);
  CHECK(setup.out.find("Apnea will not reclaim it by itself") != std::string::npos);
}

TEST_CASE("inspect: checks, raw bytes, verdicts and exit status") {
  Zoo zoo;
  const std::string mode_lock = fake_lock_name("mode");
  CommandResult result = tool({"inspect", "--lock-dir", zoo.area, mode_lock, "--json"});
  CHECK(result.status == 1);
  json::object doc = json::parse(result.out).as_object();
  CHECK(text(doc.at("entry").at("state")) == "live-malformed");  // it names this live process
  CHECK(text(doc.at("entry").at("reason")) == "owner-mode-0644");
  CHECK(text(doc.at("owner_file").at("lstat").at("mode")) == "0644");
  CHECK(text(doc.at("directory_stat").at("type")) == "directory");
  CHECK(text(doc.at("owner_file").at("raw")) == "{\\\"pid\\\":" + std::to_string(::getpid()) + ",\\\"token\\\":\\\"" +
                                                    std::string(test_token) + "\\\"}");
  std::map<std::string, std::string> outcomes;
  for (const auto& check : doc.at("checks").as_array())
    outcomes[text(check.at("name"))] = text(check.at("outcome"));
  CHECK(outcomes.at("owner-owned-by-user") == "pass");
  CHECK(outcomes.at("owner-private-mode") == "fail");
  CHECK(outcomes.at("json-syntax") == "not-run");

  CommandResult large = tool({"inspect", "--lock-dir", zoo.area, fake_lock_name("toolarge"), "--json"});
  json::object large_doc = json::parse(large.out).as_object();
  CHECK(large_doc.at("owner_file").at("raw_truncated").as_bool());
  CHECK(text(large_doc.at("owner_file").at("raw")).size() == 4096);

  CommandResult dead = tool({"inspect", zoo.area + "/" + fake_lock_name("dead")});
  CHECK(dead.status == 1);
  CHECK(dead.out.find("state:       stale (pid-dead; certain proof)") != std::string::npos);
  CHECK(dead.out.find("proof:       pid-dead: ") != std::string::npos);
  CHECK(dead.out.find("  pass     token-non-empty-string") != std::string::npos);

  CommandResult live = tool({"inspect", "--lock-dir", zoo.area, fake_lock_name("live"), "-J"});
  CHECK(live.status == 0);
  json::object live_doc = json::parse(live.out).as_object();
  CHECK(text(live_doc.at("entry").at("process").at("state")) != "null");
  CHECK(text(live_doc.at("proof").at("name")) == "none");

  CommandResult zombie = tool({"inspect", "--lock-dir", zoo.area, fake_lock_name("zombie"), "-J"});
  json::object zombie_doc = json::parse(zombie.out).as_object();
  CHECK(text(zombie_doc.at("proof").at("name")) == "zombie");
  CHECK(zombie_doc.at("proof").at("certain").as_bool());

  // A repository without a lock: free, nothing to do.
  make_dir(zoo.root / "repo");
  CommandResult free_lock = tool({"inspect", "--lock-dir", zoo.area, "--repo", zoo.root / "repo", "--json"});
  CHECK(free_lock.status == 0);
  json::object free_doc = json::parse(free_lock.out).as_object();
  CHECK(text(free_doc.at("entry").at("state")) == "free");
  CHECK(text(free_doc.at("entry").at("label")) == *real_system().realpath(zoo.root / "repo"));

  CHECK(tool_with_stderr({"inspect", "--repo", zoo.root / "nope"}).status == 3);  // a typed path
  CHECK(tool_with_stderr({"inspect", "a", "--repo", "b"}).status == 2);
}

TEST_CASE("path: Apnea's lock path for a repository or home") {
  TempDir root;
  make_dir(root / "repo");
  const std::string canonical = *real_system().realpath(root / "repo");
  CommandResult repo = tool({"path", "--lock-dir", "/locks", "--repo", root / "repo/"});
  CHECK(repo.status == 0);
  CHECK(repo.out == "/locks/" + lock_name(LockKind::repository, lock_key(LockKind::repository, canonical)) + "\n");

  CommandResult here = tool({"path"}, "cd " + shell_quote(root / "repo") + " && TMPDIR=/x//y/ ");
  CHECK(here.out == "/x/y/apnea-" + std::to_string(::getuid()) + "/operation-locks/" +
                        lock_name(LockKind::repository, lock_key(LockKind::repository, canonical)) + "\n");

  CommandResult home = tool({"path", "--home", root / "repo", "--json"}, "TMPDIR=/t ");
  json::object doc = json::parse(home.out).as_object();
  CHECK(text(doc.at("lock_path")) ==
        "/t/apnea-" + std::to_string(::getuid()) + "/operation-locks/" +
            lock_name(LockKind::global_setup, lock_key(LockKind::global_setup, canonical)));

  CommandResult missing = tool_with_stderr({"path", "--repo", root / "nope"});
  CHECK(missing.status == 2);
  CHECK(missing.out == "apnea-locks path: " + root / "nope" + ": ENOENT: no such file or directory\n"
                       "Try 'apnea-locks path --help' for more information.\n");
}
