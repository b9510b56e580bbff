// Where Apnea keeps its operation locks, and whether that place is safe.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "apnea_locks/system.h"

namespace apnea_locks {

/// Node's `path.posix.normalize`: folds "//", "." and ".." lexically (no symlinks resolved);
/// an empty relative result is ".".
std::string node_normalize(std::string_view path);

/// Node's `path.posix.join` of two parts (empty parts are skipped, then normalised).
std::string node_join(std::string_view a, std::string_view b);

/// Node's `path.posix.dirname`.
std::string node_dirname(std::string_view path);

/// Node's `os.tmpdir()` on POSIX: the first non-empty of TMPDIR, TMP, TEMP, else "/tmp",
/// with one trailing "/" removed (but "/" stays "/"). Node decodes the environment as
/// UTF-8, so bytes that are not UTF-8 become U+FFFD (utf8_with_replacement) here too.
std::string node_tmpdir(System& system);

/// Node's `os.homedir()`: $HOME when set and non-empty, else the passwd entry (or ""),
/// decoded as UTF-8 with U+FFFD for invalid bytes, as Node makes it a string.
std::string node_homedir(System& system);

/// The lock directory Apnea uses: `<tmpdir>/apnea-<uid>/operation-locks`, joined like
/// Node's `path.join`.
std::string default_lock_directory(System& system);

/// The lock directory for another uid's account (`<tmpdir>/apnea-<uid>/operation-locks`).
std::string lock_directory_for_uid(System& system, std::uint32_t uid);

/// Why a lock area (or one of its two directories) is unsafe.
enum class AreaProblem {
  none,
  missing,        ///< it does not exist (no lock has been taken yet): not unsafe
  symlink,        ///< it is a symlink
  not_directory,  ///< it is something other than a directory
  foreign_owner,  ///< it belongs to another uid
  open_mode,      ///< it has group or other permission bits
  unreadable,     ///< lstat failed with something other than ENOENT
};

/// The verdict on a lock area: the first component that has a problem, and what it is.
struct AreaCheck {
  AreaProblem problem = AreaProblem::none;
  std::string path;      ///< the component the problem is about (empty when none)
  FileStat stat;         ///< its lstat, when it could be taken
  std::error_code error; ///< for `unreadable`
  std::uint32_t expected_uid = 0;

  bool safe() const { return problem == AreaProblem::none; }
  /// One line for a human, naming the path and what is wrong.
  std::string message() const;
  /// A stable short name ("ok", "missing", "symlink", "not-directory", "foreign-owner",
  /// "open-mode", "unreadable").
  std::string_view name() const;
};

/// Checks `lock_directory` and its parent (`apnea-<uid>`) without changing anything: each
/// must be a real directory (not a symlink), owned by `uid`, with no group/other bits.
/// When `check_parent` is false (an explicit --lock-dir), only the directory itself is
/// checked.
AreaCheck check_area(System& system, const std::string& lock_directory, std::uint32_t uid,
                     bool check_parent = true);

}  // namespace apnea_locks
