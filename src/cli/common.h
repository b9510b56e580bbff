// What the inspecting subcommands share: option parsing with one-line errors, the lock
// area to look at, colour, and the timing options.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/lock_area.h"
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
};

/// The lock area for `options`: --lock-dir, else default_lock_directory.
LockArea resolve_area(System& system, const AreaOptions& options);

/// Checks the area without changing it (check_area; the parent too for the default area).
AreaCheck check_lock_area(System& system, const LockArea& area);

/// Parses `args` for `command`. `options` are shown by --help (with `usage` first);
/// `hidden` and `positional` take positional arguments. On --help prints usage and yields
/// exit_ok; on a bad option prints one line ("apnea-locks CMD: ...") and yields exit_usage.
std::expected<po::variables_map, int> parse_command_line(
    std::string_view command, std::string_view usage, const std::vector<std::string>& args,
    const po::options_description& options, const po::options_description* hidden = nullptr,
    const po::positional_options_description* positional = nullptr);

/// Parses `args` against `options` (plus `hidden` and `positional`) without printing: the
/// values (not yet checked by notify when --help was given), or the parser's message.
std::expected<po::variables_map, std::string> try_parse_command_line(
    const std::vector<std::string>& args, const po::options_description& options,
    const po::options_description* hidden = nullptr,
    const po::positional_options_description* positional = nullptr);

/// Prints "apnea-locks COMMAND: MESSAGE" on standard error.
void print_error(std::string_view command, std::string_view message);

/// True when standard output is a terminal and NO_COLOR is unset (or empty).
bool colour_wanted(System& system);

/// A duration option in seconds, as nanoseconds; a usage error when negative or not finite.
std::expected<std::int64_t, std::string> seconds_option(std::string_view name, double seconds);

/// Splits comma-separated values of a repeatable option ("a,b" "c" -> a b c).
std::vector<std::string> split_list(const std::vector<std::string>& values);

}  // namespace apnea_locks::cli
