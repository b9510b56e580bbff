// Which lock area a command reads and how it judges it: --lock-dir and --user, the labels
// (the current directory, its ancestors, the home, --repo and --scan), the timing options,
// and one judging pass through the survey. No protocol I/O of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/labels.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/names.h"
#include "apnea_locks/survey.h"
#include "apnea_locks/system.h"
#include "cli/fields.h"
#include "cli/options.h"

namespace apnea_locks::cli {

/// Options shared by commands that read the lock area.
struct AreaOptions {
  std::string lock_dir;  ///< --lock-dir; empty for Apnea's default
  std::string user;      ///< --user NAME (root only); empty for this account
};

/// Adds `--lock-dir DIR` and `--user NAME` to `options`.
void add_area_options(po::options_description& options, AreaOptions& area);

/// The lock directory a command looks at.
struct LockArea {
  std::string directory;
  bool explicit_directory = false;  ///< given by --lock-dir (then only it is checked)
  /// An explicit directory that is still Apnea's own area of an account (--user): it may
  /// be absent. Any other explicit directory must exist.
  bool may_be_absent = false;
  /// The home whose global setup lock is labelled: the --user account's, else this
  /// process's (node_homedir); empty when unknown.
  std::string home;
  /// --user's account name: fixes then act for it (reclaim --user NAME); empty without --user.
  std::string user;
};

/// An account's own lock area as --user finds it: /tmp/apnea-<uid>/operation-locks, what
/// Apnea uses where the account's environment sets no TMPDIR (root's TMPDIR says nothing of
/// the account's; another area is named by --lock-dir or by the LOCKPATH from its message).
std::string account_default_area(std::uint32_t uid);

/// Why a command cannot go on: one line for standard error and the exit status.
struct CommandFailure {
  int exit_status;
  std::string message;
};

/// The lock area for `options`. With --user NAME (root only, else a usage error): NAME's
/// account is looked up (unknown: a usage error), this process becomes NAME for good
/// (System::become; failing: exit_unsafe), and the area is NAME's own unless --lock-dir.
/// Then --lock-dir, else default_lock_directory.
std::expected<LockArea, CommandFailure> open_lock_area(System& system, const AreaOptions& options);

/// A LOCKPATH argument: the path of an entry as Apnea's message prints it, or an entry name.
struct LockPath {
  std::string given;      ///< as typed
  std::string path;       ///< node_normalize'd, without a trailing slash
  std::string directory;  ///< the lock area it names (node_dirname); empty for a bare name
  std::string name;       ///< the entry name: the last component
  EntryName entry;        ///< parse_entry_name(name)
  /// The name is still cut with `…` (or `...`), as status cuts names: read_lock_paths
  /// replaces a cut name by the one entry of the area that starts with what precedes the cut
  /// and ends with what follows it, and leaves it cut only where the area was not safe to
  /// list (the command's own area check then says why).
  bool elided = false;
};

/// The one reading of LOCKPATHs every command shares: each normalised, split into its area
/// and entry name; they must name one area, which becomes `area` unless `area_fixed` (then
/// they must be its entries). With `apnea_names`, each must be a name Apnea uses. A name cut
/// with `…` is the area's one entry that matches it, looked up only in an area that passes
/// check_lock_area (else it stays as typed, and the command's own check says why); none or
/// several is an error naming them.
std::expected<std::vector<LockPath>, std::string> read_lock_paths(
    System& system, const std::vector<std::string>& given, LockArea& area, bool area_fixed,
    bool apnea_names = true);

/// Checks the area without changing it (check_area; the parent too for the default area).
/// Explicit paths are promises: a --lock-dir that does not exist, or is not a directory (a
/// symlink stays `symlink`), is `unreadable` (ENOENT, ENOTDIR), never an empty area; only
/// Apnea's own area may be `missing` ("no lock taken yet").
AreaCheck check_lock_area(System& system, const LockArea& area);

/// check.message(), and for an area another uid owns whose it is and what to do: an
/// account's own area (`apnea-<uid>` names its owner) takes `--user NAME`; one whose
/// name says another uid, or that no account owns, is squatted (docs/runbook.md).
std::string area_problem(System& system, const AreaCheck& check);

/// A lock directory the user typed (--lock-dir), as PROTOCOL.md section 10 checks paths:
/// trailing `/` and `.` components dropped, so `LINK/` and `LINK/.` are `LINK` (and are then
/// refused as a symlink, where lstat of `LINK/` would have followed it); nothing when a
/// component is `..` (refused: `a/b/..` is not `a` when `b` is a symlink).
std::optional<std::string> typed_area_path(std::string_view typed);

/// The usage error for a --lock-dir that typed_area_path refuses.
std::string dotdot_refused(std::string_view option, std::string_view typed);

/// Checks a --repo or --home PATH the user typed: it must resolve (realpath) to a
/// directory. Otherwise one line naming the option and the (escaped) path:
/// "--repo '/x': ENOENT: no such file or directory", "--home '/x': not a directory".
std::expected<void, std::string> typed_directory(System& system, std::string_view option,
                                                 const std::string& path);

/// The options that say which repositories are known by name.
struct LabelOptions {
  std::vector<std::string> repos;  ///< --repo: labelled and, for status/check, a filter
  std::vector<std::string> scans;  ///< --scan: folders whose .apnea/ repositories are labelled
  int scan_depth = 4;
};

/// Under sudo, the uid that ran sudo: $SUDO_UID when it differs from this process's uid
/// (sudo sets it; a user who sets it by hand only restricts themselves). A value that is not
/// a uid counts as an account that owns nothing. Nothing when not under sudo.
std::optional<std::uint32_t> sudo_invoker(System& system);

/// What check and status refuse under sudo (sudo_invoker), so that a sudoers entry for them
/// gives the invoking account no more than their report: `--output-file` (it would replace
/// a file with this account's rights), and a path option (`--lock-dir`, `--repo`, `--scan`:
/// each a pair of the option and the path as typed) that the invoking account could not
/// read itself, or could change between this check and its use (a symlink of its own
/// swapped). "Could read" is judged from the permission bits alone, the owner's and
/// everyone's (a directory readable through a group or an ACL only is refused): every
/// directory on the way, as typed and as resolved, searchable, and the last one readable.
/// "Could not change": each of them (and each symlink on the typed way) owned by root or
/// this account, and not writable by group or others unless sticky. One line naming the
/// option and the path; nothing when allowed.
std::optional<std::string> sudo_refusal(
    System& system, const std::string& output_file,
    const std::vector<std::pair<std::string_view, std::string>>& paths);

/// The path options of a command as sudo_refusal takes them: --lock-dir, each --repo and
/// --scan, and the directory of each LOCKPATH that has one.
std::vector<std::pair<std::string_view, std::string>> typed_paths(
    const AreaOptions& area, const LabelOptions& labels, const std::vector<std::string>& lock_paths = {});

/// Adds `--repo PATH`, `--scan DIR` and `--scan-depth N` to `options`; `repo_help` says
/// what --repo does for the command.
void add_label_options(po::options_description& options, LabelOptions& labels,
                       const char* repo_help);

/// The labels of a pass, and the lock names --repo asked for.
struct Labels {
  LabelIndex index;
  std::set<std::string> repo_locks;  ///< entry names of the --repo locks; empty: no filter
};

/// Labels, without hashing until a lock needs its name: the current directory and each of
/// its ancestors, the home (`area.home`) as a repository and its global setup lock, every
/// repository under each --scan, and each --repo. Fails with a message naming the option
/// and the path that does not resolve to a directory (a path the user typed: callers exit
/// exit_bad_path, check UNKNOWN).
std::expected<Labels, std::string> build_labels(System& system, const LockArea& area,
                                                const LabelOptions& options);

/// The timing options of a judging command, range-checked when the command line is parsed.
struct TimingOptions {
  std::int64_t tolerance_ns = default_reuse_tolerance.count();  ///< parsed: Windows (survey.h)
  std::int64_t guard_age_ns = default_guard_age.count();
  unsigned jobs = 0;  ///< --jobs: threads gathering entries; 0 = one per CPU we may run on
};

/// The most --jobs accepted.
inline constexpr unsigned max_jobs = 64;

/// The default --jobs: the number of CPUs this process may run on (1..max_jobs).
unsigned default_jobs();

/// Adds `--tolerance DURATION` (default 2s, 1s..1d), `--guard-age DURATION` (default 5m,
/// 1m..30d) and `--jobs N` (1..max_jobs, default the CPU count) to `options`; `guard_help` (null: the status wording) says what --guard-age does
/// for the command.
void add_timing_options(po::options_description& options, TimingOptions& timing,
                        const char* guard_help = nullptr);

/// The survey settings for a pass over `area` now (host facts read once: at once, or by the
/// survey when it has something to judge), deciding for `reclaim` with `force`. (The timing
/// options were checked when they were parsed: this does not fail today.)
std::expected<SurveySettings, std::string> judging_settings(System& system, const LockArea& area,
                                                            const TimingOptions& timing,
                                                            bool force = false,
                                                            HostRead host = HostRead::now);

/// Lists `area` with the survey and calls `visit` with each entry judged (with its label);
/// then, for each name of `expected_locks` that was not listed, with that lock judged as
/// absent (`free`). Returns the number of entries listed, or the listing error (then no
/// absent lock is visited).
SysResult<std::size_t> judge_area(System& system, const std::string& area,
                                  const SurveySettings& settings, const LabelIndex& labels,
                                  const std::set<std::string>& expected_locks,
                                  const std::function<void(const EntryView&)>& visit);

/// Calls `visit` with each lock of `names` (entry names in `area`) judged as absent
/// (`free`), as when the area does not exist yet (pending host facts read first).
void judge_absent_locks(System& system, const std::string& area, const SurveySettings& settings,
                        const LabelIndex& labels, const std::set<std::string>& names,
                        const std::function<void(const EntryView&)>& visit);

}  // namespace apnea_locks::cli
