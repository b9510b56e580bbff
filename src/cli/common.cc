#include "cli/common.h"

#include "cli/render.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cmath>
#include <cstdio>

#include "cli/commands.h"

namespace apnea_locks::cli {

void add_area_options(po::options_description& options, AreaOptions& area) {
  options.add_options()("lock-dir", po::value(&area.lock_dir)->value_name("DIR"),
                        "lock directory to look at (default: Apnea's, <tmpdir>/apnea-<uid>/"
                        "operation-locks)");
}

LockArea resolve_area(System& system, const AreaOptions& options) {
  if (!options.lock_dir.empty()) return LockArea{options.lock_dir, true};
  return LockArea{default_lock_directory(system), false};
}

AreaCheck check_lock_area(System& system, const LockArea& area) {
  return check_area(system, area.directory, system.uid(), !area.explicit_directory);
}

std::expected<po::variables_map, std::string> try_parse_command_line(
    const std::vector<std::string>& args, const po::options_description& options,
    const po::options_description* hidden, const po::positional_options_description* positional) {
  po::options_description all;
  all.add(options);
  if (hidden != nullptr) all.add(*hidden);
  po::variables_map values;
  try {
    po::command_line_parser parser(args);
    parser.options(all);
    if (positional != nullptr) parser.positional(*positional);
    else parser.positional(po::positional_options_description());
    po::store(parser.run(), values);
    if (values.count("help") == 0) po::notify(values);
  } catch (const po::error& error) {
    return std::unexpected(std::string(error.what()));
  }
  return values;
}

std::expected<po::variables_map, int> parse_command_line(
    std::string_view command, std::string_view usage, const std::vector<std::string>& args,
    const po::options_description& options, const po::options_description* hidden,
    const po::positional_options_description* positional) {
  auto values = try_parse_command_line(args, options, hidden, positional);
  if (!values) {
    print_error(command, fmt::format("{} (see 'apnea-locks {} --help')", values.error(), command));
    return std::unexpected(exit_usage);
  }
  if (values->count("help") != 0) {
    fmt::print("{}\n\n{}", usage, fmt::streamed(options));
    return std::unexpected(exit_ok);
  }
  return std::move(*values);
}

void print_error(std::string_view command, std::string_view message) {
  std::fflush(stdout);
  // Messages carry paths and values from the environment and the disk: escaped, one line.
  fmt::print(stderr, "apnea-locks {}: {}\n", command, printable(message));
}

bool colour_wanted(System& system) {
  const auto no_colour = system.env("NO_COLOR");
  return system.is_terminal(1) && (!no_colour || no_colour->empty());
}

std::expected<std::int64_t, std::string> seconds_option(std::string_view name, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return std::unexpected(fmt::format("--{} must be a number of seconds >= 0, not {}", name, seconds));
  return static_cast<std::int64_t>(std::llround(seconds * 1e9));
}

std::vector<std::string> split_list(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& value : values) {
    std::size_t at = 0;
    while (at <= value.size()) {
      std::size_t comma = value.find(',', at);
      if (comma == std::string::npos) comma = value.size();
      if (comma > at) out.push_back(value.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return out;
}

}  // namespace apnea_locks::cli
