// Lock names: which path Apnea uses for what, and what a directory entry's name means.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "apnea_locks/system.h"

namespace apnea_locks {

/// Lowercase hex SHA-256 of `bytes` (OpenSSL's SHA256_* functions).
std::string sha256_hex(std::string_view bytes);

/// The two kinds of Apnea lock.
enum class LockKind { repository, global_setup, unknown };

/// "repository", "global-setup" or "unknown".
std::string_view kind_name(LockKind kind);

/// The key of a lock: hex SHA-256 of `<prefix> NUL <canonical path>`.
std::string lock_key(LockKind kind, std::string_view canonical_path);

/// The entry name of a lock: `repository-<key>.lock` or `global-setup-<key>.lock`.
std::string lock_name(LockKind kind, std::string_view key);

/// A lock Apnea would take, located: the root (or home) it is for and its path.
struct LocatedLock {
  LockKind kind = LockKind::repository;
  std::string root;       ///< the canonical repository root, or the canonical home
  std::string name;       ///< the entry name (lock_name)
  std::string path;       ///< the lock path, as `apnea-locks path` prints it
};

/// The one computation of a lock from what it is for: the repository lock of the canonical
/// (realpath'd) root `canonical`, or the global setup lock of the canonical home, in
/// `lock_directory`. Hashes once; no system call.
LocatedLock canonical_lock(std::string_view lock_directory, LockKind kind, std::string canonical);

/// canonical_lock of `root` realpath'd (once, as Apnea resolves it). Fails with realpath's
/// error.
SysResult<LocatedLock> locate_lock(System& system, const std::string& lock_directory,
                                   LockKind kind, const std::string& root);

/// The lock path Apnea uses for the repository at `root` (realpath'd) inside
/// `lock_directory` (locate_lock). Fails with realpath's error.
SysResult<std::string> repository_lock_path(System& system, const std::string& lock_directory,
                                            const std::string& root);

/// The lock path of the global setup lock for `home` (realpath'd; locate_lock).
SysResult<std::string> global_setup_lock_path(System& system, const std::string& lock_directory,
                                              const std::string& home);

/// The reclaim guard of the lock at (or named) `lock`: `<lock>.reclaim`.
std::string reclaim_guard_path(std::string_view lock);

/// The candidate of the lock at `lock` for an owner with `token`: `<lock>.candidate.<token>`.
std::string candidate_path(std::string_view lock, std::string_view token);

/// A tombstone of the lock at `lock`: `<lock>.tombstone.<uuid>`.
std::string tombstone_path(std::string_view lock, std::string_view uuid);

/// The protocol's entry names (PROTOCOL.md section 2), spelled here only: what ends a lock's
/// name, a reclaim guard's suffix, and the infixes before a candidate's token and a
/// tombstone's uuid.
inline constexpr std::string_view lock_name_suffix = ".lock";
inline constexpr std::string_view guard_suffix = ".reclaim";
inline constexpr std::string_view candidate_infix = ".candidate.";
inline constexpr std::string_view tombstone_infix = ".tombstone.";

/// True when `text` is a lock key: exactly 64 lowercase hex digits.
bool is_lock_key(std::string_view text);

/// What an entry of the lock directory is.
enum class EntryRole { lock, candidate, tombstone, reclaim_guard, unknown };

/// What follows the lock's name in the name of an entry of `role`, before a candidate's
/// token or a tombstone's uuid: "", ".reclaim", ".candidate." or ".tombstone." ("" for
/// unknown).
std::string_view role_suffix(EntryRole role);

/// "lock", "candidate", "tombstone", "reclaim-guard" or "unknown".
std::string_view role_name(EntryRole role);

/// A parsed directory entry name.
struct EntryName {
  LockKind kind = LockKind::unknown;
  EntryRole role = EntryRole::unknown;
  std::string key;     ///< the 64 hex digits; empty for unknown entries
  std::string suffix;  ///< the candidate token or tombstone uuid; empty otherwise
  /// The name of the lock this entry belongs to (`<kind>-<key>.lock`); empty when unknown.
  std::string lock_name() const;
};

/// Parses any entry name. Names that are not exactly one of the protocol's forms
/// (wrong prefix, key not 64 lowercase hex digits, empty suffix) are `unknown`.
EntryName parse_entry_name(std::string_view name);

/// `parsed.lock_name()` without making a string: a protocol name starts with the name of its
/// lock, so it is a view of `name` when `parsed` is parse_entry_name(name); otherwise the
/// lock name is made in `scratch` and viewed there. Empty when `parsed` is unknown.
std::string_view lock_name_view(std::string_view name, const EntryName& parsed, std::string& scratch);

}  // namespace apnea_locks
