// Nagios 4 for real (Debian's nagios4-core): `nagios4 -v` accepts the shipped command and
// service definitions, and a Nagios daemon (foreground, its own temporary configuration,
// checks every second) runs the shipped check_apnea_locks_dir command on staged areas and
// writes the state, output, perfdata and long output it parsed to its service perfdata file,
// which must say what the area holds. Skipped (exit 77) when nagios4 is absent.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "area_builder.h"
#include "monitoring_util.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

std::string source(const std::string& relative) { return test_env("APNEA_LOCKS_SOURCE") + "/" + relative; }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

/// A Nagios 4 configuration in a temporary directory: the objects every configuration needs
/// (a time period, a contact, localhost, the generic-service template), the shipped command
/// definitions with /usr/bin/apnea-locks replaced by the built binary, and `services`.
struct NagiosConfig {
  TempDir dir;
  std::string main = dir / "nagios.cfg";
  std::string perfdata = dir / "perfdata";

  explicit NagiosConfig(const std::vector<std::string>& object_files) {
    ::mkdir((dir / "checkresults").c_str(), 0700);
    write_text(dir / "base.cfg", R"(
define timeperiod {
  timeperiod_name 24x7
  alias           always
  sunday          00:00-24:00
  monday          00:00-24:00
  tuesday         00:00-24:00
  wednesday       00:00-24:00
  thursday        00:00-24:00
  friday          00:00-24:00
  saturday        00:00-24:00
}
define command {
  command_name noop
  command_line /bin/true
}
define contact {
  contact_name                  tester
  host_notifications_enabled    0
  service_notifications_enabled 0
  host_notification_period      24x7
  service_notification_period   24x7
  host_notification_options     n
  service_notification_options  n
  host_notification_commands    noop
  service_notification_commands noop
}
define host {
  host_name             localhost
  address               127.0.0.1
  max_check_attempts    1
  check_period          24x7
  notification_period   24x7
  contacts              tester
  active_checks_enabled 0
}
define service {
  name                  generic-service
  register              0
  max_check_attempts    1
  check_interval        1
  retry_interval        1
  check_period          24x7
  notification_period   24x7
  contacts              tester
  notifications_enabled 0
  process_perf_data     1
}
)");
    write_text(dir / "commands.cfg",
               replace_all(read_all(source("contrib/nagios/apnea-locks-commands.cfg")),
                           "/usr/bin/apnea-locks", test_env("APNEA_LOCKS_BIN")));
    std::string cfg;
    for (const char* file : {"base.cfg", "commands.cfg"}) cfg += "cfg_file=" + (dir / file) + "\n";
    for (const std::string& file : object_files) cfg += "cfg_file=" + file + "\n";
    const std::string d = dir.path();
    CommandResult user = run_command({"id", "-un"});
    CommandResult group = run_command({"id", "-gn"});
    cfg += "log_file=" + d + "/nagios.log\nobject_cache_file=" + d + "/objects.cache\n" +
           "precached_object_file=" + d + "/objects.precache\nstatus_file=" + d + "/status.dat\n" +
           "temp_file=" + d + "/nagios.tmp\ntemp_path=" + d + "\nlock_file=" + d + "/nagios.lock\n" +
           "check_result_path=" + d + "/checkresults\ncommand_file=" + d + "/nagios.cmd\n" +
           "state_retention_file=" + d + "/retention.dat\nretain_state_information=0\nuse_syslog=0\n" +
           // Seconds, not minutes: every check is due within a second of the start.
           "interval_length=1\nmax_service_check_spread=1\nmax_host_check_spread=1\n" +
           "check_result_reaper_frequency=1\nprocess_performance_data=1\n" +
           "service_perfdata_file=" + perfdata + "\nservice_perfdata_file_mode=a\n" +
           "service_perfdata_file_template=$SERVICEDESC$\\t$SERVICESTATE$\\t$SERVICESTATEID$\\t"
           "$SERVICEOUTPUT$\\t$SERVICEPERFDATA$\\t$LONGSERVICEOUTPUT$\n" +
           // Debian's default: these never reach a command through a macro.
           "illegal_macro_output_chars=`~$&|'\"<>\n" +
           "nagios_user=" + user.out.substr(0, user.out.size() - 1) + "\n" +
           "nagios_group=" + group.out.substr(0, group.out.size() - 1) + "\n";
    write_text(main, cfg);
  }
};

/// What Nagios recorded for one service check: the fields of the perfdata template.
struct Result {
  std::string state;
  std::string state_id;
  std::string output;
  std::string perfdata;
  std::string long_output;
};

/// Runs Nagios on `config` until each of `services` has a result in the perfdata file (or
/// 120 s pass), waiting on inotify for the file's writes; returns the first result of each.
std::map<std::string, Result> run_nagios(const NagiosConfig& config, std::size_t services) {
  const int watch = ::inotify_init1(IN_CLOEXEC);
  REQUIRE(watch >= 0);
  REQUIRE(::inotify_add_watch(watch, config.dir.path().c_str(), IN_MODIFY | IN_CLOSE_WRITE) >= 0);
  Child nagios({find_program("nagios4"), config.main});
  std::map<std::string, Result> results;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (results.size() < services && std::chrono::steady_clock::now() < deadline) {
    results.clear();
    std::istringstream lines(read_all(config.perfdata));
    for (std::string line; std::getline(lines, line);) {
      std::vector<std::string> fields;
      std::size_t start = 0;
      for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
        fields.push_back(line.substr(start, tab - start));
      fields.push_back(line.substr(start));
      if (fields.size() == 6 && results.count(fields[0]) == 0)
        results[fields[0]] = Result{fields[1], fields[2], fields[3], fields[4], fields[5]};
    }
    if (results.size() >= services) break;
    struct pollfd fd {watch, POLLIN, 0};
    if (::poll(&fd, 1, 1000) > 0) {
      char events[4096];
      [[maybe_unused]] ssize_t n = ::read(watch, events, sizeof events);
    }
  }
  ::close(watch);
  nagios.signal(SIGTERM);
  nagios.wait();
  MESSAGE("nagios.log:\n", read_all(config.dir / "nagios.log"));
  return results;
}

/// Nagios' own perfdata as label -> fields ('label'=value[UOM];warn;crit;min;max).
std::map<std::string, std::vector<std::string>> perf_fields(const std::string& perfdata) {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream words(perfdata);
  for (std::string word; words >> word;) {
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos) continue;
    std::vector<std::string> fields;
    std::size_t start = eq + 1;
    for (std::size_t semi; (semi = word.find(';', start)) != std::string::npos; start = semi + 1)
      fields.push_back(word.substr(start, semi - start));
    fields.push_back(word.substr(start));
    out[word.substr(0, eq)] = fields;
  }
  return out;
}

}  // namespace

TEST_CASE("nagios4 -v accepts the shipped command and service definitions") {
  NagiosConfig config({source("contrib/nagios/apnea-locks-services.cfg")});
  CommandResult verified = run_command({find_program("nagios4"), "-v", config.main}, "exec 2>&1; ");
  CHECK_MESSAGE(verified.status == 0, verified.out);
  CHECK_MESSAGE(verified.out.find("Total Warnings: 0") != std::string::npos, verified.out);
  CHECK_MESSAGE(verified.out.find("Total Errors:   0") != std::string::npos, verified.out);
  CHECK_MESSAGE(verified.out.find("Checked 4 commands.") != std::string::npos, verified.out);
}

TEST_CASE("Nagios runs check_apnea_locks_dir and parses its state, output, perfdata and long output") {
  // A healthy area (one live lock) and a critical one (a live lock, a dead global setup
  // lock, a leftover reclaim guard).
  TempDir areas;
  const std::string healthy = areas / "healthy";
  const std::string broken = areas / "broken";
  make_dir(healthy);
  make_dir(broken);
  make_entry(healthy, fake_lock_name("live"), owner_json(::getpid()));
  make_entry(broken, fake_lock_name("live"), owner_json(::getpid()));
  const std::string dead = make_entry(broken, fake_lock_name("home", LockKind::global_setup), owner_json(dead_pid()));
  const std::string guard = broken + "/" + fake_lock_name("crashed") + ".reclaim";
  make_dir(guard);
  age_path(guard, 600);

  TempDir services_dir;
  const std::string services = services_dir / "services.cfg";
  write_text(services, "define service {\n  use generic-service\n  host_name localhost\n"
                       "  service_description healthy\n  check_command check_apnea_locks_dir!" + healthy +
                       "!1h!4h\n}\n"
                       "define service {\n  use generic-service\n  host_name localhost\n"
                       "  service_description broken\n  check_command check_apnea_locks_dir!" + broken +
                       "!1h!4h\n}\n");
  NagiosConfig config({services});
  const std::map<std::string, Result> results = run_nagios(config, 2);
  REQUIRE_MESSAGE(results.count("healthy") == 1, read_all(config.perfdata));
  REQUIRE_MESSAGE(results.count("broken") == 1, read_all(config.perfdata));

  const Result& ok = results.at("healthy");
  CHECK(ok.state == "OK");
  CHECK(ok.state_id == "0");
  CHECK(ok.output.starts_with("APNEA-LOCKS OK - 1 lock (1 live, 0 stale, 0 malformed), oldest "));
  CHECK(ok.long_output.empty());
  auto perf = perf_fields(ok.perfdata);
  CHECK(perf["locks"] == std::vector<std::string>{"1", "", "", "0"});
  CHECK(perf["live"] == std::vector<std::string>{"1", "", "", "0"});
  CHECK(perf["attention"] == std::vector<std::string>{"0", "0", "", "0"});
  REQUIRE(perf["oldest_age_s"].size() == 4);
  CHECK(perf["oldest_age_s"][0].ends_with("s"));
  CHECK(perf["oldest_age_s"][1] == "3600");
  CHECK(perf["oldest_age_s"][2] == "14400");

  const Result& bad = results.at("broken");
  CHECK(bad.state == "CRITICAL");
  CHECK(bad.state_id == "2");
  // Nagios turns every ';' of the output into ':' (its own field separator).
  CHECK_MESSAGE(bad.output.starts_with("APNEA-LOCKS CRITICAL - 1 leftover reclaim guard, 1 stale lock Apnea "
                                       "will not reclaim: 2 locks (1 live, 1 stale, 0 malformed)"),
                bad.output);
  perf = perf_fields(bad.perfdata);
  CHECK(perf["locks"][0] == "2");
  CHECK(perf["stale"][0] == "1");
  CHECK(perf["guards"] == std::vector<std::string>{"1", "", "0", "0"});
  CHECK(perf["attention"][0] == "2");
  // The long output (Nagios shows its newlines as \n): the guard (critical) first, then the
  // dead lock with its fix command.
  CHECK_MESSAGE(bad.long_output.starts_with("leftover reclaim-guard " + guard), bad.long_output);
  CHECK_MESSAGE(bad.long_output.find("\\nstale lock " + dead) != std::string::npos, bad.long_output);
  CHECK_MESSAGE(bad.long_output.find("fix: apnea-locks reclaim") != std::string::npos, bad.long_output);
}

int main(int argc, char** argv) {
  return run_unless_missing(argc, argv, {{"nagios4", "nagios4-core"}}, [](int count, char** words) {
    doctest::Context context(count, words);
    return context.run();
  });
}
