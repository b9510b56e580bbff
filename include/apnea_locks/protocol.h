// Apnea 0.2.2's on-disk protocol constants (PROTOCOL.md), in one place: everything that judges
// or acts on a lock takes its numbers from here, so judgement (classify) need not depend on
// action (lock) for one of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "apnea_locks/system.h"

namespace apnea_locks {

/// The file name of the owner record inside a lock directory.
inline constexpr std::string_view owner_file_name = "owner.json";
/// The largest owner record Apnea reads.
inline constexpr std::int64_t owner_size_limit = 4096;
/// The grace after which Apnea reclaims a dead owner's repository lock.
inline constexpr std::chrono::milliseconds repository_reclaim_grace{60'000};

/// Why an object (lstat) is not a private directory of `uid`, as Apnea requires of its lock
/// area's directories and of every lock (PROTOCOL.md sections 1 and 3).
enum class PrivacyProblem {
  none,           ///< a directory of `uid` without group or other permission bits
  symlink,
  not_directory,  ///< anything else that is not a directory
  foreign_owner,  ///< owned by another uid
  open_mode,      ///< group or other permission bits set
};

/// The first of the checks `st` fails, in Apnea's order; PrivacyProblem::none when it passes.
constexpr PrivacyProblem private_directory_problem(const FileStat& st, std::uint32_t uid) {
  if (st.type == FileType::symlink) return PrivacyProblem::symlink;
  if (st.type != FileType::directory) return PrivacyProblem::not_directory;
  if (st.uid != uid) return PrivacyProblem::foreign_owner;
  if ((st.mode & 077) != 0) return PrivacyProblem::open_mode;
  return PrivacyProblem::none;
}

}  // namespace apnea_locks
