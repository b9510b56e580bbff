#include "apnea_locks/owner.h"

#include <boost/json/basic_parser_impl.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "apnea_locks/lock_area.h"
#include "detail/owner.h"

namespace apnea_locks {
using detail::SettledRead;
using detail::Utf8Step;
using detail::utf8_step;

std::string pid_text(double pid) {
  if (pid > 0 && pid < 1e15 && std::trunc(pid) == pid) {
    char digits[24];  // every real pid: exact as an integer, and fmt is slow for status
    const auto end = std::to_chars(digits, digits + sizeof digits, static_cast<std::int64_t>(pid)).ptr;
    return std::string(digits, end);
  }
  if (std::trunc(pid) == pid && std::fabs(pid) >= 0x1p53 && std::fabs(pid) < 1e21) {
    // Beyond 2^53 JavaScript prints the shortest digits that read back as the number, then
    // zeros (2^60 prints as 1152921504606847000, not 1152921504606846976).
    char buffer[32];
    const auto end =
        std::to_chars(buffer, buffer + sizeof buffer, pid, std::chars_format::scientific).ptr;
    const std::string_view text(buffer, static_cast<std::size_t>(end - buffer));  // "1.2e+20"
    const std::size_t e = text.find('e');
    std::string out;
    for (char c : text.substr(0, e))
      if (c != '.') out += c;
    const int exponent = std::stoi(std::string(text.substr(e + 1)));
    out.resize((pid < 0 ? 2u : 1u) + static_cast<std::size_t>(exponent), '0');
    return out;
  }
  if (std::isfinite(pid) && std::trunc(pid) == pid && std::fabs(pid) < 1e21)
    return fmt::format("{:.0f}", pid);
  return fmt::format("{}", pid);
}

std::string encode_owner(const Owner& owner) {
  // Apnea's tokens are UUIDs: nothing to escape. Anything else is escaped as JSON.stringify.
  std::string token;
  for (std::size_t i = 0; i < owner.token.size(); ++i) {
    const auto c = static_cast<unsigned char>(owner.token[i]);
    if (c == 0xED && i + 2 < owner.token.size() &&
        static_cast<unsigned char>(owner.token[i + 1]) >= 0xA0) {
      // A lone surrogate, held as WTF-8 (decode_owner): JSON.stringify writes `\udXXX`.
      const unsigned unit =
          0xD000u | ((owner.token[i + 1] & 0x3Fu) << 6) | (owner.token[i + 2] & 0x3Fu);
      token += fmt::format("\\u{:04x}", unit);
      i += 2;
    } else if (c == '"' || c == '\\') {
      token += '\\';
      token += static_cast<char>(c);
    } else if (c < 0x20) {
      switch (c) {
        case '\b': token += "\\b"; break;
        case '\f': token += "\\f"; break;
        case '\n': token += "\\n"; break;
        case '\r': token += "\\r"; break;
        case '\t': token += "\\t"; break;
        default: token += fmt::format("\\u{:04x}", c);
      }
    } else {
      token += static_cast<char>(c);
    }
  }
  return fmt::format("{{\"pid\":{},\"token\":\"{}\"}}", pid_text(owner.pid), token);
}

Utf8Step detail::utf8_step(std::string_view bytes) {
  const auto b = static_cast<unsigned char>(bytes[0]);
  if (b < 0x80) return {1, true, b};
  std::size_t needed = 0;
  unsigned char lower = 0x80, upper = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    needed = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    needed = 2;
    if (b == 0xE0) lower = 0xA0;
    if (b == 0xED) upper = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    needed = 3;
    if (b == 0xF0) lower = 0x90;
    if (b == 0xF4) upper = 0x8F;
  } else {
    return {1, false};
  }
  char32_t point = b & (needed == 1 ? 0x1F : needed == 2 ? 0x0F : 0x07);
  std::size_t k = 1;
  for (; k <= needed && k < bytes.size(); ++k) {
    const auto c = static_cast<unsigned char>(bytes[k]);
    if (c < lower || c > upper) break;
    point = (point << 6) | (c & 0x3F);
    lower = 0x80;
    upper = 0xBF;
  }
  if (k <= needed) return {k, false};
  return {needed + 1, true, point};
}

bool detail::must_escape(const Utf8Step& step) {
  const char32_t c = step.point;
  if (!step.valid || c < 0x20 || (c >= 0x7F && c < 0xA0)) return true;
  return c == 0x00AD || c == 0x061C || c == 0x180E || (c >= 0x200B && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202E) || (c >= 0x2060 && c <= 0x2064) ||
         (c >= 0x2066 && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB);
}

std::string utf8_with_replacement(std::string_view bytes) {
  static constexpr std::string_view replacement = "\xEF\xBF\xBD";
  if (std::all_of(bytes.begin(), bytes.end(), [](char c) { return (c & 0x80) == 0; }))
    return std::string(bytes);  // ASCII, as owner records are: nothing to decode
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Step step = utf8_step(bytes.substr(i));
    if (step.valid) out.append(bytes.substr(i, step.length));
    else out += replacement;  // a maximal subpart of an invalid sequence: one replacement
    i += step.length;
  }
  return out;
}

namespace {

namespace json = boost::json;

/// The JSON type of a member's value, as far as the acceptance rules care.
enum class ValueType { absent, number, string, other };

/// A boost::json::basic_parser handler that remembers only the top-level members "pid" and
/// "token" (the last of duplicates wins, as in JSON.parse) and whether the top-level value
/// is an object. Numbers are re-read from their text with strtod, so they round exactly as
/// JavaScript's do (and overflow to infinity instead of failing).
struct OwnerHandler {
  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

  std::size_t depth = 0;
  bool top_is_object = false;
  bool seen_top = false;
  std::string key;
  std::string text;  // pieces of the current string or number
  ValueType pid_type = ValueType::absent;
  double pid = 0;
  ValueType token_type = ValueType::absent;
  std::string token;

  /// The member a value at this point belongs to: 1 for pid, 2 for token, 0 otherwise.
  int member() const {
    if (depth != 1 || !top_is_object) return 0;
    if (key == "pid") return 1;
    if (key == "token") return 2;
    return 0;
  }
  void value(ValueType type) {
    if (!seen_top) seen_top = true;
    switch (member()) {
      case 1: pid_type = type; break;
      case 2: token_type = type; break;
      default: break;
    }
  }
  void container_begin(bool object) {
    if (!seen_top) {
      seen_top = true;
      top_is_object = object;
    } else {
      value(ValueType::other);
    }
    ++depth;
  }
  bool number(json::string_view last) {
    text.append(last.data(), last.size());
    if (member() == 1) pid = std::strtod(text.c_str(), nullptr);
    text.clear();
    value(ValueType::number);
    return true;
  }

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_array_begin(json::error_code&) { container_begin(false); return true; }
  bool on_array_end(std::size_t, json::error_code&) { --depth; return true; }
  bool on_object_begin(json::error_code&) { container_begin(true); return true; }
  bool on_object_end(std::size_t, json::error_code&) { --depth; return true; }
  bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
    if (member() == 2) text.append(s.data(), s.size());
    return true;
  }
  bool on_string(json::string_view s, std::size_t, json::error_code&) {
    if (member() == 2) {
      text.append(s.data(), s.size());
      token = std::move(text);
    }
    text.clear();
    value(ValueType::string);
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    if (depth == 1) text.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code&) {
    if (depth == 1) {
      text.append(s.data(), s.size());
      key = std::move(text);
    }
    text.clear();
    return true;
  }
  bool on_number_part(json::string_view s, json::error_code&) {
    text.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t, json::string_view s, json::error_code&) { return number(s); }
  bool on_uint64(std::uint64_t, json::string_view s, json::error_code&) { return number(s); }
  bool on_double(double, json::string_view s, json::error_code&) { return number(s); }
  bool on_bool(bool, json::error_code&) { value(ValueType::other); return true; }
  bool on_null(json::error_code&) { value(ValueType::other); return true; }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The code unit of a `\uXXXX` escape starting at `at` (the backslash), or -1.
int escape_unit(std::string_view text, std::size_t at) {
  if (at + 6 > text.size() || text[at] != '\\' || text[at + 1] != 'u') return -1;
  int value = 0;
  for (std::size_t i = at + 2; i < at + 6; ++i) {
    const int digit = hex_digit(text[i]);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

/// Rewrites, inside string literals, each `\uXXXX` escape of a lone UTF-16 surrogate into
/// its 3-byte WTF-8 form (as a JavaScript string would hold the lone code unit). Returns
/// true when anything was rewritten.
bool lone_surrogates_to_wtf8(std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false, changed = false;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (!in_string) {
      in_string = c == '"';
      out += c;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = false;
      out += c;
      ++i;
      continue;
    }
    if (c != '\\' || i + 1 >= text.size()) {
      out += c;
      ++i;
      continue;
    }
    const int unit = escape_unit(text, i);
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      const int next = escape_unit(text, i + 6);
      if (next >= 0xDC00 && next <= 0xDFFF) {  // a proper pair: left as it is
        out.append(text, i, 12);
        i += 12;
        continue;
      }
    }
    if (unit >= 0xD800 && unit <= 0xDFFF) {
      out += static_cast<char>(0xE0 | (unit >> 12));
      out += static_cast<char>(0x80 | ((unit >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (unit & 0x3F));
      changed = true;
      i += 6;
      continue;
    }
    out.append(text, i, 2);  // any other escape, copied whole so `\"` does not end the string
    i += 2;
  }
  if (changed) text = std::move(out);
  return changed;
}

/// Shortens, outside string literals, each number exponent larger in magnitude than
/// `limit` to `limit` itself. Boost.JSON 1.81 fails a number whose exponent does not fit
/// an int ("exponent overflow"), where JSON.parse reads Infinity or 0. With `limit` above
/// the text's length plus 400, every such number keeps its double value: its mantissa has
/// fewer digits than the text, so it is already far beyond DBL_MAX or below the smallest
/// subnormal. Digits replace digits, so valid and invalid JSON stay so.
void clamp_exponents(std::string& text, std::size_t limit) {
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if ((c != 'e' && c != 'E') || i == 0 || text[i - 1] < '0' || text[i - 1] > '9') continue;
    std::size_t start = i + 1;
    if (start < text.size() && (text[start] == '+' || text[start] == '-')) ++start;
    std::size_t end = start, value = 0;
    for (; end < text.size() && text[end] >= '0' && text[end] <= '9'; ++end)
      value = std::min(value * 10 + static_cast<std::size_t>(text[end] - '0'), limit + 1);
    if (value > limit) text.replace(start, end - start, std::to_string(limit));
    i = start;
  }
}

OwnerRejection reject(OwnerCheck check, std::string detail = {}) {
  OwnerRejection rejection;
  rejection.check = check;
  rejection.detail = std::move(detail);
  return rejection;
}

}  // namespace

std::string OwnerRejection::reason() const {
  switch (check) {
    case OwnerCheck::lock_missing: return "lock-missing";
    case OwnerCheck::lock_unreadable: return "lock-unreadable";
    case OwnerCheck::lock_symlink: return "lock-symlink";
    case OwnerCheck::lock_not_directory: return fmt::format("lock-{}", file_type_name(type));
    case OwnerCheck::lock_foreign_owner: return "lock-foreign-owner";
    case OwnerCheck::lock_open_mode: return fmt::format("lock-mode-{:04o}", mode);
    case OwnerCheck::owner_missing: return "owner-missing";
    case OwnerCheck::owner_symlink: return "owner-symlink";
    case OwnerCheck::owner_unreadable: return "owner-unreadable";
    case OwnerCheck::owner_not_regular: return fmt::format("owner-{}", file_type_name(type));
    case OwnerCheck::owner_foreign_owner: return "owner-foreign-owner";
    case OwnerCheck::owner_open_mode: return fmt::format("owner-mode-{:04o}", mode);
    case OwnerCheck::owner_empty: return "owner-empty";
    case OwnerCheck::owner_too_large: return "owner-too-large";
    case OwnerCheck::owner_short_read: return "owner-short-read";
    case OwnerCheck::json_syntax: return "json-syntax";
    case OwnerCheck::not_object: return "not-object";
    case OwnerCheck::pid_missing: return "pid-missing";
    case OwnerCheck::pid_not_number: return "pid-not-number";
    case OwnerCheck::pid_not_positive_integer: return "pid-not-positive-integer";
    case OwnerCheck::token_missing: return "token-missing";
    case OwnerCheck::token_not_string: return "token-not-string";
    case OwnerCheck::token_empty: return "token-empty";
  }
  return "unknown";
}

namespace {

/// Apnea's own records, `{"pid":N,"token":"<uuid v4>"}` byte for byte (N 1 to 15 digits
/// without a leading zero, so exact as a double; the token of ASCII letters, digits and
/// `-` only): the owner JSON.parse gives them, read without the parser. Anything else
/// (spaces, escapes, other members, other orders): nothing, and the parser decides.
std::optional<Owner> decode_canonical(std::string_view bytes) {
  constexpr std::string_view head = "{\"pid\":", middle = ",\"token\":\"", tail = "\"}";
  if (bytes.size() < head.size() + middle.size() + tail.size() + 2 || !bytes.starts_with(head) ||
      !bytes.ends_with(tail))
    return std::nullopt;
  std::string_view rest = bytes.substr(head.size(), bytes.size() - head.size() - tail.size());
  std::size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15 || rest[0] == '0') return std::nullopt;
  std::int64_t pid = 0;  // at most 15 digits: no overflow
  for (std::size_t i = 0; i < digits; ++i) pid = pid * 10 + (rest[i] - '0');
  rest.remove_prefix(digits);
  if (!rest.starts_with(middle) || rest.size() == middle.size()) return std::nullopt;
  rest.remove_prefix(middle.size());
  for (const char c : rest)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-'))
      return std::nullopt;
  return Owner{static_cast<double>(pid), std::string(rest)};
}

}  // namespace

std::expected<Owner, OwnerRejection> decode_owner(std::string_view bytes) {
  if (std::optional<Owner> owner = decode_canonical(bytes)) return *std::move(owner);
  std::string text = utf8_with_replacement(bytes);
  json::parse_options options;
  options.max_depth = text.size() + 1;  // JSON.parse has no depth limit
  // JSON.parse accepts "\ud800" (a lone surrogate) in a string; Boost.JSON 1.81 does not.
  // Such escapes become their WTF-8 bytes, which only this rewrite can have put in the
  // (otherwise valid UTF-8) text, so the parser is told to let them through.
  if (text.find("\\u") != std::string::npos) options.allow_invalid_utf8 = lone_surrogates_to_wtf8(text);
  clamp_exponents(text, text.size() + 1000);
  json::basic_parser<OwnerHandler> parser(options);
  json::error_code error;
  const std::size_t used = parser.write_some(false, text.data(), text.size(), error);
  if (error) return std::unexpected(reject(OwnerCheck::json_syntax, error.message()));
  if (used != text.size())
    return std::unexpected(reject(OwnerCheck::json_syntax, "data after the JSON value"));
  const OwnerHandler& h = parser.handler();
  if (!h.top_is_object) return std::unexpected(reject(OwnerCheck::not_object));
  if (h.pid_type == ValueType::absent) return std::unexpected(reject(OwnerCheck::pid_missing));
  if (h.pid_type != ValueType::number) return std::unexpected(reject(OwnerCheck::pid_not_number));
  if (!std::isfinite(h.pid) || std::trunc(h.pid) != h.pid || !(h.pid > 0))
    return std::unexpected(reject(OwnerCheck::pid_not_positive_integer, pid_text(h.pid)));
  if (h.token_type == ValueType::absent) return std::unexpected(reject(OwnerCheck::token_missing));
  if (h.token_type != ValueType::string)
    return std::unexpected(reject(OwnerCheck::token_not_string));
  if (h.token.empty()) return std::unexpected(reject(OwnerCheck::token_empty));
  return Owner{h.pid, h.token};
}

namespace {

// The lenient reading of PROTOCOL.md section 10 (the never-live rule): a small scanner, no
// parser. Over-naming a pid only makes the tool more careful; missing one is the bug.

constexpr double largest_pid = 2147483647.0;  // 2^31-1: what kill() takes as one process

/// The pids found so far. A value seen lately (a small direct-mapped cache) is not added
/// again and duplicates are folded now and then, so that a record of a million `"pid":1,`
/// keeps a small list.
struct PidSink {
  std::vector<double> pids;
  std::size_t compacted = 0;
  std::array<double, 256> recent{};
  std::string scratch;  // a number's text without separators, reused

  void add(double value) {
    if (!(value >= 1 && value <= largest_pid) || std::trunc(value) != value) return;
    double& slot = recent[(static_cast<std::uint64_t>(value) * 0x9E3779B97F4A7C15u) >> 56];
    if (slot == value) return;
    slot = value;
    pids.push_back(value);
    if (pids.size() >= 4096 && pids.size() >= 2 * compacted) {
      std::sort(pids.begin(), pids.end());
      pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
      compacted = pids.size();
    }
  }
};

constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

constexpr bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/// A character of an unquoted word: an identifier, a keyword or a number (signs, dots and
/// separators included), or an escape in one.
constexpr bool word_char(char c) {
  return is_letter(c) || is_digit(c) || c == '_' || c == '$' || c == '\\' || c == '+' || c == '-' ||
         c == '.';
}

/// The value of `c` as a digit in `radix` (2, 8, 10, 16), or -1.
int digit_in(char c, int radix) {
  const int value = hex_digit(c);
  return value >= 0 && value < radix ? value : -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Decodes the escape at `text[at]` (a backslash) as JavaScript does in strings and
/// identifiers (`\uXXXX` with surrogate pairs, `\u{X...}`, `\xXX`, the one-letter escapes, a
/// line continuation; any other escaped character stands for itself) onto `out`. Returns
/// the index after it.
std::size_t decode_escape(std::string_view text, std::size_t at, std::string& out) {
  if (at + 1 >= text.size()) return text.size();
  const char e = text[at + 1];
  auto hex_run = [&](std::size_t from, std::size_t count) -> int {  // -1 unless all hex
    if (from + count > text.size()) return -1;
    int value = 0;
    for (std::size_t k = from; k < from + count; ++k) {
      const int d = hex_digit(text[k]);
      if (d < 0) return -1;
      value = value * 16 + d;
    }
    return value;
  };
  switch (e) {
    case 'u': {
      if (at + 2 < text.size() && text[at + 2] == '{') {
        std::size_t k = at + 3;
        std::uint32_t cp = 0;
        while (k < text.size() && hex_digit(text[k]) >= 0) {
          cp = std::min<std::uint32_t>(cp * 16 + static_cast<std::uint32_t>(hex_digit(text[k])), 0x110000);
          ++k;
        }
        if (k < text.size() && text[k] == '}' && k > at + 3) {
          append_utf8(out, cp);
          return k + 1;
        }
        out += 'u';
        return at + 2;
      }
      const int unit = hex_run(at + 2, 4);
      if (unit < 0) {
        out += 'u';
        return at + 2;
      }
      if (unit >= 0xD800 && unit <= 0xDBFF && at + 7 < text.size() && text[at + 6] == '\\' &&
          text[at + 7] == 'u') {
        const int low = hex_run(at + 8, 4);
        if (low >= 0xDC00 && low <= 0xDFFF) {
          append_utf8(out, 0x10000 + ((static_cast<std::uint32_t>(unit) - 0xD800) << 10) +
                               (static_cast<std::uint32_t>(low) - 0xDC00));
          return at + 12;
        }
      }
      append_utf8(out, static_cast<std::uint32_t>(unit));
      return at + 6;
    }
    case 'x': {
      const int value = hex_run(at + 2, 2);
      if (value < 0) {
        out += 'x';
        return at + 2;
      }
      append_utf8(out, static_cast<std::uint32_t>(value));
      return at + 4;
    }
    case 'b': out += '\b'; break;
    case 'f': out += '\f'; break;
    case 'n': out += '\n'; break;
    case 'r': out += '\r'; break;
    case 't': out += '\t'; break;
    case 'v': out += '\v'; break;
    case '\n': break;  // a line continuation
    case '\r':
      if (at + 2 < text.size() && text[at + 2] == '\n') return at + 3;
      break;
    default: out += e;
  }
  return at + 2;
}

/// Reads, at `text[at]`, a number as JavaScript would (Number(), a literal or parseInt's
/// longest prefix): `0x`/`0o`/`0b` with `_` separators, a legacy octal `0755`, and a decimal
/// with `_` separators, a fraction and an exponent (`2.0506e4`, `.5e1`), rounded to a double
/// as JavaScript rounds it. A sign is not read: the magnitude is named either way. Plain
/// digits are left to read_numbers' runs of digits.
void read_number_at(std::string_view text, std::size_t at, PidSink& sink) {
  const std::size_t n = text.size();
  if (text[at] == '0' && at + 1 < n) {
    const char kind = static_cast<char>(text[at + 1] | 0x20);
    const int radix = kind == 'x' ? 16 : kind == 'o' ? 8 : kind == 'b' ? 2 : digit_in(text[at + 1], 8) >= 0 ? 8 : 0;
    if (radix != 0) {  // 0x.., 0o.., 0b.., or a legacy octal literal 0755
      std::size_t k = radix == 8 && kind != 'o' ? at + 1 : at + 2;
      double value = 0;
      bool any = false;
      for (; k < n; ++k) {
        if (text[k] == '_') continue;
        const int d = digit_in(text[k], radix);
        if (d < 0) break;
        value = std::min(value * radix + d, 4294967296.0);  // past 2^31: only "too large"
        any = true;
      }
      if (any) sink.add(value);
      if (kind == 'x' || kind == 'o' || kind == 'b') return;
    }
  }
  // A decimal: digits (and separators), a fraction, an exponent. Read at once for Clinger's
  // fast path (a mantissa below 2^53 times an exact power of ten is rounded once, exactly as
  // strtod rounds it); its text without separators goes to strtod otherwise.
  std::int64_t mantissa = 0;
  int significant = 0, scale = 0, exponent = 0;
  bool plain = true;  // digits only: the same as a run of digits
  bool fraction = false, negative_exponent = false;
  std::size_t k = at;
  auto mantissa_digits = [&] {
    for (; k < n && (is_digit(text[k]) || text[k] == '_'); ++k) {
      if (text[k] == '_') {
        plain = false;
        continue;
      }
      if (fraction) --scale;
      if (mantissa == 0 && text[k] == '0') continue;  // a leading zero
      if (++significant <= 15) mantissa = mantissa * 10 + (text[k] - '0');
    }
  };
  mantissa_digits();
  if (k < n && text[k] == '.') {
    plain = false;
    fraction = true;
    ++k;
    mantissa_digits();
  }
  if (k < n && (text[k] == 'e' || text[k] == 'E')) {
    std::size_t e = k + 1;
    if (e < n && (text[e] == '+' || text[e] == '-')) ++e;
    if (e < n && is_digit(text[e])) {
      negative_exponent = text[e - 1] == '-';
      plain = false;
      for (k = e; k < n && (is_digit(text[k]) || text[k] == '_'); ++k)
        if (text[k] != '_') exponent = std::min(exponent * 10 + (text[k] - '0'), 100000);
    }
  }
  if (plain || significant == 0) return;  // a run of digits, or zero
  const int power = scale + (negative_exponent ? -exponent : exponent);
  static constexpr double powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (significant <= 15 && power >= 0 && power <= 22) {
    sink.add(static_cast<double>(mantissa) * powers[power]);
  } else if (significant <= 15 && power < 0 && power >= -22) {
    sink.add(static_cast<double>(mantissa) / powers[-power]);
  } else if (significant + power > -400 && significant + power < 400) {  // else far from 1..2^31
    std::string& clean = sink.scratch;
    clean.clear();
    for (std::size_t i = at; i < k; ++i)
      if (text[i] != '_') clean += text[i];
    sink.add(std::strtod(clean.c_str(), nullptr));
  }
}

/// Every number in `text` (a value's piece, escapes decoded): each run of decimal digits
/// (`0506` is 506), and each number JavaScript could read starting at a digit or a dot that
/// does not continue one (read_number_at).
void read_numbers(std::string_view text, PidSink& sink) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char before = i > 0 ? text[i - 1] : ' ';
    if (is_digit(c) && !is_digit(before)) {
      std::size_t end = i;
      std::int64_t value = 0;
      for (; end < text.size() && is_digit(text[end]); ++end)
        value = std::min<std::int64_t>(value * 10 + (text[end] - '0'), std::int64_t{1} << 40);
      sink.add(static_cast<double>(value));
    }
    const bool starts = is_digit(c) ? !is_digit(before) && before != '_' && before != '.'
                                    : c == '.' && i + 1 < text.size() && is_digit(text[i + 1]) &&
                                          !is_digit(before) && before != '_';
    if (starts) read_number_at(text, i, sink);
  }
}

/// `pid` in any letter case.
bool is_pid_key(std::string_view text) {
  return text.size() == 3 && (text[0] | 0x20) == 'p' && (text[1] | 0x20) == 'i' && (text[2] | 0x20) == 'd';
}

/// What a character is to the scanner.
enum class CharClass : std::uint8_t { other, word, colon, open, close, quote, slash };

constexpr std::array<CharClass, 256> char_class = [] {
  std::array<CharClass, 256> table{};
  for (int c = 0; c < 128; ++c)
    if (word_char(static_cast<char>(c))) table[static_cast<std::size_t>(c)] = CharClass::word;
  table[':'] = CharClass::colon;
  table['{'] = table['['] = CharClass::open;
  table['}'] = table[']'] = CharClass::close;
  table['"'] = table['\''] = table['`'] = CharClass::quote;
  table['/'] = CharClass::slash;
  return table;
}();

/// The quoted string opening at `text[at]` (its quote) appended to `piece`, its escapes
/// decoded, up to the closing quote or the end; returns where the text goes on.
std::size_t read_quoted(std::string_view text, std::size_t at, std::string& piece) {
  const char quote = text[at];
  std::size_t i = at + 1;
  while (i < text.size() && text[i] != quote) {
    if (text[i] == '\\') i = decode_escape(text, i, piece);
    else piece += text[i++];
  }
  return i < text.size() ? i + 1 : i;  // past the closing quote
}

/// Past the comment opening at `text[at]` (`/*...*/` or `//...` to the line's end, or to the
/// end of the text), or past the lone `/` there.
std::size_t skip_comment(std::string_view text, std::size_t at) {
  const std::size_t n = text.size();
  if (at + 1 < n && text[at + 1] == '*') {
    const std::size_t end = text.find("*/", at + 2);
    return end == std::string_view::npos ? n : end + 2;
  }
  if (at + 1 < n && text[at + 1] == '/') {
    const std::size_t end = text.find('\n', at + 2);
    return end == std::string_view::npos ? n : end + 1;
  }
  return at + 1;
}

/// The unquoted word starting at `text[at]` appended to `piece`, its escapes decoded;
/// returns where the text goes on.
std::size_t read_word(std::string_view text, std::size_t at, std::string& piece) {
  const std::size_t n = text.size();
  const auto in_word = [&](std::size_t i) {
    return i < n && char_class[static_cast<unsigned char>(text[i])] == CharClass::word;
  };
  std::size_t end = at;
  while (in_word(end) && text[end] != '\\') ++end;
  piece.append(text, at, end - at);
  std::size_t i = end;
  while (in_word(i)) {
    if (text[i] == '\\') i = decode_escape(text, i, piece);
    else piece += text[i++];
  }
  return i;
}

/// One pass of the scanner over `text` (UTF-8). The text is cut into pieces: quoted strings
/// (`"`, `'` or `` ` ``, to the closing quote or the end) and unquoted words (word_char),
/// each with its escapes decoded; `{` `[` and `}` `]` count the depth; `/*...*/` and
/// `//...` comments, whitespace, commas and anything else only separate pieces. A piece
/// followed by `:` is a key when it is key-like (a string, or a word that begins as an
/// identifier: `{20506:1}` is read as a value). A `blind` pass sees no strings and no
/// comments (quotes, `/` and `*` only separate), so a lost or extra quote cannot hide a key.
///
/// A piece spelled `pid` in any letter case (a key, or any piece at all: `{"pid" 2050}`)
/// opens a pid value at its depth. The value runs to the next key at that depth or
/// shallower (the next member of its object or of an enclosing one), or to the end of the
/// text: keys inside the value (`{"pid":{"value":2050}}`) do not end it, and are read as
/// part of it. Every piece inside a value is read for numbers (read_numbers); the key that
/// ends it is not.
void scan_pass(std::string_view text, bool blind, PidSink& sink) {
  std::int64_t depth = 0;
  bool in_value = false;
  std::int64_t value_depth = 0;  // the depth of the outermost open pid key
  std::string piece;
  bool pending = false, key_like = false;
  std::int64_t piece_depth = 0;

  auto settle = [&](bool before_colon) {
    if (!pending) return;
    pending = false;
    const bool key = before_colon && key_like;
    if (in_value && (!key || piece_depth > value_depth)) read_numbers(piece, sink);
    if (key && in_value && piece_depth <= value_depth) in_value = false;
    if (is_pid_key(piece)) {
      value_depth = in_value ? std::min(value_depth, piece_depth) : piece_depth;
      in_value = true;
    }
  };
  auto begin_piece = [&](bool looks_like_key) {
    settle(false);
    piece.clear();
    pending = true;
    key_like = looks_like_key;
    piece_depth = depth;
  };

  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const char c = text[i];
    switch (char_class[static_cast<unsigned char>(c)]) {
      case CharClass::other:  // whitespace, a comma, a control, non-ASCII, other punctuation
        ++i;
        break;
      case CharClass::colon:
        settle(true);
        ++i;
        break;
      case CharClass::open:
      case CharClass::close:
        settle(false);
        depth += c == '{' || c == '[' ? 1 : -1;
        ++i;
        break;
      case CharClass::quote:
        if (blind) {
          ++i;
          break;
        }
        begin_piece(true);
        i = read_quoted(text, i, piece);
        break;
      case CharClass::slash:
        i = blind ? i + 1 : skip_comment(text, i);
        break;
      case CharClass::word:
        begin_piece(is_letter(c) || c == '_' || c == '$' || c == '\\');
        i = read_word(text, i, piece);
        break;
    }
  }
  settle(false);
}

/// `bytes` from `offset` decoded as UTF-16 (`width` 2) or UTF-32 (`width` 4), little- or
/// big-endian, for the scanner: ASCII as itself, and every other character (a pair of
/// surrogates, an unpaired one, a value past U+10FFFF, a cut unit) as one byte 0x80, which
/// like any non-ASCII character never spells a key or a digit.
std::string decode_wide(std::string_view bytes, std::size_t offset, std::size_t width, bool little) {
  std::string out;
  out.reserve(bytes.size() / width + 1);
  std::size_t at = offset;
  for (; at + width <= bytes.size(); at += width) {
    std::uint32_t value = 0;
    for (std::size_t k = 0; k < width; ++k)
      value = (value << 8) | static_cast<unsigned char>(bytes[at + (little ? width - 1 - k : k)]);
    out += value < 0x80 ? static_cast<char>(value) : '\x80';
  }
  if (at < bytes.size()) out += '\x80';
  return out;
}

}  // namespace

std::vector<double> named_pids(std::string_view bytes) {
  PidSink sink;
  auto scan = [&](std::string_view text) {
    scan_pass(text, false, sink);
    scan_pass(text, true, sink);
  };
  scan(utf8_with_replacement(bytes));
  // UTF-16 and UTF-32, either byte order, when a BOM begins the bytes or any NUL byte is in
  // them (their pattern: ASCII text in them is mostly NULs); at every alignment, so a stray
  // byte before the text (a UTF-8 BOM in front of a UTF-16 one) does not hide it.
  const bool wide = bytes.find('\0') != std::string_view::npos || bytes.starts_with("\xFF\xFE") ||
                    bytes.starts_with("\xFE\xFF");
  if (wide) {
    for (std::size_t width : {2u, 4u})
      for (std::size_t offset = 0; offset < width; ++offset)
        for (bool little : {true, false}) scan(decode_wide(bytes, offset, width, little));
  }
  std::vector<double>& pids = sink.pids;
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return std::move(pids);
}

OwnerRead read_owner(System& system, const std::string& lock, std::uint32_t uid) {
  return read_owner(system, DirRef{}, lock, uid);
}

namespace {

/// Why the lock directory Apnea would read fails its checks (PROTOCOL.md section 3, 1);
/// nothing when it passes.
std::optional<OwnerRejection> lock_rejection(const FileStat& lock, std::uint32_t uid) {
  OwnerRejection rejection;
  switch (private_directory_problem(lock, uid)) {
    case PrivacyProblem::none: return std::nullopt;
    case PrivacyProblem::symlink: return reject(OwnerCheck::lock_symlink);
    case PrivacyProblem::not_directory:
      rejection = reject(OwnerCheck::lock_not_directory);
      rejection.type = lock.type;
      return rejection;
    case PrivacyProblem::foreign_owner:
      return reject(OwnerCheck::lock_foreign_owner, fmt::format("uid {}", lock.uid));
    case PrivacyProblem::open_mode:
      rejection = reject(OwnerCheck::lock_open_mode, fmt::format("mode {:04o}", lock.mode));
      rejection.mode = lock.mode;
      return rejection;
  }
  return std::nullopt;
}

/// Why owner.json's uid or mode fails Apnea's checks (PROTOCOL.md section 3, 2); nothing
/// when they pass. Apnea checks them before the size, but the bytes of a regular,
/// size-bounded file are read even when these fail, so a malformed lock's exact content is
/// known (status shows it; a guarded reclamation re-validates it).
std::optional<OwnerRejection> owner_stat_rejection(const FileStat& owner, std::uint32_t uid) {
  if (owner.uid != uid) return reject(OwnerCheck::owner_foreign_owner, fmt::format("uid {}", owner.uid));
  if ((owner.mode & 077) == 0) return std::nullopt;
  OwnerRejection rejection = reject(OwnerCheck::owner_open_mode, fmt::format("mode {:04o}", owner.mode));
  rejection.mode = owner.mode;
  return rejection;
}

/// The rejection for an open of owner.json that failed with `error`.
OwnerRejection open_rejection(const std::error_code& error) {
  if (error == std::errc::no_such_file_or_directory) return reject(OwnerCheck::owner_missing);
  if (error == std::errc::too_many_symbolic_link_levels) return reject(OwnerCheck::owner_symlink);
  return reject(OwnerCheck::owner_unreadable, errno_text(error));
}

/// Reads the owner record open as `fd` (checked by fstat as Apnea checks it) into `read`.
OwnerRead read_open_owner(System& system, const Descriptor& fd, std::uint32_t uid, OwnerRead read) {
  auto fail = [&](OwnerRejection rejection) {
    read.owner = std::unexpected(std::move(rejection));
    return std::move(read);
  };
  auto owner_stat = system.fstat(fd.get());
  if (!owner_stat) return fail(reject(OwnerCheck::owner_unreadable, errno_text(owner_stat.error())));
  read.owner_stat = *owner_stat;
  if (owner_stat->type != FileType::regular) {
    auto rejection = reject(OwnerCheck::owner_not_regular);
    rejection.type = owner_stat->type;
    return fail(rejection);
  }
  const std::optional<OwnerRejection> stat_rejection = owner_stat_rejection(*owner_stat, uid);
  if (owner_stat->size <= 0) return fail(stat_rejection.value_or(reject(OwnerCheck::owner_empty)));
  if (owner_stat->size > owner_size_limit)
    return fail(stat_rejection.value_or(
        reject(OwnerCheck::owner_too_large, fmt::format("{} bytes", owner_stat->size))));

  auto bytes = read_at_most(system, fd.get(), static_cast<std::size_t>(owner_stat->size));
  if (!bytes) return fail(reject(OwnerCheck::owner_unreadable, errno_text(bytes.error())));
  const std::size_t got = bytes->size();
  read.bytes = std::move(*bytes);
  if (got < static_cast<std::size_t>(owner_stat->size))
    return fail(stat_rejection.value_or(reject(
        OwnerCheck::owner_short_read, fmt::format("{} of {} bytes", got, owner_stat->size))));
  if (stat_rejection) return fail(*stat_rejection);
  read.owner = decode_owner(*read.bytes);
  return read;
}

}  // namespace

OwnerRead read_owner(System& system, const DirRef& dir, std::string_view lock, std::uint32_t uid) {
  OwnerRead read;
  auto fail = [&](OwnerRejection rejection) {
    read.owner = std::unexpected(std::move(rejection));
    return read;
  };
  auto lock_stat = system.lstat_in(dir, lock);
  if (!lock_stat) {
    if (lock_stat.error() == std::errc::no_such_file_or_directory)
      return fail(reject(OwnerCheck::lock_missing));
    return fail(reject(OwnerCheck::lock_unreadable, errno_text(lock_stat.error())));
  }
  read.lock_stat = *lock_stat;
  if (auto rejected = lock_rejection(*lock_stat, uid)) return fail(*std::move(rejected));
  auto opened = system.open_read_in(dir, std::string(lock) + "/" + std::string(owner_file_name));
  if (!opened) return fail(open_rejection(opened.error()));
  return read_open_owner(system, Descriptor(system, *opened), uid, std::move(read));
}

namespace {
/// True when two rejected reads saw the same directory and owner file with the same content
/// and failed the same check.
bool same_rejection(const OwnerRead& first, const OwnerRead& second) {
  return first.lock_stat && second.lock_stat && first.lock_stat->same_object(*second.lock_stat) &&
         first.owner.error().check == second.owner.error().check && first.bytes == second.bytes &&
         first.owner_stat.has_value() == second.owner_stat.has_value() &&
         (!first.owner_stat || first.owner_stat->same_object(*second.owner_stat));
}
}  // namespace

SettledRead detail::read_owner_settled(System& system, const std::string& lock, std::uint32_t uid,
                                       int reads) {
  return read_owner_settled(system, DirRef{}, lock, uid, reads);
}

SettledRead detail::read_owner_settled(System& system, const DirRef& dir, std::string_view lock,
                                       std::uint32_t uid, int reads) {
  SettledRead result{read_owner(system, dir, lock, uid), true};
  for (int done = 1;; ++done) {
    if (result.read.owner || result.read.owner.error().lock_vanished()) return result;
    if (done >= reads) {
      result.settled = false;
      return result;
    }
    OwnerRead again = read_owner(system, dir, lock, uid);
    const bool agree = !again.owner && same_rejection(result.read, again);
    result.read = std::move(again);
    if (agree) return result;
  }
}

}  // namespace apnea_locks
