// Fuzz target: the owner-record decoder (decode_owner, utf8_with_replacement, encode_owner).
// Invariants: nothing crashes; utf8_with_replacement yields valid UTF-8, is idempotent and
// leaves valid UTF-8 alone; decoding is deterministic and depends only on the decoded
// text; JSON whitespace around the value changes nothing and a leading BOM is always an
// error; an accepted owner has a finite integer pid > 0 and a non-empty WTF-8 token, and
// encode_owner of it decodes back to the same owner.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "apnea_locks/owner.h"
#include "fuzz_support.h"

using apnea_locks::decode_owner;
using apnea_locks::encode_owner;
using apnea_locks::Owner;
using apnea_locks::OwnerCheck;
using apnea_locks::OwnerRejection;
using apnea_locks::utf8_with_replacement;
using apnea_locks::fuzz::require;

namespace {

/// True when `bytes` is well-formed UTF-8 (RFC 3629); with `surrogates`, the 3-byte forms
/// of U+D800..U+DFFF (WTF-8, how a decoded lone surrogate is held) are allowed too.
/// Written independently of utf8_with_replacement on purpose.
bool well_formed(std::string_view bytes, bool surrogates) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    std::uint32_t cp = 0;
    std::size_t len = 0;
    if (b < 0x80) {
      ++i;
      continue;
    }
    if ((b & 0xE0) == 0xC0) {
      cp = b & 0x1F;
      len = 2;
    } else if ((b & 0xF0) == 0xE0) {
      cp = b & 0x0F;
      len = 3;
    } else if ((b & 0xF8) == 0xF0) {
      cp = b & 0x07;
      len = 4;
    } else {
      return false;
    }
    if (i + len > bytes.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(bytes[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10FFFF) return false;  // overlong or out of range
    if (cp >= 0xD800 && cp <= 0xDFFF && !surrogates) return false;
    i += len;
  }
  return true;
}

bool same_owner(const Owner& a, const Owner& b) { return a.pid == b.pid && a.token == b.token; }

bool same_result(const std::expected<Owner, OwnerRejection>& a,
                 const std::expected<Owner, OwnerRejection>& b, bool same_detail) {
  if (a.has_value() != b.has_value()) return false;
  if (a) return same_owner(*a, *b);
  return a.error().check == b.error().check &&
         (!same_detail || a.error().detail == b.error().detail);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const std::string text = utf8_with_replacement(input);
  require(well_formed(text, false), "utf8_with_replacement yields well-formed UTF-8", input);
  require(text.size() <= 3 * input.size(), "each input byte becomes at most 3 bytes", input);
  require(utf8_with_replacement(text) == text, "utf8_with_replacement is idempotent", input);
  if (well_formed(input, false))
    require(text == input, "well-formed UTF-8 is left unchanged", input);

  const auto first = decode_owner(input);
  require(same_result(first, decode_owner(input), true), "decode_owner is deterministic", input);
  require(same_result(first, decode_owner(text), true),
          "decode_owner depends only on the decoded text", input);

  // JSON.parse skips JSON whitespace around the value and refuses a leading BOM.
  require(same_result(first, decode_owner(" \t\n\r" + std::string(input) + "\r\n\t "), false),
          "JSON whitespace around the record changes nothing", input);
  const auto bom = decode_owner("\xEF\xBB\xBF" + std::string(input));
  require(!bom && bom.error().check == OwnerCheck::json_syntax, "a leading BOM is an error", input);

  if (!first) {
    // A pure decode can only fail the checks after the file was read.
    require(first.error().check >= OwnerCheck::json_syntax, "decode-only rejection", input);
    require(!first.error().reason().empty(), "a rejection has a reason", input);
    return 0;
  }
  const Owner& owner = *first;
  require(std::isfinite(owner.pid) && std::trunc(owner.pid) == owner.pid && owner.pid > 0,
          "an accepted pid is a finite integer > 0", input);
  require(!owner.token.empty(), "an accepted token is non-empty", input);
  require(well_formed(owner.token, true), "an accepted token is WTF-8", input);

  const std::string encoded = encode_owner(owner);
  const auto again = decode_owner(encoded);
  require(again.has_value(), "encode_owner of an accepted owner is accepted", input);
  require(same_owner(owner, *again), "encode_owner of an accepted owner decodes to it", input);
  require(encode_owner(*again) == encoded, "encode_owner is canonical", input);
  return 0;
}
