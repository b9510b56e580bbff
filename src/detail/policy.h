// Internals of policy.h: the reclaim command line behind fix_command.
// Not part of the library's interface (not installed); for src/ and the tests.
#pragma once

#include <string>
#include <vector>

#include "apnea_locks/facts.h"
#include "apnea_locks/policy.h"

namespace apnea_locks::detail {

/// The argv of `apnea-locks reclaim [--force]` naming the entry: by `--repo`/`--home` for a
/// lock whose `label` is known, else by its path. Pure.
std::vector<std::string> reclaim_argv(const EntryFacts& facts, const EntryLabel* label, bool force,
                                      const FixContext& context);

}  // namespace apnea_locks::detail
