// One entry of the lock area as status and inspect show it: its columns (table and raw) and
// its JSON object. The field names are documented in docs/status.md and kept stable.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/policy.h"
#include "cli/render.h"

namespace apnea_locks::cli {

/// A column of `status` output.
enum class Field {
  kind, key, role, state, reason, apnea, pid, token, age, command, started, written, label, fix,
  name, path, attention, self_heals, certain, guard
};

/// A column's `-o` name ("self-heals") and table header ("SELF-HEALS").
struct FieldInfo {
  Field field;
  std::string_view name;
  std::string_view header;
  bool right_aligned;
};

/// Every column, in the order `--help` lists them.
const std::vector<FieldInfo>& all_fields();

/// The columns shown without `-o`.
const std::vector<Field>& default_fields();

/// The info of one column.
const FieldInfo& field_info(Field field);

/// Parses `-o`: "a,b" selects columns, "+a,b" appends them to the defaults. Fails with a
/// message naming an unknown column.
std::expected<std::vector<Field>, std::string> parse_fields(std::string_view spec);

/// An entry with its verdict, label (may be null) and the policy's decision (may be null).
struct EntryView {
  const EntryFacts& facts;
  const Verdict& verdict;
  const EntryLabel* label;
  const Decision* decision = nullptr;
};

/// The text of one column ("" when it has none). With `truncate`, the key (12 digits),
/// the token (8 characters) and the command line (40) are shortened for the table.
std::string field_text(Field field, const EntryView& entry, bool truncate);

/// Writes the entry as one JSON object (docs/status.md, "entries").
void write_entry_json(JsonWriter& json, const EntryView& entry);

/// One sentence explaining a proof of death, for inspect.
std::string_view proof_explanation(DeathProof proof);

/// The name of a signal probe's answer: "ok", "ESRCH", "EPERM", "not-signalable", ...
std::string signal_answer(int signal_errno);

}  // namespace apnea_locks::cli
