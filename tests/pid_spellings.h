// Damaged and exotic owner records that all name one pid (PROTOCOL.md section 10, the
// never-live rule: "a record names every pid it could mean"). Shared by owner_test (the
// pids named_pids finds) and never_live_test (a live holder's lock so spelled survives
// `reclaim --force`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace apnea_locks::testing {

struct PidSpelling {
  const char* what;
  std::string bytes;  ///< the whole owner.json
};

/// `ascii` in UTF-16, little- or big-endian, with or without a BOM.
inline std::string utf16(std::string_view ascii, bool little, bool bom) {
  std::string out;
  if (bom) out += little ? std::string("\xFF\xFE", 2) : std::string("\xFE\xFF", 2);
  for (char c : ascii) {
    if (little) out += c;
    out += '\0';
    if (!little) out += c;
  }
  return out;
}

/// `ascii` in UTF-32, little- or big-endian, with or without a BOM.
inline std::string utf32(std::string_view ascii, bool little, bool bom) {
  std::string out;
  if (bom) out += little ? std::string("\xFF\xFE\0\0", 4) : std::string("\0\0\xFE\xFF", 4);
  for (char c : ascii) {
    if (little) out += c;
    out += std::string(3, '\0');
    if (!little) out += c;
  }
  return out;
}

/// `value` in base 2, 8 or 16 (lower case), without a prefix.
inline std::string in_base(long long value, int base) {
  std::string digits;
  do {
    digits.insert(digits.begin(), "0123456789abcdef"[value % base]);
    value /= base;
  } while (value > 0);
  return digits;
}

/// Every spelling of `pid` (> 999) that the never-live rule must read as naming it.
inline std::vector<PidSpelling> pid_spellings(long long pid) {
  const std::string p = std::to_string(pid);
  const std::string canonical = R"({"pid":)" + p + R"(,"token":"t"})";
  // 2.0506e4, 20_506, "\u0032\u0030..." and "\x32\x30..." for 20506.
  const std::string exponent = p.substr(0, 1) + "." + p.substr(1) + "e" + std::to_string(p.size() - 1);
  const std::string separated = p.substr(0, p.size() - 3) + "_" + p.substr(p.size() - 3);
  std::string u_escaped, x_escaped;
  for (char c : p) {
    u_escaped += "\\u003" + std::string(1, c);
    x_escaped += "\\x3" + std::string(1, c);
  }
  std::string hex_upper = in_base(pid, 16);
  for (char& c : hex_upper) c = static_cast<char>(c >= 'a' ? c - 'a' + 'A' : c);
  hex_upper.insert(hex_upper.size() - 2, "_");
  std::string deep(2000, '[');
  deep += R"({"pid":)" + p + "}";
  return {
      {.what = "canonical", .bytes = canonical},
      {.what = "escaped key p\\u0069d after a syntax error",
       .bytes = R"({"token":"t",,"p\u0069d":)" + p + "}"},
      {.what = "key PID", .bytes = R"({"PID":)" + p + R"(,"token":"t"})"},
      {.what = "key Pid", .bytes = R"({"Pid":)" + p + "}"},
      {.what = "key escaped \\u0050ID", .bytes = R"({"\u0050ID":)" + p + "}"},
      {.what = "unquoted key", .bytes = "{pid:" + p + "}"},
      {.what = "unquoted key with a trailing comma (JSON5)", .bytes = "{pid:" + p + ",}"},
      {.what = "single quotes", .bytes = "{'pid':" + p + "}"},
      {.what = "single-quoted key and value", .bytes = "{'pid':'" + p + "'}"},
      {.what = "key with spaces inside its quotes", .bytes = R"({" pid ":)" + p + "}"},
      {.what = "key without a colon", .bytes = R"({"pid" )" + p + "}"},
      {.what = "any depth", .bytes = R"({"a":[{"b":{"pid":)" + p + R"(}}],"token":"t"})"},
      {.what = "after a syntax error", .bytes = R"({"token":"t" "x" ]] {"pid":)" + p + "}"},
      {.what = "nested object after a syntax error", .bytes = R"({"token":}{"owner":{"pid":)" + p + "}}"},
      {.what = "a lost quote before the key", .bytes = R"({"token":"t,"pid":)" + p + "}"},
      {.what = "duplicates, the pid first", .bytes = R"({"pid":)" + p + R"(,"pid":null,"token":"t"})"},
      {.what = "duplicates, the pid last", .bytes = R"({"pid":"x","pid":)" + p + R"(,"token":"t"})"},
      {.what = "exponent", .bytes = R"({"pid":)" + exponent + "}"},
      {.what = "leading dot and exponent", .bytes = R"({"pid":.)" + p + "e" + std::to_string(p.size()) + "}"},
      {.what = "fraction .0", .bytes = R"({"pid":)" + p + ".0}"},
      {.what = "hexadecimal", .bytes = R"({"pid":0x)" + in_base(pid, 16) + "}"},
      {.what = "hexadecimal, upper case, separator", .bytes = R"({"pid":0X)" + hex_upper + "}"},
      {.what = "octal 0o", .bytes = R"({"pid":0o)" + in_base(pid, 8) + "}"},
      {.what = "legacy octal literal", .bytes = R"({"pid":0)" + in_base(pid, 8) + "}"},
      {.what = "binary 0b", .bytes = R"({"pid":0b)" + in_base(pid, 2) + "}"},
      {.what = "numeric separator", .bytes = R"({"pid":)" + separated + "}"},
      {.what = "BigInt suffix", .bytes = R"({"pid":)" + p + "n}"},
      {.what = "leading +", .bytes = R"({"pid":+)" + p + "}"},
      {.what = "negative", .bytes = R"({"pid":-)" + p + "}"},
      {.what = "decimal string", .bytes = R"({"pid":")" + p + R"(","token":"t"})"},
      {.what = "string with a trailing space", .bytes = R"({"pid":")" + p + R"( "})"},
      {.what = "string with a space and a sign before", .bytes = R"({"pid":" +)" + p + R"("})"},
      {.what = "in an array", .bytes = R"({"pid":[)" + p + "]}"},
      {.what = "in an object", .bytes = R"({"pid":{"value":)" + p + "}}"},
      {.what = "in a string in an array in an object", .bytes = R"({"pid":{"value":[" )" + p + R"( "]}})"},
      {.what = "escaped digits \\u0032...", .bytes = R"({"pid":")" + u_escaped + R"("})"},
      {.what = "escaped digits \\x32...", .bytes = R"({"pid":")" + x_escaped + R"("})"},
      {.what = "block comment before the value", .bytes = R"({"pid":/*c*/)" + p + "}"},
      {.what = "block comment holding a colon", .bytes = R"({"pid":/* note: */)" + p + "}"},
      {.what = "line comment before the value", .bytes = "{\"pid\"://c\n" + p + "}"},
      {.what = "form feed as whitespace", .bytes = "{\"pid\":\f" + p + "}"},
      {.what = "vertical tab, CR LF and tabs", .bytes = "{\r\n\t\"pid\"\v:\r\n\t" + p + "\r\n}"},
      {.what = "UTF-8 BOM", .bytes = "\xEF\xBB\xBF" + canonical},
      {.what = "trailing bytes", .bytes = canonical + "x}"},
      {.what = "invalid UTF-8 next to the key", .bytes = "{\xFFpid\xFE:" + p + "}"},
      {.what = "invalid UTF-8 in another member", .bytes = "{\"\xFF\":1,\"pid\":" + p + "}"},
      {.what = "cut right after the pid", .bytes = R"({"pid":)" + p},
      {.what = "truncated after the pid", .bytes = R"({"pid":)" + p + R"(,"tok)"},
      {.what = "a second top-level value", .bytes = R"({"token":"t"}{"pid":)" + p + "}"},
      {.what = "2000 levels deep", .bytes = deep},
      {.what = "padded past 4096 bytes", .bytes = std::string(2100, ' ') + canonical + std::string(2100, ' ')},
      {.what = "UTF-16 LE with BOM", .bytes = utf16(canonical, true, true)},
      {.what = "UTF-16 LE without BOM", .bytes = utf16(canonical, true, false)},
      {.what = "UTF-16 BE with BOM", .bytes = utf16(canonical, false, true)},
      {.what = "UTF-16 BE without BOM", .bytes = utf16(canonical, false, false)},
      {.what = "UTF-16 LE after a UTF-8 BOM (odd offset)", .bytes = "\xEF\xBB\xBF" + utf16(canonical, true, true)},
      {.what = "UTF-32 LE with BOM", .bytes = utf32(canonical, true, true)},
      {.what = "UTF-32 BE without BOM", .bytes = utf32(canonical, false, false)},
  };
}

}  // namespace apnea_locks::testing
