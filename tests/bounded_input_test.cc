// Bounded inputs and explicit paths (PROTOCOL.md section 10), through the built binary:
// duration options take `[0-9]+[smhd]?` within their ranges, empty option values are usage
// errors, a typed --lock-dir/--repo/--home must exist, `run --lock-dir` creates at most
// the directory itself and chmods nothing it did not create, --output-file never writes
// through a symlink nor keeps setuid bits, and a TMPDIR that is not UTF-8 is decoded as
// Node decodes it.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// A scratch folder whose `locks/` is a ready lock area (0700).
struct Setup {
  Scratch scratch;
  Setup() { make_dir(scratch.locks); }
  const std::string& locks() const { return scratch.locks; }
};

/// `apnea-locks ARGS...` run to completion.
Finished tool(const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv{locks_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return finish(argv, env);
}

/// The words that put `command` to work on the set-up's area, around `middle` (its options).
std::vector<std::string> command_line(const Setup& s, const std::string& command,
                                      const std::vector<std::string>& middle) {
  std::vector<std::string> args{command, "--lock-dir", s.locks()};
  if (command == "reclaim") args.insert(args.end(), {"--repo", s.scratch.repo, "--dry-run"});
  if (command == "run") args.insert(args.end(), {"--repo", s.scratch.repo});
  args.insert(args.end(), middle.begin(), middle.end());
  if (command == "run") args.insert(args.end(), {"--", "true"});
  return args;
}

std::string both(const Finished& f) { return "stdout: " + f.out + "stderr: " + f.err; }

/// A usage error: exit 2 with "apnea-locks COMMAND: ..." on stderr, or for check the
/// plugin's UNKNOWN (3) with "usage: ..." on its status line; either names `named` and ends
/// its stderr with "Try 'apnea-locks COMMAND --help' for more information.".
void check_usage_error(const std::string& command, const Finished& f, const std::string& named) {
  CAPTURE(both(f));
  if (command == "check") {
    CHECK(f.status == 3);
    CHECK(f.out.starts_with("APNEA-LOCKS UNKNOWN - usage: "));
    CHECK(f.out.find(named) != std::string::npos);
  } else {
    CHECK(f.status == 2);
    CHECK(f.err.starts_with("apnea-locks " + command + ": "));
    CHECK(f.err.find(named) != std::string::npos);
  }
  // util-linux's last line, the same for every command (check: its only line on stderr).
  CHECK(f.err.ends_with("Try 'apnea-locks " + command + " --help' for more information.\n"));
  CHECK(f.out.find("APNEA-LOCKS OK") == std::string::npos);
}

/// A path the user typed is refused: exit 3 naming it (check: UNKNOWN on the status line).
void check_bad_path(const std::string& command, const Finished& f, const std::string& path) {
  CAPTURE(both(f));
  CHECK(f.status == 3);
  if (command == "check") {
    CHECK(f.out.starts_with("APNEA-LOCKS UNKNOWN - "));
    CHECK(f.out.find(path) != std::string::npos);
  } else {
    CHECK(f.err.starts_with("apnea-locks " + command + ": "));
    CHECK(f.err.find(path) != std::string::npos);
  }
}

struct DurationOption {
  std::string command, option;
};

const std::vector<DurationOption> duration_options = {
    {"status", "--tolerance"}, {"status", "--guard-age"},  {"inspect", "--tolerance"},
    {"inspect", "--guard-age"}, {"reclaim", "--tolerance"}, {"reclaim", "--guard-age"},
    {"check", "--tolerance"},  {"check", "--guard-age"},   {"check", "--warn-age"},
    {"check", "--crit-age"},   {"run", "--wait"},
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

mode_t current_umask() {
  const mode_t mask = ::umask(022);
  ::umask(mask);
  return mask;
}

}  // namespace

TEST_CASE("every duration option rejects what is not [0-9]+[smhd]? (--wait: with a fraction) within its range") {
  Setup s;
  // Not the grammar: refused by every option, whatever its range.
  const std::vector<std::string> malformed = {"1e3", "0x10", " 5",  "5 ",  "inf", "-5", "+5",
                                              "",    "1.5",  "5ms", "5 m", "s",   "5sec", "١"};
  for (const auto& [command, option] : duration_options) {
    CAPTURE(command);
    CAPTURE(option);
    std::vector<std::string> refused = malformed;
    refused.push_back("99999999999999999999");   // overflows any integer: out of range
    refused.push_back("9223372036854775807d");   // fits, but not once scaled to nanoseconds
    if (option != "--wait") refused.push_back("0");  // below every range but --wait's
    if (option == "--wait") {
      // run's --wait takes a fraction, as flock's -w does (1.5 is a wait of 1500ms); not
      // one without digits on both sides of the point, nor any other number syntax.
      std::erase(refused, "1.5");
      for (const char* more : {".5", "5.", "1.5.5", "nan", "-0.5", "1.5e3", "9223372036854775807.5d"})
        refused.push_back(more);
    }
    for (const std::string& value : refused) {
      CAPTURE(value);
      check_usage_error(command, tool(command_line(s, command, {option + "=" + value})), option);
      if (!value.starts_with('-'))  // a separate "-5" reads as an option: still refused
        check_usage_error(command, tool(command_line(s, command, {option, value})), option);
    }
  }
}

TEST_CASE("duration ranges: below and above are refused, naming the option and the range") {
  Setup s;
  struct Bound {
    std::string command, option, below, above, range;
  };
  const std::vector<Bound> bounds = {
      {"status", "--tolerance", "0", "25h", "must be between 1s and 1d"},
      {"reclaim", "--guard-age", "59s", "31d", "must be between 1m and 30d"},
      {"inspect", "--guard-age", "0", "721h", "must be between 1m and 30d"},
      {"check", "--warn-age", "0s", "366d", "must be between 1s and 365d"},
      {"check", "--crit-age", "0m", "8761h", "must be between 1s and 365d"},
      {"run", "--wait", "", "31d", "must be between 0s and 30d"},
  };
  for (const Bound& b : bounds) {
    CAPTURE(b.option);
    for (const std::string& value : {b.below, b.above}) {
      if (value.empty()) continue;
      const Finished f = tool(command_line(s, b.command, {b.option, value}));
      check_usage_error(b.command, f, b.option + " '" + value + "': " + b.range);
    }
  }
  // The example of the brief, word for word.
  const Finished zero = tool({"reclaim", "--lock-dir", s.locks(), "--guard-age", "0"});
  CHECK(zero.status == 2);
  CHECK(zero.err.starts_with("apnea-locks reclaim: --guard-age '0': must be between 1m and 30d"));
  // Hostile bytes in a value are escaped before they reach the terminal.
  const Finished hostile = tool({"status", "--lock-dir", s.locks(), "--tolerance", "5\x1b[2J"});
  CHECK(hostile.status == 2);
  CHECK(hostile.err.find('\x1b') == std::string::npos);
}

TEST_CASE("valid durations are accepted: 90s, 5m, 2h, 1d, and bare seconds") {
  Setup s;
  for (const auto& [command, option] : duration_options) {
    for (const std::string value : {"90s", "5m", "2h", "1d", "120"}) {
      CAPTURE(command);
      CAPTURE(option);
      CAPTURE(value);
      std::vector<std::string> middle{option, value};
      if (option == "--crit-age") middle.insert(middle.end(), {"--warn-age", "1m"});
      const Finished f = tool(command_line(s, command, middle));
      CAPTURE(both(f));
      if (command == "reclaim") {
        // Accepted; there is no lock where it looked, which reclaim says (exit 1).
        CHECK(f.status == 1);
        CHECK(f.out.starts_with("no lock at "));
      } else {
        CHECK(f.status == 0);
      }
    }
  }
  // A run that waits 0 seconds tries once.
  CHECK(tool(command_line(s, "run", {"--wait", "0"})).status == 0);
}

TEST_CASE("check: --crit-age below --warn-age is a usage error (UNKNOWN); thresholds in seconds") {
  Setup s;
  const Finished below = tool({"check", "--lock-dir", s.locks(), "--warn-age", "2h", "--crit-age", "1h"});
  check_usage_error("check", below, "--crit-age");
  CHECK(below.out.find("--warn-age") != std::string::npos);
  // A threshold alone, as Nagios plugins take it: no default warning age beside it.
  for (const std::vector<std::string>& alone : {std::vector<std::string>{"--crit-age", "30m"},
                                                std::vector<std::string>{"-c", "10m"}}) {
    std::vector<std::string> args = {"check", "--lock-dir", s.locks()};
    args.insert(args.end(), alone.begin(), alone.end());
    const Finished only = tool(args);
    CAPTURE(only.out);
    CHECK(only.status == 0);
    CHECK(only.out.find("oldest_age_s=0s;;" + std::string(alone[0] == "-c" ? "600" : "1800") + ";0") !=
          std::string::npos);
  }
  const Finished warning_alone = tool({"check", "--lock-dir", s.locks(), "-w", "2h"});
  CHECK(warning_alone.status == 0);
  CHECK(warning_alone.out.find("oldest_age_s=0s;7200;;0") != std::string::npos);

  const Finished equal = tool({"check", "--lock-dir", s.locks(), "--warn-age", "1h", "--crit-age", "60m"});
  CHECK(equal.status == 0);
  CHECK(equal.out.find("oldest_age_s=0s;3600;3600;0") != std::string::npos);
}

TEST_CASE("reclaim --guard-age 0 --force is refused before anything is removed") {
  Setup s;
  // A candidate whose writer is certainly dead, and an old pid-less one: both are what
  // `reclaim --all --force` removes.
  const std::string base = fake_lock_name("bounded");
  const std::string dead = make_entry(s.locks(), base + ".candidate.dead", owner_json(dead_pid()));
  const std::string pidless = make_entry(s.locks(), base + ".candidate.pidless", "");
  age_path(dead, 3600);
  age_path(pidless, 3600);
  const auto before = snapshot(s.scratch.root);
  for (const std::string value : {"0", "0s", "-1", "1e3", ""}) {
    CAPTURE(value);
    const Finished f = tool({"reclaim", "--lock-dir", s.locks(), "--all", "--force", "--yes",
                             "--guard-age=" + value});
    check_usage_error("reclaim", f, "--guard-age");
    CHECK(f.out.empty());
    CHECK(snapshot(s.scratch.root) == before);
  }
  // The same command with a valid age removes the dead one: it was a real target.
  const Finished valid = tool({"reclaim", "--lock-dir", s.locks(), "--all", "--force", "--yes",
                               "--guard-age", "1m"});
  CAPTURE(both(valid));
  CHECK_FALSE(exists(dead));
}

TEST_CASE("an empty value of any string option is a usage error naming the option") {
  Setup s;
  struct Empty {
    std::string command;
    std::vector<std::string> args;
    std::string named;
  };
  const std::string dir = s.locks();
  const std::vector<Empty> cases = {
      {"status", {"--lock-dir", ""}, "--lock-dir"},
      {"status", {"--lock-dir", dir, "--repo", ""}, "--repo"},
      {"status", {"--lock-dir", dir, "--scan", ""}, "--scan"},
      {"status", {"--lock-dir", dir, "-o", ""}, "--output"},
      {"status", {"--lock-dir", dir, "--output", ""}, "--output"},
      {"status", {"--lock-dir", dir, "--format", "prometheus", "--output-file", ""}, "--output-file"},
      {"status", {"--lock-dir", dir, "--format", ""}, "--format"},
      {"status", {"--lock-dir", dir, "--state", ""}, "--state"},
      {"status", {"--lock-dir", dir, "--kind", ""}, "--kind"},
      {"inspect", {"--lock-dir", ""}, "--lock-dir"},
      {"inspect", {"--lock-dir", dir, "--repo", ""}, "--repo"},
      {"inspect", {"--lock-dir", dir, "--home", ""}, "--home"},
      {"inspect", {"--lock-dir", dir, ""}, "LOCK"},
      {"reclaim", {"--lock-dir", ""}, "--lock-dir"},
      {"reclaim", {"--lock-dir", dir, "--repo", ""}, "--repo"},
      {"reclaim", {"--lock-dir", dir, "--home", ""}, "--home"},
      {"reclaim", {"--lock-dir", dir, "--user", ""}, "--user"},
      {"reclaim", {"--lock-dir", dir, "--dry-run", ""}, "PATH"},
      {"check", {"--lock-dir", ""}, "--lock-dir"},
      {"check", {"--lock-dir", dir, "--repo", ""}, "--repo"},
      {"check", {"--lock-dir", dir, "--scan", ""}, "--scan"},
      {"check", {"--lock-dir", dir, "--prometheus", "--output-file", ""}, "--output-file"},
      {"path", {"--lock-dir", ""}, "--lock-dir"},
      {"path", {"--repo", ""}, "--repo"},
      {"path", {"--home", ""}, "--home"},
      {"run", {"--lock-dir", "", "--", "true"}, "--lock-dir"},
      {"run", {"--lock-dir", dir, "--repo", "", "--", "true"}, "--repo"},
      {"run", {"--lock-dir", dir, "--home", "", "--", "true"}, "--home"},
      {"run", {"--lock-dir=", "--", "true"}, "--lock-dir"},
  };
  const auto before = snapshot(s.scratch.root);
  for (const Empty& c : cases) {
    std::vector<std::string> args{c.command};
    args.insert(args.end(), c.args.begin(), c.args.end());
    CAPTURE(c.command);
    CAPTURE(c.named);
    const Finished f = tool(args);
    check_usage_error(c.command, f, c.named);
    // ("--lock-dir=" is refused by the option parser itself, in its own words.)
    const std::string& text = c.command == "check" ? f.out : f.err;
    if (c.args.front() != "--lock-dir=") CHECK(text.find("empty") != std::string::npos);
  }
  CHECK(snapshot(s.scratch.root) == before);  // run --lock-dir '' made nothing, chmod'ed nothing
}

TEST_CASE("explicit paths are promises: a typed --lock-dir, --repo or --home that is absent is an error") {
  Setup s;
  const std::string missing = s.scratch.root + "/typo";
  const std::string file = s.scratch.root + "/file";
  write_file(file, "x");
  const std::string dir = s.locks();

  for (const std::string command : {"status", "inspect", "reclaim", "check"}) {
    CAPTURE(command);
    const std::vector<std::string> extra =
        command == "reclaim" ? std::vector<std::string>{"--dry-run"} : std::vector<std::string>{};
    auto with = [&](std::vector<std::string> args) {
      args.insert(args.begin(), command);
      args.insert(args.end(), extra.begin(), extra.end());
      return tool(args);
    };
    check_bad_path(command, with({"--lock-dir", missing}), missing);
    check_bad_path(command, with({"--lock-dir", file}), file);
    check_bad_path(command, with({"--lock-dir", dir, "--repo", missing}), missing);
    check_bad_path(command, with({"--lock-dir", dir, "--repo", file}), file);
    if (command == "inspect" || command == "reclaim") {
      check_bad_path(command, with({"--lock-dir", dir, "--home", missing}), missing);
      check_bad_path(command, with({"--lock-dir", dir, "--home", file}), file);
    } else {
      check_bad_path(command, with({"--lock-dir", dir, "--scan", missing}), missing);
    }
  }
  // check says so on its status line, without perfdata: not "OK - no lock area yet".
  const Finished typo = tool({"check", "--lock-dir", missing});
  CHECK(typo.out.starts_with("APNEA-LOCKS UNKNOWN - cannot inspect Apnea lock directory: " +
                             missing + ": ENOENT"));

  const auto before = snapshot(s.scratch.root);
  check_bad_path("run", tool({"run", "--lock-dir", dir, "--repo", missing, "--", "true"}), missing);
  check_bad_path("run", tool({"run", "--lock-dir", dir, "--repo", file, "--", "true"}), file);
  check_bad_path("run", tool({"run", "--lock-dir", dir, "--home", missing, "--", "true"}), missing);
  check_bad_path("run", tool({"run", "--lock-dir", file, "--repo", s.scratch.repo, "--", "true"}), file);
  const std::string leaf = missing + "/leaf";
  check_bad_path("run", tool({"run", "--lock-dir", leaf, "--repo", s.scratch.repo, "--", "true"}), leaf);
  CHECK_FALSE(exists(missing));  // the parent was not created
  CHECK(snapshot(s.scratch.root) == before);

  // JSON events say it too.
  const Finished json = tool({"run", "--json", "--lock-dir", dir, "--repo", missing, "--", "true"});
  CHECK(json.status == 3);
  const auto event = boost::json::parse(json.err.substr(0, json.err.find('\n'))).as_object();
  CHECK(event.at("event") == "refused");
  CHECK(event.at("error") == "ConfigError");
  CHECK(std::string(event.at("path").as_string()) == missing);
}

TEST_CASE("only Apnea's own area may be absent: no lock taken yet") {
  Setup s;
  const std::string tmp = s.scratch.root + "/tmp";
  make_dir(tmp);
  const std::map<std::string, std::string> env{{"TMPDIR", tmp}};
  const Finished status = tool({"status"}, env);
  CAPTURE(both(status));
  CHECK(status.status == 0);
  // One clean line on stdout (no header for an empty table), nothing on stderr.
  CHECK(status.out.find("does not exist yet (Apnea has taken no lock there)") != std::string::npos);
  CHECK(status.out.find("KIND") == std::string::npos);
  CHECK(status.err.empty());
  const Finished check = tool({"check"}, env);
  CAPTURE(both(check));
  CHECK(check.status == 0);
  CHECK(check.out.starts_with("APNEA-LOCKS OK - no lock area yet"));
  CHECK(tool({"inspect"}, env).status == 0);
  // Not an error (3): there is simply no lock where reclaim looked, which it says (exit 1).
  const Finished reclaim = tool({"reclaim", "--dry-run"}, env);
  CAPTURE(both(reclaim));
  CHECK(reclaim.status == 1);
  CHECK(reclaim.out.starts_with("no lock at "));
  CHECK(reclaim.out.find("no lock where it looked") != std::string::npos);
}

TEST_CASE("run --lock-dir creates at most the directory itself and chmods nothing it did not create") {
  Setup s;
  const std::string parent = s.scratch.root + "/shared";
  make_dir(parent, 0755);

  SUBCASE("a new leaf under an existing 0755 parent: created 0700, the parent untouched") {
    const std::string leaf = parent + "/leaf";
    const Finished f = tool({"run", "--lock-dir", leaf, "--repo", s.scratch.repo, "--", "true"});
    CAPTURE(both(f));
    CHECK(f.status == 0);
    CHECK(mode_of(leaf) == 0700);
    CHECK(mode_of(parent) == 0755);
  }
  SUBCASE("an existing directory with group/other bits: refused, its mode unchanged") {
    const std::string marker = s.scratch.root + "/ran";
    const Finished f = tool({"run", "--lock-dir", parent, "--repo", s.scratch.repo, "--", "touch", marker});
    CAPTURE(both(f));
    CHECK(f.status == 3);
    CHECK(f.err == "apnea-locks run: unsafe Apnea lock directory: " + parent +
                       ": mode 0755 has group/other bits (apnea-locks changes the mode of no "
                       "directory it did not create)\n");
    CHECK(mode_of(parent) == 0755);
    CHECK_FALSE(exists(marker));
    CHECK(std::filesystem::is_empty(parent));
  }
  SUBCASE("a symlink to a private directory: refused, nothing created through it") {
    const std::string target = s.scratch.root + "/private";
    make_dir(target, 0700);
    const std::string link = s.scratch.root + "/link";
    REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
    const Finished f = tool({"run", "--lock-dir", link, "--repo", s.scratch.repo, "--", "true"});
    CHECK(f.status == 3);
    CHECK(f.err.find("unsafe Apnea lock directory: " + link) != std::string::npos);
    CHECK(std::filesystem::is_empty(target));
  }
  SUBCASE("an existing private directory is used as it is") {
    const Finished f = tool({"run", "--lock-dir", s.locks(), "--repo", s.scratch.repo, "--", "true"});
    CHECK(f.status == 0);
    CHECK(mode_of(s.locks()) == 0700);
  }
  SUBCASE("a relative --lock-dir: the working directory is never chmod'ed, a new leaf is") {
    auto run_in_parent = [&](const std::string& lock_dir) {
      return finish({"sh", "-c", "cd \"$0\" && exec \"$1\" run --lock-dir \"$2\" --repo \"$3\" -- true",
                     parent, locks_bin(), lock_dir, s.scratch.repo});
    };
    const Finished dot = run_in_parent(".");
    CAPTURE(both(dot));
    CHECK(dot.status == 3);
    CHECK(mode_of(parent) == 0755);
    CHECK(std::filesystem::is_empty(parent));
    const Finished leaf = run_in_parent("leaf");
    CAPTURE(both(leaf));
    CHECK(leaf.status == 0);
    CHECK(mode_of(parent + "/leaf") == 0700);
    CHECK(mode_of(parent) == 0755);
  }
  SUBCASE("Apnea's own area is created and forced to 0700, as Apnea does") {
    const std::string tmp = s.scratch.root + "/tmp";
    make_dir(tmp, 0755);
    const std::string account = tmp + "/apnea-" + std::to_string(::getuid());
    make_dir(account, 0755);  // Apnea forces its own directory back to 0700
    const Finished f = tool({"run", "--repo", s.scratch.repo, "--", "true"}, {{"TMPDIR", tmp}});
    CAPTURE(both(f));
    CHECK(f.status == 0);
    CHECK(mode_of(account) == 0700);
    CHECK(mode_of(account + "/operation-locks") == 0700);
    CHECK(mode_of(tmp) == 0755);  // the temp directory itself is not Apnea's
  }
}

TEST_CASE("--output-file replaces a symlink with a new file: no setuid, the target untouched") {
  Setup s;
  const std::string victim = s.scratch.root + "/victim";
  write_file(victim, "original\n", 04755);
  const mode_t expected = 0644 & ~current_umask();

  for (const std::string command : {"status", "check"}) {
    CAPTURE(command);
    const std::string out = s.scratch.root + "/" + command + ".prom";
    REQUIRE(::symlink(victim.c_str(), out.c_str()) == 0);
    const std::vector<std::string> args =
        command == "status"
            ? std::vector<std::string>{"status", "--lock-dir", s.locks(), "--format", "prometheus",
                                       "--output-file", out}
            : std::vector<std::string>{"check", "--lock-dir", s.locks(), "--prometheus",
                                       "--output-file", out};
    const Finished f = tool(args);
    CAPTURE(both(f));
    CHECK(f.status == 0);
    struct stat st {};
    REQUIRE(::lstat(out.c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK((st.st_mode & 07777) == expected);
    CHECK(read_all(out).find("apnea_locks_scrape_success") != std::string::npos);
    CHECK(read_all(victim) == "original\n");
    CHECK(mode_of(victim) == 04755);
  }

  // A regular setuid file in place keeps its rwx bits, never the setuid bit.
  const std::string regular = s.scratch.root + "/regular.prom";
  write_file(regular, "old\n", 04750);
  CHECK(tool({"status", "--lock-dir", s.locks(), "--format", "prometheus", "--output-file", regular})
            .status == 0);
  CHECK(mode_of(regular) == 0750);
  CHECK(read_all(regular).find("apnea_locks_scrape_success") != std::string::npos);
}

TEST_CASE("a TMPDIR that is not UTF-8 names the directory Node names (U+FFFD)") {
  Setup s;
  // Node decodes the environment as UTF-8: 0xFF becomes U+FFFD (EF BF BD).
  const std::string raw = s.scratch.root + "/bad\xff" "dir";
  const std::string decoded = s.scratch.root + "/bad\xef\xbf\xbd" "dir";
  make_dir(raw);
  make_dir(decoded);
  const std::map<std::string, std::string> env{{"TMPDIR", raw}};
  const std::string area = decoded + "/apnea-" + std::to_string(::getuid()) + "/operation-locks";

  const Finished status = tool({"status", "-J"}, env);
  CAPTURE(both(status));
  CHECK(status.status == 0);
  CHECK(std::string(boost::json::parse(status.out).at("lock_dir").as_string()) == area);

  // run takes its lock in the decoded directory, as Apnea would; nothing under the raw one.
  const Finished held = tool({"run", "--repo", s.scratch.repo, "--print-token", "--", "true"}, env);
  CAPTURE(both(held));
  CHECK(held.status == 0);
  CHECK(held.err.find("holding " + area + "/repository-") != std::string::npos);
  CHECK(mode_of(area) == 0700);
  CHECK(std::filesystem::is_empty(raw));
}
