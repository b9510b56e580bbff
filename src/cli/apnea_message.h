// Reading what a user pasted (Apnea's message, or a ticket around it) for `explain`: which
// of Apnea's errors it is, the lock, guard, candidate and tombstone paths it names and the
// pids. Pure: no system calls; nothing here decides anything about the locks.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace apnea_locks::cli {

/// One error Apnea 0.2.2 prints (operation-lock.ts): what identifies it and what it means.
struct ApneaError {
  std::string_view id;        ///< stable name: "stale", "guarded", "not-owned", ...
  std::string_view error;     ///< Apnea's error class and reason ("OperationLocked stale")
  std::string_view pattern;   ///< the message with its variable parts as LOCK, GUARD, PATH...
  std::string_view meaning;   ///< what Apnea meant, in one or two plain sentences
  /// Phrases that identify it (any one, matched with whitespace folded, case ignored).
  std::vector<std::string_view> phrases;
};

/// Every error of Apnea's lock code, most specific first.
const std::vector<ApneaError>& apnea_errors();

/// A path found in the text.
struct FoundPath {
  std::string path;      ///< as written, without the sentence's punctuation around it
  bool area = false;     ///< a lock area (`apnea-<uid>` or `.../operation-locks`), not an entry
  std::vector<std::string> alternatives;  ///< other readings of a re-wrapped path, in order
};

/// What the text holds.
struct PastedText {
  std::vector<const ApneaError*> errors;  ///< each error recognised, in the text's order
  std::vector<FoundPath> paths;           ///< entries (and areas) named, in order, each once
  std::vector<std::string> pids;          ///< "pid N" mentioned, in order, each once (at most 64)
  bool more_paths = false;                ///< the text names more than max_pasted_paths
};

/// The most paths read_pasted reports: a message names one or two, a ticket a few.
inline constexpr std::size_t max_pasted_paths = 64;

/// The most text `explain` reads from standard input: 256 KiB.
inline constexpr std::size_t max_pasted_bytes = 256 * 1024;

/// Reads a pasted text: quote markers ("> ") dropped, lines re-joined (a path broken by a
/// re-wrap is joined again), each Apnea error found by its phrases, every lock, guard,
/// candidate and tombstone path (and lock area path after one of Apnea's area messages)
/// with the punctuation of its sentence (`.`, `,`, `)`, quotes, backticks) dropped, and the
/// pids. A path starts at its word's first `/`; a control byte (NUL included) ends it; a
/// directory longer than PATH_MAX is none. Linear in the text's size.
PastedText read_pasted(std::string_view text);

}  // namespace apnea_locks::cli
