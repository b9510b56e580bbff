// Where Apnea keeps its operation locks, and whether that place is safe.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

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

/// node_tmpdir with the environment read through `env` (a process's own, say).
std::string node_tmpdir_from(const std::function<std::optional<std::string>(const char*)>& env);

/// True when `executable`'s basename (a trailing " (deleted)" dropped) names a runtime Apnea
/// may run in (PROTOCOL.md section 10): `node*`, `nodejs*`, `bun*`, `deno*`, `electron*`, or
/// `apnea-locks` itself.
bool recognised_runtime(std::string_view executable);

/// Other areas (PROTOCOL.md section 10): the lock directories that live processes of `uid`
/// running a recognised runtime would compute from their own environments
/// (`<tmpdir>/apnea-<uid>/operation-locks`), each once, `own` (normalised) left out.
/// Empty when /proc cannot be listed.
std::vector<std::string> other_lock_areas(System& system, std::uint32_t uid,
                                          const std::string& own);

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

  /// True when no component has a problem.
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

/// Why a `<tmpdir>/apnea-*` entry is not surveyed as an account's area (status/check
/// --all-users): it must be named `apnea-<uid>` with the uid in decimal as Node prints it,
/// and be a real directory (not a symlink) owned by that uid. Only that uid (or root) can
/// make such a directory; a uid without a passwd entry (a DynamicUser) still counts. Any
/// other `apnea-*` entry is a foreign entry: anyone may make one, so it is reported, never
/// judged as an area.
enum class AccountAreaProblem {
  none,
  bad_name,       ///< the suffix is not a uid in decimal ("apnea-x", "apnea-01")
  symlink,        ///< `apnea-<uid>` is a symlink
  not_directory,  ///< `apnea-<uid>` is something other than a directory
  owner_mismatch, ///< `apnea-<uid>` belongs to another uid than its name says
  unreadable,     ///< lstat failed
};

/// One `<tmpdir>/apnea-*` entry and whether it is an account's area.
struct AccountArea {
  std::string top;             ///< `<tmpdir>/apnea-<suffix>`
  std::string lock_directory;  ///< `top/operation-locks`
  std::optional<std::uint32_t> uid;  ///< the uid the name claims
  /// Its account, for an area to survey: the passwd entry, or for a uid without one an
  /// account of that uid with the overflow gid (no_account_gid), no name and no home.
  std::optional<Account> account;
  AccountAreaProblem problem = AccountAreaProblem::none;
  FileStat stat;          ///< the lstat of `top`, when taken
  std::error_code error;  ///< for `unreadable`
  /// The entry's name under the temp dir ("apnea-1000").
  std::string entry_name() const;

  /// True when it is an account's area, to be surveyed.
  bool surveyable() const { return problem == AccountAreaProblem::none; }
  /// A stable short name ("ok", "bad-name", "symlink", "not-directory", "owner-mismatch",
  /// "unreadable").
  std::string_view name() const;
  /// What is wrong, without the path: "owned by uid 1001, not 1000".
  std::string message() const;
};

/// A uid as Node and the kernel print one (an `apnea-<uid>` suffix, `--user 61234`,
/// $SUDO_UID, /proc/self/loginuid): decimal, no sign, no leading zero, not (uid_t)-1;
/// nothing for anything else.
std::optional<std::uint32_t> decimal_uid(std::string_view text);

/// The gid a uid without a passwd entry is surveyed with: the kernel's overflow gid
/// (Debian's nogroup), never a gid equal to the uid, which may be a real group's.
inline constexpr std::uint32_t no_account_gid = 65534;

/// The account of `uid` (System::lookup_uid), or for a uid without a passwd entry one with
/// that uid, no_account_gid, no name and no home.
Account account_of_uid(System& system, std::uint32_t uid);

/// Every entry `apnea-*` directly under node_tmpdir, judged, sorted by uid (then name, the
/// names that are no uid last). Reads only (lstat and the passwd database); fails when
/// the temp dir cannot be listed.
SysResult<std::vector<AccountArea>> find_account_areas(System& system);

}  // namespace apnea_locks
