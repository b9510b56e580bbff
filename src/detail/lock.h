// Internals of lock.h: preparing the lock directory and removing one entry the way
// PROTOCOL.md section 10 allows. Not part of the library's interface (not installed); for
// src/ and the tests.
#pragma once

#include <optional>
#include <string>

#include "apnea_locks/lock.h"
#include "apnea_locks/system.h"

namespace apnea_locks::detail {

/// Prepares the lock directory per `mode`. AreaMode::apnea: creates it and its parent (mode
/// 0700) as Apnea does, refusing a symlink, a non-directory or another uid's directory
/// (ConfigError), and forces mode 0700. AreaMode::explicit_directory: creates only
/// `lock_directory` (0700; a missing parent is an error), or refuses an existing one that
/// is a symlink, not a directory, another uid's or has group/other bits, changing no mode.
LockResult<void> ensure_lock_directory(System& system, const std::string& lock_directory,
                                       AreaMode mode = AreaMode::apnea);

/// Why the entry at `path` (a lock, candidate or tombstone) could not be removed the way
/// PROTOCOL.md section 10 allows, or nothing when it could: opened as a directory without
/// following a symlink, it must be the device and inode `judged`, hold nothing but a regular
/// `owner.json` on the same device (or nothing), and be writable by us. Changes nothing.
std::optional<std::string> entry_unremovable(System& system, const std::string& path,
                                             const FileStat& judged);

/// Removes the entry at `path` as PROTOCOL.md section 10 says: the checks of
/// entry_unremovable, then `owner.json` unlinked through the directory's descriptor, then
/// the entry rmdir'ed. Never recursive: anything else inside is refused and left. Returns
/// why it was not removed, or nothing when it was.
std::optional<std::string> remove_entry(System& system, const std::string& path,
                                        const FileStat& judged);

}  // namespace apnea_locks::detail
