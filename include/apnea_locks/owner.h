// The owner record: `owner.json` inside a lock, candidate or tombstone.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/protocol.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// An accepted owner. `pid` is a JavaScript number: an integer > 0, possibly beyond any
/// real pid (`1e20` is accepted by Apnea).
struct Owner {
  double pid = 0;
  std::string token;  ///< non-empty; UTF-8 (invalid input bytes became U+FFFD)
};

/// `pid` as JavaScript prints it (`1000`, `1e+21`).
std::string pid_text(double pid);

/// The record Apnea writes for an owner: `{"pid":<pid>,"token":"<token>"}`.
std::string encode_owner(const Owner& owner);

/// Which of Apnea's acceptance checks an owner record failed.
enum class OwnerCheck {
  lock_missing,             ///< the lock path does not exist
  lock_unreadable,          ///< lstat of the lock failed otherwise
  lock_symlink,
  lock_not_directory,
  lock_foreign_owner,
  lock_open_mode,           ///< group/other bits on the lock directory
  owner_missing,            ///< no owner.json
  owner_symlink,
  owner_unreadable,         ///< open/fstat/read failed otherwise
  owner_not_regular,        ///< a FIFO, directory, socket, device
  owner_foreign_owner,
  owner_open_mode,
  owner_empty,
  owner_too_large,
  owner_short_read,         ///< fewer bytes than fstat said (truncated while reading)
  json_syntax,
  not_object,
  pid_missing,
  pid_not_number,
  pid_not_positive_integer,
  token_missing,
  token_not_string,
  token_empty,
};

/// Why an owner record was rejected: the failed check and the value that failed it.
struct OwnerRejection {
  OwnerCheck check = OwnerCheck::json_syntax;
  std::string detail;  ///< the value or error, for a human ("mode 0644", "ELOOP", ...)
  std::uint32_t mode = 0;
  FileType type = FileType::unknown;

  /// The stable reason name shown by status (`owner-mode-0644`, `owner-symlink`,
  /// `json-syntax`, `pid-not-positive-integer`, ...).
  std::string reason() const;
  /// True when the rejection means the lock vanished rather than being malformed.
  bool lock_vanished() const { return check == OwnerCheck::lock_missing; }
};

/// Decodes owner bytes exactly as Apnea does: UTF-8 with invalid sequences replaced by
/// U+FFFD, then JSON.parse (strict JSON, duplicate keys last-wins, any depth, numbers as
/// IEEE doubles), then `pid` a positive integer number and `token` a non-empty string.
/// Pure: no I/O.
std::expected<Owner, OwnerRejection> decode_owner(std::string_view bytes);

/// Every pid an owner record could mean (PROTOCOL.md section 10, the never-live rule), read
/// as leniently as any program that wrote or mangled it could have meant it, by a scanner
/// without a parser's depth limit or failure: the bytes as UTF-8 (U+FFFD for invalid
/// sequences) and, when they begin with a UTF-16 BOM or hold a NUL byte, also as UTF-16 and
/// UTF-32 of either byte order; every key spelled `pid` in any letter case once escapes are
/// decoded, quoted with `"`, `'` or not at all, at any depth, after a syntax error too; and
/// in its value, up to the next key of its object or of an enclosing one (or the end), every
/// number as JavaScript could read it (`2.0506e4`, `0x501a`, `20_506`) and each run of
/// digits (`"-5"` names 5). Over-naming only makes the tool more careful. Only integers
/// 1..2^31-1 are returned, sorted, without duplicates. Linear in the size. Pure.
std::vector<double> named_pids(std::string_view bytes);

/// UTF-8 decoding as Node's `Buffer.toString("utf8")`: each maximal invalid subpart
/// becomes U+FFFD.
std::string utf8_with_replacement(std::string_view bytes);

/// What reading an owner record saw on disk, accepted or not.
struct OwnerRead {
  std::optional<FileStat> lock_stat;   ///< lstat of the lock path
  std::optional<FileStat> owner_stat;  ///< fstat of owner.json
  std::optional<std::string> bytes;    ///< the whole record, when it was read
  std::expected<Owner, OwnerRejection> owner = std::unexpected(OwnerRejection{});
};

/// Reads `<lock>/owner.json` with Apnea's acceptance rules (PROTOCOL.md section 3): the lock
/// is a real directory owned by `uid` with no group/other bits; owner.json is opened with
/// O_NOFOLLOW|O_NONBLOCK (a symlink is refused, a FIFO cannot hang), is a regular file
/// owned by `uid` with no group/other bits, 1..4096 bytes, and decodes (decode_owner).
OwnerRead read_owner(System& system, const std::string& lock, std::uint32_t uid);
/// read_owner of the lock named `lock` inside `dir` (System::lstat_in, open_read_in).
OwnerRead read_owner(System& system, const DirRef& dir, std::string_view lock, std::uint32_t uid);

}  // namespace apnea_locks
