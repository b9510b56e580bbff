// One pass over the lock area, gathering the facts classify() judges, entry by entry.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/probe.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// The path of entry `name` inside `directory`.
std::string entry_path(std::string_view directory, std::string_view name);

/// Streams every entry of `lock_directory` (one directory pass) to `visit` with its facts;
/// entries that vanish before they are read are skipped. `visit` returns false to stop.
/// Fails only when the directory cannot be listed.
SysResult<void> scan_area(System& system, const std::string& lock_directory, std::uint32_t uid,
                          const std::function<bool(const EntryFacts&)>& visit);

/// What inspect shows beyond the facts: owner.json's own lstat and up to 4 KiB of its raw
/// bytes even when Apnea would not read them (too large, wrong mode).
struct OwnerFileDetails {
  std::optional<FileStat> lstat;
  std::error_code lstat_error;            ///< when lstat failed
  std::optional<std::string> raw;         ///< at most owner_size_limit bytes
  bool raw_truncated = false;             ///< the file holds more than `raw`
};

/// Reads owner.json's details inside `entry` without following a symlink and without
/// blocking on a FIFO (only a regular file is read).
OwnerFileDetails gather_owner_file(System& system, const std::string& entry);

}  // namespace apnea_locks
