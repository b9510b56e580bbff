// Apnea 0.2.2's on-disk protocol constants (PROTOCOL.md), in one place: everything that judges
// or acts on a lock takes its numbers from here, so judgement (classify) need not depend on
// action (lock) for one of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace apnea_locks {

/// The file name of the owner record inside a lock directory.
inline constexpr std::string_view owner_file_name = "owner.json";
/// The largest owner record Apnea reads.
inline constexpr std::int64_t owner_size_limit = 4096;
/// The grace after which Apnea reclaims a dead owner's repository lock.
inline constexpr std::chrono::milliseconds repository_reclaim_grace{60'000};

}  // namespace apnea_locks
