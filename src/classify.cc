#include "apnea_locks/classify.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>

#include "apnea_locks/lock.h"

namespace apnea_locks {

std::string_view apnea_verdict_name(ApneaVerdict verdict) {
  switch (verdict) {
    case ApneaVerdict::live: return "live";
    case ApneaVerdict::stale: return "stale";
    case ApneaVerdict::malformed: return "malformed";
    case ApneaVerdict::free: return "free";
    case ApneaVerdict::raced: return "raced";
  }
  return "malformed";
}

namespace {
constexpr std::array all_states = {EntryState::live,      EntryState::stale,  EntryState::malformed,
                                   EntryState::free,      EntryState::in_flight,
                                   EntryState::debris,    EntryState::leftover,
                                   EntryState::unknown};
}  // namespace

std::string_view state_name(EntryState state) {
  switch (state) {
    case EntryState::live: return "live";
    case EntryState::stale: return "stale";
    case EntryState::malformed: return "malformed";
    case EntryState::free: return "free";
    case EntryState::in_flight: return "in-flight";
    case EntryState::debris: return "debris";
    case EntryState::leftover: return "leftover";
    case EntryState::unknown: break;
  }
  return "unknown";
}

std::optional<EntryState> parse_state(std::string_view name) {
  for (EntryState state : all_states)
    if (state_name(state) == name) return state;
  return std::nullopt;
}

std::string_view guard_state_name(GuardState state) {
  switch (state) {
    case GuardState::none: return "none";
    case GuardState::in_flight: return "in-flight";
    case GuardState::leftover: return "leftover";
  }
  return "none";
}

std::string shell_word(std::string_view word) {
  static constexpr auto safe = [] {  // characters no POSIX shell treats specially
    std::array<bool, 256> table{};
    for (unsigned char c : std::string_view("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789/.-_+:,@%="))
      table[c] = true;
    return table;
  }();
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return safe[static_cast<unsigned char>(c)];
  });
  if (plain && word.front() != '=') return std::string(word);
  std::string out;
  out.reserve(word.size() + 2);
  out += '\'';
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
  return out;
}

namespace {

/// Why a process not proven dead counts as alive.
std::string_view live_reason(const ProcessFacts& facts) {
  if (facts.signal_errno == 0) return "pid-alive";
  if (facts.signal_errno == EPERM) return "pid-eperm";
  if (facts.signal_errno == -1) return "pid-unsignalable";
  return "pid-unprovable";
}

/// The `apnea-locks reclaim` command that would act on an entry.
std::string fix_command(const EntryFacts& facts, const ClassifyPolicy& policy,
                        const EntryLabel* label, bool force) {
  std::string command;
  command.reserve(64 + facts.path.size() +
                  (policy.lock_dir_option ? policy.lock_dir_option->size() : 0) +
                  (label != nullptr ? label->path.size() : 0));
  command += "apnea-locks reclaim";
  if (force) command += " --force";
  if (policy.lock_dir_option) command.append(" --lock-dir ").append(shell_word(*policy.lock_dir_option));
  if (facts.parsed.role == EntryRole::lock && label != nullptr) {
    command += label->kind == LockKind::global_setup ? " --home " : " --repo ";
    command += shell_word(label->path);
  } else {
    command.append(" ").append(shell_word(facts.path));
  }
  return command;
}

std::optional<std::int64_t> age_of(const std::optional<FileStat>& stat, std::int64_t now_ns) {
  if (!stat) return std::nullopt;
  return std::max<std::int64_t>(0, now_ns - stat->mtime_ns);
}

/// The judgement on the owner's death (none when there is no accepted owner or probe),
/// recorded in `verdict`: `proof` is none unless the judgement's class is at least evidence.
DeathProof proof_for(const EntryFacts& facts, const ClassifyPolicy& policy, Verdict& verdict) {
  if (!facts.owner || !facts.owner->owner || !facts.process) return DeathProof::none;
  const std::int64_t written_ns = facts.owner->owner_stat ? facts.owner->owner_stat->mtime_ns : 0;
  const DeathJudgement judged = judge_death(*facts.process, policy.host, policy.area_uid,
                                            written_ns, policy.reuse_tolerance_ns);
  verdict.proof_class = judged.proof;
  verdict.certain = judged.proof == ProofClass::certain;
  return judged.proof == ProofClass::none ? DeathProof::none : judged.reason;
}

void classify_lock(const EntryFacts& facts, const ClassifyPolicy& policy, const EntryLabel* label,
                   Verdict& verdict) {
  if (facts.kept_changing) {
    verdict.state = EntryState::in_flight;
    verdict.apnea_verdict = ApneaVerdict::raced;
    verdict.reason = "changed-during-scan";
    return;
  }
  if (facts.guard) {
    const std::int64_t guard_age = std::max<std::int64_t>(0, policy.now_ns - facts.guard->mtime_ns);
    verdict.guard = guard_age < policy.guard_threshold_ns ? GuardState::in_flight
                                                          : GuardState::leftover;
  }
  const auto& read = *facts.owner;
  if (!read.owner) {
    verdict.state = EntryState::malformed;
    verdict.apnea_verdict = ApneaVerdict::malformed;
    verdict.reason = read.owner.error().reason();
    verdict.force_required = true;
    verdict.needs_attention = true;
    verdict.fix = fix_command(facts, policy, label, true);
    return;
  }
  if (!facts.process) {  // never probed: fail closed, as Apnea would
    verdict.state = EntryState::live;
    verdict.apnea_verdict = ApneaVerdict::live;
    verdict.reason = "pid-unprobed";
    return;
  }
  const bool apnea_live = apnea_alive(*facts.process);
  verdict.apnea_verdict = apnea_live ? ApneaVerdict::live : ApneaVerdict::stale;
  verdict.proof = proof_for(facts, policy, verdict);
  if (verdict.proof == DeathProof::none) {
    verdict.state = EntryState::live;
    verdict.reason = live_reason(*facts.process);
    return;
  }
  verdict.state = EntryState::stale;
  verdict.reason = proof_name(verdict.proof);
  const std::int64_t grace_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(repository_reclaim_grace).count();
  verdict.apnea_self_heals = facts.parsed.kind == LockKind::repository && !apnea_live &&
                             verdict.age_ns && *verdict.age_ns >= grace_ns &&
                             verdict.guard == GuardState::none;
  // A guard in flight means someone is reclaiming it right now.
  verdict.needs_attention = !verdict.apnea_self_heals && verdict.guard != GuardState::in_flight;
  verdict.force_required = !verdict.certain || verdict.guard == GuardState::leftover;
  verdict.fix = fix_command(facts, policy, label, verdict.force_required);
}

/// Candidates and tombstones: in flight while their writer may still be running.
void classify_transient(const EntryFacts& facts, const ClassifyPolicy& policy, Verdict& verdict) {
  const auto& read = *facts.owner;
  bool gone = false;
  if (!read.owner) {
    // Written or removed right now (owner.json not yet complete, or already unlinked), or
    // left behind: only its age tells.
    verdict.reason = read.owner.error().reason();
    gone = verdict.age_ns && *verdict.age_ns >= policy.guard_threshold_ns;
  } else if (!facts.process) {
    verdict.reason = "pid-unprobed";
  } else {
    verdict.proof = proof_for(facts, policy, verdict);
    if (verdict.proof == DeathProof::none) {
      verdict.reason = live_reason(*facts.process);
    } else {
      verdict.reason = proof_name(verdict.proof);
      gone = true;
    }
  }
  if (!gone) {
    verdict.state = EntryState::in_flight;
    return;
  }
  verdict.state = EntryState::debris;
  verdict.needs_attention = true;
  verdict.force_required = true;
  verdict.fix = fix_command(facts, policy, nullptr, true);
}

void classify_guard(const EntryFacts& facts, const ClassifyPolicy& policy, Verdict& verdict) {
  if (verdict.age_ns && *verdict.age_ns < policy.guard_threshold_ns) {
    verdict.state = EntryState::in_flight;
    verdict.reason = "guard-recent";
    return;
  }
  verdict.state = EntryState::leftover;
  verdict.reason = "guard-abandoned";
  verdict.needs_attention = true;
  verdict.force_required = true;
  verdict.fix = fix_command(facts, policy, nullptr, true);
}

}  // namespace

Verdict classify(const EntryFacts& facts, const ClassifyPolicy& policy, const EntryLabel* label) {
  Verdict verdict;
  verdict.role = facts.parsed.role;
  verdict.age_ns = age_of(facts.stat, policy.now_ns);
  const bool has_owner_record = facts.parsed.role == EntryRole::lock ||
                                facts.parsed.role == EntryRole::candidate ||
                                facts.parsed.role == EntryRole::tombstone;
  const bool gone = !facts.stat || (has_owner_record && facts.owner && !facts.owner->owner &&
                                    facts.owner->owner.error().lock_vanished());
  if (gone && !facts.kept_changing) {
    verdict.state = EntryState::free;
    verdict.reason = "absent";
    verdict.age_ns.reset();
    if (facts.parsed.role == EntryRole::lock) verdict.apnea_verdict = ApneaVerdict::free;
    return verdict;
  }
  switch (facts.parsed.role) {
    case EntryRole::lock:
      if (facts.owner || facts.kept_changing) classify_lock(facts, policy, label, verdict);
      break;
    case EntryRole::candidate:
    case EntryRole::tombstone:
      if (facts.owner) classify_transient(facts, policy, verdict);
      break;
    case EntryRole::reclaim_guard:
      classify_guard(facts, policy, verdict);
      break;
    case EntryRole::unknown:
      verdict.state = EntryState::unknown;
      verdict.reason = "unrecognised-name";
      break;
  }
  if (verdict.reason.empty()) {  // a lock-like entry without an owner read: nothing to judge
    verdict.state = EntryState::unknown;
    verdict.reason = "not-read";
  }
  return verdict;
}

}  // namespace apnea_locks
