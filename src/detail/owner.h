// Internals of owner.h: Node's UTF-8 stepping (and which steps no text output prints as
// they are) and the race-safe owner read.
// Not part of the library's interface (not installed); for src/, src/cli and the tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "apnea_locks/owner.h"
#include "apnea_locks/system.h"

namespace apnea_locks::detail {

/// One UTF-8 sequence: its length in bytes, whether it is valid and its code point.
struct Utf8Step {
  std::size_t length = 1;  ///< an invalid one's maximal subpart (at least 1), one U+FFFD in Node
  bool valid = false;      ///< a valid sequence
  char32_t point = 0;      ///< the code point of a valid sequence (0 for an invalid one)
};

/// The UTF-8 sequence `bytes` (not empty) starts with, as Node's decoder steps over it. Pure.
Utf8Step utf8_step(std::string_view bytes);

/// True for a step no text output shows as it is (PROTOCOL.md section 10, "Nothing hostile
/// reaches a terminal"): invalid UTF-8, C0 controls, DEL, C1 controls, and the invisible
/// format characters that reorder or hide text (category Cf: soft hyphen, Arabic letter
/// mark, zero-width characters, LRM/RLM, the bidi embeddings, overrides and isolates, word
/// joiner and invisible operators, BOM, interlinear annotation) with U+2028/U+2029. The one
/// rule behind the text escaper (cli::printable) and the shell quoting (shell_word).
bool must_escape(const Utf8Step& step);

/// A read_owner whose result can be trusted not to be a race artifact.
struct SettledRead {
  OwnerRead read;       ///< the last read
  bool settled = true;  ///< false when the lock kept changing for every read allowed
};

/// read_owner that never mistakes a lock changing under the reader for a malformed one.
/// Apnea never changes a published lock in place, but a release may rename it away and a
/// new owner publish another (possibly reusing the inode number) between the reader's
/// steps. A rejected read is therefore repeated until two consecutive reads agree (same
/// directory, same owner file, same bytes, same failed check), at most `reads` reads in
/// all; an accepted read, or a vanished lock, ends it at once.
SettledRead read_owner_settled(System& system, const std::string& lock, std::uint32_t uid,
                               int reads = 5);
/// read_owner_settled of the lock named `lock` inside `dir`.
SettledRead read_owner_settled(System& system, const DirRef& dir, std::string_view lock,
                               std::uint32_t uid, int reads = 5);

}  // namespace apnea_locks::detail
