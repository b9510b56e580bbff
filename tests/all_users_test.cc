// status --all-users and check --all-users as root runs them: two real accounts' areas under
// a temp dir of our own, each read as its account; the `apnea-*` entries that are no
// account's own area refused (not surveyed), nothing changed; and refused to non-root.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <map>
#include <random>
#include <sstream>

#include "area_builder.h"
#include "process_util.h"
#include "run_test_util.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// A system account made for the test (useradd) and removed at the end (userdel).
struct TestAccount {
  std::string name;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  explicit TestAccount(const std::string& base) {
    name = base + std::to_string(std::random_device{}() % 100000);
    CommandResult made = run_command({"useradd", "--system", "--no-create-home", "--shell",
                                      "/usr/sbin/nologin", name}, "exec 2>&1; ");
    REQUIRE_MESSAGE(made.status == 0, made.out);
    CommandResult id = run_command({"id", "-u", name});
    REQUIRE(id.status == 0);
    uid = static_cast<std::uint32_t>(std::stoul(id.out));
    CommandResult group = run_command({"id", "-g", name});
    REQUIRE(group.status == 0);
    gid = static_cast<std::uint32_t>(std::stoul(group.out));
  }
  TestAccount(const TestAccount&) = delete;
  TestAccount& operator=(const TestAccount&) = delete;
  ~TestAccount() { run_command({"userdel", name}, "exec 2>/dev/null; "); }
};

void own(const std::string& path, std::uint32_t uid) {
  REQUIRE(::lchown(path.c_str(), uid, static_cast<gid_t>(-1)) == 0);
}

/// A process of `account` (setpriv drops to it), running until the test ends: a live owner.
struct AccountProcess {
  SpawnedProcess process;
  explicit AccountProcess(const TestAccount& account)
      : process({"setpriv", "--reuid=" + std::to_string(account.uid), "--regid=" + std::to_string(account.gid),
                 "--clear-groups", "--", "sh", "-c", "echo ready; exec \"$0\" 600", node_named_sleep()}) {
    REQUIRE(process.read_line(Stream::out, 30s) == std::optional<std::string>("ready"));
  }
};

/// `account`'s area under `tmp` with a stale lock (a dead owner) and a live one (`live_pid`,
/// a process of the account), everything owned by the account as Apnea would have made it.
std::string make_area(const std::string& tmp, const TestAccount& account, pid_t live_pid) {
  const std::string top = tmp + "/apnea-" + std::to_string(account.uid);
  const std::string area = top + "/operation-locks";
  make_dir(top);
  make_dir(area);
  const std::string stale = make_entry(area, fake_lock_name(account.name + "stale"), owner_json(dead_pid()));
  const std::string live = make_entry(area, fake_lock_name(account.name + "live"), owner_json(live_pid));
  for (const std::string& path : {top, area, stale, stale + "/owner.json", live, live + "/owner.json"})
    own(path, account.uid);
  return area;
}

}  // namespace

TEST_CASE("--all-users is refused to anyone but root, and with --user or --lock-dir") {
  const std::vector<std::string> prefix =
      ::getuid() == 0 ? std::vector<std::string>{"setpriv", "--reuid=65534", "--regid=65534",
                                                 "--clear-groups", "--"}
                      : std::vector<std::string>{};
  for (const char* command : {"status", "check"}) {
    CAPTURE(command);
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), {locks_bin(), command, "--all-users"});
    Finished refused = finish(argv);
    CAPTURE(refused.out);
    CAPTURE(refused.err);
    if (std::string(command) == "status") {
      CHECK(refused.status == 2);
      CHECK(refused.err == "apnea-locks status: --all-users needs root\n"
                           "Try 'apnea-locks status --help' for more information.\n");
      CHECK(refused.out.empty());
    } else {
      CHECK(refused.status == 3);  // a plugin's usage error is UNKNOWN
      CHECK(refused.out == "APNEA-LOCKS UNKNOWN - usage: --all-users needs root\n");
      CHECK(refused.err == "Try 'apnea-locks check --help' for more information.\n");
    }
  }
  Finished with_user = finish({locks_bin(), "status", "--all-users", "--user", "root"});
  CHECK(with_user.status == 2);
  CHECK(with_user.err.find("--all-users and --user exclude each other") != std::string::npos);
  Finished with_dir = finish({locks_bin(), "check", "--all-users", "--lock-dir", "/tmp"});
  CHECK(with_dir.status == 3);
  CHECK(with_dir.out.find("--all-users and --lock-dir exclude each other") != std::string::npos);
  Finished with_path = finish({locks_bin(), "status", "--all-users", "/tmp/x/repository-0.lock"});
  CHECK(with_path.status == 2);
}

TEST_CASE("root surveys every account's area as that account, refuses the impostors, changes nothing" *
          doctest::skip(::geteuid() != 0)) {
  Scratch scratch;
  // Every account must be able to reach its area through our scratch folder.
  REQUIRE(::chmod(scratch.root.c_str(), 0711) == 0);
  const std::string tmp = scratch.root + "/tmp";
  make_dir(tmp, 0755);
  TestAccount ann("apnea-ann-");
  TestAccount bob("apnea-bob-");
  AccountProcess ann_process(ann);
  AccountProcess bob_process(bob);
  const std::string ann_area = make_area(tmp, ann, ann_process.process.pid());
  const std::string bob_area = make_area(tmp, bob, bob_process.process.pid());
  const std::map<std::string, std::string> env{{"TMPDIR", tmp}, {"NO_COLOR", "1"}};

  SUBCASE("two accounts: one table and one JSON document with a user column, exit 1") {
    Finished table = finish({locks_bin(), "status", "--all-users"}, env);
    CAPTURE(table.out);
    CAPTURE(table.err);
    CHECK(table.err.empty());
    CHECK(table.status.has_value());
    CHECK(table.out.find("USER") != std::string::npos);
    std::size_t ann_rows = 0, bob_rows = 0;
    std::istringstream lines(table.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with(ann.name + " ")) ++ann_rows;
      if (line.starts_with(bob.name + " ")) ++bob_rows;
    }
    CHECK(ann_rows == 2);
    CHECK(bob_rows == 2);
    CHECK(table.out.find("4 entries: 2 stale, 2 live") != std::string::npos);

    Finished json = finish({locks_bin(), "status", "--all-users", "-J"}, env);  // schema-checked
    CAPTURE(json.out);
    const auto doc = boost::json::parse(json.out).as_object();
    const auto& entries = doc.at("entries").as_array();
    REQUIRE(entries.size() == 4);
    std::map<std::string, std::vector<std::string>> by_user;
    for (const auto& entry : entries) {
      const auto& e = entry.as_object();
      by_user[std::string(e.at("user").as_string())].push_back(std::string(e.at("state").as_string()));
      // The fix acts for the account, never on root's view of its directory.
      if (e.at("state").as_string() == "stale" && !e.at("fix").is_null())
        CHECK(std::string(e.at("fix").as_string()).find("--user ") != std::string::npos);
    }
    CHECK(by_user.size() == 2);
    CHECK(by_user[ann.name].size() == 2);
    CHECK(by_user[bob.name].size() == 2);
    const auto& users = doc.at("users").as_array();
    REQUIRE(users.size() == 2);
    CHECK(users[0].at("surveyed").as_bool());
    CHECK(users[0].at("lock_dir").as_string() == (ann.uid < bob.uid ? ann_area : bob_area));
    CHECK(doc.at("summary").at("scanned").as_int64() == 4);
    CHECK(doc.at("error").is_null());

    Finished check = finish({locks_bin(), "check", "--all-users"}, env);
    CAPTURE(check.out);
    CHECK(check.out.starts_with("APNEA-LOCKS "));
    CHECK(check.out.find(" | locks=4;") != std::string::npos);
    CHECK(check.out.find(" live=2;") != std::string::npos);
    CHECK(check.out.find(" stale=2;") != std::string::npos);
    CHECK(check.out.find("in 2 accounts' areas") != std::string::npos);
    CHECK(check.status != 3);

    Finished metrics = finish({locks_bin(), "check", "--all-users", "--prometheus"}, env);
    CAPTURE(metrics.out);
    CHECK(count(metrics.out, "# TYPE apnea_locks_area_safe gauge\n") == 1);  // each family once
    CHECK(metrics.out.find("apnea_locks_area_safe{lock_dir=\"" + ann_area + "\",user=\"" + ann.name + "\"} 1\n") !=
          std::string::npos);
    CHECK(metrics.out.find("apnea_locks_area_safe{lock_dir=\"" + bob_area + "\",user=\"" + bob.name + "\"} 1\n") !=
          std::string::npos);
    Finished textfile = finish({locks_bin(), "status", "--all-users", "--format", "prometheus"}, env);
    CAPTURE(textfile.out);
    CHECK(count(textfile.out, "# TYPE apnea_locks_entries gauge\n") == 1);
    CHECK(textfile.out.find("apnea_locks_entries{lock_dir=\"" + ann_area + "\",user=\"" + ann.name +
                            "\",kind=\"repository\",role=\"lock\",state=\"live\"} 1\n") != std::string::npos);
  }

  SUBCASE("foreign entries (a mismatched owner, a symlink, no uid) are noted, not judged; a uid without an account is surveyed") {
    // apnea-65534 (nobody's name) owned by root.
    const std::string mismatched = tmp + "/apnea-65534";
    make_dir(mismatched);
    make_dir(mismatched + "/operation-locks");
    make_entry(mismatched + "/operation-locks", fake_lock_name("planted"), owner_json(dead_pid()));
    // apnea-1 (daemon's) a symlink to ann's area.
    const std::string link = tmp + "/apnea-1";
    REQUIRE(::symlink((tmp + "/apnea-" + std::to_string(ann.uid)).c_str(), link.c_str()) == 0);
    // A uid with no account (a DynamicUser's), owning its area and a lock of a dead owner:
    // only that uid could have made it, so it is surveyed, labelled by its uid.
    const std::string orphan = tmp + "/apnea-3999999";
    const std::string orphan_area = orphan + "/operation-locks";
    make_dir(orphan);
    make_dir(orphan_area);
    const std::string orphan_lock = make_entry(orphan_area, fake_lock_name("orphan"), owner_json(dead_pid()));
    for (const std::string& path : {orphan, orphan_area, orphan_lock, orphan_lock + "/owner.json"})
      own(path, 3999999);
    make_dir(tmp + "/apnea-x\x1b[31m");  // not a uid (and a terminal escape in its name)
    const std::string alone = scratch.root + "/alone";  // a temp dir with a foreign entry only
    make_dir(alone, 0755);
    make_dir(alone + "/apnea-foo");
    const auto before = snapshot(scratch.root);
    const std::string foreign = "3 foreign entries under " + tmp +
                                ", not judged: 'apnea-1' (owner uid 0; a symlink), 'apnea-65534' (owner uid "
                                "0; not uid 65534's), 'apnea-x\\x1b[31m' (owner uid 0; its name is not apnea-<uid>)";

    Finished table = finish({locks_bin(), "status", "--all-users"}, env);
    CAPTURE(table.out);
    CAPTURE(table.err);
    CHECK(table.status == 1);  // the stale locks; the foreign entries do not fail it
    CHECK(table.err == "apnea-locks status: note: " + foreign + "\n");
    // The accounts' own areas are listed, the orphan's under its uid; the planted lock is not.
    CHECK(table.out.find("5 entries") != std::string::npos);
    CHECK(table.out.find("\n3999999 ") != std::string::npos);
    // Its fix names the uid, and --user takes it (no account has that name).
    CHECK(table.out.find("reclaim --user 3999999 " + orphan_area) != std::string::npos);
    Finished dry = finish({locks_bin(), "reclaim", "--user", "3999999", "--dry-run", orphan_lock}, env);
    CAPTURE(dry.out);
    CAPTURE(dry.err);
    CHECK(dry.status == 0);
    CHECK(dry.out.starts_with("would reclaim " + orphan_lock + " "));
    CHECK(table.out.find("65534") == std::string::npos);

    Finished json = finish({locks_bin(), "status", "--all-users", "--json"}, env);
    CAPTURE(json.out);
    CHECK(json.status == 1);
    const auto doc = boost::json::parse(json.out).as_object();
    CHECK(doc.at("entries").as_array().size() == 5);
    std::map<std::string, std::string> checks;
    for (const auto& user : doc.at("users").as_array())
      checks[std::string(user.at("path").as_string())] = std::string(user.at("check").as_string());
    CHECK(checks[mismatched] == "owner-mismatch");
    CHECK(checks[link] == "symlink");
    CHECK(checks[orphan] == "ok");
    CHECK(doc.at("error").is_null());

    // check: WARNING by default (never CRITICAL), OK with --foreign ok; one line names them.
    Finished check = finish({locks_bin(), "check", "--all-users"}, env);
    CAPTURE(check.out);
    CHECK(check.status == 1);
    CHECK(check.out.starts_with("APNEA-LOCKS WARNING - " + foreign + "; "));
    CHECK(check.out.find(" | locks=5;") != std::string::npos);
    CHECK(check.out.find('\x1b') == std::string::npos);
    // Alone (the accounts' stale locks would be WARNING whatever --foreign says).
    const std::map<std::string, std::string> alone_env{{"TMPDIR", alone}, {"NO_COLOR", "1"}};
    const std::string one = "1 foreign entry under " + alone +
                            ", not judged: 'apnea-foo' (owner uid 0; its name is not apnea-<uid>); ";
    Finished loud = finish({locks_bin(), "check", "--all-users"}, alone_env);
    CAPTURE(loud.out);
    CHECK(loud.status == 1);
    CHECK(loud.out.starts_with("APNEA-LOCKS WARNING - " + one));
    Finished quiet = finish({locks_bin(), "check", "--all-users", "--foreign", "ok"}, alone_env);
    CAPTURE(quiet.out);
    CHECK(quiet.status == 0);
    CHECK(quiet.out.starts_with("APNEA-LOCKS OK - " + one));
    Finished bad = finish({locks_bin(), "check", "--all-users", "--foreign", "critical"}, env);
    CHECK(bad.status == 3);
    CHECK(bad.out.find("--foreign 'critical': must be ok or warning") != std::string::npos);

    // Metrics: no series for a foreign entry (ApneaLockAreaUnsafe stays quiet), one count.
    Finished metrics = finish({locks_bin(), "status", "--all-users", "--format", "prometheus"}, env);
    CAPTURE(metrics.out);
    CHECK(metrics.out.find("apnea_locks_foreign_entries{lock_dir=\"" + tmp + "\"} 3\n") != std::string::npos);
    CHECK(metrics.out.find("apnea_locks_area_safe{lock_dir=\"" + orphan_area + "\",user=\"3999999\"} 1\n") !=
          std::string::npos);
    CHECK(metrics.out.find("apnea-65534") == std::string::npos);
    CHECK(metrics.out.find("apnea-1/") == std::string::npos);
    std::istringstream samples(metrics.out);
    for (std::string line; std::getline(samples, line);)
      if (line.starts_with("apnea_locks_area_safe{")) CHECK_MESSAGE(line.ends_with("} 1"), line);

    CHECK(snapshot(scratch.root) == before);
  }
}
