#include "cli/entry_report.h"

#include <fmt/format.h>

#include <cmath>

#include <cctype>
#include <cerrno>

#include "apnea_locks/owner.h"

namespace apnea_locks::cli {

const std::vector<FieldInfo>& all_fields() {
  static const std::vector<FieldInfo> fields = {
      {Field::kind, "kind", "KIND", false},
      {Field::key, "key", "KEY", false},
      {Field::role, "role", "ROLE", false},
      {Field::state, "state", "STATE", false},
      {Field::reason, "reason", "REASON", false},
      {Field::apnea, "apnea", "APNEA", false},
      {Field::pid, "pid", "PID", true},
      {Field::token, "token", "TOKEN", false},
      {Field::age, "age", "AGE", true},
      {Field::command, "command", "COMMAND", false},
      {Field::started, "started", "STARTED", false},
      {Field::written, "written", "WRITTEN", false},
      {Field::label, "label", "LABEL", false},
      {Field::fix, "fix", "FIX", false},
      {Field::name, "name", "NAME", false},
      {Field::path, "path", "PATH", false},
      {Field::attention, "attention", "ATTENTION", false},
      {Field::self_heals, "self-heals", "SELF-HEALS", false},
      {Field::certain, "certain", "CERTAIN", false},
      {Field::guard, "guard", "GUARD", false},
  };
  return fields;
}

const std::vector<Field>& default_fields() {
  static const std::vector<Field> fields = {
      Field::kind,    Field::key,     Field::role,    Field::state, Field::reason,
      Field::apnea,   Field::pid,     Field::token,   Field::age,   Field::command,
      Field::started, Field::label,   Field::fix};
  return fields;
}

const FieldInfo& field_info(Field field) {
  for (const auto& info : all_fields())
    if (info.field == field) return info;
  return all_fields().front();
}

std::expected<std::vector<Field>, std::string> parse_fields(std::string_view spec) {
  std::vector<Field> fields;
  if (spec.starts_with('+')) {
    fields = default_fields();
    spec.remove_prefix(1);
  }
  std::size_t at = 0;
  while (at <= spec.size()) {
    std::size_t comma = spec.find(',', at);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view name = spec.substr(at, comma - at);
    at = comma + 1;
    if (name.empty()) continue;
    const FieldInfo* found = nullptr;
    for (const auto& info : all_fields()) {
      if (info.name.size() != name.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i)
        same = std::tolower(static_cast<unsigned char>(name[i])) == info.name[i];
      if (same) found = &info;
    }
    if (found == nullptr) return std::unexpected(fmt::format("unknown column '{}'", name));
    fields.push_back(found->field);
  }
  if (fields.empty()) return std::unexpected(std::string("no columns given"));
  return fields;
}

namespace {

const Owner* accepted_owner(const EntryFacts& facts) {
  if (!facts.owner || !facts.owner->owner) return nullptr;
  return &*facts.owner->owner;
}

const ProcessInfo* process_info(const EntryFacts& facts) {
  if (!facts.process || !facts.process->info) return nullptr;
  return &*facts.process->info;
}

std::string yes_no(bool value) { return value ? "yes" : "no"; }

}  // namespace

std::string field_text(Field field, const EntryView& entry, bool truncate) {
  const EntryFacts& facts = entry.facts;
  const Verdict& verdict = entry.verdict;
  const Owner* owner = accepted_owner(facts);
  const ProcessInfo* info = process_info(facts);
  switch (field) {
    case Field::kind:
      return facts.parsed.role == EntryRole::unknown ? "" : std::string(kind_name(facts.parsed.kind));
    case Field::key:
      return truncate ? facts.parsed.key.substr(0, 12) : facts.parsed.key;
    case Field::role: return std::string(role_name(verdict.role));
    case Field::state: return std::string(state_name(verdict.state));
    case Field::reason: return verdict.reason;
    case Field::apnea:
      return verdict.apnea_verdict ? std::string(apnea_verdict_name(*verdict.apnea_verdict)) : "";
    case Field::pid: return owner != nullptr ? pid_text(owner->pid) : "";
    case Field::token:
      if (owner == nullptr) return "";
      return truncate ? shorten(printable(owner->token), 11) : printable(owner->token);
    case Field::age: return verdict.age_ns ? format_age(*verdict.age_ns) : "";
    case Field::command:
      if (info == nullptr) return "";
      return truncate ? shorten(printable(info->command), 40) : printable(info->command);
    case Field::started: return info != nullptr ? format_time(info->start_time_ns) : "";
    case Field::written:
      return facts.owner && facts.owner->owner_stat ? format_time(facts.owner->owner_stat->mtime_ns)
                                                    : "";
    case Field::label: return entry.label != nullptr ? printable(entry.label->path) : "";
    case Field::fix: return printable(verdict.fix);
    case Field::name: return printable(facts.name);
    case Field::path: return printable(facts.path);
    case Field::attention: return yes_no(verdict.needs_attention);
    case Field::self_heals: return yes_no(verdict.apnea_self_heals);
    case Field::certain: return yes_no(verdict.certain);
    case Field::guard:
      return verdict.role == EntryRole::lock ? std::string(guard_state_name(verdict.guard)) : "";
  }
  return "";
}

std::string signal_answer(int signal_errno) {
  if (signal_errno == 0) return "ok";
  if (signal_errno == -1) return "not-signalable";
  if (signal_errno == ESRCH) return "ESRCH";
  if (signal_errno == EPERM) return "EPERM";
  return fmt::format("errno-{}", signal_errno);
}

void write_entry_json(JsonWriter& json, const EntryView& entry) {
  const EntryFacts& facts = entry.facts;
  const Verdict& verdict = entry.verdict;
  const bool known = facts.parsed.role != EntryRole::unknown;
  auto text_or_null = [&](bool present, std::string_view text) {
    if (present) json.string(text);
    else json.null();
  };
  json.begin_object();
  json.key("name").string(facts.name);
  json.key("path").string(facts.path);
  json.key("role").string(role_name(verdict.role));
  json.key("kind");
  text_or_null(known, kind_name(facts.parsed.kind));
  json.key("key");
  text_or_null(known, facts.parsed.key);
  json.key("suffix");
  text_or_null(!facts.parsed.suffix.empty(), facts.parsed.suffix);
  json.key("lock_name");
  text_or_null(known, facts.parsed.lock_name());
  json.key("label");
  text_or_null(entry.label != nullptr, entry.label != nullptr ? entry.label->path : "");
  json.key("state").string(state_name(verdict.state));
  json.key("reason").string(verdict.reason);
  json.key("apnea_verdict");
  text_or_null(verdict.apnea_verdict.has_value(),
               verdict.apnea_verdict ? apnea_verdict_name(*verdict.apnea_verdict) : "");
  json.key("certain").boolean(verdict.certain);
  json.key("apnea_self_heals").boolean(verdict.apnea_self_heals);
  json.key("needs_attention").boolean(verdict.needs_attention);
  json.key("force_required").boolean(verdict.force_required);
  json.key("fix");
  text_or_null(!verdict.fix.empty(), verdict.fix);
  json.key("fix_argv");
  if (verdict.fix_argv.empty()) {
    json.null();
  } else {
    json.begin_array();
    for (const std::string& word : verdict.fix_argv) json.string(word);
    json.end_array();
  }
  json.key("proof").string(proof_class_name(verdict.proof_class));
  json.key("proof_name");
  text_or_null(verdict.proof != DeathProof::none, proof_name(verdict.proof));
  json.key("clock_void").boolean(verdict.death.clock_void);
  json.key("named_pids");
  if (verdict.pids_unknown) {
    json.null();
  } else {
    json.begin_array();
    for (const auto& [pid, process] : facts.named) {
      if (std::isfinite(pid)) json.number_text(pid_text(pid));
      else json.string(pid_text(pid));  // 1e400: JSON has no Infinity
    }
    json.end_array();
  }
  json.key("blocker");
  if (verdict.death.blocker) {
    const ProcessInfo& b = *verdict.death.blocker;
    json.begin_object();
    json.key("pid").integer(b.pid);
    json.key("nspid").begin_array();
    for (std::int64_t n : b.nspid) json.integer(n);
    json.end_array();
    json.key("uid");
    if (b.uids_known) json.integer(b.uids[0]);
    else json.null();
    json.key("command").string(b.command);
    json.key("started");
    text_or_null(b.start_time_ns > 0, b.start_time_ns > 0 ? format_time(b.start_time_ns, true) : "");
    json.end_object();
  } else {
    json.null();
  }
  if (entry.decision != nullptr) {
    json.key("decision").string(plan_action_name(entry.decision->action));
    json.key("decision_why").string(entry.decision->why);
    json.key("next_step");
    text_or_null(!entry.decision->next_step.empty(), entry.decision->next_step);
  }
  json.key("guard");
  text_or_null(verdict.role == EntryRole::lock, guard_state_name(verdict.guard));
  json.key("type");
  text_or_null(facts.stat.has_value(), facts.stat ? file_type_name(facts.stat->type) : "");
  json.key("age_ms");
  if (verdict.age_ns) json.integer(*verdict.age_ns / 1'000'000);
  else json.null();
  json.key("mtime");
  text_or_null(facts.stat.has_value(), facts.stat ? format_time(facts.stat->mtime_ns, true) : "");

  const Owner* owner = accepted_owner(facts);
  json.key("pid");
  if (owner != nullptr) json.number_text(pid_text(owner->pid));
  else json.null();
  json.key("token");
  text_or_null(owner != nullptr, owner != nullptr ? owner->token : "");
  json.key("written");
  const bool written = facts.owner && facts.owner->owner_stat;
  text_or_null(written, written ? format_time(facts.owner->owner_stat->mtime_ns, true) : "");
  json.key("owner_error");
  if (facts.owner && !facts.owner->owner) {
    const OwnerRejection& rejection = facts.owner->owner.error();
    json.begin_object();
    json.key("reason").string(rejection.reason());
    json.key("detail").string(rejection.detail);
    json.end_object();
  } else {
    json.null();
  }
  json.key("process");
  if (facts.process) {
    const ProcessInfo* info = process_info(facts);
    json.begin_object();
    json.key("signal").string(signal_answer(facts.process->signal_errno));
    json.key("exists").boolean(info != nullptr);
    json.key("state");
    text_or_null(info != nullptr, info != nullptr ? std::string(1, info->state) : "");
    json.key("uid");
    if (info != nullptr) json.integer(info->uid);
    else json.null();
    json.key("tgid");
    if (info != nullptr) json.integer(info->tgid);
    else json.null();
    json.key("start_time");
    text_or_null(info != nullptr, info != nullptr ? format_time(info->start_time_ns, true) : "");
    json.key("command");
    text_or_null(info != nullptr, info != nullptr ? info->command : "");
    json.end_object();
  } else {
    json.null();
  }
  json.end_object();
}

std::string_view proof_explanation(DeathProof proof) {
  switch (proof) {
    case DeathProof::none: return "no proof of death: the owner may be alive";
    case DeathProof::pid_out_of_range:
      return "the pid cannot exist (>= 4194304, the kernel's PID_MAX_LIMIT, or >= 2^31)";
    case DeathProof::pid_dead:
      return "kill(pid, 0) failed with ESRCH and no process in a nested PID namespace has it";
    case DeathProof::zombie: return "the process has exited and waits to be reaped";
    case DeathProof::pid_other_uid:
      return "the pid now belongs to another account, so it was recycled";
    case DeathProof::pid_is_thread:
      return "the pid now names a thread of another process, so it was recycled";
    case DeathProof::pid_reused:
      return "the process started after owner.json was written (clock-based: reclaim needs --force)";
    case DeathProof::predates_boot:
      return "owner.json was written before the last boot (clock-based: reclaim needs --force)";
  }
  return "";
}

}  // namespace apnea_locks::cli
