// The built apnea-locks' conventions and hints: one help style (help CMD is CMD --help),
// -V everywhere, -o help, --user on every command that reads an area, -J honouring -o with
// fix_argv beside every fix, a clean empty area, inspect of a path that does not exist, the
// enclosing repository named from a subdirectory, the dead global setup lock named first,
// and labels without --scan. Every JSON document is checked against the schema (the
// run_command hook, tests/json_schema.h).
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
namespace json = boost::json;

namespace {

std::string bin() { return test_env("APNEA_LOCKS_BIN"); }

constexpr const char* commands[] = {"status", "inspect", "explain", "path", "reclaim", "run", "check"};

/// Runs the binary in `directory` with `env` ("NAME=value " words), stderr folded in.
CommandResult tool_in(const std::string& directory, std::vector<std::string> args,
                      const std::string& env = "", bool with_stderr = false) {
  args.insert(args.begin(), bin());
  return run_command(args, std::string(with_stderr ? "exec 2>&1; " : "") + "cd " + shell_quote(directory) +
                               " && " + env);
}

CommandResult tool(std::vector<std::string> args, const std::string& env = "") {
  return tool_in(".", std::move(args), env);
}

json::object parsed(const CommandResult& result) {
  json::value value = parse_checked_json(result.out);
  REQUIRE_MESSAGE(value.is_object(), result.out);
  return value.as_object();
}

std::string text(const json::value& value) {
  return value.is_string() ? std::string(value.as_string()) : json::serialize(value);
}

std::string canonical(const std::string& path) { return *real_system().realpath(path); }

std::string lock_for(LockKind kind, const std::string& path) {
  return lock_name(kind, lock_key(kind, canonical(path)));
}

}  // namespace

TEST_CASE("help: one style everywhere, and help CMD prints exactly CMD --help") {
  for (const char* command : commands) {
    CAPTURE(command);
    const CommandResult help = tool({command, "--help"});
    CHECK(help.status == 0);
    CHECK(help.out.starts_with(std::string("Usage:\n apnea-locks ") + command));
    for (const char* option : {"\n -h, --help ", "\n -V, --version ", "\n     --color[=WHEN] ", "\nOptions:\n"})
      CHECK(help.out.find(option) != std::string::npos);
    CHECK(help.out.find("[ --") == std::string::npos);  // not Boost's "-h [ --help ]"
    CHECK(help.out.ends_with("For more details see apnea-locks(1).\n"));
    CHECK(tool({"help", command}).out == help.out);
    CHECK(tool({"help", command}).status == 0);
    CHECK(tool({command, "-h"}).out == help.out);
  }
  // The top level: help alone, -h, --help; an unknown command after help is a usage error.
  const CommandResult top = tool({"help"});
  CHECK(top.status == 0);
  CHECK(top.out.starts_with("Usage:\n apnea-locks COMMAND [options]\n"));
  CHECK(tool({"--help"}).out == top.out);
  CHECK(tool({"help", "bogus"}).status == 2);
  CHECK(tool({"help", "status", "extra"}).status == 2);
}

TEST_CASE("usage errors: util-linux's two lines on every command and at the top level") {
  auto try_line = [](const std::string& command) {
    return "Try 'apnea-locks " + command + (command.empty() ? "" : " ") + "--help' for more information.\n";
  };
  for (const std::string command : commands) {
    CAPTURE(command);
    const CommandResult bad = tool_in(".", {command, "--bogus-option"}, "", true);
    if (command == "check") {
      // A plugin's first line stays a Nagios status line: the hint goes to standard error.
      CHECK(bad.status == 3);
      CHECK(tool({command, "--bogus-option"}).out ==
            "APNEA-LOCKS UNKNOWN - usage: unrecognised option '--bogus-option'\n");
      CHECK(bad.out == "APNEA-LOCKS UNKNOWN - usage: unrecognised option '--bogus-option'\n" + try_line(command));
    } else {
      CHECK(bad.status == 2);
      CHECK(tool({command, "--bogus-option"}).out.empty());
      CHECK(bad.out == "apnea-locks " + command + ": unrecognised option '--bogus-option'\n" + try_line(command));
    }
  }
  // Usage errors found after parsing look the same.
  const std::vector<std::pair<std::vector<std::string>, std::string>> later = {
      {{"status", "--json", "--raw"}, "apnea-locks status: --json and --raw exclude each other\n"},
      {{"inspect", "some.lock", "--repo", "."}, "apnea-locks inspect: give one of LOCK, --repo PATH, --home PATH\n"},
      {{"path", "--repo", ".", "--home", "."}, "apnea-locks path: give --repo PATH or --home PATH, not both\n"},
      {{"reclaim", "--all", "--repo", "."}, "apnea-locks reclaim: --all names every entry: give no other target\n"},
      {{"run", "--repo", ".", "--home", ".", "--", "true"}, "apnea-locks run: --repo and --home exclude each other\n"},
      {{"check", "--output-file", "x"}, "APNEA-LOCKS UNKNOWN - usage: --output-file needs --prometheus\n"},
  };
  for (const auto& [args, first] : later) {
    CAPTURE(args.front());
    const CommandResult bad = tool_in(".", args, "", true);
    CHECK(bad.status == (args.front() == "check" ? 3 : 2));
    CHECK(bad.out == first + try_line(args.front()));
  }
  // The top level.
  for (const auto& [args, first] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "apnea-locks: no command given\n"},
           {{"bogus"}, "apnea-locks: unknown command 'bogus'\n"},
           {{"help", "bogus"}, "apnea-locks: unknown command 'bogus'\n"},
           {{"help", "status", "extra"}, "apnea-locks: help takes one COMMAND\n"}}) {
    const CommandResult bad = tool_in(".", args, "", true);
    CHECK(bad.status == 2);
    CHECK(bad.out == first + try_line(""));
  }
}

TEST_CASE("every command's help fits 80 columns, check's too, and wraps under each item's text") {
  for (const char* command : commands) {
    CAPTURE(command);
    std::istringstream lines(tool({command, "--help"}).out);
    for (std::string line; std::getline(lines, line);) {
      CAPTURE(line);
      CHECK(line.size() <= 80);
    }
  }
  // check's statuses: each wraps under its text, as an option's description does.
  const std::string help = tool({"check", "--help"}).out;
  CHECK(help.find("\nA monitoring plugin (Nagios, Icinga, Naemon, Sensu, ...). Judges the lock area\nas 'apnea-locks status' does") != std::string::npos);
  CHECK(help.find("\n  WARNING   anything else that needs a human: a dead owner Apnea will not\n"
                  "            reclaim by itself,") != std::string::npos);
  std::istringstream lines(help);
  bool in_statuses = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  CRITICAL  ")) in_statuses = true;
    if (line.empty()) in_statuses = false;
    if (!in_statuses) continue;
    CAPTURE(line);
    CHECK((line.starts_with("  CRITICAL  ") || line.starts_with("  WARNING   ") ||
           line.starts_with("  UNKNOWN   ") || (line.starts_with("            ") && line[12] != ' ')));
  }
}

TEST_CASE("-V and --version on every command") {
  const std::string version = tool({"--version"}).out;
  REQUIRE(version.starts_with("apnea-locks "));
  CHECK(tool({"-V"}).out == version);
  const std::string number = version.substr(std::string("apnea-locks ").size());
  for (const char* command : commands) {
    CAPTURE(command);
    for (const char* flag : {"-V", "--version"}) {
      const CommandResult result = tool({command, flag});
      CHECK(result.status == 0);
      CHECK(result.out == std::string("apnea-locks ") + command + " " + number);  // names the plugin
    }
  }
}

TEST_CASE("-o help and --list-columns list every column with a description") {
  const CommandResult list = tool({"status", "-o", "help"});
  CHECK(list.status == 0);
  CHECK(list.out.starts_with("Available output columns:\n"));
  CHECK(tool({"status", "--list-columns"}).out == list.out);
  for (const char* column : {"kind", "key", "role", "state", "reason", "apnea", "pid", "token", "age",
                             "command", "started", "label", "fix", "written", "name", "path",
                             "attention", "self-heals", "certain", "guard", "proof", "decision", "why",
                             "next-step"})
    CHECK(list.out.find(std::string("\n  ") + column + " ") != std::string::npos);
  CHECK(list.out.find("the apnea-locks reclaim command that removes it") != std::string::npos);
  // --help lists them too.
  CHECK(tool({"status", "--help"}).out.find(list.out) != std::string::npos);
}

TEST_CASE("-J honours -o, and fix_argv is beside every fix") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  make_dir(root / "repo");
  make_entry(area, lock_for(LockKind::repository, root / "repo"), owner_json(dead_pid()));
  const auto doc = parsed(tool({"status", "--lock-dir", area, "--repo", root / "repo", "-J", "-o", "state,fix"}));
  CHECK(text(doc.at("columns")) == R"(["state","fix"])");
  const auto& entry = doc.at("entries").as_array().at(0).as_object();
  CHECK(entry.size() == 3);  // state, fix and fix_argv
  CHECK(text(entry.at("state")) == "stale");
  const std::string fix = text(entry.at("fix"));
  CHECK(fix.starts_with("apnea-locks reclaim"));
  std::string joined;
  for (const auto& word : entry.at("fix_argv").as_array()) joined += (joined.empty() ? "" : " ") + text(word);
  CHECK(joined == fix);  // no word needed quoting here
  // Without -o: every field, and the summary's next step carries both forms too.
  const auto whole = parsed(tool({"status", "--lock-dir", area, "--repo", root / "repo", "-J"}));
  CHECK(whole.at("columns").is_null());
  CHECK(whole.at("entries").as_array().at(0).as_object().size() > 30);
  const auto& next = whole.at("summary").at("next").as_object();
  CHECK(text(next.at("fix")) == fix);
  CHECK(next.at("fix_argv").is_array());
  CHECK(text(whole.at("schema")) == R"({"name":"status","version":1})");
  // inspect -J and path -J carry the schema too.
  CHECK(text(parsed(tool({"inspect", "--lock-dir", area, "--repo", root / "repo", "-J"})).at("schema")) ==
        R"({"name":"inspect","version":1})");
  CHECK(text(parsed(tool({"path", "--lock-dir", area, "-J"})).at("schema")) == R"({"name":"path","version":1})");
  CHECK(text(parsed(tool({"reclaim", "--lock-dir", area, "--all", "--dry-run", "-J"})).at("schema")) ==
        R"({"name":"reclaim","version":1})");
  // The raw format honours -o as before, and the metrics' labels come from the same fields.
  CHECK(tool({"status", "--lock-dir", area, "-r", "-n", "-o", "state,role"}).out == "stale lock\n");
  CHECK(validated_documents() >= 5);
}

TEST_CASE("an empty area is one clean line; a missing default area another; -n prints nothing") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  const CommandResult empty = tool({"status", "--lock-dir", area});
  CHECK(empty.status == 0);
  CHECK(empty.out == "No entries in " + area + ": nothing needs attention.\n");
  CHECK(tool({"status", "--lock-dir", area, "-n"}).out.empty());
  const CommandResult missing = tool_in(".", {"status"}, "TMPDIR=" + shell_quote(root / "tmp") + " ", true);
  CHECK(missing.status == 0);
  CHECK(missing.out == "No entries: " + root / "tmp" + "/apnea-" + std::to_string(::getuid()) +
                           "/operation-locks does not exist yet (Apnea has taken no lock there).\n");
  // Filters that match nothing say so.
  make_entry(area, fake_lock_name("x"), owner_json(::getpid()));
  CHECK(tool({"status", "--lock-dir", area, "--state", "stale"}).out ==
        "No entries match (1 entry in " + area + ").\n");
}

TEST_CASE("inspect of a path that does not exist says so; a vanished lock is free") {
  const CommandResult missing = tool_in(".", {"inspect", "/nonexistent"}, "", true);
  CHECK(missing.status == 3);
  CHECK(missing.out == "apnea-locks inspect: '/nonexistent': ENOENT: no such file or directory\n");
  CHECK(tool_in(".", {"inspect", "/no/such/dir/repository-ab.lock"}, "", true).status == 3);
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  const std::string gone = area + "/" + fake_lock_name("gone");
  const CommandResult free_lock = tool({"inspect", gone});
  CHECK(free_lock.status == 0);
  CHECK(free_lock.out.find("state:       free (absent)") != std::string::npos);
}

TEST_CASE("from a subdirectory, status and inspect name the enclosing repository's lock") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  const std::string repo = root / "app";
  std::filesystem::create_directories(repo + "/.git");
  std::filesystem::create_directories(repo + "/src/deep");
  make_entry(area, lock_for(LockKind::repository, repo), owner_json(dead_pid()));
  const std::string sub = repo + "/src/deep";
  const std::string env = "HOME=" + shell_quote(root / "home") + " ";

  const CommandResult status = tool_in(sub, {"status", "--lock-dir", area}, env);
  CHECK(status.out.find(canonical(sub) + " is inside the repository " + canonical(repo) +
                        "; Apnea run there uses its lock, which is stale (pid-dead") != std::string::npos);
  CHECK(status.out.find("  fix: apnea-locks reclaim --lock-dir " + area + " --repo " + canonical(repo)) !=
        std::string::npos);
  // The row is labelled: the current directory's ancestors are, without --scan.
  CHECK(status.out.find(" " + canonical(repo) + " ") != std::string::npos);
  const auto doc = parsed(tool_in(sub, {"status", "--lock-dir", area, "-J"}, env));
  const auto& hint = doc.at("hints").as_array().at(0).as_object();
  CHECK(text(hint.at("kind")) == "enclosing-repository");
  CHECK(text(hint.at("root")) == canonical(repo));
  CHECK(text(hint.at("state")) == "stale");
  CHECK(hint.at("fix_argv").as_array().back() == canonical(repo).c_str());

  // inspect looks at the subdirectory's own lock (absent: free) and names the root's,
  // which Apnea run there uses and which needs attention: so does the exit status.
  const CommandResult inspect = tool_in(sub, {"inspect", "--lock-dir", area}, env);
  CHECK(inspect.status == 1);
  CHECK(inspect.out.find("free (absent)") != std::string::npos);
  CHECK(inspect.out.find("is inside the repository " + canonical(repo)) != std::string::npos);
  const auto inspected = parsed(tool_in(sub, {"inspect", "--lock-dir", area, "-J"}, env));
  CHECK(text(inspected.at("hints").as_array().at(0).at("kind")) == "enclosing-repository");
  // At the root itself there is nothing to point at.
  CHECK(parsed(tool_in(repo, {"status", "--lock-dir", area, "-J"}, env)).at("hints").as_array().empty());
}

TEST_CASE("a dead global setup lock is named first by status, with the command that fixes it") {
  TempDir root;
  const std::string area = root / "locks";
  const std::string home = root / "home";
  make_dir(area);
  make_dir(home);
  make_entry(area, fake_lock_name("malformed"), "{", 0700, 0600);  // needs attention too
  age_path(area + "/" + fake_lock_name("malformed"), 600);
  make_entry(area, lock_for(LockKind::global_setup, home), owner_json(dead_pid()));
  const std::string env = "HOME=" + shell_quote(home) + " ";
  const CommandResult status = tool({"status", "--lock-dir", area}, env);
  CHECK(status.status == 1);
  CHECK(status.out.starts_with("The global setup lock of " + canonical(home) + " is stale (pid-dead"));
  std::istringstream lines(status.out);
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);
  CHECK(line == "  fix: apnea-locks reclaim --lock-dir " + area + " --home " + canonical(home));
  // The first row and the footer's next step are the global setup lock, before the
  // malformed one (which the state order alone would put first).
  while (std::getline(lines, line) && !line.starts_with("KIND")) {
  }
  std::getline(lines, line);
  CHECK(line.starts_with("global-setup "));
  CHECK(status.out.find("Next: the global setup lock of " + canonical(home) + " is stale (pid-dead):\n"
                        "  apnea-locks reclaim --lock-dir " + area + " --home " + canonical(home) + "\n") !=
        std::string::npos);
  // Filters do not hide it: it blocks every Apnea run.
  CHECK(tool({"status", "--lock-dir", area, "--kind", "repository"}, env)
            .out.starts_with("The global setup lock of"));
  const auto doc = parsed(tool({"status", "--lock-dir", area, "-J"}, env));
  const auto& hint = doc.at("hints").as_array().at(0).as_object();
  CHECK(text(hint.at("kind")) == "global-setup");
  CHECK(text(hint.at("fix")) == "apnea-locks reclaim --lock-dir " + area + " --home " + canonical(home));
  CHECK(text(doc.at("summary").at("next").at("name")) == lock_for(LockKind::global_setup, home));
  // A live global setup lock is no hint.
  TempDir calm;
  make_dir(calm / "locks");
  make_entry(calm / "locks", lock_for(LockKind::global_setup, home), owner_json(::getpid()));
  CHECK(parsed(tool({"status", "--lock-dir", calm / "locks", "-J"}, env)).at("hints").as_array().empty());
}

TEST_CASE("labels without --scan: the current directory, its ancestors and $HOME") {
  TempDir root;
  const std::string area = root / "locks";
  const std::string home = root / "home";
  make_dir(area);
  std::filesystem::create_directories(home + "/work/project/sub");
  make_entry(area, lock_for(LockKind::repository, home + "/work"), owner_json(::getpid()));
  make_entry(area, lock_for(LockKind::repository, home), owner_json(::getpid()));
  make_entry(area, lock_for(LockKind::global_setup, home), owner_json(::getpid()));
  const auto doc = parsed(tool_in(home + "/work/project/sub", {"status", "--lock-dir", area, "-J", "-o", "kind,label"},
                                  "HOME=" + shell_quote(home) + " "));
  std::vector<std::string> labels;
  for (const auto& entry : doc.at("entries").as_array())
    labels.push_back(text(entry.at("kind")) + " " + text(entry.at("label")));
  std::sort(labels.begin(), labels.end());
  CHECK(labels == std::vector<std::string>{"global-setup " + canonical(home), "repository " + canonical(home),
                                           "repository " + canonical(home + "/work")});
}

TEST_CASE("--user NAME on every command that reads an area: root only, as NAME") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);  // root's 0700 area: NAME may not read it
  for (const char* command : {"status", "inspect", "reclaim", "path"}) {
    CAPTURE(command);
    CHECK(tool_in(".", {command, "--user", "no-such-account-here"}, "", true).status == 2);
  }
  CHECK(tool({"check", "--user", "no-such-account-here"}).out.starts_with("APNEA-LOCKS UNKNOWN"));
  if (::getuid() != 0) return;  // the rest needs root
  REQUIRE(::chmod(root.path().c_str(), 0755) == 0);  // nobody may look inside
  // As nobody the root-owned area is another user's: proof the privileges were dropped.
  const CommandResult status = tool_in(".", {"status", "--user", "nobody", "--lock-dir", area}, "", true);
  CHECK(status.status == 3);
  CHECK(status.out.find("is not owned by the current user") != std::string::npos);
  const CommandResult inspect = tool_in(".", {"inspect", "--user", "nobody", "--lock-dir", area, fake_lock_name("x")}, "", true);
  CHECK(inspect.status == 3);
  CHECK(tool({"check", "--user", "nobody", "--lock-dir", area}).status == 2);  // CRITICAL: unsafe
  // NAME's own area (TMPDIR-aware), which may not exist yet.
  const CommandResult own = tool_in(".", {"status", "--user", "nobody"}, "TMPDIR=" + shell_quote(root / "none") + " ");
  CHECK(own.status == 0);
  CHECK(own.out.find("/apnea-65534/operation-locks does not exist yet") != std::string::npos);
  CHECK(tool({"path", "--user", "nobody", "--home", "/"}, "TMPDIR=/tmp ").out.starts_with("/tmp/apnea-65534/"));
}

TEST_CASE("status LOCKPATH: the path in Apnea's message is enough (its directory is the area)") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  const std::string mine = fake_lock_name("mine");
  make_entry(area, mine, owner_json(dead_pid()));
  make_entry(area, mine + ".candidate.abc", owner_json(dead_pid()));
  make_entry(area, fake_lock_name("other"), owner_json(dead_pid()));
  const auto doc = parsed(tool({"status", area + "/" + mine, "-J", "-o", "name"}));
  CHECK(text(doc.at("lock_dir")) == area);
  std::vector<std::string> names;
  for (const auto& entry : doc.at("entries").as_array()) names.push_back(text(entry.at("name")));
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{mine, mine + ".candidate.abc"});
  // A lock that is not there is one free row; a directory that does not exist is an error.
  const auto gone = parsed(tool({"status", area + "/" + fake_lock_name("gone"), "-J", "-o", "state"}));
  CHECK(text(gone.at("entries")) == R"([{"state":"free"}])");
  CHECK(tool_in(".", {"status", root / ("nowhere/" + mine)}, "", true).status == 3);
  CHECK(tool_in(".", {"status", area + "/notes.txt"}, "", true).status == 2);  // not an Apnea name
}

TEST_CASE("inspect LOCKPATH is read as status reads it: '//' and '/./' name the same entry") {
  TempDir root;
  const std::string area = root / "locks";
  make_dir(area);
  const std::string mine = fake_lock_name("mine");
  make_entry(area, mine, owner_json(dead_pid()));
  const std::string odd = root.path() + "//locks/./" + mine;
  const auto status = parsed(tool({"status", odd, "-J", "-o", "path,state,reason"}));
  CHECK(text(status.at("lock_dir")) == area);
  REQUIRE(status.at("entries").as_array().size() == 1);
  const json::value& listed = status.at("entries").as_array()[0];
  CHECK(text(listed.at("path")) == area + "/" + mine);
  const auto inspected = parsed(tool({"inspect", odd, "-J"}));
  CHECK(text(inspected.at("lock_dir")) == area);
  CHECK(text(inspected.at("entry").at("path")) == text(listed.at("path")));
  CHECK(text(inspected.at("entry").at("state")) == text(listed.at("state")));
  CHECK(text(inspected.at("entry").at("reason")) == text(listed.at("reason")));
  // Inside --lock-dir as status says: the same entry, not a usage error.
  for (const char* command : {"status", "inspect"}) {
    CAPTURE(command);
    const CommandResult given = tool({command, "--lock-dir", area, odd, "-J"});
    CHECK(given.status == 1);  // a dead owner's lock needs attention
    CHECK(text(parsed(given).at("lock_dir")) == area);
  }
}
