// The command line of every subcommand: one help style (util-linux's), the standard options
// (-h/--help, -V/--version, --color[=WHEN]), bounded option parsing with one-line errors,
// and the duration options of PROTOCOL.md section 10.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <cstdio>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/policy.h"
#include "cli/terminal.h"
#include "cli/time_text.h"

namespace apnea_locks::cli {

namespace po = boost::program_options;

/// What a command's `--help` says besides its options.
struct CommandHelp {
  std::string_view name;         ///< the subcommand ("status")
  std::string_view usage;        ///< synopsis lines after "apnea-locks ", one per line
  std::string_view description;  ///< what it does, a paragraph or two
  std::string_view notes;        ///< after the options: exit status and the like
  bool columns = false;          ///< list the output columns (status)
};

/// Writes the help of a command in util-linux's style: "Usage:", the synopsis, the
/// description, "Options:" (the command's, then -h, -V and --color), the columns, the notes
/// and "For more details see apnea-locks(1).", wrapped to 80 columns.
void print_help(std::FILE* out, const CommandHelp& help, const po::options_description& options);

/// Prints "apnea-locks VERSION", or "apnea-locks COMMAND VERSION" for a subcommand (a
/// monitoring plugin's -V names the plugin).
void print_version(std::FILE* out, std::string_view command = {});

/// The options every subcommand has: -h/--help, -V/--version and --color[=WHEN] (checked
/// when the command line is notified).
const po::options_description& standard_options();

/// --color as given (auto when not given).
ColourMode colour_mode(const po::variables_map& values);

/// Parses `args` against `options` plus standard_options() (and `hidden` and `positional`)
/// without printing: the values (not yet notified when --help or --version was given), or
/// the parser's message. An empty value (no_empty_value) and a bad duration
/// (duration_value) are parse errors.
std::expected<po::variables_map, std::string> try_parse_command_line(
    const std::vector<std::string>& args, const po::options_description& options,
    const po::options_description* hidden = nullptr,
    const po::positional_options_description* positional = nullptr);

/// For a command line parsed by try_parse_command_line: prints the help or the version when
/// asked for and returns exit_ok; nothing otherwise.
std::optional<int> standard_action(const po::variables_map& values, const CommandHelp& help,
                                   const po::options_description& options);

/// Parses `args` for `help.name` (try_parse_command_line, then standard_action): the
/// values; or, after --help or --version, exit_ok; or, after usage_error's two lines,
/// exit_usage.
std::expected<po::variables_map, int> parse_command_line(
    const CommandHelp& help, const std::vector<std::string>& args,
    const po::options_description& options, const po::options_description* hidden = nullptr,
    const po::positional_options_description* positional = nullptr);

/// parse_command_line with the positional arguments collected into `paths` (hidden from
/// the help as option `name`; at most `most` of them, -1 for any number).
std::expected<po::variables_map, int> parse_command_line(
    const CommandHelp& help, const std::vector<std::string>& args,
    const po::options_description& options, const char* name, std::vector<std::string>& paths,
    int most = -1);

/// Fails with the first option of `values` given with an empty value (a string, or one
/// element of a repeatable one), as a usage message naming it ("--lock-dir: empty value");
/// positional arguments (not in `visible`) are named by their upper-cased name ("empty LOCK
/// argument").
std::expected<void, std::string> no_empty_value(const po::variables_map& values,
                                                const po::options_description& visible);

/// Prints "apnea-locks COMMAND: MESSAGE" on standard error (the message escaped; without a
/// COMMAND, "apnea-locks: MESSAGE").
void print_error(std::string_view command, std::string_view message);

/// The line util-linux's tools print after a usage error, naming the help to read:
/// "Try 'apnea-locks COMMAND --help' for more information." ("apnea-locks --help" without
/// a COMMAND).
std::string usage_hint(std::string_view command);

/// A usage error in util-linux's style, the one every command uses: print_error's line,
/// then usage_hint's, on standard error. Returns exit_usage.
int usage_error(std::string_view command, std::string_view message);

/// A failure with exit status `status`: usage_error when it is exit_usage, else
/// print_error's line alone. Returns `status`.
int command_error(std::string_view command, int status, std::string_view message);

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

/// Whether a duration may have a fraction ("0.5", "1.5m"): only run's --wait, as flock's -w.
enum class Fractions { refused, allowed };

/// Parses the value of a duration option: exactly `[0-9]+[smhd]?` (a bare number is
/// seconds), or with Fractions::allowed `[0-9]+(\.[0-9]+)?[smhd]?` (digits past the
/// nanosecond are dropped), in nanoseconds, checked against [min_ns, max_ns]. Anything else
/// (`1e3`, `0x10`, ` 5`, `inf`, `nan`, `-1`, `+5`, `.5`, empty, a number too large for any
/// range) is a message naming `option` (e.g. "--guard-age"), the escaped value and the
/// range: "--guard-age '0': must be between 1m and 30d".
std::expected<std::int64_t, std::string> parse_duration(std::string_view option,
                                                        std::string_view text,
                                                        std::int64_t min_ns,
                                                        std::int64_t max_ns,
                                                        Fractions fractions = Fractions::refused);

/// Parses the value of an option that is a whole number: exactly decimal digits, in
/// [min, max] (min >= 0). Anything else (`-1`, `+5`, ` 5`, `0x10`, `1.0`, empty, a number
/// past max) is a message naming `option`, the escaped value and the range:
/// "--jobs '0': must be a whole number from 1 to 64".
std::expected<std::int64_t, std::string> parse_whole_number(std::string_view option,
                                                            std::string_view text,
                                                            std::int64_t min, std::int64_t max);

/// The value of a `--NAME DURATION` option for an options table: parse_duration(`option`,
/// ..., `range`) runs when the command line is notified (defaults too); a bad value is a
/// po::error (a usage error naming the option), a good one goes to `store`.
po::typed_value<std::string>* duration_value(std::string option, DurationRange range,
                                             std::function<void(std::int64_t)> store);
/// The same, storing into `ns`.
po::typed_value<std::string>* duration_value(std::string option, DurationRange range,
                                             std::int64_t& ns);

/// " (DURATION: N[s|m|h|d], MIN to MAX)" (" N[.N][s|m|h|d]" with Fractions::allowed):
/// appended to a duration option's help.
std::string duration_help(DurationRange range, Fractions fractions = Fractions::refused);

/// Splits comma-separated values of a repeatable option ("a,b" "c" -> a b c).
std::vector<std::string> split_list(const std::vector<std::string>& values);

}  // namespace apnea_locks::cli
