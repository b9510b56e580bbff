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

/// Whether an entry named by its path (Apnea's message names it, the operator passed it)
/// needs attention: when its verdict says so; for any reclaim guard that is there, even one
/// still at work, since Apnea is refused ("reclamation is guarded") while it exists; and for
/// a live lock whose owner is stopped (state T) or held by a tracer (t), which neither goes
/// on nor releases by itself. A survey of the whole area (status, check, the metrics) counts
/// these as in flight and live: a path given is asked about because Apnea is blocked on it.
inline bool named_needs_attention(const EntryFacts& facts, const Verdict& verdict) {
  const bool owner_stopped = verdict.state == EntryState::live && verdict.death.blocker &&
                             (verdict.death.blocker->state == 'T' || verdict.death.blocker->state == 't');
  return verdict.needs_attention || owner_stopped ||
         (facts.stat && facts.parsed.role == EntryRole::reclaim_guard);
}

/// The name of a signal probe's answer: "ok", "ESRCH", "EPERM", "not-signalable", ...
std::string signal_answer(int signal_errno);

}  // namespace apnea_locks::cli
