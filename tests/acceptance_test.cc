// acceptance_checks: Apnea's owner checks, one by one, as inspect lists them.
#include "apnea_locks/acceptance.h"

#include <doctest/doctest.h>

#include <string>

using namespace apnea_locks;

namespace {

OwnerRead read_with(std::optional<OwnerCheck> failed) {
  OwnerRead read;
  FileStat lock;
  lock.type = FileType::directory;
  lock.mode = 0700;
  lock.uid = 7;
  read.lock_stat = lock;
  FileStat owner;
  owner.type = FileType::regular;
  owner.mode = 0600;
  owner.uid = 7;
  owner.size = 50;
  read.owner_stat = owner;
  if (failed) {
    OwnerRejection rejection;
    rejection.check = *failed;
    rejection.mode = 0644;
    read.owner = std::unexpected(rejection);
  } else {
    read.owner = Owner{42, "token"};
  }
  return read;
}

}  // namespace

TEST_CASE("an accepted owner passes every check, with what was seen") {
  auto checks = acceptance_checks(read_with(std::nullopt));
  REQUIRE(checks.size() == 17);
  for (const auto& check : checks) CHECK(check.outcome == CheckOutcome::pass);
  CHECK(checks[0].name == "lock-exists");
  CHECK(checks[4].name == "lock-private-mode");
  CHECK(checks[4].detail == "mode 0700");
  CHECK(checks[11].detail == "50 bytes");
  CHECK(checks[15].detail == "42");
  CHECK(checks[16].name == "token-non-empty-string");
}

TEST_CASE("checks before the failure pass, the failure fails, the rest did not run") {
  struct Case {
    OwnerCheck check;
    std::string_view failed;
    std::string detail;
  };
  for (const Case& c : {Case{OwnerCheck::lock_symlink, "lock-not-symlink", "lock-symlink"},
                        Case{OwnerCheck::owner_open_mode, "owner-private-mode", "owner-mode-0644"},
                        Case{OwnerCheck::owner_too_large, "owner-size", "owner-too-large"},
                        Case{OwnerCheck::owner_short_read, "owner-read-complete", "owner-short-read"},
                        Case{OwnerCheck::json_syntax, "json-syntax", "json-syntax"},
                        Case{OwnerCheck::pid_not_number, "pid-positive-integer", "pid-not-number"},
                        Case{OwnerCheck::token_empty, "token-non-empty-string", "token-empty"}}) {
    CAPTURE(c.failed);
    auto checks = acceptance_checks(read_with(c.check));
    bool seen_failure = false;
    for (const auto& check : checks) {
      if (check.name == c.failed) {
        CHECK(check.outcome == CheckOutcome::fail);
        CHECK(check.detail == c.detail);
        seen_failure = true;
      } else {
        CHECK(check.outcome == (seen_failure ? CheckOutcome::not_run : CheckOutcome::pass));
      }
    }
    CHECK(seen_failure);
  }
}

TEST_CASE("an unreadable owner.json fails at open or at read, depending on what was seen") {
  OwnerRead at_open = read_with(OwnerCheck::owner_unreadable);
  at_open.owner_stat.reset();
  CHECK(acceptance_checks(at_open)[7].outcome == CheckOutcome::fail);
  CHECK(acceptance_checks(read_with(OwnerCheck::owner_unreadable))[12].outcome == CheckOutcome::fail);
  CHECK(check_outcome_name(CheckOutcome::not_run) == "not-run");
}
