// The report a surveying child of --all-users sends its parent (cli/all_users.h): every part
// arrives as it was sent, the entries in the order shown, and a child that fails is reported.
#include <unistd.h>

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "apnea_locks/system.h"
#include "cli/all_users.h"

using namespace apnea_locks;
using namespace apnea_locks::cli;

namespace {

/// This process's own account: survey_as_account surveys without becoming anyone.
Account me() { return Account{"me", real_system().uid(), 0, "/home/me"}; }

void check_same(const RenderedEntry& got, const RenderedEntry& sent) {
  CHECK(got.order == sent.order);
  CHECK(got.colour == sent.colour);
  CHECK(got.cells == sent.cells);
}

void check_same(const AreaSummary& got, const AreaSummary& sent) {
  CHECK(got.scanned == sent.scanned);
  CHECK(got.shown == sent.shown);
  CHECK(got.attention == sent.attention);
  CHECK(got.states == sent.states);
  CHECK(got.roles == sent.roles);
  CHECK(got.classes == sent.classes);
  CHECK(got.locks == sent.locks);
  CHECK(got.live == sent.live);
  CHECK(got.stale == sent.stale);
  CHECK(got.malformed == sent.malformed);
  CHECK(got.debris == sent.debris);
  CHECK(got.leftover_guards == sent.leftover_guards);
  CHECK(got.oldest_lock_age_ns == sent.oldest_lock_age_ns);
  REQUIRE(got.next.has_value() == sent.next.has_value());
  if (!got.next) return;
  const NextStep& a = *got.next;
  const NextStep& b = *sent.next;
  CHECK(a.order == b.order);
  CHECK(a.name == b.name);
  CHECK(a.path == b.path);
  CHECK(a.description == b.description);
  CHECK(a.state == b.state);
  CHECK(a.reason == b.reason);
  CHECK(a.fix_argv == b.fix_argv);
  CHECK(a.fix == b.fix);
  CHECK(a.next_step == b.next_step);
  CHECK(a.why == b.why);
}

const std::vector<RenderedEntry> shown = {
    {{0, 0, 1, "repository-1.lock\nme"}, "1;31", {"me", "stale", "", "a b\\c"}},
    {{1, 1, 7, "x"}, "", {std::string("\0\xff\n", 3)}},
};

}  // namespace

TEST_CASE("survey_as_account: the report arrives as sent, its entries in the order shown") {
  AccountReport sent;
  sent.check = "missing";
  sent.message = "no lock area yet";
  sent.area_safe = false;
  sent.scrape_success = false;
  AreaSummary summary;
  summary.scanned = 5;
  summary.shown = 4;
  summary.attention = 2;
  summary.states = {{"live", 1}, {"stale", 3}};
  summary.roles = {{"lock", 4}};
  summary.classes = {{{"repository", "lock", "stale"}, 3}, {{"unknown", "unknown", "unknown"}, 0}};
  summary.locks = 4;
  summary.live = 1;
  summary.stale = 3;
  summary.leftover_guards = 6;
  summary.oldest_lock_age_ns = 7'200'000'000'123;
  NextStep next;
  next.order = {0, 1, 2, "repository-1.lock\nme"};
  next.name = "repository-1.lock";
  next.path = "/tmp/apnea-0/operation-locks/repository-1.lock";
  next.description = "the lock repository-1.lock";
  next.state = "stale";
  next.reason = "pid-dead";
  next.fix_argv = {"apnea-locks", "reclaim", "a b", ""};
  next.fix = "apnea-locks reclaim 'a b' ''";
  next.why = std::string("bytes\0\x1b", 7);
  summary.next = next;
  sent.summary = summary;
  sent.status = 2;
  sent.findings.stale_attention = 1;
  sent.findings.blocking_guards = 2;
  sent.findings.old_locks_warning = 3;
  sent.findings.old_locks_critical = 4;
  sent.findings.critical_details = {"me: malformed lock"};
  sent.findings.details = {"me: stale lock", ""};

  const AccountReport got = survey_as_account(real_system(), me(), [&](const ShowEntry& show) {
    for (const RenderedEntry& entry : shown) show(entry);
    return sent;
  });
  CHECK(got.finished);
  CHECK(!got.error);
  CHECK(got.check == sent.check);
  CHECK(got.message == sent.message);
  CHECK(got.area_safe == sent.area_safe);
  CHECK(got.scrape_success == sent.scrape_success);
  REQUIRE(got.summary);
  check_same(*got.summary, summary);
  REQUIRE(got.entries.size() == shown.size());
  for (std::size_t i = 0; i < shown.size(); ++i) check_same(got.entries[i], shown[i]);
  CHECK(got.status == 2);
  CHECK(got.findings.stale_attention == 1);
  CHECK(got.findings.blocking_guards == 2);
  CHECK(got.findings.old_locks_warning == 3);
  CHECK(got.findings.old_locks_critical == 4);
  CHECK(got.findings.critical_details == sent.findings.critical_details);
  CHECK(got.findings.details == sent.findings.details);
  CHECK(got.findings.fine.empty());
}

TEST_CASE("survey_as_account: an empty report stays empty") {
  const AccountReport got =
      survey_as_account(real_system(), me(), [](const ShowEntry&) { return AccountReport{}; });
  CHECK(got.finished);
  CHECK(!got.check);
  CHECK(got.message.empty());
  CHECK(!got.error);
  CHECK(got.area_safe);
  CHECK(got.scrape_success);
  CHECK(!got.summary);
  CHECK(got.entries.empty());
  CHECK(got.status == 0);
}

TEST_CASE("survey_as_account: a survey that fails is reported, with the entries it showed") {
  SUBCASE("it throws") {
    const AccountReport got = survey_as_account(real_system(), me(), [](const ShowEntry& show) {
      show(shown.front());
      throw std::runtime_error("out of luck");
      return AccountReport{};
    });
    CHECK(!got.finished);
    CHECK(got.error == "survey as me failed: out of luck");
    CHECK(!got.scrape_success);
    CHECK(!got.summary);
    REQUIRE(got.entries.size() == 1);
    check_same(got.entries.front(), shown.front());
  }
  SUBCASE("it dies") {
    const AccountReport got = survey_as_account(real_system(), me(), [](const ShowEntry&) {
      ::_exit(9);
      return AccountReport{};
    });
    CHECK(!got.finished);
    CHECK(got.error == "the survey as me did not finish (exit 9)");
    CHECK(!got.scrape_success);
    CHECK(got.entries.empty());
  }
}
