#include "cli/common.h"

#include "cli/render.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>
#include <utility>

#include "cli/commands.h"
#include "cli/render.h"

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
  AreaCheck check = check_area(system, area.directory, system.uid(), !area.explicit_directory);
  if (!area.explicit_directory || area.may_be_absent) return check;
  // Explicit paths are promises: a typo is an error naming it, never an empty, healthy area.
  if (check.problem == AreaProblem::missing) {
    check.problem = AreaProblem::unreadable;
    check.error = std::make_error_code(std::errc::no_such_file_or_directory);
  } else if (check.problem == AreaProblem::not_directory) {
    check.problem = AreaProblem::unreadable;
    check.error = std::make_error_code(std::errc::not_a_directory);
  }
  return check;
}

std::expected<void, std::string> typed_directory(System& system, std::string_view option,
                                                 const std::string& path) {
  auto fail = [&](std::string_view why) {
    return std::unexpected(fmt::format("{} '{}': {}", option, printable(path), why));
  };
  auto resolved = system.realpath(path);
  if (!resolved) return fail(errno_text(resolved.error()));
  auto st = system.lstat(*resolved);
  if (!st) return fail(errno_text(st.error()));
  if (st->type != FileType::directory) return fail("not a directory");
  return {};
}

std::optional<std::string> empty_value_error(const po::variables_map& values,
                                             const po::options_description& visible) {
  for (const auto& [name, value] : values) {
    if (value.defaulted()) continue;
    const po::option_description* option = visible.find_nothrow(name, false);
    if (option != nullptr && option->semantic()->max_tokens() == 0) continue;  // a flag
    bool empty = false;
    if (const auto* text = boost::any_cast<std::string>(&value.value())) {
      empty = text->empty();
    } else if (const auto* texts = boost::any_cast<std::vector<std::string>>(&value.value())) {
      empty = std::any_of(texts->begin(), texts->end(), [](const std::string& t) { return t.empty(); });
    }
    if (!empty) continue;
    if (option == nullptr) {
      std::string upper = name;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return fmt::format("empty {} argument", upper);
    }
    const std::string short_name =
        option->canonical_display_name(po::command_line_style::allow_dash_for_short);
    const std::string long_name = "--" + name;
    return fmt::format("{}: empty value",
                       short_name.size() == 2 && short_name != long_name
                           ? short_name + "/" + long_name
                           : long_name);
  }
  return std::nullopt;
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
    if (values.count("help") != 0) return values;
    if (auto empty = empty_value_error(values, options)) return std::unexpected(*empty);
    po::notify(values);
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

std::string duration_text(std::int64_t ns) {
  const std::int64_t seconds = ns / ns_per_second;
  if (seconds != 0) {
    for (const auto& [unit, size] : {std::pair{'d', 86400}, {'h', 3600}, {'m', 60}})
      if (seconds % size == 0) return fmt::format("{}{}", seconds / size, unit);
  }
  return fmt::format("{}s", seconds);
}

std::expected<std::int64_t, std::string> parse_duration(std::string_view option,
                                                        std::string_view text,
                                                        std::int64_t min_ns,
                                                        std::int64_t max_ns) {
  const std::string range =
      fmt::format("must be between {} and {}", duration_text(min_ns), duration_text(max_ns));
  auto fail = [&](std::string_view why) {
    return std::unexpected(fmt::format("{} '{}': {}{}", option, printable(text), why, range));
  };
  std::string_view digits = text;
  std::int64_t unit_ns = ns_per_second;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 's': unit_ns = ns_per_second; break;
      case 'm': unit_ns = ns_per_minute; break;
      case 'h': unit_ns = ns_per_hour; break;
      case 'd': unit_ns = ns_per_day; break;
      default: unit_ns = 0;
    }
    if (unit_ns != 0) digits.remove_suffix(1);
    else unit_ns = ns_per_second;
  }
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return fail("not a duration (digits with an optional unit s, m, h or d: 90s, 5m, 2h, 1d); ");
  // Saturates instead of overflowing: any value past the limit is out of every range.
  constexpr std::int64_t limit = std::numeric_limits<std::int64_t>::max();
  std::int64_t count = 0;
  bool huge = false;
  for (char c : digits) {
    const int digit = c - '0';
    if (count > (limit - digit) / 10) {
      huge = true;
      break;
    }
    count = count * 10 + digit;
  }
  if (huge || count > limit / unit_ns) return fail("");
  const std::int64_t ns = count * unit_ns;
  if (ns < min_ns || ns > max_ns) return fail("");
  return ns;
}

std::string duration_help(DurationRange range) {
  return fmt::format(" (DURATION: N[s|m|h|d], {} to {})", duration_text(range.min_ns),
                     duration_text(range.max_ns));
}

po::typed_value<std::string>* duration_value(std::string option, DurationRange range,
                                             std::function<void(std::int64_t)> store) {
  return po::value<std::string>()->value_name("DURATION")->notifier(
      [option = std::move(option), range, store = std::move(store)](const std::string& text) {
        auto ns = parse_duration(option, text, range.min_ns, range.max_ns);
        if (!ns) throw po::error(ns.error());
        store(*ns);
      });
}

po::typed_value<std::string>* duration_value(std::string option, DurationRange range,
                                             std::int64_t& ns) {
  return duration_value(std::move(option), range, [&ns](std::int64_t value) { ns = value; });
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
