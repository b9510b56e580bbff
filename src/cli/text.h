// Text for a terminal: the one escaper, display widths and shortening with an ellipsis.
// Pure: no system calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "apnea_locks/audit.h"

namespace apnea_locks::cli {

/// The one escaper for text output (PROTOCOL.md section 10): C0 controls (`\n` and `\t`
/// included) and DEL as `\xNN`, C1 controls and the invisible format characters (Cf,
/// U+2028/U+2029: detail::must_escape) as `\uNNNN`, each byte of invalid UTF-8 as `\xNN`;
/// everything else as is. Every string from disk, /proc or the environment passes it before
/// it reaches a terminal. Shell words (shell_word) come out of it unchanged when they needed
/// `$'...'`: those are printable ASCII.
std::string printable(std::string_view text);

/// Bytes as a C-like literal body, losslessly on one line: the library's escape_bytes
/// (audit.h), which the system log's records use too.
using apnea_locks::escape_bytes;

/// Terminal columns of valid UTF-8 text (printable's output): 2 for East Asian wide and
/// emoji code points, 0 for combining marks and zero-width spaces, 1 for the rest.
std::size_t display_width(std::string_view text);

/// Where shorten() cuts.
enum class Cut {
  end,    ///< keep the start: "apnea-locks recl…" (commands, tokens)
  start,  ///< keep the end: "…/code/web" (paths, where the last part says most)
};

/// `text` in at most `width` columns: unchanged when it fits, else cut at `cut` with
/// `ellipsis` ("…" or "...") in place of what was cut. A width below the ellipsis' gives
/// the ellipsis cut to that width.
std::string shorten(std::string_view text, std::size_t width, Cut cut = Cut::end,
                    std::string_view ellipsis = "...");

/// How wrap treats a word longer than the width.
enum class LongWords {
  keep,   ///< it gets a line of its own, wider than the width
  split,  ///< cut into lines of at most the width that end in `\`, the next piece from column
          ///< 0: a shell joins them back into the one word (a path inside a command). Lines
          ///< also never break inside a command the prose gives (glued_to_command): it is
          ///< cut with `\` where it must be, so it pastes whole.
};

/// Splits prose into lines of at most `width` columns at spaces (a word longer than the
/// width: see LongWords); every line after the first starts with `indent`. `width` 0: one
/// line.
std::string wrap(std::string_view text, std::size_t width, std::string_view indent = {},
                 LongWords long_words = LongWords::keep);

/// File mode as four octal digits ("0700").
std::string format_mode(std::uint32_t mode);

}  // namespace apnea_locks::cli
