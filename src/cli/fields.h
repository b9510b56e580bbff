// The one table of fields of an entry: each field's `-o` name, table header, description,
// JSON key, how its text is escaped and how it is shortened. It drives the table columns,
// `-o`, `-o help` / `--list-columns`, `-J` (with or without `-o`), `-r` and the labels of
// the Prometheus metrics. The field names are documented in docs/status.md and kept stable.
#pragma once

#include <cstddef>
#include <cstdio>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/policy.h"
#include "cli/json_writer.h"
#include "cli/table.h"
#include "cli/text.h"

namespace apnea_locks::cli {

/// An entry with its verdict, label (may be null) and the policy's decision (may be null).
struct EntryView {
  const EntryFacts& facts;
  const Verdict& verdict;
  const Decision& decision;
  const EntryLabel* label;
  /// The account whose area holds the entry (status --all-users); null otherwise.
  const std::string* user = nullptr;
};

/// A field of an entry: a column of `status`, a member of its JSON object.
enum class Field {
  kind, key, role, state, reason, apnea, pid, token, age, command, started, label, fix,
  written, name, path, attention, self_heals, certain, guard, proof, proof_name, decision,
  why, next_step, force, clock_void, lock_name, suffix, type, mtime, user
};

/// How a field's text is made safe for a terminal.
enum class Escape {
  none,       ///< apnea-locks' own words (states, reasons, numbers, times)
  printable,  ///< anything from disk, /proc or the environment: the one escaper
};

/// Everything about one field.
struct FieldInfo {
  Field field;
  std::string_view name;         ///< `-o` name ("self-heals")
  std::string_view header;       ///< table header ("SELF-HEALS")
  std::string_view description;  ///< one line for `-o help`
  std::string_view json_key;     ///< member of the ENTRY object (`fix` writes `fix_argv` too)
  Escape escape = Escape::none;
  bool right_aligned = false;
  /// In the table on a terminal: the first N characters, as a short form (the key). 0: none.
  std::size_t abbreviate = 0;
  /// Free text: shortened with an ellipsis down to this width to fit the terminal. 0: never.
  std::size_t min_width = 0;
  /// Free-text columns shrink in this order (1 first): the fix last.
  int shrink_rank = 0;
  Cut cut = Cut::end;
  /// A default column hidden on a terminal too narrow for it: rank 1 first. 0: never.
  int hide_rank = 0;
  /// The label name in apnea_locks_entries, or empty when the field is not a label.
  std::string_view prometheus_label;
  /// The text of the field, unescaped ("" when the entry has none).
  std::string (*text)(const EntryView&) = nullptr;
  /// Writes the member(s) of the field into an open JSON object.
  void (*json)(JsonWriter&, const EntryView&) = nullptr;
};

/// Every field, in the order `-o help` lists them (the default columns first).
const std::vector<FieldInfo>& all_fields();

/// The columns shown without `-o`.
const std::vector<Field>& default_fields();

/// The info of one field.
const FieldInfo& field_info(Field field);

/// Parses `-o`: "a,b" selects columns (case-insensitive), "+a,b" appends them to the
/// defaults. Fails with a message naming an unknown column.
std::expected<std::vector<Field>, std::string> parse_fields(std::string_view spec);

/// The text of a field made safe for a terminal (its Escape applied); "" when none.
std::string field_text(Field field, const EntryView& entry);

/// The table column of a field: with `fit` (the table is fitted to a terminal) free text
/// may shrink to its min_width, and with `hide` too (a default column) it may be hidden.
TableColumn column_of(Field field, bool fit, bool hide);

/// The cell of a field in the table: field_text, abbreviated on a terminal, "-" when empty.
std::string field_cell(Field field, const EntryView& entry, bool terminal);

/// Writes the members of `fields` of the entry as one JSON object.
void write_fields_json(JsonWriter& json, const EntryView& entry, const std::vector<Field>& fields);

/// The Prometheus label fields of apnea_locks_entries, in order (kind, role, state).
const std::vector<Field>& prometheus_label_fields();

/// The list `-o help` and `--list-columns` print: each field's name and description,
/// wrapped to `width` columns (0: 80), then the default columns.
std::string columns_help(std::size_t width = 0);

}  // namespace apnea_locks::cli
