#include "cli/fields.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <optional>
#include <string_view>

#include "apnea_locks/owner.h"
#include "cli/time_text.h"
#include "detail/split.h"

namespace apnea_locks::cli {
namespace {

const Owner* accepted_owner(const EntryFacts& facts) {
  if (!facts.owner || !facts.owner->owner) return nullptr;
  return &*facts.owner->owner;
}

const ProcessInfo* process_info(const EntryFacts& facts) {
  if (!facts.process || !facts.process->info) return nullptr;
  return &*facts.process->info;
}

bool known(const EntryView& e) { return e.facts.parsed.role != EntryRole::unknown; }

std::string yes_no(bool value) { return value ? "yes" : "no"; }

// What a field holds, or nothing when the entry has none: its table text ("" for nothing)
// and its JSON member (null for nothing) both come from here, so the two cannot disagree,
// and the JSON is written from views, without a string per member (some 45 an entry).
using Value = std::optional<std::string_view>;

Value kind_value(const EntryView& e) { return known(e) ? Value(kind_name(e.facts.parsed.kind)) : std::nullopt; }
Value key_value(const EntryView& e) { return known(e) ? Value(e.facts.parsed.key) : std::nullopt; }
Value apnea_value(const EntryView& e) {
  return e.verdict.apnea_verdict ? Value(apnea_verdict_name(*e.verdict.apnea_verdict)) : std::nullopt;
}
Value token_value(const EntryView& e) {
  const Owner* owner = accepted_owner(e.facts);
  return owner != nullptr ? Value(owner->token) : std::nullopt;
}
Value command_value(const EntryView& e) {
  const ProcessInfo* info = process_info(e.facts);
  return info != nullptr ? Value(info->command) : std::nullopt;
}
Value label_value(const EntryView& e) { return e.label != nullptr ? Value(e.label->path) : std::nullopt; }
Value fix_value(const EntryView& e) {
  return !e.decision.fix.empty() ? Value(e.decision.fix.command) : std::nullopt;
}
Value guard_value(const EntryView& e) {
  return e.verdict.role == EntryRole::lock ? Value(guard_state_name(e.verdict.guard)) : std::nullopt;
}
Value proof_name_value(const EntryView& e) {
  return e.verdict.proof != DeathProof::none ? Value(proof_name(e.verdict.proof)) : std::nullopt;
}
Value decision_value(const EntryView& e) {
  return Value(plan_action_name(e.decision.action));
}
Value why_value(const EntryView& e) { return Value(e.decision.why); }
Value next_step_value(const EntryView& e) {
  return !e.decision.next_step.empty() ? Value(e.decision.next_step) : std::nullopt;
}
Value suffix_value(const EntryView& e) {
  return !e.facts.parsed.suffix.empty() ? Value(e.facts.parsed.suffix) : std::nullopt;
}
Value type_value(const EntryView& e) {
  return e.facts.stat ? Value(file_type_name(e.facts.stat->type)) : std::nullopt;
}
Value user_value(const EntryView& e) { return e.user != nullptr ? Value(*e.user) : std::nullopt; }

// The times a field holds (nanoseconds since the epoch), or nothing.
using Time = std::optional<std::int64_t>;

Time started_time(const EntryView& e) {
  const ProcessInfo* info = process_info(e.facts);
  return info != nullptr ? Time(info->start_time_ns) : std::nullopt;
}
Time written_time(const EntryView& e) {
  return e.facts.owner && e.facts.owner->owner_stat ? Time(e.facts.owner->owner_stat->mtime_ns) : std::nullopt;
}
Time mtime_time(const EntryView& e) { return e.facts.stat ? Time(e.facts.stat->mtime_ns) : std::nullopt; }

std::string text_of(Value value) { return std::string(value.value_or("")); }
std::string text_of(Time time, bool millis = false) { return time ? format_time(*time, millis) : ""; }

/// The member `key`: the value, or null.
void member(JsonWriter& json, const JsonKey& key, Value value) {
  if (value) json.member_string(key, *value);
  else json.member_null(key);
}

/// The member `key`: the time (UTC, milliseconds), or null.
void member(JsonWriter& json, const JsonKey& key, Time time) {
  if (time) json.member_string(key, format_time_text(*time, true));
  else json.member_null(key);
}

// The text of each field, unescaped.
std::string kind_text(const EntryView& e) { return text_of(kind_value(e)); }
std::string key_text(const EntryView& e) { return text_of(key_value(e)); }
std::string role_text(const EntryView& e) { return std::string(role_name(e.verdict.role)); }
std::string state_text(const EntryView& e) { return std::string(state_name(e.verdict.state)); }
std::string reason_text(const EntryView& e) { return e.verdict.reason; }
std::string apnea_text(const EntryView& e) { return text_of(apnea_value(e)); }
std::string pid_field_text(const EntryView& e) {
  const Owner* owner = accepted_owner(e.facts);
  return owner != nullptr ? pid_text(owner->pid) : "";
}
std::string token_text(const EntryView& e) { return text_of(token_value(e)); }
std::string age_text(const EntryView& e) { return e.verdict.age_ns ? format_age(*e.verdict.age_ns) : ""; }
std::string command_text(const EntryView& e) { return text_of(command_value(e)); }
std::string started_text(const EntryView& e) { return text_of(started_time(e)); }
std::string label_text(const EntryView& e) { return text_of(label_value(e)); }
std::string fix_text(const EntryView& e) { return text_of(fix_value(e)); }
std::string written_text(const EntryView& e) { return text_of(written_time(e)); }
std::string name_text(const EntryView& e) { return e.facts.name; }
std::string path_text(const EntryView& e) { return e.facts.path; }
std::string attention_text(const EntryView& e) { return yes_no(e.verdict.needs_attention); }
std::string self_heals_text(const EntryView& e) { return yes_no(e.verdict.apnea_self_heals); }
std::string certain_text(const EntryView& e) { return yes_no(e.verdict.certain()); }
std::string guard_text(const EntryView& e) { return text_of(guard_value(e)); }
std::string proof_text(const EntryView& e) { return std::string(proof_class_name(e.verdict.proof_class)); }
std::string proof_name_text(const EntryView& e) { return text_of(proof_name_value(e)); }
std::string decision_text(const EntryView& e) { return text_of(decision_value(e)); }
std::string why_text(const EntryView& e) { return text_of(why_value(e)); }
std::string next_step_text(const EntryView& e) { return text_of(next_step_value(e)); }
std::string force_text(const EntryView& e) { return yes_no(e.decision.fix.forced); }
std::string clock_void_text(const EntryView& e) { return yes_no(e.verdict.death.clock_void); }
std::string lock_name_text(const EntryView& e) { return known(e) ? e.facts.parsed.lock_name() : ""; }
std::string suffix_text(const EntryView& e) { return text_of(suffix_value(e)); }
std::string type_text(const EntryView& e) { return text_of(type_value(e)); }
std::string mtime_text(const EntryView& e) { return text_of(mtime_time(e), true); }
std::string user_text(const EntryView& e) { return text_of(user_value(e)); }

// The JSON member(s) of each field.
void kind_json(JsonWriter& j, const EntryView& e) { member(j, "kind", kind_value(e)); }
void key_json(JsonWriter& j, const EntryView& e) { member(j, "key", key_value(e)); }
void role_json(JsonWriter& j, const EntryView& e) { j.member_string("role", role_name(e.verdict.role)); }
void state_json(JsonWriter& j, const EntryView& e) { j.member_string("state", state_name(e.verdict.state)); }
void reason_json(JsonWriter& j, const EntryView& e) { j.member_string("reason", e.verdict.reason); }
void apnea_json(JsonWriter& j, const EntryView& e) { member(j, "apnea_verdict", apnea_value(e)); }
void pid_json(JsonWriter& j, const EntryView& e) {
  j.key("pid");
  const Owner* owner = accepted_owner(e.facts);
  if (owner == nullptr) j.null();
  else if (std::isfinite(owner->pid)) j.number_text(pid_text(owner->pid));
  else j.string(pid_text(owner->pid));  // JSON has no Infinity
}
void token_json(JsonWriter& j, const EntryView& e) { member(j, "token", token_value(e)); }
void user_json(JsonWriter& j, const EntryView& e) { member(j, "user", user_value(e)); }
void age_json(JsonWriter& j, const EntryView& e) {
  if (e.verdict.age_ns) j.member_integer("age_ms", *e.verdict.age_ns / 1'000'000);
  else j.member_null("age_ms");
}
void command_json(JsonWriter& j, const EntryView& e) { member(j, "command", command_value(e)); }
void started_json(JsonWriter& j, const EntryView& e) { member(j, "started", started_time(e)); }
void label_json(JsonWriter& j, const EntryView& e) { member(j, "label", label_value(e)); }
void fix_json(JsonWriter& j, const EntryView& e) {
  member(j, "fix", fix_value(e));
  j.key("fix_argv");
  write_argv(j, e.decision.fix.argv);
}
void written_json(JsonWriter& j, const EntryView& e) { member(j, "written", written_time(e)); }
void name_json(JsonWriter& j, const EntryView& e) { j.member_string("name", e.facts.name); }
void path_json(JsonWriter& j, const EntryView& e) { j.member_string("path", e.facts.path); }
void attention_json(JsonWriter& j, const EntryView& e) { j.member_boolean("needs_attention", e.verdict.needs_attention); }
void self_heals_json(JsonWriter& j, const EntryView& e) { j.member_boolean("apnea_self_heals", e.verdict.apnea_self_heals); }
void certain_json(JsonWriter& j, const EntryView& e) { j.member_boolean("certain", e.verdict.certain()); }
void guard_json(JsonWriter& j, const EntryView& e) { member(j, "guard", guard_value(e)); }
void proof_json(JsonWriter& j, const EntryView& e) { j.member_string("proof", proof_class_name(e.verdict.proof_class)); }
void proof_name_json(JsonWriter& j, const EntryView& e) { member(j, "proof_name", proof_name_value(e)); }
void decision_json(JsonWriter& j, const EntryView& e) { member(j, "decision", decision_value(e)); }
void why_json(JsonWriter& j, const EntryView& e) { member(j, "decision_why", why_value(e)); }
void next_step_json(JsonWriter& j, const EntryView& e) { member(j, "next_step", next_step_value(e)); }
void force_json(JsonWriter& j, const EntryView& e) { j.member_boolean("force_required", e.decision.fix.forced); }
void clock_void_json(JsonWriter& j, const EntryView& e) { j.member_boolean("clock_void", e.verdict.death.clock_void); }
void lock_name_json(JsonWriter& j, const EntryView& e) {
  std::string scratch;
  if (known(e)) j.member_string("lock_name", lock_name_view(e.facts.name, e.facts.parsed, scratch));
  else j.member_null("lock_name");
}
void suffix_json(JsonWriter& j, const EntryView& e) { member(j, "suffix", suffix_value(e)); }
void type_json(JsonWriter& j, const EntryView& e) { member(j, "type", type_value(e)); }
void mtime_json(JsonWriter& j, const EntryView& e) { member(j, "mtime", mtime_time(e)); }

}  // namespace

const std::vector<FieldInfo>& all_fields() {
  using enum Field;
  constexpr Escape raw = Escape::none;
  constexpr Escape safe = Escape::printable;
  // One row a field, one line a row: name, header, description, JSON key, escape,
  // right-aligned, abbreviate, min width, shrink rank, cut, hide rank, Prometheus label,
  // text, JSON.
  static const std::vector<FieldInfo> fields = {
      {kind, "kind", "KIND", "repository or global-setup (empty for an unknown entry)", "kind", raw, false, 0, 0, 0, Cut::end, 6, "kind", kind_text, kind_json},
      {key, "key", "KEY", "the lock's 64-hex key (12 digits on a terminal)", "key", raw, false, 12, 0, 0, Cut::end, 4, "", key_text, key_json},
      {role, "role", "ROLE", "lock, candidate, tombstone, reclaim-guard or unknown", "role", raw, false, 0, 0, 0, Cut::end, 7, "role", role_text, role_json},
      {state, "state", "STATE", "live, stale, malformed, live-malformed, free, in-flight, debris, leftover, unknown", "state", raw, false, 0, 0, 0, Cut::end, 0, "state", state_text, state_json},
      {reason, "reason", "REASON", "the proof of death, the failed owner check, or why it lives", "reason", raw, false, 0, 0, 0, Cut::end, 0, "", reason_text, reason_json},
      {apnea, "apnea", "APNEA", "what Apnea 0.2.2 concludes: live, stale, malformed (locks only)", "apnea_verdict", raw, false, 0, 0, 0, Cut::end, 3, "", apnea_text, apnea_json},
      {pid, "pid", "PID", "the owner record's pid", "pid", raw, true, 0, 0, 0, Cut::end, 0, "", pid_field_text, pid_json},
      {token, "token", "TOKEN", "the owner record's token", "token", safe, false, 0, 9, 1, Cut::end, 2, "", token_text, token_json},
      {age, "age", "AGE", "now minus the entry's mtime", "age_ms", raw, true, 0, 0, 0, Cut::end, 0, "", age_text, age_json},
      {command, "command", "COMMAND", "the command line of the process that has the pid", "command", safe, false, 0, 10, 2, Cut::end, 5, "", command_text, command_json},
      {started, "started", "STARTED", "when the process that has the pid started (UTC)", "started", raw, false, 0, 0, 0, Cut::end, 1, "", started_text, started_json},
      {label, "label", "LABEL", "the repository or home the lock belongs to, when known", "label", safe, false, 0, 12, 4, Cut::start, 0, "", label_text, label_json},
      {fix, "fix", "FIX", "the apnea-locks reclaim command that removes it; - when none would", "fix", safe, false, 0, 20, 5, Cut::end, 0, "", fix_text, fix_json},
      {written, "written", "WRITTEN", "when owner.json was written (its mtime, UTC)", "written", raw, false, 0, 0, 0, Cut::end, 0, "", written_text, written_json},
      {name, "name", "NAME", "the entry's name in the lock area", "name", safe, false, 0, 16, 3, Cut::end, 0, "", name_text, name_json},
      {path, "path", "PATH", "the entry's path", "path", safe, false, 0, 16, 3, Cut::start, 0, "", path_text, path_json},
      {attention, "attention", "ATTENTION", "yes when a human (or reclaim) must act", "needs_attention", raw, false, 0, 0, 0, Cut::end, 0, "", attention_text, attention_json},
      {self_heals, "self-heals", "SELF-HEALS", "yes when Apnea reclaims it on its next run", "apnea_self_heals", raw, false, 0, 0, 0, Cut::end, 0, "", self_heals_text, self_heals_json},
      {certain, "certain", "CERTAIN", "yes when the proof of death needs no clock or trust", "certain", raw, false, 0, 0, 0, Cut::end, 0, "", certain_text, certain_json},
      {guard, "guard", "GUARD", "a lock's reclaim guard: none, in-flight, leftover", "guard", raw, false, 0, 0, 0, Cut::end, 0, "", guard_text, guard_json},
      {proof, "proof", "PROOF", "how strong the proof of death is: certain, evidence, none", "proof", raw, false, 0, 0, 0, Cut::end, 0, "", proof_text, proof_json},
      {proof_name, "proof-name", "PROOF-NAME", "the proof of death (pid-dead, pid-reused, ...)", "proof_name", raw, false, 0, 0, 0, Cut::end, 0, "", proof_name_text, proof_name_json},
      {decision, "decision", "DECISION", "what plain reclaim would do now: keep, remove, refuse", "decision", raw, false, 0, 0, 0, Cut::end, 0, "", decision_text, decision_json},
      {why, "why", "WHY", "the proof reclaim would act on, or what blocks it", "decision_why", safe, false, 0, 16, 3, Cut::end, 0, "", why_text, why_json},
      {next_step, "next-step", "NEXT-STEP", "for a refusal, or a young guard kept: what would unblock it", "next_step", safe, false, 0, 16, 3, Cut::end, 0, "", next_step_text, next_step_json},
      {force, "force", "FORCE", "yes when only a forced reclaim would remove it", "force_required", raw, false, 0, 0, 0, Cut::end, 0, "", force_text, force_json},
      {clock_void, "clock-void", "CLOCK-VOID", "yes when clock evidence is void (the clock stepped)", "clock_void", raw, false, 0, 0, 0, Cut::end, 0, "", clock_void_text, clock_void_json},
      {lock_name, "lock-name", "LOCK-NAME", "the name of the lock the entry belongs to", "lock_name", raw, false, 0, 16, 3, Cut::end, 0, "", lock_name_text, lock_name_json},
      {suffix, "suffix", "SUFFIX", "a candidate's token or a tombstone's uuid", "suffix", safe, false, 0, 9, 1, Cut::end, 0, "", suffix_text, suffix_json},
      {type, "type", "TYPE", "the entry's file type (directory, file, symlink, ...)", "type", raw, false, 0, 0, 0, Cut::end, 0, "", type_text, type_json},
      {mtime, "mtime", "MTIME", "the entry's mtime (UTC, milliseconds)", "mtime", raw, false, 0, 0, 0, Cut::end, 0, "", mtime_text, mtime_json},
      {user, "user", "USER", "the account whose lock area holds the entry (--all-users; the uid when it has no name)", "user", safe, false, 0, 0, 0, Cut::end, 0, "", user_text, user_json},
  };
  return fields;
}

const std::vector<Field>& default_fields() {
  using enum Field;
  static const std::vector<Field> fields = {kind, key,     role,    state,   reason, apnea, pid,
                                            token, age,    command, started, label,  fix};
  return fields;
}

const FieldInfo& field_info(Field field) { return all_fields()[static_cast<std::size_t>(field)]; }

std::expected<std::vector<Field>, std::string> parse_fields(std::string_view spec) {
  std::vector<Field> fields;
  if (spec.starts_with('+')) {
    fields = default_fields();
    spec.remove_prefix(1);
  }
  for (std::string_view name : detail::split_parts(spec, ',')) {
    if (name.empty()) continue;
    const FieldInfo* found = nullptr;
    for (const auto& info : all_fields()) {
      if (info.name.size() != name.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i)
        same = std::tolower(static_cast<unsigned char>(name[i])) == info.name[i];
      if (same) found = &info;
    }
    if (found == nullptr)
      return std::unexpected(fmt::format("unknown column '{}' (see 'apnea-locks status -o help')",
                                         printable(name)));
    fields.push_back(found->field);
  }
  if (fields.empty()) return std::unexpected(std::string("no columns given"));
  return fields;
}

std::string field_text(Field field, const EntryView& entry) {
  const FieldInfo& info = field_info(field);
  std::string text = info.text(entry);
  return info.escape == Escape::printable ? printable(text) : text;
}

TableColumn column_of(Field field, bool fit, bool hide) {
  const FieldInfo& info = field_info(field);
  TableColumn column;
  column.header = std::string(info.header);
  column.right_aligned = info.right_aligned;
  column.min_width = fit ? info.min_width : 0;
  column.shrink_rank = info.shrink_rank;
  column.cut = info.cut;
  column.hide_rank = fit && hide ? info.hide_rank : 0;
  return column;
}

std::string field_cell(Field field, const EntryView& entry, bool terminal) {
  const FieldInfo& info = field_info(field);
  std::string text = field_text(field, entry);
  if (terminal && info.abbreviate != 0 && text.size() > info.abbreviate) text.resize(info.abbreviate);
  return text.empty() ? "-" : text;
}

void write_fields_json(JsonWriter& json, const EntryView& entry, const std::vector<Field>& fields) {
  json.begin_object();
  for (Field field : fields) field_info(field).json(json, entry);
  json.end_object();
}

const std::vector<Field>& prometheus_label_fields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> out;
    for (const FieldInfo& info : all_fields())
      if (!info.prometheus_label.empty()) out.push_back(info.field);
    return out;
  }();
  return fields;
}

std::string columns_help(std::size_t width) {
  if (width == 0) width = 80;
  std::size_t name_width = 0;
  for (const FieldInfo& info : all_fields()) name_width = std::max(name_width, info.name.size());
  const std::string indent(name_width + 4, ' ');
  std::string out = "Available output columns:\n";
  for (const FieldInfo& info : all_fields()) {
    const std::string line = fmt::format("  {:<{}}  {}", info.name, name_width, info.description);
    out += wrap(line, width, indent) + "\n";
  }
  std::string defaults;
  for (Field field : default_fields()) defaults += (defaults.empty() ? "" : ",") + std::string(field_info(field).name);
  out += wrap(fmt::format("Default: {}. -o +COL,... adds to the defaults; names are case-insensitive.",
                          defaults),
              width) +
         "\n";
  return out;
}

}  // namespace apnea_locks::cli
