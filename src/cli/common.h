// What the inspecting subcommands share: option parsing with one-line errors, the lock
// area to look at, colour, and the timing options.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/lock_area.h"
#include "apnea_locks/policy.h"
#include "apnea_locks/system.h"

namespace apnea_locks::cli {

namespace po = boost::program_options;

/// Options shared by commands that read the lock area.
struct AreaOptions {
  std::string lock_dir;  ///< --lock-dir; empty for Apnea's default
};

/// Adds `--lock-dir DIR` to `options`.
void add_area_options(po::options_description& options, AreaOptions& area);

/// The lock directory a command looks at.
struct LockArea {
  std::string directory;
  bool explicit_directory = false;  ///< given by --lock-dir (then only it is checked)
  /// An explicit directory that is still Apnea's own area of an account (reclaim --user):
  /// it may be absent. Any other explicit directory must exist.
  bool may_be_absent = false;
};

/// The lock area for `options`: --lock-dir, else default_lock_directory.
LockArea resolve_area(System& system, const AreaOptions& options);

/// Checks the area without changing it (check_area; the parent too for the default area).
/// Explicit paths are promises: a --lock-dir that does not exist, or is not a directory (a
/// symlink stays `symlink`), is `unreadable` (ENOENT, ENOTDIR), never an empty area; only
/// Apnea's own area may be `missing` ("no lock taken yet").
AreaCheck check_lock_area(System& system, const LockArea& area);

/// Checks a --repo or --home PATH the user typed: it must resolve (realpath) to a
/// directory. Otherwise one line naming the option and the (escaped) path:
/// "--repo '/x': ENOENT: no such file or directory", "--home '/x': not a directory".
std::expected<void, std::string> typed_directory(System& system, std::string_view option,
                                                 const std::string& path);

/// The first option of `values` given with an empty value (a string, or one element of a
/// repeatable one), as a usage message naming it ("--lock-dir: empty value"); positional
/// arguments (not in `visible`) are named by their upper-cased name ("empty LOCK
/// argument"). Nothing when every value given is non-empty.
std::optional<std::string> empty_value_error(const po::variables_map& values,
                                             const po::options_description& visible);

/// Parses `args` for `command`. `options` are shown by --help (with `usage` first);
/// `hidden` and `positional` take positional arguments. On --help prints usage and yields
/// exit_ok; on a bad option prints one line ("apnea-locks CMD: ...") and yields exit_usage.
std::expected<po::variables_map, int> parse_command_line(
    std::string_view command, std::string_view usage, const std::vector<std::string>& args,
    const po::options_description& options, const po::options_description* hidden = nullptr,
    const po::positional_options_description* positional = nullptr);

/// Parses `args` against `options` (plus `hidden` and `positional`) without printing: the
/// values (not yet checked by notify when --help was given), or the parser's message. An
/// empty value (empty_value_error) and a bad duration (duration_value) are parse errors.
std::expected<po::variables_map, std::string> try_parse_command_line(
    const std::vector<std::string>& args, const po::options_description& options,
    const po::options_description* hidden = nullptr,
    const po::positional_options_description* positional = nullptr);

/// Prints "apnea-locks COMMAND: MESSAGE" on standard error.
void print_error(std::string_view command, std::string_view message);

/// True when standard output is a terminal and NO_COLOR is unset (or empty).
bool colour_wanted(System& system);

/// Nanoseconds in a second, a minute, an hour, a day.
inline constexpr std::int64_t ns_per_second = 1'000'000'000;
inline constexpr std::int64_t ns_per_minute = 60 * ns_per_second;
inline constexpr std::int64_t ns_per_hour = 60 * ns_per_minute;
inline constexpr std::int64_t ns_per_day = 24 * ns_per_hour;

/// The range a duration option must be in (inclusive), in nanoseconds.
struct DurationRange {
  std::int64_t min_ns;
  std::int64_t max_ns;
};

/// The ranges of PROTOCOL.md section 10 ("Bounded inputs"), and run's --wait.
inline constexpr DurationRange tolerance_range{ns_per_second, ns_per_day};
inline constexpr DurationRange guard_age_range{ns_per_minute, 30 * ns_per_day};
inline constexpr DurationRange lock_age_range{ns_per_second, 365 * ns_per_day};  ///< --warn-age, --crit-age
inline constexpr DurationRange wait_range{0, 30 * ns_per_day};                   ///< run --wait

/// The defaults of the timing options.
inline constexpr std::int64_t default_tolerance_ns = default_reuse_tolerance_ns;
using apnea_locks::default_guard_age_ns;  // policy.h

/// Parses the value of a duration option: exactly `[0-9]+[smhd]?` (a bare number is
/// seconds), in nanoseconds, checked against [min_ns, max_ns]. Anything else (`1e3`,
/// `0x10`, ` 5`, `inf`, `-1`, `+5`, empty, a number too large for any range) is a message
/// naming `option` (e.g. "--guard-age"), the escaped value and the range:
/// "--guard-age '0': must be between 1m and 30d".
std::expected<std::int64_t, std::string> parse_duration(std::string_view option,
                                                        std::string_view text,
                                                        std::int64_t min_ns,
                                                        std::int64_t max_ns);

/// A whole-second duration in its largest exact unit: "0s", "90s", "5m", "2h", "30d".
std::string duration_text(std::int64_t ns);

/// The value of a `--NAME DURATION` option for an options table: parse_duration(`option`,
/// ..., `range`) runs when the command line is notified (defaults too); a bad value is a
/// po::error (a usage error naming the option), a good one goes to `store`.
po::typed_value<std::string>* duration_value(std::string option, DurationRange range,
                                             std::function<void(std::int64_t)> store);
/// The same, storing into `ns`.
po::typed_value<std::string>* duration_value(std::string option, DurationRange range,
                                             std::int64_t& ns);

/// " (DURATION: N[s|m|h|d], MIN to MAX)": appended to a duration option's help.
std::string duration_help(DurationRange range);

/// Splits comma-separated values of a repeatable option ("a,b" "c" -> a b c).
std::vector<std::string> split_list(const std::vector<std::string>& values);

}  // namespace apnea_locks::cli
