// Apnea's owner acceptance checks one by one, for a human reading `inspect`. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/owner.h"

namespace apnea_locks {

/// The outcome of one acceptance check. Apnea stops at the first failure, so the checks
/// after it were not run.
enum class CheckOutcome { pass, fail, not_run };

/// "pass", "fail" or "not-run".
std::string_view check_outcome_name(CheckOutcome outcome);

/// One of Apnea's acceptance checks (PROTOCOL.md section 3) applied to an owner read.
struct AcceptanceCheck {
  std::string_view name;  ///< stable: "lock-exists", "lock-private-mode", "json-syntax", ...
  CheckOutcome outcome = CheckOutcome::not_run;
  std::string detail;     ///< the value checked or why it failed ("mode 0700", "5000 bytes")
};

/// Every acceptance check, in Apnea's order, judged from what read_owner saw.
std::vector<AcceptanceCheck> acceptance_checks(const OwnerRead& read);

}  // namespace apnea_locks
