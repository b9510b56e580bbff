#include "cli/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <utility>

#include "cli/commands.h"
#include "cli/fields.h"
#include "cli/text.h"
#include "detail/split.h"

#ifndef APNEA_LOCKS_VERSION
#define APNEA_LOCKS_VERSION "unknown"
#endif

namespace apnea_locks::cli {
namespace {

/// The width help is wrapped to.
constexpr std::size_t help_width = 80;

/// A value name as Boost keeps it, without the default or implicit value it appends.
std::string value_name(const po::value_semantic& semantic) {
  std::string name = semantic.name();
  if (name.starts_with("[=")) name = name.substr(2);
  if (const auto cut = name.find("(="); cut != std::string::npos) name = name.substr(0, cut);
  while (!name.empty() && (name.back() == ' ' || name.back() == ']')) name.pop_back();
  return name;
}

/// The default value as Boost shows it ("2s"), or "".
std::string default_text(const po::value_semantic& semantic) {
  const std::string name = semantic.name();
  if (name.starts_with("[=")) {  // implicit value first: "[=WHEN(=auto)] (=x)"
    const auto close = name.find(")]");
    const auto tail = close == std::string::npos ? std::string::npos : name.find(" (=", close);
    if (tail == std::string::npos) return {};
    return name.substr(tail + 3, name.size() - tail - 4);
  }
  const auto at = name.find(" (=");
  if (at == std::string::npos) return {};
  return name.substr(at + 3, name.size() - at - 4);
}

/// " -o, --output COLUMNS" or "     --lock-dir DIR" or "     --color[=WHEN]".
std::string option_spec(const po::option_description& option) {
  const std::string short_name = option.canonical_display_name(po::command_line_style::allow_dash_for_short);
  const bool has_short = short_name.size() == 2 && short_name[0] == '-' && short_name[1] != '-';
  std::string spec = has_short ? " " + short_name + ", " : "     ";
  spec += "--" + option.long_name();
  const po::value_semantic& semantic = *option.semantic();
  if (semantic.max_tokens() > 0) {
    const std::string value = value_name(semantic);
    spec += semantic.min_tokens() == 0 ? "[=" + value + "]" : " " + value;
  }
  return spec;
}

void print_option_lines(std::string& out, const po::options_description& options, std::size_t column) {
  const std::string indent(column, ' ');
  for (const auto& option : options.options()) {
    std::string spec = option_spec(*option);
    std::string description = option->description();
    const po::value_semantic& semantic = *option->semantic();
    if (semantic.max_tokens() > 0) {
      const std::string fallback = default_text(semantic);
      if (!fallback.empty() && description.find("default") == std::string::npos)
        description += fmt::format(" (default: {})", fallback);
    }
    std::string line;
    if (spec.size() + 2 > column) {
      out += spec + "\n";
      line = indent + description;
    } else {
      line = spec + std::string(column - spec.size(), ' ') + description;
    }
    out += wrap(line, help_width, indent) + "\n";
  }
}

/// Where the wrapped lines of an indented help line go on: under its text when it is a
/// definition ("  TERM  text": after the two or more spaces that end the term), else two
/// columns in from the line.
std::size_t hanging_indent(std::string_view line) {
  const std::size_t indent = line.find_first_not_of(' ');
  const std::size_t term_end = line.find(' ', indent);
  const std::size_t text = line.find_first_not_of(' ', term_end);
  if (term_end != std::string_view::npos && text != std::string_view::npos && text - term_end >= 2)
    return text;
  return indent + 2;
}

/// Paragraphs (separated by an empty line) refilled to help_width. In a paragraph, lines
/// that start in column 0 are prose, joined and refilled; an indented line is a layout
/// line: it keeps its own line, the lines after it indented deeper are its continuation
/// (joined to it), and it wraps at hanging_indent.
std::string reflow(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const auto end = text.find("\n\n");
    const std::string_view paragraph = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 2);
    std::string block;
    std::string prose;
    std::string layout;
    std::size_t layout_indent = 0;
    auto flush = [&] {
      if (!prose.empty()) block += wrap(prose, help_width) + "\n";
      if (!layout.empty()) block += wrap(layout, help_width, std::string(hanging_indent(layout), ' ')) + "\n";
      prose.clear();
      layout.clear();
    };
    for (const std::string_view line : detail::split_parts(paragraph, '\n')) {
      const std::size_t indent = std::min(line.find_first_not_of(' '), line.size());
      if (indent == 0) {
        if (!layout.empty()) flush();
        if (!prose.empty()) prose += ' ';
        prose += line;
      } else if (!layout.empty() && indent > layout_indent) {
        layout += ' ';
        layout += line.substr(indent);
      } else {
        flush();
        layout = line;
        layout_indent = indent;
      }
    }
    flush();
    if (!out.empty()) out += "\n";
    out += block;
  }
  return out;
}

}  // namespace

const po::options_description& standard_options() {
  static const po::options_description options = [] {
    po::options_description o;
    o.add_options()
        ("help,h", "display this help")
        ("version,V", "display version")
        ("color", po::value<std::string>()->implicit_value("auto")->value_name("WHEN")->notifier(
             [](const std::string& when) {
               if (auto mode = parse_colour_mode(when); !mode) throw po::error(mode.error());
             }),
         "colour the output: auto (the default: on a terminal, unless NO_COLOR is set or "
         "TERM=dumb), always or never");
    return o;
  }();
  return options;
}

ColourMode colour_mode(const po::variables_map& values) {
  if (values.count("color") == 0) return ColourMode::automatic;
  return parse_colour_mode(values["color"].as<std::string>()).value_or(ColourMode::automatic);
}

void print_help(std::FILE* out, const CommandHelp& help, const po::options_description& options) {
  std::string text = "Usage:\n";
  std::string_view usage = help.usage;
  while (!usage.empty()) {
    const auto end = usage.find('\n');
    text += fmt::format(" apnea-locks {}\n", usage.substr(0, end));
    usage = end == std::string_view::npos ? std::string_view() : usage.substr(end + 1);
  }
  if (!help.description.empty()) text += "\n" + reflow(help.description);
  // The description column: after the longest option (at most 28 columns in).
  std::size_t column = 0;
  for (const po::options_description* part : {&options, &standard_options()})
    for (const auto& option : part->options()) column = std::max(column, option_spec(*option).size() + 2);
  column = std::min<std::size_t>(column, 28);
  text += "\nOptions:\n";
  print_option_lines(text, options, column);
  text += "\n";
  print_option_lines(text, standard_options(), column);
  if (help.columns) text += "\n" + columns_help(help_width);
  if (!help.notes.empty()) text += "\n" + reflow(help.notes);
  text += "\nFor more details see apnea-locks(1).\n";
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

void print_version(std::FILE* out, std::string_view command) {
  if (command.empty()) fmt::print(out, "apnea-locks {}\n", APNEA_LOCKS_VERSION);
  else fmt::print(out, "apnea-locks {} {}\n", command, APNEA_LOCKS_VERSION);
  std::fflush(out);
}

std::expected<void, std::string> no_empty_value(const po::variables_map& values,
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
      return std::unexpected(fmt::format("empty {} argument", upper));
    }
    const std::string short_name =
        option->canonical_display_name(po::command_line_style::allow_dash_for_short);
    const std::string long_name = "--" + name;
    return std::unexpected(fmt::format(
        "{}: empty value",
        short_name.size() == 2 && short_name != long_name ? short_name + "/" + long_name : long_name));
  }
  return {};
}

std::expected<po::variables_map, std::string> try_parse_command_line(
    const std::vector<std::string>& args, const po::options_description& options,
    const po::options_description* hidden, const po::positional_options_description* positional) {
  po::options_description all;
  all.add(options);
  all.add(standard_options());
  if (hidden != nullptr) all.add(*hidden);
  po::variables_map values;
  try {
    po::command_line_parser parser(args);
    parser.options(all);
    if (positional != nullptr) parser.positional(*positional);
    else parser.positional(po::positional_options_description());
    po::store(parser.run(), values);
    if (values.count("help") != 0 || values.count("version") != 0) return values;
    po::options_description visible;
    visible.add(options);
    visible.add(standard_options());
    if (auto filled = no_empty_value(values, visible); !filled) return std::unexpected(filled.error());
    po::notify(values);
  } catch (const po::error& error) {
    return std::unexpected(std::string(error.what()));
  }
  return values;
}

std::optional<int> standard_action(const po::variables_map& values, const CommandHelp& help,
                                   const po::options_description& options) {
  if (values.count("help") != 0) {
    print_help(stdout, help, options);
    return exit_ok;
  }
  if (values.count("version") != 0) {
    print_version(stdout, help.name);
    return exit_ok;
  }
  return std::nullopt;
}

std::expected<po::variables_map, int> parse_command_line(
    const CommandHelp& help, const std::vector<std::string>& args,
    const po::options_description& options, const po::options_description* hidden,
    const po::positional_options_description* positional) {
  auto values = try_parse_command_line(args, options, hidden, positional);
  if (!values) return std::unexpected(usage_error(help.name, values.error()));
  if (auto done = standard_action(*values, help, options)) return std::unexpected(*done);
  return std::move(*values);
}

std::expected<po::variables_map, int> parse_command_line(
    const CommandHelp& help, const std::vector<std::string>& args,
    const po::options_description& options, const char* name, std::vector<std::string>& paths,
    int most) {
  po::options_description hidden;
  hidden.add_options()(name, po::value(&paths)->composing());
  po::positional_options_description positional;
  positional.add(name, most);
  return parse_command_line(help, args, options, &hidden, &positional);
}

void print_error(std::string_view command, std::string_view message) {
  std::fflush(stdout);
  // Messages carry paths and values from the environment and the disk: escaped, one line.
  if (command.empty()) fmt::print(stderr, "apnea-locks: {}\n", printable(message));
  else fmt::print(stderr, "apnea-locks {}: {}\n", command, printable(message));
}

std::string usage_hint(std::string_view command) {
  if (command.empty()) return "Try 'apnea-locks --help' for more information.";
  return fmt::format("Try 'apnea-locks {} --help' for more information.", command);
}

int usage_error(std::string_view command, std::string_view message) {
  print_error(command, message);
  fmt::print(stderr, "{}\n", usage_hint(command));
  return exit_usage;
}

int command_error(std::string_view command, int status, std::string_view message) {
  if (status == exit_usage) return usage_error(command, message);
  print_error(command, message);
  return status;
}

std::expected<std::int64_t, std::string> parse_duration(std::string_view option,
                                                        std::string_view text,
                                                        std::int64_t min_ns,
                                                        std::int64_t max_ns,
                                                        Fractions fractions) {
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
  // The fraction, after the one '.' (only where allowed): digits on both sides of it.
  std::string_view fraction;
  if (const auto dot = digits.find('.'); fractions == Fractions::allowed && dot != std::string_view::npos) {
    fraction = digits.substr(dot + 1);
    digits = digits.substr(0, dot);
    if (fraction.empty()) digits = {};  // "5." is not a duration
  }
  auto all_digits = [](std::string_view part) {
    return std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (digits.empty() || !all_digits(digits) || !all_digits(fraction))
    return fail(fractions == Fractions::allowed
                    ? "not a duration (digits, with an optional fraction and unit s, m, h or d: "
                      "0.5, 1.5s, 90s, 5m, 2h, 1d); "
                    : "not a duration (digits with an optional unit s, m, h or d: 90s, 5m, 2h, 1d); ");
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
  // The fraction in nanoseconds of the unit: its first 9 digits (every unit is whole
  // seconds, so nothing finer than a nanosecond is lost), times the unit's seconds.
  std::int64_t billionths = 0;
  for (std::size_t i = 0; i < 9; ++i) billionths = billionths * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
  const std::int64_t fraction_ns = billionths * (unit_ns / ns_per_second);
  if (huge || count > (limit - fraction_ns) / unit_ns) return fail("");
  const std::int64_t ns = count * unit_ns + fraction_ns;
  if (ns < min_ns || ns > max_ns) return fail("");
  return ns;
}

std::expected<std::int64_t, std::string> parse_whole_number(std::string_view option,
                                                            std::string_view text,
                                                            std::int64_t min, std::int64_t max) {
  std::uint64_t value = 0;
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end ||
      value < static_cast<std::uint64_t>(min) || value > static_cast<std::uint64_t>(max))
    return std::unexpected(fmt::format("{} '{}': must be a whole number from {} to {}", option,
                                       printable(text), min, max));
  return static_cast<std::int64_t>(value);
}

std::string duration_help(DurationRange range, Fractions fractions) {
  return fmt::format(" (DURATION: N{}[s|m|h|d], {} to {})",
                     fractions == Fractions::allowed ? "[.N]" : "", duration_text(range.min_ns),
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
  for (const std::string& value : values)
    for (std::string_view part : detail::split_parts(value, ','))
      if (!part.empty()) out.emplace_back(part);
  return out;
}

}  // namespace apnea_locks::cli
