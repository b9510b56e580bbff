// The built `apnea-locks check` against real lock areas: the Nagios status line, its
// perfdata and thresholds, the exit status for each state, and the long output.
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "process_util.h"
#include "prometheus_parser.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// One perfdata item: 'label'=value[UOM];[warn];[crit];[min];[max].
struct Perf {
  double value = 0;
  std::string uom, warn, crit, min, max;
};

/// The parts of a plugin's output.
struct CheckOutput {
  int status = -1;
  std::string word;     ///< OK, WARNING, CRITICAL, UNKNOWN
  std::string summary;  ///< between " - " and " | "
  std::map<std::string, Perf> perf;
  bool has_perfdata = false;
  std::vector<std::string> details;  ///< the lines after the first
  std::string raw;
};

/// Splits `text` at each `sep`.
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (true) {
    const std::size_t next = text.find(sep, at);
    out.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) return out;
    at = next + 1;
  }
}

/// A perfdata number: optional minus, digits, optional fraction.
bool is_number(const std::string& text) {
  std::size_t i = text.starts_with('-') ? 1 : 0;
  const std::size_t digits = i;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == digits) return false;
  if (i < text.size() && text[i] == '.') {
    const std::size_t fraction = ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == fraction) return false;
  }
  return i == text.size();
}

/// One perfdata item, strictly: label=value[UOM];warn;crit;min[;max].
Perf parse_perf_item(const std::string& word, std::string& label) {
  const auto eq = word.find('=');
  REQUIRE_MESSAGE(eq != std::string::npos, word);
  label = word.substr(0, eq);
  REQUIRE_MESSAGE(!label.empty(), word);
  for (char c : label) REQUIRE_MESSAGE((std::isalnum(static_cast<unsigned char>(c)) || c == '_'), word);
  const auto fields = split(word.substr(eq + 1), ';');
  REQUIRE_MESSAGE((fields.size() == 4 || fields.size() == 5), word);
  std::string value = fields[0];
  Perf perf;
  for (const char* uom : {"s", "%", "B", "KB", "MB", "GB", "TB", "c"}) {
    if (value.ends_with(uom) && is_number(value.substr(0, value.size() - std::strlen(uom)))) {
      perf.uom = uom;
      value.resize(value.size() - std::strlen(uom));
      break;
    }
  }
  REQUIRE_MESSAGE(is_number(value), word);
  perf.value = std::stod(value);
  perf.warn = fields[1];
  perf.crit = fields[2];
  perf.min = fields[3];
  perf.max = fields.size() == 5 ? fields[4] : "";
  // warn and crit are Nagios ranges ([@][~|N:][N]); min and max numbers.
  for (std::size_t i = 1; i < fields.size(); ++i) {
    std::string field = fields[i];
    if (i <= 2) {
      if (field.starts_with('@')) field.erase(0, 1);
      if (const auto colon = field.find(':'); colon != std::string::npos) {
        const std::string start = field.substr(0, colon);
        CHECK_MESSAGE((start == "~" || is_number(start)), word);
        field = field.substr(colon + 1);
      }
    }
    CHECK_MESSAGE((field.empty() || is_number(field)), word);
  }
  return perf;
}

CheckOutput parse_check(const CommandResult& result) {
  CheckOutput out;
  out.status = result.status;
  out.raw = result.out;
  std::istringstream lines(result.out);
  std::string first;
  REQUIRE_MESSAGE(std::getline(lines, first), result.out);
  const std::string prefix = "APNEA-LOCKS ";
  REQUIRE_MESSAGE(first.starts_with(prefix), first);
  const auto dash = first.find(" - ");
  REQUIRE_MESSAGE(dash != std::string::npos, first);
  out.word = first.substr(prefix.size(), dash - prefix.size());
  const auto bar = first.find(" | ");
  out.summary = first.substr(dash + 3, bar == std::string::npos ? std::string::npos : bar - dash - 3);
  CHECK_MESSAGE(out.summary.find('|') == std::string::npos, first);
  if (bar != std::string::npos) {
    out.has_perfdata = true;
    for (const std::string& word : split(first.substr(bar + 3), ' ')) {
      std::string label;
      Perf perf = parse_perf_item(word, label);
      CHECK_MESSAGE(out.perf.emplace(label, perf).second, "repeated perfdata label ", label);
    }
  }
  std::string line;
  while (std::getline(lines, line)) {
    // Nagios takes what follows the first '|' of any line as perfdata: no other '|'.
    CHECK_MESSAGE(line.find('|') == std::string::npos, line);
    out.details.push_back(line);
  }
  CHECK_MESSAGE(first.find('|') == (bar == std::string::npos ? std::string::npos : bar + 1), first);
  // Nagios: the exit status is the status word.
  const std::map<std::string, int> codes = {{"OK", 0}, {"WARNING", 1}, {"CRITICAL", 2}, {"UNKNOWN", 3}};
  REQUIRE_MESSAGE(codes.count(out.word) == 1, first);
  CHECK_MESSAGE(codes.at(out.word) == out.status, result.out);
  return out;
}

CheckOutput check(const std::string& area, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {test_env("APNEA_LOCKS_BIN"), "check", "--lock-dir", area};
  args.insert(args.end(), more.begin(), more.end());
  return parse_check(run_command(args));
}

/// A fresh lock area (mode 0700) in a temp folder.
struct Area {
  TempDir root;
  std::string path = root / "locks";
  Area() { make_dir(path); }

  std::string lock(const std::string& seed, std::string_view owner, double age_s = 0,
                   LockKind kind = LockKind::repository, mode_t file_mode = 0600) {
    const std::string name = fake_lock_name(seed, kind);
    make_entry(path, name, owner, 0700, file_mode);
    if (age_s > 0) age_path(path + "/" + name, age_s);
    return path + "/" + name;
  }
};

const std::vector<std::string> perf_labels = {"locks", "live", "stale", "malformed", "debris",
                                              "guards", "attention", "oldest_age_s"};

void check_perf_thresholds(const CheckOutput& out, const std::string& warn_age,
                           const std::string& crit_age) {
  REQUIRE(out.has_perfdata);
  for (const auto& label : perf_labels) {
    REQUIRE_MESSAGE(out.perf.count(label) == 1, label);
    CHECK(out.perf.at(label).min == "0");
  }
  CHECK(out.perf.at("malformed").crit == "0");
  CHECK(out.perf.at("malformed").warn == "");
  CHECK(out.perf.at("guards").crit == "0");
  CHECK(out.perf.at("debris").warn == "0");
  CHECK(out.perf.at("attention").warn == "0");
  CHECK(out.perf.at("locks").warn == "");
  CHECK(out.perf.at("locks").crit == "");
  CHECK(out.perf.at("oldest_age_s").uom == "s");
  CHECK(out.perf.at("oldest_age_s").warn == warn_age);
  CHECK(out.perf.at("oldest_age_s").crit == crit_age);
}

}  // namespace

TEST_CASE("check: an empty area and Apnea's missing area are OK; a missing --lock-dir is UNKNOWN") {
  Area area;
  CheckOutput out = check(area.path);
  CHECK(out.word == "OK");
  CHECK(out.summary == "no locks");
  check_perf_thresholds(out, "3600", "");
  for (const auto& label : perf_labels) CHECK(out.perf.at(label).value == 0);
  CHECK(out.details.empty());

  // Only Apnea's own area may be absent (no lock taken yet).
  CheckOutput missing = parse_check(run_command(
      {test_env("APNEA_LOCKS_BIN"), "check"}, "TMPDIR=" + shell_quote(area.root.path()) + " "));
  CHECK(missing.word == "OK");
  CHECK(missing.summary.find("no lock area yet") == 0);
  CHECK(missing.perf.at("locks").value == 0);

  // A directory the user named is a promise: its absence is an error naming it.
  CheckOutput typo = check(area.root / "nothing-here");
  CHECK(typo.word == "UNKNOWN");
  CHECK(typo.summary.find(area.root / "nothing-here") != std::string::npos);
  CHECK(!typo.has_perfdata);
}

TEST_CASE("check: live locks are OK until --warn-age, then WARNING, then CRITICAL at --crit-age") {
  Area area;
  area.lock("fresh", owner_json(::getpid()));
  CheckOutput fresh = check(area.path);
  CHECK(fresh.word == "OK");
  CHECK(fresh.perf.at("locks").value == 1);
  CHECK(fresh.perf.at("live").value == 1);
  CHECK(fresh.perf.at("attention").value == 0);
  CHECK(fresh.summary.find("1 lock (1 live, 0 stale, 0 malformed)") == 0);

  const std::string old = area.lock("old", owner_json(::getpid()), 7200);
  CheckOutput warned = check(area.path);
  CHECK(warned.word == "WARNING");
  CHECK(warned.perf.at("oldest_age_s").value >= 7200);
  CHECK(warned.perf.at("oldest_age_s").value < 7300);
  CHECK(warned.summary.find("1 lock older than 3600s") == 0);
  REQUIRE(warned.details.size() == 1);
  CHECK(warned.details[0].find("live lock " + old + " (pid-alive, pid ") == 0);
  CHECK(warned.perf.at("attention").value == 0);  // old, but nothing to reclaim

  CheckOutput higher = check(area.path, {"--warn-age", "10000"});
  CHECK(higher.word == "OK");
  check_perf_thresholds(higher, "10000", "");

  CheckOutput critical = check(area.path, {"--crit-age", "3600"});
  CHECK(critical.word == "CRITICAL");
  CHECK(critical.summary.find("1 lock older than 3600s") == 0);
  check_perf_thresholds(critical, "", "3600");  // -c alone: no default warning age beside it

  CheckOutput units = check(area.path, {"--warn-age", "7300", "--crit-age", "1d"});
  CHECK(units.word == "OK");
  check_perf_thresholds(units, "7300", "86400");
}

TEST_CASE("check: a dead owner Apnea will not reclaim is WARNING; one it will is OK") {
  Area area;
  const long long dead = dead_pid();
  area.lock("healing", owner_json(dead), 120);  // Apnea reclaims it on its next run
  CheckOutput healing = check(area.path);
  CHECK(healing.word == "OK");
  CHECK(healing.perf.at("stale").value == 1);
  CHECK(healing.perf.at("attention").value == 0);

  const std::string global = area.lock("global", owner_json(dead), 120, LockKind::global_setup);
  CheckOutput warned = check(area.path);
  CHECK(warned.word == "WARNING");
  CHECK(warned.summary.find("1 stale lock Apnea will not reclaim") == 0);
  CHECK(warned.perf.at("stale").value == 2);
  CHECK(warned.perf.at("attention").value == 1);
  REQUIRE(warned.details.size() == 1);
  CHECK(warned.details[0].find("stale lock " + global + " (pid-dead, pid " + std::to_string(dead) + ")") == 0);
  CHECK(warned.details[0].find("fix: apnea-locks reclaim --lock-dir " + area.path) != std::string::npos);
}

TEST_CASE("check: debris is WARNING") {
  Area area;
  const std::string base = fake_lock_name("transient");
  make_entry(area.path, base + ".candidate.dead", owner_json(dead_pid()));
  make_entry(area.path, base + ".tombstone.live", owner_json(::getpid()));  // in flight: fine
  CheckOutput out = check(area.path);
  CHECK(out.word == "WARNING");
  CHECK(out.summary.find("1 debris entry") == 0);
  CHECK(out.perf.at("debris").value == 1);
  CHECK(out.perf.at("locks").value == 0);
  REQUIRE(out.details.size() == 1);
  CHECK(out.details[0].find("debris candidate ") == 0);
  CHECK(out.details[0].find("fix: apnea-locks reclaim ") != std::string::npos);
}

TEST_CASE("check: malformed metadata is CRITICAL") {
  Area area;
  area.lock("live", owner_json(::getpid()));
  area.lock("mode", owner_json(::getpid()), 0, LockKind::repository, 0644);
  area.lock("syntax", "{\"pid\":");
  CheckOutput out = check(area.path);
  CHECK(out.word == "CRITICAL");
  CHECK(out.summary.find("2 malformed locks") == 0);
  CHECK(out.summary.find("3 locks (1 live, 0 stale, 2 malformed)") != std::string::npos);
  CHECK(out.perf.at("malformed").value == 2);
  CHECK(out.perf.at("attention").value == 2);
  CHECK(out.details.size() == 2);
}

TEST_CASE("check: a leftover reclaim guard is CRITICAL; a recent one is OK") {
  Area area;
  const std::string guard = area.path + "/" + fake_lock_name("guarded") + ".reclaim";
  make_dir(guard);
  CheckOutput recent = check(area.path);
  CHECK(recent.word == "OK");
  CHECK(recent.perf.at("guards").value == 0);

  age_path(guard, 600);  // past the default --guard-age of 5 minutes
  CheckOutput left = check(area.path);
  CHECK(left.word == "CRITICAL");
  CHECK(left.summary.find("1 leftover reclaim guard") == 0);
  CHECK(left.perf.at("guards").value == 1);
  CHECK(check(area.path, {"--guard-age", "900"}).word == "OK");
  CHECK(check(area.path, {"--guard-age", "15m"}).word == "OK");
}

TEST_CASE("check: a '|' from a path is written \\x7c, so that only the perfdata follows a '|'") {
  TempDir root;
  const std::string dir = root / "pipe|dir";  // parse_check: one '|' on the status line, none after
  make_dir(dir);
  const std::string global = fake_lock_name("global", LockKind::global_setup);
  make_entry(dir, global, owner_json(dead_pid()));
  age_path(dir + "/" + global, 120);
  const std::string shown = root / "pipe\\x7cdir";
  CheckOutput out = check(dir, {"-vv"});
  CHECK(out.word == "WARNING");
  CHECK(out.perf.at("stale").value == 1);
  REQUIRE(out.details.size() == 2);
  CHECK(out.details[0].find("lock area " + shown + ";") == 0);
  CHECK(out.details[1].find("stale lock " + shown + "/" + global) == 0);
  // The fix is a shell word that still names the path when pasted: $'...\x7c...'.
  const std::size_t fix = out.details[1].find("fix: apnea-locks reclaim --lock-dir ");
  REQUIRE(fix != std::string::npos);
  const std::string pasted = out.details[1].substr(fix + 5);
  CAPTURE(pasted);
  const std::vector<std::string> argv = bash_words(pasted);
  CHECK(std::find(argv.begin(), argv.end(), dir) != argv.end());

  // On the status line: a missing area, an unsafe one.
  CheckOutput missing = check(root / "missing|dir");
  CHECK(missing.word == "UNKNOWN");
  CHECK(missing.summary.find(root / "missing\\x7cdir") != std::string::npos);
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  CheckOutput unsafe = check(dir);
  CHECK(unsafe.word == "CRITICAL");
  CHECK(unsafe.summary.find("unsafe Apnea lock directory: " + shown) == 0);
}

TEST_CASE("check: an unsafe area is CRITICAL, an unreadable one UNKNOWN, without perfdata") {
  Area area;
  REQUIRE(::chmod(area.path.c_str(), 0755) == 0);
  CheckOutput unsafe = check(area.path);
  CHECK(unsafe.word == "CRITICAL");
  CHECK(unsafe.summary.find("unsafe Apnea lock directory: " + area.path) == 0);
  CHECK(!unsafe.has_perfdata);

  write_file(area.root / "file", "x");
  CheckOutput unreadable = check(area.root / "file/locks");
  CHECK(unreadable.word == "UNKNOWN");
  CHECK(!unreadable.has_perfdata);
}

TEST_CASE("check: usage errors are UNKNOWN on the status line") {
  Area area;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--bogus"}, {"--warn-age", "-1"}, {"--crit-age", "abc"},
        {"--warn-age", "7300.5"}, {"--crit-age", "0"}, {"--warn-age", "2h", "--crit-age", "1h"},
        {"--output-file", area.root / "x.prom"}, {"stray"}}) {
    CheckOutput out = check(area.path, args);
    CHECK_MESSAGE(out.word == "UNKNOWN", out.raw);
    CHECK(out.summary.find("usage: ") == 0);
  }
  CommandResult help = run_command({test_env("APNEA_LOCKS_BIN"), "check", "--help"});
  CHECK(help.status == 0);
  CHECK(help.out.find("--warn-age") != std::string::npos);
}

TEST_CASE("check: --repo looks only at that repository's entries") {
  Area area;
  area.lock("bad", "{");
  TempDir repo;
  CHECK(check(area.path).word == "CRITICAL");
  CheckOutput mine = check(area.path, {"--repo", repo.path()});
  CHECK(mine.word == "OK");
  CHECK(mine.perf.at("locks").value == 0);
}

TEST_CASE("check --prometheus: the metrics with the check status, or a file and the line") {
  Area area;
  area.lock("syntax", "{");
  CommandResult metrics = run_command({test_env("APNEA_LOCKS_BIN"), "check", "--lock-dir", area.path, "--prometheus"});
  CHECK(metrics.status == 2);
  auto parsed = parse_exposition(metrics.out);
  REQUIRE_MESSAGE(parsed, parsed.error());
  CHECK(parsed->value("apnea_locks_check_status") == 2);
  CHECK(parsed->value("apnea_locks_entries", {{"kind", "repository"}, {"role", "lock"}, {"state", "malformed"}}) == 1);

  const std::string file = area.root / "apnea.prom";
  CheckOutput line = check(area.path, {"--prometheus", "--output-file", file});
  CHECK(line.word == "CRITICAL");
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  auto written = parse_exposition(text.str());
  REQUIRE_MESSAGE(written, written.error());
  CHECK(written->value("apnea_locks_check_status") == 2);

  CheckOutput failed = check(area.path, {"--prometheus", "--output-file", area.root / "no/dir/x.prom"});
  CHECK(failed.word == "UNKNOWN");
  CHECK(failed.summary.find("cannot write ") == 0);
}

TEST_CASE("check: long output lists critical entries first, at most 20 lines") {
  Area area;
  const long long dead = dead_pid();
  for (int i = 0; i < 25; ++i)
    make_entry(area.path, fake_lock_name("t" + std::to_string(i)) + ".candidate.x", owner_json(dead));
  const std::string bad = area.lock("zzz-malformed", "{");
  CheckOutput out = check(area.path);
  CHECK(out.word == "CRITICAL");
  CHECK(out.perf.at("debris").value == 25);
  REQUIRE(out.details.size() == 21);
  CHECK(out.details.front().find("malformed lock " + bad + " (json-syntax)") == 0);
  for (std::size_t i = 1; i < 20; ++i) CHECK(out.details[i].find("debris candidate ") == 0);
  CHECK(out.details.back() == "... and 6 more (-v lists them all)");
}

TEST_CASE("check: a lock older than --crit-age (equal to --warn-age) is CRITICAL and listed once") {
  Area area;
  const std::string old = area.lock("old", owner_json(::getpid()), 600);
  CheckOutput out = check(area.path, {"--warn-age", "5m", "--crit-age", "300"});
  CHECK(out.word == "CRITICAL");
  REQUIRE(out.details.size() == 1);
  CHECK(out.details[0].find("live lock " + old) == 0);
}

TEST_CASE("check -w/-c: Nagios ranges for the lock age, with @, ~ and start:end") {
  Area area;
  const std::string old = area.lock("old", owner_json(::getpid()), 600);  // 10 minutes
  struct Case {
    std::vector<std::string> args;
    std::string word;
    std::string warn, crit;  // perfdata
  };
  const std::vector<Case> cases = {
      {{"-w", "300"}, "WARNING", "300", ""},                // older than 5 m
      {{"-w", "5m", "-c", "9m"}, "CRITICAL", "300", "540"}, // units, critical wins
      {{"--warning", "1h", "--critical", "2h"}, "OK", "3600", "7200"},
      {{"-w", "~:300"}, "WARNING", "~:300", ""},
      {{"-w", "@500:700"}, "WARNING", "@500:700", ""},      // inside 500..700
      {{"-w", "@0:100"}, "OK", "@100", ""},                 // the same as @100
      {{"-w", "700:"}, "WARNING", "700:", ""},              // younger than 700 s
      {{"-w", "age=100:2000"}, "OK", "100:2000", ""},
      {{"-w", "oldest_age_s=100"}, "WARNING", "100", ""},
      {{"-w", "@~:", "-c", "@0:1000"}, "CRITICAL", "@~:", "@1000"},
      {{"--warn-age", "5m"}, "WARNING", "300", ""},         // deprecated spelling
      {{"--warn-age", "5m", "--crit-age", "9m"}, "CRITICAL", "300", "540"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    CheckOutput out = check(area.path, c.args);
    CHECK_MESSAGE(out.word == c.word, out.raw);
    CHECK(out.perf.at("oldest_age_s").warn == c.warn);
    CHECK(out.perf.at("oldest_age_s").crit == c.crit);
    if (c.word != "OK") {
      REQUIRE(out.details.size() == 1);
      CHECK(out.details[0].find("live lock " + old) == 0);
    }
  }
  CHECK(check(area.path, {"-w", "300"}).summary.find("1 lock older than 300s") == 0);
  CHECK(check(area.path, {"-w", "@500:700"}).summary.find("1 lock aged within @500:700s") == 0);
}

TEST_CASE("check -w/-c METRIC=RANGE: thresholds on the counts, which only add alerts") {
  Area area;
  area.lock("a", owner_json(::getpid()));
  area.lock("b", owner_json(::getpid()));
  CheckOutput two = check(area.path, {"-w", "locks=1", "-c", "locks=5"});
  CHECK(two.word == "WARNING");
  CHECK(two.summary.find("locks=2 outside 1") == 0);
  CHECK(two.perf.at("locks").warn == "1");
  CHECK(two.perf.at("locks").crit == "5");
  CHECK(check(area.path, {"-c", "live=@2:"}).word == "CRITICAL");
  CHECK(check(area.path, {"-w", "live=2:"}).word == "OK");
  CHECK(check(area.path, {"-w", "stale=0"}).word == "OK");

  // A built-in level stays: a malformed lock is CRITICAL whatever range is given for it.
  area.lock("bad", "{");
  CheckOutput bad = check(area.path, {"-c", "malformed=10"});
  CHECK(bad.word == "CRITICAL");
  CHECK(bad.perf.at("malformed").crit == "10");
}

TEST_CASE("check: inconsistent or malformed thresholds are usage errors (UNKNOWN), bounded and one line") {
  Area area;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-w", "2h", "-c", "1h"}, {"-w", "10:", "-c", "5"},
        {"-w", "stale=5", "-c", "stale=1"}, {"-w", "@0:10", "-c", "@0:100"},
        {"-w", "1h", "--warn-age", "1h"}, {"-c", "1h", "--crit-age", "2h"},
        {"-w", "1h", "-w", "2h"}, {"-w", "bogus=1"}, {"-w", "stale=1h"}, {"-w", "10:5"},
        {"-w", "1e3"}, {"-w", ""}, {"-w", std::string(100, '9')}, {"-c", "@"},
        {"-t", "0"}, {"-t", "2h"}, {"-t", "abc"}}) {
    CAPTURE(args);
    CommandResult result = run_command([&] {
      std::vector<std::string> argv = {test_env("APNEA_LOCKS_BIN"), "check", "--lock-dir", area.path};
      argv.insert(argv.end(), args.begin(), args.end());
      return argv;
    }());
    CheckOutput out = parse_check(result);
    CHECK_MESSAGE(out.word == "UNKNOWN", out.raw);
    CHECK(out.summary.find("usage: ") == 0);
    CHECK(out.details.empty());
    CHECK(out.raw.size() < 400);
  }
}

TEST_CASE("check -V, -t and -v levels") {
  Area area;
  CommandResult version = run_command({test_env("APNEA_LOCKS_BIN"), "check", "-V"});
  CHECK(version.status == 0);
  CHECK(version.out.find("apnea-locks check ") == 0);
  CHECK(check(area.path, {"-t", "5"}).word == "OK");
  CHECK(check(area.path, {"--timeout", "1m"}).word == "OK");

  const long long dead = dead_pid();
  for (int i = 0; i < 22; ++i)
    make_entry(area.path, fake_lock_name("t" + std::to_string(i)) + ".candidate.x", owner_json(dead));
  area.lock("live", owner_json(::getpid()));
  const std::string live_malformed = area.lock("mode", owner_json(::getpid()), 0, LockKind::repository, 0644);

  CheckOutput quiet = check(area.path);
  CHECK(quiet.details.size() == 21);  // 20 and "... and 3 more"
  CheckOutput one = check(area.path, {"-v"});
  CHECK(one.details.size() == 23);    // every entry that needs a human
  bool next_step = false;
  for (const auto& line : one.details)
    if (line.find("live-malformed lock " + live_malformed) == 0) next_step = line.find("next step: ") != std::string::npos;
  CHECK(next_step);
  CheckOutput two = check(area.path, {"-vv"});
  REQUIRE(two.details.size() == 25);   // + the area line + the live lock
  CHECK(two.details[0].find("lock area " + area.path + "; 24 entries; thresholds: -w age=3600") == 0);
  CHECK(two.details.back().find("ok: live lock ") == 0);
  CheckOutput three = check(area.path, {"-v", "-v", "--verbose"});
  REQUIRE(three.details.size() == 26);
  CHECK(three.details[1].find("host: filesystem ") == 0);
}

TEST_CASE("check: a reclaim guard that blocks Apnea is never OK, however recent") {
  Area area;
  const std::string lock = area.lock("guarded", owner_json(dead_pid()), 120);  // past the grace
  CHECK(check(area.path).word == "OK");  // Apnea reclaims it by itself
  make_dir(lock + ".reclaim");           // a reclaimer crashed a moment ago
  CheckOutput out = check(area.path);
  CHECK(out.word == "CRITICAL");
  CHECK(out.summary.find("1 reclaim guard blocking Apnea") == 0);
  CHECK(out.perf.at("guards").value == 1);
  REQUIRE(out.details.size() >= 1);
  CHECK(out.details[0].find("stale lock " + lock) == 0);
  CHECK(out.details[0].find("its reclaim guard blocks Apnea") != std::string::npos);
  // status agrees: exit 1, never 0.
  CommandResult status = run_command({test_env("APNEA_LOCKS_BIN"), "status", "--lock-dir", area.path});
  CHECK(status.status == 1);
}

TEST_CASE("under sudo, check and status refuse --output-file and paths the invoking account could not read") {
  // SUDO_UID names the account that ran sudo (here one that owns nothing). Nothing here runs
  // sudo: the refusal rests on that variable alone, which a user setting it by hand can only
  // use against themselves.
  Area area;
  REQUIRE(::chmod(area.root.path().c_str(), 0755) == 0);
  const std::string secret = area.root / "secret";
  make_dir(secret);
  REQUIRE(::chmod(secret.c_str(), 0700) == 0);
  const std::string hidden = fake_lock_name("hidden", LockKind::repository);
  make_entry(secret, hidden, "{\"pid\":1}", 0700, 0600);
  const std::string open = area.root / "open";
  make_dir(open);
  REQUIRE(::chmod(open.c_str(), 0755) == 0);
  const std::string written = area.root / "metrics.prom";
  const std::string bin = test_env("APNEA_LOCKS_BIN");
  auto as_sudo = [&](std::vector<std::string> args, const std::string& uid = "1234") {
    std::vector<std::string> words = {"sh", "-c", "\"$0\" \"$@\" 2>&1", bin};
    words.insert(words.end(), args.begin(), args.end());
    return run_command(words, "SUDO_UID=" + uid + " ");
  };
  auto refused = [&](const CommandResult& result, int status, const std::string& option) {
    INFO(result.out);
    CHECK(result.status == status);
    CHECK(result.out.find(option) != std::string::npos);
    CHECK(result.out.find("refused under sudo (invoked by uid") != std::string::npos);
    CHECK(result.out.find(hidden) == std::string::npos);
    // A usage error: its line (check: the UNKNOWN line), then util-linux's Try line.
    CHECK(std::count(result.out.begin(), result.out.end(), '\n') == 2);
    CHECK(result.out.find("\nTry 'apnea-locks ") != std::string::npos);
    CHECK(result.out.ends_with(" --help' for more information.\n"));
  };

  refused(as_sudo({"check", "--lock-dir", area.path, "--prometheus", "--output-file", written}), 3,
          "--output-file '" + written + "'");
  refused(as_sudo({"status", "--lock-dir", area.path, "--format", "prometheus", "--output-file", written}), 2,
          "--output-file '" + written + "'");
  CHECK(::access(written.c_str(), F_OK) != 0);
  refused(as_sudo({"check", "--lock-dir", secret, "-vv"}), 3, "--lock-dir '" + secret + "'");
  refused(as_sudo({"status", "--lock-dir", secret}), 2, "--lock-dir '" + secret + "'");
  refused(as_sudo({"status", secret + "/" + hidden}), 2, "LOCKPATH '" + secret + "'");
  refused(as_sudo({"check", "--lock-dir", open, "--scan", secret}), 3, "--scan '" + secret + "'");
  refused(as_sudo({"check", "--lock-dir", open, "--repo", secret}), 3, "--repo '" + secret + "'");
  refused(as_sudo({"status", "--lock-dir", secret}, "not-a-uid"), 2, "--lock-dir '" + secret + "'");

  // A path through a directory or a symlink the invoking account owns: it could swap the
  // link between the check and the use (to a root-only directory), so it is refused even
  // where it points somewhere readable now.
  if (::geteuid() == 0) {
    const std::string theirs = area.root / "theirs";
    make_dir(theirs);
    REQUIRE(::chmod(theirs.c_str(), 0755) == 0);
    REQUIRE(::lchown(theirs.c_str(), 1234, 1234) == 0);
    REQUIRE(::symlink(open.c_str(), (theirs + "/link").c_str()) == 0);
    REQUIRE(::lchown((theirs + "/link").c_str(), 1234, 1234) == 0);
    refused(as_sudo({"check", "--lock-dir", theirs + "/link"}), 3, "--lock-dir '" + theirs + "/link'");
    const std::string root_link = area.root / "root-link";  // root's own link: nothing to swap
    REQUIRE(::symlink(open.c_str(), root_link.c_str()) == 0);
    CHECK(as_sudo({"check", "--lock-dir", root_link}).out.find("refused") == std::string::npos);
  }

  // What the invoking account could read itself is judged as without sudo (this one is
  // unsafe: its mode lets others in), and without sudo nothing is refused.
  CommandResult readable = as_sudo({"check", "--lock-dir", open});
  CHECK(readable.out.find("refused") == std::string::npos);
  CHECK(readable.out.find("unsafe") != std::string::npos);
  CommandResult own = as_sudo({"check", "--lock-dir", secret, "-vv"}, std::to_string(::getuid()));
  CHECK(own.out.find("refused") == std::string::npos);
  CHECK(own.out.find(hidden) != std::string::npos);
}
