// What standard output is: a terminal of some width, with or without colour. Read once per
// command through the System seam; the renderers only consult the result.
#pragma once

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>

#include "apnea_locks/system.h"

namespace apnea_locks::cli {

/// `--color[=WHEN]`: auto (the default, and `--color` alone, as util-linux has it), always,
/// never.
enum class ColourMode { automatic, always, never };

/// Parses WHEN ("auto", "always", "never"); a message naming the value otherwise.
std::expected<ColourMode, std::string> parse_colour_mode(std::string_view when);

/// True when output to standard output should be coloured: `always`; or `auto` with
/// standard output a terminal, `NO_COLOR` unset or empty, and `TERM` set and not `dumb`.
bool colour_wanted(System& system, ColourMode mode = ColourMode::automatic);

/// Standard output as the table sees it.
struct Terminal {
  /// Columns a line may use; 0 = unlimited (not a terminal, or --notruncate).
  std::size_t width = 0;
  bool colour = false;                ///< SGR escapes wanted
  std::string_view ellipsis = "...";  ///< "…" when the locale's charset is UTF-8
};

/// The width when standard output is a terminal: its ioctl TIOCGWINSZ width, else a valid
/// `COLUMNS` (1..10000), else 80. Nothing when standard output is not a terminal.
std::optional<std::size_t> terminal_width(System& system);

/// Standard output now: terminal_width unless `notruncate`, colour per `mode`, and the
/// ellipsis from `LC_ALL`, `LC_CTYPE` or `LANG` (the first set and non-empty).
Terminal terminal_view(System& system, ColourMode mode, bool notruncate);

/// SGR codes the output uses.
inline constexpr std::string_view sgr_attention = "1;31";  ///< bold red: a human must act
inline constexpr std::string_view sgr_warning = "33";      ///< yellow: stale but handled, in flight
inline constexpr std::string_view sgr_ok = "32";           ///< green: live
inline constexpr std::string_view sgr_bold = "1";

/// `text` between `ESC[<sgr>m` and `ESC[0m` when `colour` and `sgr` is not empty; else as is.
std::string paint(std::string_view text, std::string_view sgr, bool colour);

}  // namespace apnea_locks::cli
