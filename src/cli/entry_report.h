// One entry of the lock area as a whole JSON object (status -J without -o, inspect -J): every
// field of the field table, then what only JSON carries (the pids the record names, the
// blocker, the rejected record, the process). Also the words inspect explains a proof with.
#pragma once

#include <string>
#include <string_view>

#include "apnea_locks/classify.h"
#include "cli/fields.h"
#include "cli/json_writer.h"

namespace apnea_locks::cli {

/// Writes the entry as one JSON object (docs/status.md, "ENTRY"): all_fields() in order,
/// then `named_pids`, `blocker`, `owner_error` and `process`.
void write_entry_json(JsonWriter& json, const EntryView& entry);

/// One sentence explaining a proof of death, for inspect.
std::string_view proof_explanation(DeathProof proof);

/// The name of a signal probe's answer: "ok", "ESRCH", "EPERM", "not-signalable", ...
std::string signal_answer(int signal_errno);

}  // namespace apnea_locks::cli
