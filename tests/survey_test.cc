// survey_area: one pass, judged and decided; a death verdict is re-confirmed after the probe.
#include "apnea_locks/survey.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "area_builder.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

constexpr std::int64_t staged_live = 6000;
constexpr std::int64_t staged_dead = 6001;

struct Seen {
  std::string name;
  std::string state;
  std::string token;
  PlanAction action;
};

std::vector<Seen> survey(StagedSystem& system, const std::string& dir, bool force = false) {
  SurveySettings settings;
  settings.judge.now_ns = system.now_ns();
  settings.judge.area_uid = ::getuid();
  settings.judge.host = healthy_host();
  settings.flags.force = force;
  std::vector<Seen> seen;
  LabelIndex labels;
  auto listed = survey_area(system, dir, settings, labels, {}, [&](const JudgedEntry& e) {
    const auto& owner = e.facts.owner;
    seen.push_back(Seen{e.facts.name, std::string(state_name(e.verdict.state)),
                        owner && owner->owner ? owner->owner->token : std::string(), e.decision.action});
  });
  REQUIRE(listed);
  return seen;
}

/// The verdicts and decisions of one survey of `dir` (reclaim's flags: `force`), in order.
std::vector<std::pair<Verdict, Decision>> judged(StagedSystem& system, const std::string& dir, bool force) {
  SurveySettings settings;
  settings.judge.now_ns = system.now_ns();
  settings.judge.area_uid = ::getuid();
  settings.judge.host = healthy_host();
  settings.flags.force = force;
  std::vector<std::pair<Verdict, Decision>> seen;
  LabelIndex labels;
  REQUIRE(survey_area(system, dir, settings, labels, {}, [&](const JudgedEntry& e) {
    seen.emplace_back(e.verdict, e.decision);
  }));
  return seen;
}

/// A live Node process of this account, pid 20506, that counts as a possible owner (it runs
/// Apnea's CLI, and the staged table lists it as a runtime).
void stage_node_process(StagedSystem& system) {
  constexpr std::int64_t pid = 20506;
  ProcessInfo node{'S', pid, ::getuid(), 1, "node /usr/lib/apnea/cli.js sync"};
  node.threads = 1;
  system.processes[pid] = StagedProcess{0, node};
  system.staged_runtime = std::vector<RuntimeProcess>{{pid, "/usr/bin/node", "HOME=/root"}};
}

}  // namespace

TEST_CASE("no transient false stale: an owner released and replaced under the probe is read again") {
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  system.processes[staged_live] = StagedProcess{0, ProcessInfo{'S', staged_live, ::getuid(), 0, "apnea"}};
  system.processes[staged_live].info->pid = staged_live;
  system.processes[staged_live].info->threads = 1;
  const std::string name = fake_lock_name("churn");
  const std::string lock = dir + "/" + name;
  make_entry(dir, name, owner_json(staged_dead, "old-token"));
  // The root cause: the owner record was read, then (before its pid was probed) the owner
  // released the lock and exited, and a new owner published a lock of the same name. The
  // probe then says ESRCH about a lock that no longer exists.
  bool replaced = false;
  system.before = [&](std::string_view op, const std::string& what) {
    if (op == "kill" && what == std::to_string(staged_dead) && !replaced) {
      replaced = true;
      REQUIRE(system.real().rename(lock, temp / "tombstone"));
      make_entry(dir, name, owner_json(staged_live, "new-token"));
    }
  };
  const auto seen = survey(system, dir, true);
  REQUIRE(replaced);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].state == "live");
  CHECK(seen[0].token == "new-token");
  CHECK(seen[0].action == PlanAction::refuse);
}

TEST_CASE("a lock that changes on every re-confirmation is reported in flight, never stale") {
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  const std::string name = fake_lock_name("spin");
  const std::string lock = dir + "/" + name;
  make_entry(dir, name, owner_json(staged_dead, "t0"));
  int generation = 0;
  system.before = [&](std::string_view op, const std::string& what) {
    if (op == "kill" && generation < 50) {  // every probe: a fresh dead owner's lock
      (void)what;
      REQUIRE(system.real().rename(lock, temp / ("old" + std::to_string(generation))));
      make_entry(dir, name, owner_json(staged_dead, "t" + std::to_string(++generation)));
    }
  };
  const auto seen = survey(system, dir, true);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].state == "in-flight");
  CHECK(seen[0].action != PlanAction::remove);
}

TEST_CASE("re-confirmation: a pid found dead earlier in the survey is probed again before it is reported") {
  // Two locks name pid 6001. The first probe finds it dead (ESRCH) and the survey caches
  // that; then a new process gets pid 6001 and holds the second lock. A cached "dead" does
  // not count: every pid is probed afresh before an entry is reported stale.
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  make_entry(dir, fake_lock_name("first"), owner_json(staged_dead, "first"));
  make_entry(dir, fake_lock_name("second"), owner_json(staged_dead, "second"));
  bool probed = false;
  std::string reborn_at;  // the record opened once the pid was found dead
  system.before = [&](std::string_view op, const std::string& what) {
    if (op == "kill" && what == std::to_string(staged_dead)) probed = true;
    if (op != "open" || !probed || !reborn_at.empty()) return;
    reborn_at = what;  // the second lock's record is read: pid 6001 lives again
    ProcessInfo info{'S', staged_dead, ::getuid(), 0, "node apnea"};
    info.pid = staged_dead;
    info.threads = 1;
    system.processes[staged_dead] = StagedProcess{0, info};
  };
  const auto seen = survey(system, dir, true);
  REQUIRE_FALSE(reborn_at.empty());
  REQUIRE(seen.size() == 2);
  for (const Seen& entry : seen) {
    CAPTURE(entry.token);
    // The lock whose record was read after the rebirth names a live process; the other
    // was judged (and re-confirmed) while the pid was dead.
    const bool second = reborn_at.find(fake_lock_name(entry.token)) != std::string::npos;
    CHECK(entry.state == (second ? "live" : "stale"));
    CHECK(entry.action == (second ? PlanAction::refuse : PlanAction::remove));
  }
}

TEST_CASE("re-confirmation: a candidate its writer removed just before exiting is not reported") {
  // The candidate's record was read; its writer then removed it and exited, so the probe
  // says ESRCH about an entry that is gone. Re-read after the probe, it is not reported
  // as dead debris (a survey of this area must find nothing to remove).
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  const std::string candidate = fake_lock_name("gone") + ".candidate." + std::string(test_token);
  make_entry(dir, candidate, owner_json(staged_dead));
  bool removed = false;
  system.before = [&](std::string_view op, const std::string& what) {
    if (op != "kill" || what != std::to_string(staged_dead) || removed) return;
    removed = true;
    REQUIRE(::unlink((dir + "/" + candidate + "/owner.json").c_str()) == 0);
    REQUIRE(::rmdir((dir + "/" + candidate).c_str()) == 0);
  };
  const auto seen = survey(system, dir, true);
  REQUIRE(removed);
  CHECK(seen.empty());
}

TEST_CASE("record-changed: a live holder's record rewritten in place is not removed while a possible owner lives") {
  // Issue 30, case 1: a live holder (pid 20506, a Node process) had its owner.json
  // rewritten in place some time after it was written, now naming pid 2050, which is dead.
  // The record changed after it was published, so it proves nothing: only --force may
  // remove it, and only with no possible owner alive.
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  const std::string name = fake_lock_name("truncated");
  const std::string lock = dir + "/" + name;
  make_entry(dir, name, owner_json(2050, "rewritten"));
  stage_node_process(system);
  const auto survey_with = [&](bool force) {
    const auto seen = judged(system, dir, force);
    REQUIRE(seen.size() == 1);
    return seen.front();
  };
  SUBCASE("changed 30 s after it was written: refused while the Node process lives") {
    const FileStat real_dir = *system.real().lstat(lock);
    system.restat = [&](const std::string& path, FileStat& st) {
      const std::int64_t born = real_dir.ctime_ns - 60'000'000'000;
      if (path == lock) {
        st.birth_ns = born;
        st.ctime_ns = born + 1'000'000;
      } else if (path == lock + "/owner.json") {
        st.birth_ns = born + 500'000;
        st.ctime_ns = born + 30'000'000'000;
      }
    };
    // The survey stats owner.json through its descriptor (fstat): stage that too.
    const auto [plain, plain_decision] = survey_with(false);
    CHECK(plain.record_changed);
    CHECK(plain_decision.action != PlanAction::remove);
    // --force would refuse too while the Node process lives: the step says so, and how on.
    CHECK(plain_decision.next_step.starts_with("needs --force, which refuses too: "));
    CHECK(plain_decision.next_step.find("--not-owner 20506@") != std::string::npos);
    const auto [forced, forced_decision] = survey_with(true);
    CHECK(!forced.possible_owners.empty());
    CHECK(forced_decision.action == PlanAction::refuse);
    CHECK(forced_decision.why.find("20506") != std::string::npos);
    // With no process that could have taken it, --force removes it, saying what it trusts.
    system.staged_runtime = std::vector<RuntimeProcess>{};
    const auto [alone, alone_decision] = survey_with(true);
    CHECK(alone_decision.action == PlanAction::remove);
    CHECK(std::find_if(alone_decision.trusts.begin(), alone_decision.trusts.end(), [](const std::string& t) {
            return t.find("recognised runtime") != std::string::npos;
          }) != alone_decision.trusts.end());
    // And when the process table cannot be read, nothing is shown free of a possible owner.
    system.staged_runtime.reset();
  }
  SUBCASE("unchanged since it was written: its pid decides, as before") {
    const auto [verdict, decision] = survey_with(false);
    CHECK_FALSE(verdict.record_changed);
    CHECK(decision.action == PlanAction::remove);  // 2050 is dead, for certain
  }
}

// issue 32: "needs --force" was the whole next step of a malformed record whose pids are
// dead while a possible owner lives, so --force only led to another refusal.
TEST_CASE("malformed, its pid dead, a possible owner alive: the next step is --force's refusal's") {
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  make_entry(dir, fake_lock_name("damaged"), "{\"pid\":2050,\"token\":\"\"}");
  stage_node_process(system);
  const auto plain = judged(system, dir, false);
  REQUIRE(plain.size() == 1);
  const Decision& decision = plain.front().second;
  CHECK(decision.action == PlanAction::refuse);
  CAPTURE(decision.next_step);
  CHECK(decision.next_step.starts_with("needs --force, which refuses too: "));
  CHECK(decision.next_step.find("pid 20506") != std::string::npos);
  CHECK(decision.next_step.find("apnea-locks reclaim --force --not-owner 20506@") != std::string::npos);
  // With no possible owner, --force would remove it: the step is --force, its fix the command.
  system.staged_runtime = std::vector<RuntimeProcess>{};
  const auto alone = judged(system, dir, false);
  REQUIRE(alone.size() == 1);
  CHECK(alone.front().second.next_step == "needs --force");
}

TEST_CASE("a record truncated inside a pid names every pid those digits begin: never removed on a proof") {
  // {"pid":2050 may have been {"pid":20506 (alive, or not probed at all): whatever 2050
  // itself says, no flag removes it on a proof of death.
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  make_entry(dir, fake_lock_name("cut"), "{\"pid\":2050");
  for (const bool force : {false, true}) {
    CAPTURE(force);
    const auto seen = judged(system, dir, force);
    REQUIRE(seen.size() == 1);
    const auto& [verdict, decision] = seen.front();
    CHECK(verdict.truncated_pid == std::optional<std::string>("2050"));
    CHECK(decision.action == PlanAction::refuse);
    CHECK(decision.fix.empty());
  }
}

namespace {

/// Everything a survey reports of one entry, as text, for comparing two surveys.
std::string report_of(const JudgedEntry& e) {
  return e.facts.name + " | " + std::string(state_name(e.verdict.state)) + " | " + e.verdict.reason +
         " | guard " + (e.facts.guard ? "yes" : "no") + " | " +
         std::to_string(static_cast<int>(e.decision.action)) + " | " + e.decision.why + " | " +
         e.decision.fix.command;
}

/// A real area of `n` entries of every kind: live, dead and malformed locks, candidates,
/// tombstones, young and old guards (listed before or after their locks, as the directory
/// hashes them), hostile names, a symlink and a FIFO.
void fill_mixed_area(const std::string& dir, int n) {
  const pid_t dead = dead_pid();
  for (int i = 0; i < n; ++i) {
    const std::string name = fake_lock_name("mixed-" + std::to_string(i));
    switch (i % 12) {
      case 0: make_entry(dir, name, owner_json(::getpid())); break;
      case 1: make_entry(dir, name, owner_json(dead)); break;
      case 2: make_entry(dir, name, owner_json(4'000'000 + i)); break;
      case 3: make_entry(dir, name, "not json", 0700, 0644); break;
      case 4: make_entry(dir, name, owner_json(::getpid()), 0700, 0644); break;
      case 5:
        make_entry(dir, name, owner_json(dead));
        make_dir(dir + "/" + reclaim_guard_path(name));
        break;
      case 6:
        make_entry(dir, name, owner_json(dead));
        make_dir(dir + "/" + reclaim_guard_path(name));
        age_path(dir + "/" + reclaim_guard_path(name), 3600);
        break;
      case 7: make_entry(dir, candidate_path(name, "tok-" + std::to_string(i)), owner_json(dead)); break;
      case 8: make_entry(dir, tombstone_path(name, "uuid-" + std::to_string(i)), owner_json(dead)); break;
      case 9: make_dir(dir + "/" + name); break;  // no owner.json
      case 10: write_file(dir + "/odd\x01name\xff-" + std::to_string(i), "x"); break;
      case 11:
        if (::symlink("/tmp", (dir + "/" + name).c_str()) != 0) std::abort();
        if (::mkfifo((dir + "/fifo-" + std::to_string(i)).c_str(), 0600) != 0) std::abort();
        break;
    }
  }
}

/// One survey's reports. Every survey is judged at the same `now_ns`: reports quote ages
/// ("unchanged for 2 s"), which would differ between surveys that straddle a second.
/// A guard age above every guard fill_mixed_area makes (the oldest is an hour): no guard is
/// old enough for the survey to read the machine's paused processes, which other tests
/// running at the same time stop and resume, so every survey sees the same facts.
constexpr std::chrono::nanoseconds hermetic_guard_age = std::chrono::hours(2);

/// The settings of a --force survey of `dir` now, with hermetic_guard_age.
SurveySettings hermetic_settings(const std::string& dir) {
  return survey_settings(real_system(), dir, Windows{.guard_age = hermetic_guard_age}, true);
}

/// A real area of `n` mixed entries (fill_mixed_area) in a folder of its own.
struct MixedArea {
  TempDir temp;
  std::string dir;
  explicit MixedArea(int n) : dir(temp / "locks") {
    make_dir(dir);
    fill_mixed_area(dir, n);
  }
};

std::vector<std::string> survey_reports(const std::string& dir, unsigned jobs, std::int64_t now_ns) {
  SurveySettings settings = hermetic_settings(dir);
  settings.judge.now_ns = now_ns;
  settings.jobs = jobs;
  std::vector<std::string> reports;
  LabelIndex labels;
  auto listed = survey_area(real_system(), dir, settings, labels, {fake_lock_name("absent")},
                            [&](const JudgedEntry& e) { reports.push_back(report_of(e)); });
  REQUIRE(listed);
  return reports;
}

}  // namespace

TEST_CASE("a survey with many jobs reports what one job does, in the same order") {
  const MixedArea area(600);
  const std::string& dir = area.dir;
  const std::int64_t now_ns = real_system().now_ns();
  const auto one = survey_reports(dir, 1, now_ns);
  REQUIRE(one.size() > 600);  // every entry, plus the absent lock at the end
  CHECK(one.back().starts_with(fake_lock_name("absent") + " | free"));
  for (unsigned jobs : {2U, 3U, 8U}) {
    CAPTURE(jobs);
    CHECK(survey_reports(dir, jobs, now_ns) == one);
  }
  // Every name comes back exactly as listed (the packed listing spells it again).
  std::vector<std::string> listed;
  REQUIRE(real_system().list_directory(dir, [&](const DirEntry& e) {
    listed.push_back(e.name);
    return true;
  }));
  REQUIRE(listed.size() + 1 == one.size());
  for (std::size_t i = 0; i < listed.size(); ++i) CHECK(one[i].starts_with(listed[i] + " | "));
}

TEST_CASE("the guard question answered from the listing agrees with a lookup per entry") {
  const MixedArea area(120);
  const std::string& dir = area.dir;
  const SurveySettings settings = hermetic_settings(dir);
  LabelIndex labels;
  std::size_t guarded = 0;
  auto listed = survey_area(real_system(), dir, settings, labels, {}, [&](const JudgedEntry& e) {
    const EntryFacts alone = EntryJudge(real_system(), dir, settings).gather(e.facts.name);
    CAPTURE(e.facts.name);
    CHECK(alone.guard.has_value() == e.facts.guard.has_value());
    if (alone.guard) {
      ++guarded;
      CHECK(alone.guard->same_object(*e.facts.guard));
    }
    const auto judged = judge_entry(alone, settings, nullptr);
    CHECK(judged.first.state == e.verdict.state);
    CHECK(judged.second.action == e.decision.action);
  });
  REQUIRE(listed);
  CHECK(guarded == 20);  // the locks made with a guard (young and old)
}

TEST_CASE("host facts read when needed: never for an empty area, before the first judgement otherwise") {
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  system.staged_area = dir;
  const SurveySettings pending =
      survey_settings(system, dir, Windows{}, false, HostRead::when_needed);
  CHECK(pending.host_pending);
  CHECK(system.namespace_inode_reads == 0);
  LabelIndex labels;
  std::vector<std::string> states;
  auto visit = [&](const JudgedEntry& e) {
    states.push_back(std::string(state_name(e.verdict.state)) + " " + std::string(proof_class_name(e.verdict.proof_class)));
  };

  auto listed = survey_area(system, dir, pending, labels, {}, visit);
  REQUIRE(listed);
  CHECK(*listed == 0);
  CHECK(system.namespace_inode_reads == 0);  // an empty area: no host facts read at all

  // An expected lock that is absent is judged: the host is read for it.
  const std::string name = fake_lock_name("dead");
  REQUIRE(survey_area(system, dir, pending, labels, {name}, visit));
  CHECK(system.namespace_inode_reads > 0);
  REQUIRE(states.size() == 1);
  CHECK(states[0] == "free none");

  // A dead owner's lock is proven dead with certainty, which needs the host facts: they
  // were read before it was judged, and give the verdict the eager settings give.
  make_entry(dir, name, owner_json(staged_dead, "t"));
  states.clear();
  const int before = system.namespace_inode_reads;
  REQUIRE(survey_area(system, dir, pending, labels, {}, visit));
  CHECK(system.namespace_inode_reads > before);
  const SurveySettings eager =
      survey_settings(system, dir, Windows{}, false, HostRead::now);
  CHECK_FALSE(eager.host_pending);
  REQUIRE(survey_area(system, dir, eager, labels, {}, visit));
  REQUIRE(states.size() == 2);
  CHECK(states[0] == "stale certain");
  CHECK(states[1] == states[0]);
}

TEST_CASE("the survey's packed listing gives every name back as listed, parsed as parse_entry_name parses it") {
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  // Keys using every hex digit at every position, and keys with one byte just outside the
  // digit ranges ('.', ':', '`', 'g', upper case, bytes >= 0x80) at each of several places.
  std::vector<std::string> names;
  const std::string digits = "0123456789abcdef";
  for (std::size_t shift = 0; shift < 16; ++shift) {
    std::string key;
    for (std::size_t i = 0; i < 64; ++i) key += digits[(i + shift) % 16];
    names.push_back("repository-" + key + ".lock");
    names.push_back("global-setup-" + key + ".lock.candidate.tok" + std::to_string(shift));
  }
  for (char odd : {'.', ':', '`', 'g', 'A', 'F', '\x80', '\xff'}) {
    for (std::size_t at : {0UL, 15UL, 16UL, 31UL, 32UL, 47UL, 63UL}) {
      std::string key(64, 'a');
      key[at] = odd;
      names.push_back("repository-" + key + ".lock.tombstone.x");
    }
  }
  for (const std::string& name : names) REQUIRE(::mkdir((dir + "/" + name).c_str(), 0700) == 0);
  SurveySettings settings;
  settings.judge.now_ns = system.now_ns();
  settings.judge.area_uid = ::getuid();
  settings.judge.host = healthy_host();
  for (unsigned jobs : {1U, 2U}) {
    settings.jobs = jobs;
    std::set<std::string> seen;
    LabelIndex labels;
    // Several jobs need a System safe to call from several threads: the real one.
    System& surveyed = jobs == 1 ? static_cast<System&>(system) : real_system();
    REQUIRE(survey_area(surveyed, dir, settings, labels, {}, [&](const JudgedEntry& e) {
      seen.insert(e.facts.name);
      const EntryName expected = parse_entry_name(e.facts.name);
      CHECK(e.facts.parsed.kind == expected.kind);
      CHECK(e.facts.parsed.role == expected.role);
      CHECK(e.facts.parsed.key == expected.key);
      CHECK(e.facts.parsed.suffix == expected.suffix);
    }));
    CHECK(seen == std::set<std::string>(names.begin(), names.end()));
  }
}

TEST_CASE("a visit that throws, while the listing goes on or after it, ends the survey with its exception") {
  const MixedArea area(600);
  const std::string& dir = area.dir;
  SurveySettings settings = hermetic_settings(dir);
  LabelIndex labels;
  for (unsigned jobs : {1U, 2U, 8U}) {
    settings.jobs = jobs;
    for (std::size_t throw_at : {0UL, 70UL, 300UL, 599UL}) {
      CAPTURE(jobs);
      CAPTURE(throw_at);
      std::size_t visits = 0;
      CHECK_THROWS_WITH_AS(survey_area(real_system(), dir, settings, labels, {},
                                       [&](const JudgedEntry&) {
                                         if (visits++ == throw_at) throw std::runtime_error("visit failed");
                                       }),
                           "visit failed", std::runtime_error);
      CHECK(visits == throw_at + 1);  // nothing visited after the failure
    }
  }
}

TEST_CASE("the survey lists the directory it opened, not whatever the path names by then") {
  // The per-entry calls are relative to the area's descriptor; the listing reads that same
  // descriptor, so an area moved away and replaced between the open and the listing is
  // still listed and judged as one directory (and no second descriptor is opened for it).
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  const std::string kept = fake_lock_name("kept"), other = fake_lock_name("other");
  make_entry(dir, kept, owner_json(staged_dead, "k"));
  bool replaced = false;
  system.before = [&](std::string_view op, const std::string&) {
    if ((op != "list_directory_at" && op != "list_directory") || std::exchange(replaced, true)) return;
    REQUIRE(::rename(dir.c_str(), (temp / "moved").c_str()) == 0);
    make_dir(dir);
    make_entry(dir, other, owner_json(staged_dead, "o"));
  };
  const auto seen = survey(system, dir);
  CHECK(system.count("open_directory") == 1);
  // Two listings of the one descriptor: the guards, then the entries (survey_area).
  CHECK(system.count("list_directory_at") == 2);
  CHECK(system.count("list_directory") == 0);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].name == kept);
  CHECK(seen[0].token == "k");
}

TEST_CASE("a survey's per-entry lstat and owner read are staged, and run on its descriptor") {
  // StagedSystem stages lstat_in and open_read_in as "lstat" and "open" of the joined path,
  // then runs the real ones, relative to the descriptor the survey opened. So a race staged
  // on an entry's lstat (after the listing) fires, and what it does to the path is not what
  // the survey reads: the area moved away and replaced there is still the one judged.
  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  const std::string name = fake_lock_name("entry");
  make_entry(dir, name, owner_json(staged_dead, "listed"));
  StagedProcess& live = system.processes[staged_live];
  live.info = ProcessInfo{'S', staged_live, ::getuid(), 0, "apnea"};
  live.info->pid = staged_live;
  live.info->threads = 1;
  bool swapped = false;
  system.before = [&](std::string_view op, const std::string& path) {
    if (op != "lstat" || path != dir + "/" + name || std::exchange(swapped, true)) return;
    REQUIRE(system.count("list_directory_at") == 2);  // during the second listing
    REQUIRE(::rename(dir.c_str(), (temp / "moved").c_str()) == 0);
    make_dir(dir);
    make_entry(dir, name, owner_json(staged_live, "swapped"));
  };
  const auto seen = survey(system, dir);
  REQUIRE(swapped);
  const std::vector<std::string>& calls = system.calls;
  CHECK(std::find(calls.begin(), calls.end(), "lstat " + dir + "/" + name) != calls.end());
  CHECK(std::find(calls.begin(), calls.end(), "open " + dir + "/" + name + "/owner.json") !=
        calls.end());
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].name == name);
  CHECK(seen[0].token == "listed");  // by path: "swapped", and live
  CHECK(seen[0].state == "stale");
}
