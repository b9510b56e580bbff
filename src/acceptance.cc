#include "apnea_locks/acceptance.h"

#include <fmt/format.h>

#include <array>
#include <cstddef>

namespace apnea_locks {

std::string_view check_outcome_name(CheckOutcome outcome) {
  switch (outcome) {
    case CheckOutcome::pass: return "pass";
    case CheckOutcome::fail: return "fail";
    case CheckOutcome::not_run: break;
  }
  return "not-run";
}

namespace {

constexpr std::array<std::string_view, 17> check_names = {
    "lock-exists",         "lock-not-symlink",    "lock-is-directory",   "lock-owned-by-user",
    "lock-private-mode",   "owner-exists",        "owner-not-symlink",   "owner-opens",
    "owner-regular-file",  "owner-owned-by-user", "owner-private-mode",  "owner-size",
    "owner-read-complete", "json-syntax",         "json-object",         "pid-positive-integer",
    "token-non-empty-string"};

/// The index in check_names of the check a rejection failed.
std::size_t failed_step(const OwnerRead& read, const OwnerRejection& rejection) {
  switch (rejection.check) {
    case OwnerCheck::lock_missing:
    case OwnerCheck::lock_unreadable: return 0;
    case OwnerCheck::lock_symlink: return 1;
    case OwnerCheck::lock_not_directory: return 2;
    case OwnerCheck::lock_foreign_owner: return 3;
    case OwnerCheck::lock_open_mode: return 4;
    case OwnerCheck::owner_missing: return 5;
    case OwnerCheck::owner_symlink: return 6;
    case OwnerCheck::owner_unreadable: return read.owner_stat ? 12 : 7;
    case OwnerCheck::owner_not_regular: return 8;
    case OwnerCheck::owner_foreign_owner: return 9;
    case OwnerCheck::owner_open_mode: return 10;
    case OwnerCheck::owner_empty:
    case OwnerCheck::owner_too_large: return 11;
    case OwnerCheck::owner_short_read: return 12;
    case OwnerCheck::json_syntax: return 13;
    case OwnerCheck::not_object: return 14;
    case OwnerCheck::pid_missing:
    case OwnerCheck::pid_not_number:
    case OwnerCheck::pid_not_positive_integer: return 15;
    case OwnerCheck::token_missing:
    case OwnerCheck::token_not_string:
    case OwnerCheck::token_empty: return 16;
  }
  return 0;
}

/// What a passed check saw, from the stats read_owner took.
std::string pass_detail(std::size_t step, const OwnerRead& read) {
  const auto& lock = read.lock_stat;
  const auto& owner = read.owner_stat;
  switch (step) {
    case 2: return "directory";
    case 3: return lock ? fmt::format("uid {}", lock->uid) : "";
    case 4: return lock ? fmt::format("mode {:04o}", lock->mode) : "";
    case 8: return "regular file";
    case 9: return owner ? fmt::format("uid {}", owner->uid) : "";
    case 10: return owner ? fmt::format("mode {:04o}", owner->mode) : "";
    case 11: return owner ? fmt::format("{} bytes", owner->size) : "";
    case 15: return read.owner ? pid_text(read.owner->pid) : "";
    default: return "";
  }
}

}  // namespace

std::vector<AcceptanceCheck> acceptance_checks(const OwnerRead& read) {
  const std::size_t failed = read.owner ? check_names.size() : failed_step(read, read.owner.error());
  std::vector<AcceptanceCheck> checks;
  checks.reserve(check_names.size());
  for (std::size_t step = 0; step < check_names.size(); ++step) {
    AcceptanceCheck check;
    check.name = check_names[step];
    if (step < failed) {
      check.outcome = CheckOutcome::pass;
      check.detail = pass_detail(step, read);
    } else if (step == failed) {
      const OwnerRejection& rejection = read.owner.error();
      check.outcome = CheckOutcome::fail;
      check.detail = rejection.detail.empty() ? rejection.reason() : rejection.detail;
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace apnea_locks
