#include "cli/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "detail/owner.h"

namespace apnea_locks::cli {

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] >= 0x20 && text[i] < 0x7f) {  // printable ASCII, the common case
      out += text[i++];
      continue;
    }
    // What must_escape (detail/owner.h) names: every byte of invalid UTF-8 and a C0
    // control or DEL as a visible \xNN, any other code point as \uNNNN; the rest as is.
    const detail::Utf8Step step = detail::utf8_step(text.substr(i));
    if (!detail::must_escape(step)) {
      out.append(text.substr(i, step.length));
      i += step.length;
    } else if (!step.valid || step.point < 0x80) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
    } else {
      out += fmt::format("\\u{:04x}", static_cast<std::uint32_t>(step.point));
      i += step.length;
    }
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
  return {step.point, step.length};
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

namespace {

/// Whether a line break at the space `at` would cut a command out of the prose around it:
/// the word after is an option, a path, or a quoted or `$` word, or the word before is an
/// option or the name of a command the next steps give. ("chmod 600 -- PATH", "kill -CONT
/// PID", "ps -o pid,args -p PID", "apnea-locks reclaim --force ...": a break inside one
/// leaves a line that runs a different command when pasted.)
bool glued_to_command(std::string_view line, std::size_t at) {
  const std::size_t next = line.find_first_not_of(' ', at);
  if (next == std::string_view::npos) return false;
  if (std::string_view("-/\"'$").find(line[next]) != std::string_view::npos) return true;
  const std::size_t end = line.find_last_not_of(' ', at);
  if (end == std::string_view::npos) return false;
  const std::size_t space = line.rfind(' ', end);
  const std::size_t begin = space == std::string_view::npos ? 0 : space + 1;
  const std::string_view before = line.substr(begin, end + 1 - begin);
  if (before.starts_with('-')) return true;
  const std::string_view name = before.starts_with('(') ? before.substr(1) : before;  // "(kill PID)"
  for (const std::string_view command : {"apnea-locks", "chmod", "kill", "rmdir", "rm", "ps", "systemctl"})
    if (name == command) return true;
  return false;
}

}  // namespace

std::string wrap(std::string_view text, std::size_t width, std::string_view indent, LongWords long_words) {
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
      if (long_words == LongWords::split && glued_to_command(line, at)) continue;
      cut = at;
    }
    if (cut == std::string::npos && long_words == LongWords::split && width > 1) {
      // The longest head that fits with its `\`, never inside a UTF-8 character.
      std::size_t head = 0;
      for (std::size_t at = 1; at <= line.size(); ++at) {
        if (at < line.size() && (static_cast<unsigned char>(line[at]) & 0xC0) == 0x80) continue;
        if (display_width(std::string_view(line).substr(0, at)) > width - 1) break;
        head = at;
      }
      if (head > 0 && head < line.size()) {
        out.append(line, 0, head);
        out += "\\\n";
        line.erase(0, head);  // from column 0: the shell joins it to the head
        first = false;
        continue;
      }
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
