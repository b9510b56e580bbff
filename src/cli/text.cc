#include "cli/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "detail/owner.h"

namespace apnea_locks::cli {

namespace {

/// The invisible format characters that reorder or hide text (Unicode category Cf: soft
/// hyphen, Arabic letter mark, zero-width characters, LRM/RLM, the bidi embeddings,
/// overrides and isolates, word joiner and invisible operators, BOM, interlinear
/// annotation) and the line and paragraph separators U+2028/U+2029: PROTOCOL.md section
/// 10, "Nothing hostile reaches a terminal".
bool hidden_format_character(char32_t c) {
  return c == 0x00AD || c == 0x061C || c == 0x180E || (c >= 0x200B && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202E) || (c >= 0x2060 && c <= 0x2064) ||
         (c >= 0x2066 && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB);
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if (byte < 0x20 || byte == 0x7f) out += fmt::format("\\x{:02x}", byte);
      else out += text[i];
      ++i;
      continue;
    }
    // A valid UTF-8 sequence is kept, but C1 controls (U+0080..U+009F) and the invisible
    // format characters are escaped; every byte of an invalid sequence becomes a visible \xNN.
    const detail::Utf8Step step = detail::utf8_step(text.substr(i));
    if (!step.valid) {
      out += fmt::format("\\x{:02x}", byte);
      ++i;
      continue;
    }
    const std::size_t length = step.length;
    char32_t point = byte & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
    for (std::size_t k = 1; k < length; ++k)
      point = (point << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    if ((point >= 0x80 && point < 0xA0) || hidden_format_character(point))
      out += fmt::format("\\u{:04x}", static_cast<std::uint32_t>(point));
    else
      out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

namespace {

/// The code point starting at `at` of valid UTF-8 and its length in bytes (an invalid
/// byte counts as one column, one byte).
std::pair<char32_t, std::size_t> decode(std::string_view text, std::size_t at) {
  const auto byte = static_cast<unsigned char>(text[at]);
  if (byte < 0x80) return {byte, 1};
  const detail::Utf8Step step = detail::utf8_step(text.substr(at));
  if (!step.valid) return {U'\uFFFD', 1};
  char32_t point = byte & (step.length == 2 ? 0x1F : step.length == 3 ? 0x0F : 0x07);
  for (std::size_t i = 1; i < step.length; ++i)
    point = (point << 6) | (static_cast<unsigned char>(text[at + i]) & 0x3F);
  return {point, step.length};
}

/// Columns of one code point (after Markus Kuhn's wcwidth, the common ranges).
std::size_t columns_of(char32_t c) {
  if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x200B && c <= 0x200F) || c == 0xFEFF ||
      (c >= 0xFE00 && c <= 0xFE0F) || (c >= 0x20D0 && c <= 0x20FF))
    return 0;
  if ((c >= 0x1100 && c <= 0x115F) || c == 0x2329 || c == 0x232A ||
      (c >= 0x2E80 && c <= 0xA4CF && c != 0x303F) || (c >= 0xAC00 && c <= 0xD7A3) ||
      (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE6F) ||
      (c >= 0xFF00 && c <= 0xFF60) || (c >= 0xFFE0 && c <= 0xFFE6) ||
      (c >= 0x1F300 && c <= 0x1F64F) || (c >= 0x1F900 && c <= 0x1F9FF) ||
      (c >= 0x20000 && c <= 0x3FFFD))
    return 2;
  return 1;
}

}  // namespace

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t at = 0; at < text.size();) {
    const auto byte = static_cast<unsigned char>(text[at]);
    if (byte < 0x80) {  // the common case
      ++width;
      ++at;
      continue;
    }
    const auto [point, length] = decode(text, at);
    width += columns_of(point);
    at += length;
  }
  return width;
}

std::string shorten(std::string_view text, std::size_t width, Cut cut, std::string_view ellipsis) {
  if (display_width(text) <= width) return std::string(text);
  const std::size_t mark = display_width(ellipsis);
  if (width <= mark) return shorten(ellipsis, width, Cut::end, "");
  const std::size_t room = width - mark;
  // The code points in order, with their columns, to cut at a code point boundary.
  std::vector<std::pair<std::size_t, std::size_t>> points;  // (byte offset, columns)
  for (std::size_t at = 0; at < text.size();) {
    const auto [point, length] = decode(text, at);
    points.emplace_back(at, columns_of(point));
    at += length;
  }
  std::size_t used = 0;
  if (cut == Cut::end) {
    // Up to the first code point that does not fit.
    std::size_t stop = text.size();
    for (const auto& [at, columns] : points) {
      if (used + columns > room) {
        stop = at;
        break;
      }
      used += columns;
    }
    return std::string(text.substr(0, stop)) + std::string(ellipsis);
  }
  std::size_t start = text.size();
  for (auto it = points.rbegin(); it != points.rend(); ++it) {
    if (used + it->second > room) break;
    used += it->second;
    start = it->first;
  }
  return std::string(ellipsis) + std::string(text.substr(start));
}

std::string wrap(std::string_view text, std::size_t width, std::string_view indent) {
  if (width == 0) return std::string(text);
  std::string out;
  std::string line(text);
  bool first = true;
  while (display_width(line) > width) {
    // The last space that leaves at most `width` columns before it, past the leading
    // spaces (and the indent of a continuation line).
    const std::size_t start = line.find_first_not_of(' ', first ? 0 : indent.size());
    std::size_t cut = std::string::npos;
    for (std::size_t at = line.find(' ', start == std::string::npos ? line.size() : start);
         at != std::string::npos; at = line.find(' ', at + 1)) {
      if (display_width(std::string_view(line).substr(0, at)) > width) break;
      cut = at;
    }
    if (cut == std::string::npos) {  // one long word: it keeps its line
      cut = line.find(' ', start == std::string::npos ? line.size() : start);
      if (cut == std::string::npos) break;
    }
    std::size_t end = cut;
    while (end > 0 && line[end - 1] == ' ') --end;
    out.append(line, 0, end);
    out += '\n';
    const std::size_t rest = line.find_first_not_of(' ', cut);
    if (rest == std::string::npos) {
      line.clear();
      break;
    }
    line = std::string(indent) + line.substr(rest);
    first = false;
  }
  out += line;
  return out;
}

std::string format_mode(std::uint32_t mode) { return fmt::format("{:04o}", mode); }

}  // namespace apnea_locks::cli
