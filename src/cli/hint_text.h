// Hints where the operator is: the lock of the repository that encloses the current
// directory, and a global setup lock that stops every Apnea run. Located by the core
// (apnea_locks/hints.h) and judged by the survey; here they become sentences, table-format
// lines and JSON.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "apnea_locks/hints.h"
#include "cli/fields.h"
#include "cli/json_writer.h"

namespace apnea_locks::cli {

/// One hint, ready to print.
struct Hint {
  std::string kind;       ///< "global-setup" or "enclosing-repository"
  std::string message;    ///< one or two sentences (unescaped)
  std::string lock_path;  ///< the lock it is about
  std::string root;       ///< the repository root, or the home
  std::string state;      ///< the survey's state of that lock ("free" when absent)
  std::string reason;
  std::vector<std::string> fix_argv;  ///< the one fix command; empty when none
  std::string fix;
  std::string next_step;  ///< the policy's next step (when there is no fix), or a command to look
};

/// The hint of `kind` about the lock `judged`, saying `message`; its next step is the
/// policy's when no fix removes it.
Hint lock_hint_text(std::string kind, const LockHint& judged, std::string message);

/// The hint for a global setup lock that needs attention; nothing when it does not.
std::optional<Hint> global_setup_hint_text(const GlobalSetupHint& judged, const std::string& next_step);

/// The hint for the repository `enclosing` that encloses the current directory `here`
/// (canonical): its lock judged as `entry` (null when absent). Nothing when `here` is the
/// root itself.
std::optional<Hint> enclosing_hint_text(const LocatedLock& enclosing, const std::string& here,
                                        const EntryView* entry);

/// Writes the hints as the table format shows them: each message wrapped to `width`
/// (0: not wrapped), then "  fix: CMD" (wrapped with continuations) or "  next step: ...".
std::string hints_text(const std::vector<Hint>& hints, std::size_t width, bool colour);

/// Writes the JSON "hints" array: [{kind, message, lock_path, root, state, reason, fix,
/// fix_argv, next_step}].
void write_hints_json(JsonWriter& json, const std::vector<Hint>& hints);

}  // namespace apnea_locks::cli
