#include "cli/entry_report.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>

#include "apnea_locks/owner.h"
#include "cli/time_text.h"

namespace apnea_locks::cli {

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
  auto text_or_null = [&](const JsonKey& key, bool present, std::string_view text) {
    if (present) json.member_string(key, text);
    else json.member_null(key);
  };
  auto integer_or_null = [&](const JsonKey& key, bool present, std::int64_t value) {
    if (present) json.member_integer(key, value);
    else json.member_null(key);
  };
  json.begin_object();
  for (const FieldInfo& info : all_fields()) info.json(json, entry);
  if (verdict.pids_unknown) {
    json.member_null("named_pids");
  } else {
    json.key("named_pids").begin_array();
    for (const auto& [pid, process] : facts.named) {
      if (std::isfinite(pid)) json.number_text(pid_text(pid));
      else json.string(pid_text(pid));  // 1e400: JSON has no Infinity
    }
    json.end_array();
  }
  if (verdict.death.blocker) {
    const ProcessInfo& b = *verdict.death.blocker;
    json.key("blocker").begin_object();
    json.member_integer("pid", b.pid);
    json.key("nspid").begin_array();
    for (std::int64_t n : b.nspid) json.integer(n);
    json.end_array();
    integer_or_null("uid", b.uids_known, b.uids[0]);
    json.member_string("command", b.command);
    text_or_null("started", b.start_time_ns > 0, b.start_time_ns > 0 ? format_time(b.start_time_ns, true) : "");
    json.end_object();
  } else {
    json.member_null("blocker");
  }
  if (facts.owner && !facts.owner->owner) {
    const OwnerRejection& rejection = facts.owner->owner.error();
    json.key("owner_error").begin_object();
    json.member_string("reason", rejection.reason());
    json.member_string("detail", rejection.detail);
    json.end_object();
  } else {
    json.member_null("owner_error");
  }
  if (facts.process) {
    const ProcessInfo* info = facts.process->info ? &*facts.process->info : nullptr;
    json.key("process").begin_object();
    json.member_string("signal", signal_answer(facts.process->signal_errno));
    json.member_boolean("exists", info != nullptr);
    text_or_null("state", info != nullptr, info != nullptr ? std::string_view(&info->state, 1) : "");
    integer_or_null("uid", info != nullptr, info != nullptr ? info->uid : 0);
    integer_or_null("tgid", info != nullptr, info != nullptr ? info->tgid : 0);
    text_or_null("start_time", info != nullptr, info != nullptr ? format_time(info->start_time_ns, true) : "");
    text_or_null("command", info != nullptr, info != nullptr ? std::string_view(info->command) : "");
    json.end_object();
  } else {
    json.member_null("process");
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
    case DeathProof::pid_is_kernel_thread:
      return "the pid now names a kernel thread, which no Apnea can be, so it was recycled";
    case DeathProof::pid_reused:
      return "the process started after owner.json was written (clock-based: reclaim needs --force)";
    case DeathProof::predates_boot:
      return "owner.json was written before the last boot (clock-based: reclaim needs --force)";
    case DeathProof::pid_not_runtime:
      return "the pid now names a process that runs no recognised runtime (Node, Bun, Deno, "
             "Electron, apnea-locks), so it is not the Apnea that wrote the record (reclaim needs "
             "--force)";
    case DeathProof::operator_word:
      return "the operator said the process with that pid and start time is not the lock's Apnea "
             "(--not-owner, with --force)";
  }
  return "";
}

}  // namespace apnea_locks::cli
