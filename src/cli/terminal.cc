#include "cli/terminal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace apnea_locks::cli {

std::expected<ColourMode, std::string> parse_colour_mode(std::string_view when) {
  if (when == "auto") return ColourMode::automatic;
  if (when == "always") return ColourMode::always;
  if (when == "never") return ColourMode::never;
  return std::unexpected(fmt::format("--color '{}': must be auto, always or never", when));
}

bool colour_wanted(System& system, ColourMode mode) {
  if (mode != ColourMode::automatic) return mode == ColourMode::always;
  if (!system.is_terminal(1)) return false;
  const auto no_colour = system.env("NO_COLOR");
  if (no_colour && !no_colour->empty()) return false;
  const auto term = system.env("TERM");
  return term && !term->empty() && *term != "dumb";
}

std::optional<std::size_t> terminal_width(System& system) {
  if (!system.is_terminal(1)) return std::nullopt;
  if (const auto columns = system.terminal_columns(1); columns && *columns > 0)
    return static_cast<std::size_t>(*columns);
  if (const auto text = system.env("COLUMNS")) {
    std::size_t value = 0;
    const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (error == std::errc() && end == text->data() + text->size() && value >= 1 && value <= 10000)
      return value;
  }
  return 80;
}

namespace {

bool utf8_locale(System& system) {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const auto value = system.env(name);
    if (!value || value->empty()) continue;
    std::string lower;
    for (char c : *value)
      if (c != '-') lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower.find("utf8") != std::string::npos;
  }
  return false;
}

}  // namespace

Terminal terminal_view(System& system, ColourMode mode, bool notruncate) {
  Terminal view;
  if (!notruncate) view.width = terminal_width(system).value_or(0);
  view.colour = colour_wanted(system, mode);
  view.ellipsis = utf8_locale(system) ? std::string_view("\xe2\x80\xa6") : std::string_view("...");
  return view;
}

std::string paint(std::string_view text, std::string_view sgr, bool colour) {
  if (!colour || sgr.empty()) return std::string(text);
  return fmt::format("\x1b[{}m{}\x1b[0m", sgr, text);
}

}  // namespace apnea_locks::cli
