// Internals of lock.h: preparing the lock directory, Apnea's errors, and the removal gate's
// steps (src/removal.cc: the only code that renames or removes an entry another writer
// made; tests/structure_test.cc checks that nothing else calls rename, rmdir or unlink on
// the lock area). Not part of the library's interface (not installed); for src/ and the
// tests.
#pragma once

#include <chrono>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

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

/// Apnea's OperationLocked error: `headline`, then `advice` (may be empty).
LockError operation_locked(LockedReason reason, std::string headline, std::string_view advice,
                           const std::string& resource, const std::string& lock, double pid);
/// Apnea's ConfigError.
LockError config_error(std::string message, std::string path);
/// A system error wrapped the way Apnea's withLock wraps unexpected errors.
LockError wrapped(const std::error_code& code, std::string_view syscall, const std::string& path,
                  const std::string& resource);
/// A new random UUID v4, lowercase (Apnea's tokens).
std::string random_uuid(System& system);

/// Whether the entry at `path` (a lock, candidate or tombstone) can be removed the way
/// PROTOCOL.md section 10 allows (the error says why not): opened as a directory without
/// following a symlink, it must be the device and inode `judged`, hold nothing but a regular
/// `owner.json` on the same device (or nothing), and be writable by us. Changes nothing.
std::expected<void, std::string> entry_removable(System& system, const std::string& path,
                                                 const FileStat& judged);

/// Removes the entry at `path` as PROTOCOL.md section 10 says: the checks of
/// entry_removable, then `owner.json` unlinked through the directory's descriptor, then
/// the entry rmdir'ed. Never recursive: anything else inside is refused and left. The error
/// says why it was not removed.
std::expected<void, std::string> remove_entry(System& system, const std::string& path,
                                              const FileStat& judged);

/// What a guarded reclamation (reclaim_guarded) expects to find at the lock before it renames it.
struct ReclaimExpectation {
  /// A valid owner: the token judged dead.
  std::optional<std::string> token;
  /// A malformed lock: the directory's stat, owner.json's stat (none when it could not be
  /// opened) and its exact bytes (none when they could not be read), as inspected. All must
  /// be unchanged (same object, mode, uid; same file size and mtime) for it to be removed.
  std::optional<FileStat> identity;
  std::optional<FileStat> owner_identity;
  std::optional<std::string> owner_bytes;
  /// Runs under the guard before anything is renamed: fails with a reason to stop (the
  /// owner came back to life, say).
  std::function<std::expected<void, std::string>()> confirm;
};

/// The result of a guarded reclamation.
struct ReclaimOutcome {
  bool removed = false;       ///< the lock was renamed to a tombstone (and removed)
  std::string tombstone;      ///< the tombstone path, when renamed
  std::string changed;        ///< why nothing was removed: what changed since inspection
};

/// Stale reclamation (PROTOCOL.md section 6), a step of the gate: only execute_repair calls it: takes `<lock>.reclaim`; fails `stale` with
/// Apnea's guarded message when it exists; under the guard re-validates the lock against
/// `expect` and only then renames it to a tombstone, verifies again, removes the tombstone
/// (unless `keep_tombstone`) and drops the guard.
LockResult<ReclaimOutcome> reclaim_guarded(System& system, const std::string& lock,
                                           const std::string& resource,
                                           const ReclaimExpectation& expect,
                                           bool keep_tombstone = false);

/// Apnea's token-checked release of our own lock: if `lock` still has `token`, rename it to a
/// tombstone, re-read the tombstone's token and, if still ours, remove it. True when it was
/// removed, false when the lock was not (or no longer) ours.
LockResult<bool> release_owned(System& system, const std::string& lock, const std::string& token);

/// What acquire does with a lock it found in place (take_over).
struct Takeover {
  enum class Kind {
    taken_over,  ///< removed through the gate: try again
    retry,       ///< it vanished or changed while judged: try again
    refused,     ///< `error` says why (live, stale, malformed, guarded)
  };
  Kind kind = Kind::retry;
  LockError error;  ///< for refused
  std::optional<Owner> owner;  ///< for taken_over: the owner whose lock was removed
};

/// Taking over is removing (PROTOCOL.md section 10): the lock of `target` judged now by the
/// survey's policy as `reclaim` without --force decides; removed through the gate (re-decided
/// under its guard) only when that decision is to remove it with a certain proof and the
/// lock is at least `grace` old (never without a grace). An owner not proven dead is
/// refused `live`, naming the blocker; a dead one inside the grace `stale`; a malformed
/// record `malformed`. `audit`: record a takeover in the system log.
Takeover take_over(System& system, const LockTarget& target,
                   std::optional<std::chrono::milliseconds> grace, bool audit);

}  // namespace apnea_locks::detail
