// The audit trail (audit.h): each removal by reclaim (execute_repair) and each takeover by
// run (acquire with audit_takeover) sends one escaped line to the system log, through the
// System seam (captured here by StagedSystem); refusals, dry runs and kept entries send none.
// tests/audit_syslog_test.cc reads the real binary's records from a syslog socket.
#include "apnea_locks/audit.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include "apnea_locks/lock.h"
#include "apnea_locks/repair.h"
#include "apnea_locks/survey.h"
#include "area_builder.h"
#include "detail/audit.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
using namespace apnea_locks::detail;

namespace {

constexpr std::int64_t staged_live_pid = 6000;  // alive in the staged table
constexpr std::int64_t staged_dead_pid = 6001;  // ESRCH

struct Area {
  TempDir temp;
  StagedSystem system;
  std::string dir = temp / "locks";
  RepairSettings policy;

  Area() {
    make_dir(dir);
    system.processes[staged_live_pid] = StagedProcess{0, ProcessInfo{'S', staged_live_pid, ::getuid(), 0, "apnea"}};
    policy.settings.judge.area_uid = ::getuid();
    policy.settings.judge.host = healthy_host();
    policy.resource = "/fake/repo";
  }
  /// Gathers, judges, decides and carries out one entry as reclaim does.
  RepairResult reclaim(const std::string& name, bool force = false) {
    policy.settings.flags.force = force;
    policy.settings.judge.now_ns = system.now_ns();
    policy.settings.judge.paused = system.paused_processes();
    policy.settings.judge.runtimes = std::vector<ProcessInfo>{};  // the staged table runs no runtime
    EntryFacts facts = EntryJudge(system, dir, policy.settings).gather(name);
    Decision decision = judge_entry(facts, policy.settings, nullptr).second;
    return execute_repair(system, facts, decision, policy);
  }
};

bool one_line_of_ascii(const std::string& line) {
  for (char c : line)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  return true;
}

}  // namespace

TEST_CASE("audit_line: every field, escaped into one line of ASCII") {
  AuditEvent event;
  event.action = "reclaim";
  event.role = "lock";
  event.path = "/tmp/apnea-1000/operation-locks/x\n\"forged\" uid=0";
  event.tombstone = "/tmp/t";
  event.owner_bytes = std::string("{\"pid\":4242,\n\"token\":\"\x1b[31m\xff\x00\"}", 31);
  event.proof = "pid-dead (certain)";
  event.trusts = "the wall clock";
  event.label = "/home/ann/repo \"x\"";
  event.acting_uid = 0;
  event.acting_user = "root";
  event.login_uid = 1000;
  event.login_user = "ann";
  event.for_uid = 1000;
  event.for_user = "ann";
  const std::string line = audit_line(event);
  CHECK(one_line_of_ascii(line));
  CHECK(line ==
        "reclaim removed lock path=\"/tmp/apnea-1000/operation-locks/x\\n\\\"forged\\\" uid=0\" "
        "tombstone=\"/tmp/t\" owner=\"{\\\"pid\\\":4242,\\n\\\"token\\\":\\\"\\x1b[31m\\xff\\x00\\\"}\" "
        "proof=\"pid-dead (certain)\" force_trusts=\"the wall clock\" label=\"/home/ann/repo \\\"x\\\"\" "
        "uid=0 user=\"root\" login_uid=1000 login_user=\"ann\" for_uid=1000 for_user=\"ann\"");

  event.owner_bytes.reset();
  event.trusts.clear();
  event.label.clear();
  event.acting_user.clear();
  event.login_uid.reset();
  event.for_user.clear();
  event.kept = true;
  CHECK(audit_line(event).find("tombstone=\"/tmp/t\" kept owner=none proof=") != std::string::npos);
  CHECK(audit_line(event).ends_with(" uid=0 login_uid=none for_uid=1000"));
}

TEST_CASE("audit_line: a long record is cut at the limit, never inside an escape") {
  AuditEvent event;
  event.action = "reclaim";
  event.role = "lock";
  for (const char fill : {'a', '\x01', '"'}) {
    event.owner_bytes = std::string(5000, fill);
    const std::string line = audit_line(event);
    const std::size_t start = line.find("owner=\"") + 7;
    const std::size_t cut = line.find("...(5000 bytes)\"");
    REQUIRE(cut != std::string::npos);
    CHECK(cut - start <= audit_owner_limit);
    CHECK(cut - start > audit_owner_limit - 4);
    const std::string owner = line.substr(start, cut - start);
    const std::string piece = escape_bytes(std::string(1, fill));
    CHECK(owner.size() % piece.size() == 0);  // whole escapes only
    CHECK(owner == [&] {
      std::string whole;
      while (whole.size() + piece.size() <= owner.size()) whole += piece;
      return whole;
    }());
  }
}

TEST_CASE("reclaim: a removed lock is logged once, with its record, proof, label and who acted for whom") {
  Area area;
  const std::string name = fake_lock_name("dead");
  const std::string lock = make_entry(area.dir, name, owner_json(staged_dead_pid));
  area.policy.acting_uid = 0;
  area.policy.acted_for = "ann";
  area.policy.resource = "/home/ann/repo";
  area.system.accounts["root"] = Account{"root", 0, 0, "/root"};
  area.system.accounts["ops"] = Account{"ops", 4321, 4321, "/home/ops"};
  area.system.staged_login_uid = 4321;
  // The environment names nobody: anyone can set SUDO_USER.
  area.system.environment["SUDO_USER"] = "alice";
  RepairResult done = area.reclaim(name);
  REQUIRE(done.outcome == RepairOutcome::removed);
  CHECK(done.audited == AuditSink::syslog);
  REQUIRE(area.system.audit_lines.size() == 1);
  const std::string& line = area.system.audit_lines.front();
  CHECK(line.starts_with("reclaim removed lock path=\"" + lock + "\" tombstone=\"" + done.tombstone + "\" owner=\"" +
                         escape_bytes(owner_json(staged_dead_pid)) + "\" proof=\"pid-dead (certain)\""));
  CHECK(line.ends_with(" label=\"/home/ann/repo\" uid=0 user=\"root\" login_uid=4321 login_user=\"ops\" for_uid=" +
                       std::to_string(::getuid()) + " for_user=\"ann\""));
  CHECK(line.find("alice") == std::string::npos);
}

TEST_CASE("reclaim: with no system log the record goes to standard error with a warning, never nowhere") {
  Area area;
  const std::string name = fake_lock_name("dead");
  make_entry(area.dir, name, owner_json(staged_dead_pid));
  area.system.audit_sink = AuditSink::none;
  RepairResult done = area.reclaim(name);
  REQUIRE(done.outcome == RepairOutcome::removed);
  CHECK(done.audited == AuditSink::standard_error);
  // A refusal records nothing, and says so.
  make_entry(area.dir, fake_lock_name("live"), owner_json(staged_live_pid));
  RepairResult refused = area.reclaim(fake_lock_name("live"), true);
  CHECK(refused.outcome != RepairOutcome::removed);
  CHECK_FALSE(refused.audited.has_value());
}

TEST_CASE("reclaim: debris and a leftover guard are logged; a refusal and a kept entry are not") {
  Area area;
  area.system.environment["SUDO_USER"] = std::nullopt;
  const std::string lock_name = fake_lock_name("repo");
  // A dead candidate (debris): removed with its record.
  const std::string candidate = make_entry(area.dir, lock_name + ".candidate.x", owner_json(staged_dead_pid));
  REQUIRE(area.reclaim(lock_name + ".candidate.x").outcome == RepairOutcome::removed);
  // A live lock: refused, nothing logged.
  make_entry(area.dir, fake_lock_name("live"), owner_json(staged_live_pid));
  CHECK(area.reclaim(fake_lock_name("live"), true).outcome != RepairOutcome::removed);
  // An abandoned guard with --force: removed, no owner.
  const std::string guard = area.dir + "/" + fake_lock_name("other") + ".reclaim";
  make_dir(guard);
  area.system.clock_offset_ns = 3600 * 1'000'000'000LL;  // an hour on: its mtime and ctime are old
  REQUIRE(area.reclaim(fake_lock_name("other") + ".reclaim", true).outcome == RepairOutcome::removed);

  REQUIRE(area.system.audit_lines.size() == 2);
  CHECK(area.system.audit_lines[0].starts_with("reclaim removed candidate path=\"" + candidate + "\" owner=\""));
  CHECK(area.system.audit_lines[1].starts_with("reclaim removed reclaim-guard path=\"" + guard + "\" owner=none proof=\""));
  // The acting uid defaults to the current one, for one's own area.
  CHECK(area.system.audit_lines[1].find(" uid=" + std::to_string(::getuid()) + " ") != std::string::npos);
  CHECK(area.system.audit_lines[1].ends_with(" login_uid=none for_uid=" + std::to_string(::getuid())));
}

TEST_CASE("acquire: a takeover of a dead owner's lock is logged when asked (run), not otherwise (Apnea)") {
  for (const bool audited : {true, false}) {
    CAPTURE(audited);
    TempDir temp;
    StagedSystem system;
    const std::string dir = temp / "locks";
    make_dir(dir);
    const std::string lock = make_entry(dir, fake_lock_name("crashed"), owner_json(staged_dead_pid));
    age_path(lock, 120);  // past Apnea's 60 s grace
    LockTarget target;
    target.lock_path = lock;
    target.resource = "/fake/crashed";
    target.area_mode = AreaMode::explicit_directory;
    AcquireOptions options = apnea_options(LockKind::repository);
    options.audit_takeover = audited;
    auto held = acquire(system, target, options);
    REQUIRE(held);
    if (!audited) {
      CHECK(system.audit_lines.empty());
      continue;
    }
    REQUIRE(system.audit_lines.size() == 1);
    const std::string& line = system.audit_lines.front();
    CHECK(line.starts_with("takeover removed lock path=\"" + lock + "\" tombstone=\"" + lock + ".tombstone."));
    CHECK(line.find(" owner=\"" + escape_bytes(owner_json(staged_dead_pid)) + "\"") != std::string::npos);
    // Taking over is removing: the proof is the policy's, as reclaim's would be.
    CHECK(line.find(" proof=\"pid-dead (certain)\"") != std::string::npos);
    CHECK(line.ends_with(" for_uid=" + std::to_string(::getuid())));
  }
}
