// The Prometheus stack for real (Debian's prometheus and prometheus-node-exporter): promtool
// lints what `check --prometheus` and `status --format prometheus` write and accepts the
// shipped alert rules, whose unit tests it runs; node_exporter's textfile collector reads a
// file `check --prometheus --output-file` wrote, and its /metrics carries the apnea-locks
// series with the values of the staged area; the systemd service's script writes each
// account's file (as root). Skipped (exit 77) when a program is absent.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "area_builder.h"
#include "monitoring_util.h"
#include "process_util.h"
#include "prometheus_parser.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

std::string source(const std::string& relative) { return test_env("APNEA_LOCKS_SOURCE") + "/" + relative; }

CommandResult tool(std::vector<std::string> args) {
  args.insert(args.begin(), test_env("APNEA_LOCKS_BIN"));
  return run_command(args, "exec 2>&1; ");
}

/// An area whose metrics are known: a live repository lock (this process), a global setup
/// lock whose owner is dead (Apnea never reclaims those: needs a human), and a reclaim guard
/// left for ten minutes (CRITICAL for check).
struct Area {
  TempDir root;
  std::string path = root / "operation-locks";
  Area() {
    make_dir(path);
    make_entry(path, fake_lock_name("live"), owner_json(::getpid()));
    make_entry(path, fake_lock_name("home", LockKind::global_setup), owner_json(dead_pid()));
    const std::string guard = path + "/" + fake_lock_name("crashed") + ".reclaim";
    make_dir(guard);
    age_path(guard, 600);
  }
};

/// Checks the apnea-locks series of `text` (only its apnea_locks_* lines are read: a
/// node_exporter scrape has many more) against the staged Area.
void check_series(const std::string& text, const std::string& lock_dir) {
  std::string ours;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("apnea_locks_") || line.starts_with("# HELP apnea_locks_") ||
        line.starts_with("# TYPE apnea_locks_"))
      ours += line + "\n";
  auto parsed = parse_exposition(ours);
  REQUIRE_MESSAGE(parsed, parsed.error(), "\n", ours);
  const std::map<std::string, std::string> area{{"lock_dir", lock_dir}};
  auto entries = [&](const char* kind, const char* role, const char* state) {
    return parsed->value("apnea_locks_entries",
                         {{"lock_dir", lock_dir}, {"kind", kind}, {"role", role}, {"state", state}});
  };
  CHECK(parsed->value("apnea_locks_scrape_success", area) == 1);
  CHECK(parsed->value("apnea_locks_area_safe", area) == 1);
  CHECK(parsed->value("apnea_locks_check_status", area) == 2);  // CRITICAL: the leftover guard
  CHECK(parsed->value("apnea_locks_entries_needing_attention", area) == 2);
  CHECK(entries("repository", "lock", "live") == 1);
  CHECK(entries("global-setup", "lock", "stale") == 1);
  CHECK(entries("repository", "reclaim-guard", "leftover") == 1);
  CHECK(entries("repository", "lock", "stale") == 0);
  const double oldest = parsed->value("apnea_locks_oldest_lock_age_seconds", area);
  CHECK(oldest >= 0);
  CHECK(oldest < 600);
  const PromFamily* info = parsed->find("apnea_locks_build_info");
  REQUIRE(info != nullptr);
  REQUIRE(info->samples.size() == 1);
  CHECK(info->samples.front().labels.at("version") == test_env("APNEA_LOCKS_VERSION"));
}

}  // namespace

TEST_CASE("promtool check metrics accepts check --prometheus and status --format prometheus") {
  Area area;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"check", "--prometheus", "--lock-dir", area.path},
        std::vector<std::string>{"status", "--format", "prometheus", "--lock-dir", area.path}}) {
    TempDir out;
    std::vector<std::string> command = args;
    command.insert(command.begin(), test_env("APNEA_LOCKS_BIN"));
    CommandResult written = run_command(command, "exec >" + shell_quote(out / "metrics") + "; ");
    CHECK(written.status == (args.front() == "check" ? 2 : 1));
    CommandResult lint = run_command({find_program("promtool"), "check", "metrics"},
                                     "exec <" + shell_quote(out / "metrics") + " 2>&1; ");
    CHECK_MESSAGE(lint.status == 0, args.front(), ": ", lint.out);
    CHECK_MESSAGE(lint.out.empty(), args.front(), ": ", lint.out);
  }
}

TEST_CASE("promtool accepts the shipped alert rules, and they fire as documented") {
  const std::string rules = source("contrib/prometheus/apnea-locks.rules.yml");
  CommandResult checked = run_command({find_program("promtool"), "check", "rules", rules}, "exec 2>&1; ");
  CHECK_MESSAGE(checked.status == 0, checked.out);
  CHECK_MESSAGE(checked.out.find("SUCCESS: 4 rules found") != std::string::npos, checked.out);
  // promtool's rule unit tests (contrib/prometheus/apnea-locks.rules.test.yml name the rules
  // file relative to themselves).
  CommandResult tested = run_command(
      {find_program("promtool"), "test", "rules", source("contrib/prometheus/apnea-locks.rules.test.yml")},
      "exec 2>&1; ");
  CHECK_MESSAGE(tested.status == 0, tested.out);
  CHECK_MESSAGE(tested.out.find("SUCCESS") != std::string::npos, tested.out);
}

TEST_CASE("node_exporter's textfile collector serves the file check --prometheus --output-file wrote") {
  Area area;
  TempDir textfiles;
  CommandResult written = tool({"check", "--prometheus", "--output-file", textfiles / "apnea-locks.prom",
                                "--lock-dir", area.path});
  CHECK(written.status == 2);
  CHECK(written.out.starts_with("APNEA-LOCKS CRITICAL - "));

  // node_exporter on 127.0.0.1 with only the textfile collector; a port taken between our
  // probe and its bind makes it exit: then another port.
  std::optional<std::string> scraped;
  for (int attempt = 0; attempt < 3 && !scraped; ++attempt) {
    const int port = free_loopback_port();
    Child exporter({"sh", "-c", "exec \"$0\" \"$@\" 2>&1", find_program("prometheus-node-exporter"),
                    "--web.listen-address=127.0.0.1:" + std::to_string(port),
                    "--collector.disable-defaults", "--collector.textfile",
                    "--collector.textfile.directory=" + textfiles.path()});
    // It logs `msg="Listening on" address=...` once it accepts connections.
    bool listening = false;
    while (auto line = exporter.read_line(std::chrono::seconds(60))) {
      if (line->find("Listening on") != std::string::npos) {
        listening = true;
        break;
      }
    }
    if (!listening) continue;
    scraped = http_get(port, "/metrics");
  }
  REQUIRE_MESSAGE(scraped, "node_exporter did not serve /metrics");
  // The collector read our file without error, and saw it.
  CHECK(scraped->find("\nnode_textfile_scrape_error 0\n") != std::string::npos);
  CHECK(scraped->find("node_textfile_mtime_seconds{file=\"" + textfiles / "apnea-locks.prom" + "\"}") !=
        std::string::npos);
  check_series(*scraped, area.path);
  MESSAGE("scraped apnea-locks series (those not 0):\n", [&] {
    std::string ours;
    std::istringstream lines(*scraped);
    for (std::string line; std::getline(lines, line);)
      if (line.starts_with("apnea_locks_") && !line.ends_with(" 0")) ours += line + "\n";
    return ours;
  }());
}

// The script apnea-locks-metrics.service runs (root: check --all-users reads each area as its
// account): one file for every area, each series labelled with its lock_dir and user, a
// directory whose name and owner disagree only marked unsafe, and the per-uid files of the
// earlier script removed.
TEST_CASE("the systemd service's script writes every account's metrics for the textfile collector" *
          doctest::skip(::geteuid() != 0)) {
  TempDir root;
  const std::string tmp = root / "tmp";
  const std::string out = root / "textfiles";
  make_dir(tmp, 0755);
  make_dir(out, 0755);
  const std::string uid = std::to_string(::getuid());
  make_dir(tmp + "/apnea-" + uid);
  const std::string area = tmp + "/apnea-" + uid + "/operation-locks";
  make_dir(area);
  make_entry(area, fake_lock_name("home", LockKind::global_setup), owner_json(dead_pid()));
  make_dir(tmp + "/apnea-4242");  // ours, not uid 4242's: a foreign entry, not surveyed
  make_dir(tmp + "/apnea-4242/operation-locks");
  make_entry(tmp + "/apnea-4242/operation-locks", fake_lock_name("planted"), owner_json(dead_pid()));
  write_file(out + "/apnea-locks-4243.prom", "apnea_locks_old 1\n", 0644);  // the old script's

  CommandResult ran = run_command(
      {"sh", source("contrib/systemd/apnea-locks-metrics.sh"), out},
      "exec 2>&1; APNEA_LOCKS_TMPDIR=" + shell_quote(tmp) + " APNEA_LOCKS_BIN=" +
          shell_quote(test_env("APNEA_LOCKS_BIN")) + " ");
  CHECK_MESSAGE(ran.status == 0, ran.out);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(out)) files.push_back(entry.path().filename());
  CHECK(files == std::vector<std::string>{"apnea-locks.prom"});
  const std::string metrics = out + "/apnea-locks.prom";
  std::ifstream in(metrics);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = parse_exposition(text.str());
  REQUIRE_MESSAGE(parsed, parsed.error());
  CHECK(parsed->value("apnea_locks_entries", {{"lock_dir", area}, {"user", "root"}, {"kind", "global-setup"},
                                              {"role", "lock"}, {"state", "stale"}}) == 1);
  CHECK(parsed->value("apnea_locks_check_status", {{"lock_dir", area}, {"user", "root"}}) == 1);  // WARNING
  const std::string planted = tmp + "/apnea-4242/operation-locks";
  CHECK(std::isnan(parsed->value("apnea_locks_area_safe", {{"lock_dir", planted}, {"user", "4242"}})));
  CHECK(parsed->value("apnea_locks_foreign_entries", {{"lock_dir", tmp}}) == 1);
  CHECK(text.str().find("planted") == std::string::npos);
  CHECK(text.str().find("apnea-4242") == std::string::npos);
  CommandResult lint = run_command({find_program("promtool"), "check", "metrics"},
                                   "exec <" + shell_quote(metrics) + " 2>&1; ");
  CHECK_MESSAGE(lint.status == 0, lint.out);
}

int main(int argc, char** argv) {
  return run_unless_missing(argc, argv,
                            {{"promtool", "prometheus"}, {"prometheus-node-exporter", "prometheus-node-exporter"}},
                            [](int count, char** words) {
                              doctest::Context context(count, words);
                              return context.run();
                            });
}
