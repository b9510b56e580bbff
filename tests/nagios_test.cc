// check's Nagios conventions: the range syntax, consistent thresholds, -v counting, and the
// -t timeout (a check staged to hang forever through the System seam ends UNKNOWN, exit 3).
#include "cli/nagios.h"

#include <doctest/doctest.h>
#include <fnmatch.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "area_builder.h"
#include "cli/commands.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::cli;
using namespace apnea_locks::testing;

namespace {

NagiosRange range(std::string_view text, RangeUnit unit = RangeUnit::count) {
  auto parsed = parse_range(text, unit);
  REQUIRE_MESSAGE(parsed, text);
  return *parsed;
}

}  // namespace

TEST_CASE("Nagios ranges: N, N:, ~:N, N:M and @ alert as the plugin guidelines say") {
  struct Case {
    const char* text;
    std::vector<double> alert, quiet;
  };
  const std::vector<Case> cases = {
      {"10", {-1, 11, 1000}, {0, 5, 10}},            // outside 0..10
      {"10:", {-5, 0, 9}, {10, 11, 1e9}},            // below 10
      {"~:10", {11, 100}, {-1e9, -1, 0, 10}},        // above 10
      {"10:20", {9, 21}, {10, 15, 20}},              // outside 10..20
      {"@10:20", {10, 15, 20}, {9, 21}},             // inside 10..20
      {"@5", {0, 3, 5}, {-1, 6}},                    // inside 0..5
      {"~:", {}, {-1e9, 0, 1e9}},                    // never
      {"@~:", {-1e9, 0, 1e9}, {}},                   // always
      {"-5:-1", {-6, 0}, {-5, -3, -1}},              // negative numbers
      {"0", {1, -1}, {0}},                           // any at all
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const NagiosRange r = range(c.text);
    for (double v : c.alert) CHECK_MESSAGE(r.alerts(v), v);
    for (double v : c.quiet) CHECK_MESSAGE(!r.alerts(v), v);
    CHECK(range(r.text()).text() == r.text());  // the perfdata form parses back the same
  }
  CHECK(range("10").text() == "10");
  CHECK(range("0:10").text() == "10");
  CHECK(range("10:").text() == "10:");
  CHECK(range("~:10").text() == "~:10");
  CHECK(range("@10:20").text() == "@10:20");
  // Durations: a bare number is seconds, s/m/h/d scale it; the text is in seconds.
  CHECK(range("1h", RangeUnit::seconds).text() == "3600");
  CHECK(range("@1m:2h", RangeUnit::seconds).text() == "@60:7200");
  CHECK(range("~:1d", RangeUnit::seconds).alerts(86401));
}

TEST_CASE("bad ranges are one message naming the text; nothing unbounded is parsed") {
  for (const char* text : {"", "@", ":", ":10", "10:5", "1h", "1e3", "0x10", " 5", "5 ", "+5", "abc",
                           "1.5", "inf", "~", "~10", "10:~", "@@1", "1::2", "1234567890123",
                           "1:2:3"}) {
    CAPTURE(text);
    auto parsed = parse_range(text, RangeUnit::count);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().find("range '") == 0);
  }
  CHECK_FALSE(parse_range(std::string(65, '1'), RangeUnit::count));
  CHECK_FALSE(parse_range("1w", RangeUnit::seconds));
  CHECK_FALSE(parse_range("h", RangeUnit::seconds));
}

TEST_CASE("a critical range may never alert where the warning range does not") {
  auto ok = [](const char* w, const char* c) { return consistent(range(w), range(c)); };
  CHECK(ok("3600", "7200"));      // CRITICAL older than 2 h, WARNING older than 1 h
  CHECK(ok("3600", "3600"));
  CHECK_FALSE(ok("7200", "3600"));  // CRITICAL at 1 h before WARNING at 2 h
  CHECK(ok("10:", "5:"));         // below 10 warns, below 5 is critical
  CHECK_FALSE(ok("5:", "10:"));
  CHECK(ok("@0:100", "@0:10"));
  CHECK_FALSE(ok("@0:10", "@0:100"));
  CHECK(ok("10:20", "@50:60"));   // inside 50..60 is outside 10..20
  CHECK_FALSE(ok("10:20", "@15:60"));
  CHECK(ok("@~:", "5"));          // warning everywhere
  CHECK_FALSE(ok("@~:100", "5"));  // above 100 would be critical but not warning
  CHECK(ok("~:", "~:"));
}

TEST_CASE("METRIC=RANGE names a count; a bare RANGE the default metric") {
  const std::vector<std::string> metrics = {"age", "stale"};
  auto age = parse_threshold("2h", "age", metrics, {"age"});
  REQUIRE(age);
  CHECK(age->metric == "age");
  CHECK(age->range.text() == "7200");
  auto stale = parse_threshold("stale=0", "age", metrics, {"age"});
  REQUIRE(stale);
  CHECK(stale->metric == "stale");
  CHECK(stale->range.alerts(1));
  CHECK_FALSE(parse_threshold("stale=1h", "age", metrics, {"age"}));  // counts take no unit
  auto unknown = parse_threshold("bogus=1", "age", metrics, {"age"});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().find("unknown metric 'bogus'") != std::string::npos);
}

TEST_CASE("nagios_text: the text escaper's, and '|' (perfdata follows it) as \\x7c") {
  CHECK(nagios_text("/tmp/a|b||c") == "/tmp/a\\x7cb\\x7c\\x7cc");
  CHECK(nagios_text("esc\x1b|\xe2\x80\xae\xff") == "esc\\x1b\\x7c\\u202e\\xff");
  CHECK(nagios_text("plain text, 2 locks") == "plain text, 2 locks");
}

TEST_CASE("-v, -vv, -vvv and --verbose count up to 3; the rest is left for the parser") {
  auto [level, rest] = take_verbosity({"-v", "--lock-dir", "x", "-vv", "--verbose"});
  CHECK(level == 3);
  CHECK(rest == std::vector<std::string>{"--lock-dir", "x"});
  CHECK(take_verbosity({"-V"}).first == 0);
  CHECK(take_verbosity({"-vx"}).second == std::vector<std::string>{"-vx"});
  CHECK(take_verbosity({"--", "-v"}).first == 0);
}

TEST_CASE("-t: a check that hangs ends UNKNOWN with exit 3 when the timeout expires") {
  TempDir temp;
  const std::string area = temp / "locks";
  make_dir(area);
  int out[2];
  REQUIRE(::pipe(out) == 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    StagedSystem system;
    // The listing of the area never returns (a dead NFS server, say): only -t ends it.
    system.before = [](std::string_view op, const std::string&) {
      if (op == "list_directory" || op == "list_directory_at")
        for (;;) ::pause();
    };
    const int status = check_main(system, {"--lock-dir", area, "-t", "1"});
    ::_exit(100 + status);  // never reached when the timeout works
  }
  ::close(out[1]);
  std::string text;
  char buffer[512];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(text == "APNEA-LOCKS UNKNOWN - timed out after 1s (-t) checking " + area + "\n");
}

namespace {

/// One sudoers line the shipped Nagios commands ask for: `USER HOST=(RUNAS) NOPASSWD: CMND ARGS`.
struct SudoersLine {
  std::string runas, command, args;
  /// Whether sudo lets `command args` run as `as` through this line: the command exactly,
  /// the arguments matched as sudo 1.9 matches them (fnmatch(3) without flags, so `*` also
  /// matches spaces; no arguments in the line allow any).
  bool allows(const std::string& as, const std::string& cmnd, const std::string& given) const {
    if (cmnd != command || (runas != "ALL" && runas != as)) return false;
    if (args.empty()) return true;
    if (args == "\"\"") return given.empty();
    return ::fnmatch(args.c_str(), given.c_str(), 0) == 0;
  }
};

std::string contrib_text(const std::string& relative) {
  std::ifstream in(test_env("APNEA_LOCKS_SOURCE") + "/" + relative, std::ios::binary);
  REQUIRE_MESSAGE(in, relative);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

TEST_CASE("the shipped sudoers lines run the shipped commands and nothing else") {
  const std::string commands = contrib_text("contrib/nagios/apnea-locks-commands.cfg");
  std::vector<SudoersLine> lines;
  const std::regex sudoers(R"(#\s+nagios\s+ALL=\((\S+)\)\s+NOPASSWD:\s+(\S+)[ \t]*([^\n]*))");
  for (std::sregex_iterator it(commands.begin(), commands.end(), sudoers), end; it != end; ++it)
    lines.push_back({(*it)[1], (*it)[2], (*it)[3]});
  REQUIRE(lines.size() >= 2);

  // Each command_line that goes through sudo, with the service's argument for $ARG1$.
  const std::regex command_line(R"(command_line\s+/usr/bin/sudo -n -u (\S+) (\S+) ([^\n]*))");
  int through_sudo = 0;
  for (std::sregex_iterator it(commands.begin(), commands.end(), command_line), end; it != end; ++it) {
    std::string as = (*it)[1];
    if (as == "$ARG1$") as = "ann";  // the example service's account
    const std::string cmnd = (*it)[2], args = (*it)[3];
    ++through_sudo;
    bool allowed = false;
    for (const SudoersLine& line : lines) allowed = allowed || line.allows(as, cmnd, args);
    CHECK_MESSAGE(allowed, "no shipped sudoers line allows: sudo -u ", as, " ", cmnd, " ", args);
  }
  CHECK(through_sudo >= 2);

  // What the nagios account must never get through them, as any account.
  const std::vector<std::string> hostile = {
      "check -w 1h -c 4h --output-file /etc/passwd --prometheus",
      "check --all-users -w 1h -c 4h --prometheus --output-file /etc/shadow",
      "check -w 1h -c 4h --lock-dir /root -vv",
      "check --lock-dir /root -vv",
      "reclaim --all --force --yes",
      "run -- /bin/sh",
  };
  for (const SudoersLine& line : lines) {
    INFO("sudoers: (", line.runas, ") ", line.command, " ", line.args);
    CHECK(line.runas != "ALL");
    CHECK(line.args.find_first_of("*?[") == std::string::npos);
    CHECK(!line.args.empty());
    if (line.runas == "root") CHECK(line.args.find("--all-users") != std::string::npos);
    for (const std::string& args : hostile)
      for (const char* as : {"root", "ann"}) CHECK_MESSAGE(!line.allows(as, line.command, args), args);
  }
}
