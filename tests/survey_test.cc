// survey_area: one pass, judged and decided; a death verdict is re-confirmed after the probe.
#include "apnea_locks/survey.h"

#include <doctest/doctest.h>
#include <unistd.h>

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
