// Shared by the fuzz targets: an invariant check that reports the input and aborts, so
// libFuzzer saves a crash file and the corpus replay (replay_main.cc) fails.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace apnea_locks::fuzz {

/// `bytes` as a C string literal body: printable ASCII as is, everything else `\xHH`.
inline std::string escaped(std::string_view bytes) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '"') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

/// Aborts with `what` and the input when `ok` is false.
inline void require(bool ok, const char* what, std::string_view input) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant violated: %s\n  input (%zu bytes): \"%s\"\n", what,
               input.size(), escaped(input).c_str());
  std::abort();
}

}  // namespace apnea_locks::fuzz
