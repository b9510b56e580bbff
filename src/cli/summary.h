// The totals of one pass over the lock area and what to do next: counted as entries are
// shown, and written as the table's footer, the JSON's "summary", the Nagios line's counts
// and the Prometheus metrics. The order "worst first" is presentation only: what needs
// attention, the fix and the next step all come from the survey and the policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "apnea_locks/classify.h"
#include "cli/fields.h"
#include "cli/json_writer.h"

namespace apnea_locks::cli {

/// (kind, role, state) as the metrics name them: "unknown" for the kind of an unknown entry.
using EntryClass = std::tuple<std::string, std::string, std::string>;

/// Where an entry goes in the table, smaller first: what needs attention, a global setup
/// lock among those (it stops every Apnea run of the account), then by state (malformed,
/// stale, leftover, debris, live, in-flight, unknown, free), then by name.
using EntryOrder = std::tuple<int, int, int, std::string>;

/// The order of `entry` (see EntryOrder).
EntryOrder entry_order(const EntryView& entry);

/// "the global setup lock of /home/ann", "the repository lock of /src/app", "the lock
/// repository-8d24....lock", "the candidate NAME", "the reclaim guard NAME" (escaped).
std::string entry_description(const EntryView& entry);

/// The worst entry shown that needs attention, and what the policy says to do about it.
struct NextStep {
  EntryOrder order;
  std::string name;
  std::string path;
  std::string description;  ///< entry_description
  std::string state;
  std::string reason;
  std::vector<std::string> fix_argv;  ///< the one fix command; empty when no flag removes it
  std::string fix;                    ///< fix_argv as a shell command line
  std::string next_step;              ///< the policy's next step when there is no fix
  std::string why;                    ///< the policy's reason (its decision)
};

/// Counts of the entries of one pass (after filters).
struct AreaSummary {
  std::size_t scanned = 0;    ///< entries listed (set by the caller)
  std::size_t shown = 0;      ///< entries added
  std::size_t attention = 0;  ///< entries needing attention
  std::map<std::string, std::size_t, std::less<>> states;  ///< by state name
  std::map<std::string, std::size_t, std::less<>> roles;   ///< by role name
  std::map<EntryClass, std::size_t, std::less<>> classes;  ///< by (kind, role, state)
  std::size_t locks = 0;            ///< locks present (role lock, not free)
  std::size_t live = 0;             ///< locks in state live
  std::size_t stale = 0;            ///< locks in state stale
  std::size_t malformed = 0;        ///< locks in state malformed
  std::size_t debris = 0;           ///< candidates and tombstones in state debris
  std::size_t leftover_guards = 0;  ///< reclaim guards in state leftover
  std::optional<std::int64_t> oldest_lock_age_ns;  ///< of the locks present
  /// The mtime of the oldest lock present (wall-clock ns): a time, true however long it is
  /// kept, where the age is only true when it is taken.
  std::optional<std::int64_t> oldest_lock_mtime_ns;
  std::optional<NextStep> next;     ///< the worst entry needing attention

  /// Counts one entry.
  void add(const EntryView& entry);
};

/// A count and its noun: "1 entry", "3 entries".
std::string plural(std::size_t n, std::string_view one, std::string_view many);

/// "2 stale, 1 live" in the table's state order; "" when nothing was shown.
std::string state_totals(const AreaSummary& summary);

/// An entry name short enough for a line of prose: a protocol name keeps its kind, 12 digits
/// of its key and what follows the key ("repository-a493186c5cd2….lock"); any other name is
/// kept whole. Escaped.
std::string brief_name(std::string_view name, std::string_view ellipsis);

/// Writes the JSON "summary" member's object: scanned, entries, needs_attention, states,
/// roles and next (null, or {name, path, description, state, reason, fix, fix_argv,
/// next_step, why}).
void write_summary_json(JsonWriter& json, const AreaSummary& summary);

/// `argv` as shell lines of at most `width` columns (0: one line), each starting with
/// `indent` and each but the last ending in " \", so it still pastes as one command.
std::string wrap_command(const std::vector<std::string>& argv, std::size_t width,
                         std::string_view indent);

}  // namespace apnea_locks::cli
