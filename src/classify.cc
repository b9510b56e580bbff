#include "apnea_locks/classify.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>

#include "apnea_locks/protocol.h"
#include "detail/owner.h"
#include "detail/probe.h"
#include "detail/scan.h"

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
                                   EntryState::live_malformed,
                                   EntryState::free,      EntryState::in_flight,
                                   EntryState::debris,    EntryState::leftover,
                                   EntryState::unknown};
}  // namespace

std::string_view state_name(EntryState state) {
  switch (state) {
    case EntryState::live: return "live";
    case EntryState::stale: return "stale";
    case EntryState::malformed: return "malformed";
    case EntryState::live_malformed: return "live-malformed";
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

namespace {

/// Whether `word` holds a byte no text output shows as it is (detail::must_escape), or a `|`,
/// which Nagios output writes as `\x7c` (nagios_text): in `$'...'` that escape still names
/// a `|` when pasted.
bool needs_escapes(std::string_view word) {
  if (word.find('|') != std::string_view::npos) return true;
  for (std::size_t at = 0; at < word.size();) {
    const detail::Utf8Step step = detail::utf8_step(word.substr(at));
    if (detail::must_escape(step)) return true;
    at += step.length;
  }
  return false;
}

/// Appends `word` as bash's and POSIX 2024's ANSI-C quoting, `$'...'`, to `out`: printable
/// ASCII as is but `\` and `'` (as `\\` and `\'`), every other byte as `\xHH`, and so is a
/// hex digit right after such an escape (POSIX leaves `\x` with more than two hex digits
/// unspecified). Printable ASCII only, so the text escaper leaves it as it is.
void append_ansi_c_word(std::string& out, std::string_view word) {
  out += "$'";
  bool after_hex = false;  // the last thing written was a \xHH escape
  for (char c : word) {
    const auto byte = static_cast<unsigned char>(c);
    const bool hex_digit = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    after_hex = byte < 0x20 || byte >= 0x7f || c == '|' || (after_hex && hex_digit);
    if (after_hex) {
      out += fmt::format("\\x{:02x}", byte);
      continue;
    }
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  out += '\'';
}

/// Appends `word` quoted for a POSIX shell when it needs quoting (else as it is) to `out`:
/// `$'...'` when a byte needs an escape (PROTOCOL.md section 10), so that the word pasted
/// into a shell names exactly its bytes; else single quotes.
void append_shell_word(std::string& out, std::string_view word) {
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
  if (plain && word.front() != '=') {
    out.append(word);
    return;
  }
  if (needs_escapes(word)) {
    append_ansi_c_word(out, word);
    return;
  }
  out += '\'';
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
}

}  // namespace

std::string shell_word(std::string_view word) {
  std::string out;
  out.reserve(word.size() + 2);
  append_shell_word(out, word);
  return out;
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::size_t size = 0;
  for (const std::string& word : argv) size += word.size() + 3;
  std::string out;
  out.reserve(size);
  for (const std::string& word : argv) {
    if (!out.empty()) out += ' ';
    append_shell_word(out, word);
  }
  return out;
}

namespace {

/// Why a process not proven dead counts as alive.
std::string_view live_reason(const ProcessFacts& facts, const DeathJudgement& death) {
  if (death.clock_void) return "clock-void";
  if (facts.signal_errno == ESRCH && death.blocker) return "pid-in-namespace";
  if (facts.signal_errno == 0) return "pid-alive";
  if (facts.signal_errno == EPERM) return "pid-eperm";
  if (facts.signal_errno == -1) return "pid-unsignalable";
  return "pid-unprovable";
}

std::optional<std::int64_t> age_of(const std::optional<FileStat>& stat, std::int64_t now_ns) {
  if (!stat) return std::nullopt;
  return now_ns - stat->mtime_ns;  // a future mtime shows a negative age, never clamped
}

/// The accepted owner's probe when `named` lacks its pid (facts gathered by hand), else null.
const ProcessFacts* unnamed_owner(const EntryFacts& facts) {
  if (!facts.owner || !facts.owner->owner || !facts.process) return nullptr;
  const double pid = facts.owner->owner->pid;
  const bool named = std::any_of(facts.named.begin(), facts.named.end(),
                                 [&](const auto& n) { return n.first == pid; });
  return named ? nullptr : &*facts.process;
}

/// True when the record names no pid at all (empty, binary, no `pid` anywhere) and was read.
bool names_no_pid(const EntryFacts& facts) {
  return !facts.pids_unknown && facts.named.empty() && unnamed_owner(facts) == nullptr;
}

/// Calls `visit(pid, probe)` for every pid the record names: `named`, then the accepted
/// owner's pid when `named` lacks it (facts gathered by hand).
template <class Visit>
void for_each_named(const EntryFacts& facts, Visit&& visit) {
  for (const auto& [pid, process] : facts.named) visit(pid, process);
  if (const ProcessFacts* owner = unnamed_owner(facts)) visit(facts.owner->owner->pid, *owner);
}

/// The judgement over every pid the record names: the weakest one decides (a pid not proven
/// dead makes the whole record "may be alive"). Records `death`, `proof`, `proof_class`,
/// `certain` and `blocking_pid` in `verdict`; the reason text of the deciding pid returned.
std::string judge_named(const EntryFacts& facts, const JudgingSettings& settings, Verdict& verdict) {
  verdict.death = DeathJudgement{};
  verdict.death.remote_filesystem = !settings.host.local_filesystem;
  std::string reason;
  bool first = true;
  const std::int64_t written =
      facts.written_ns != 0 ? facts.written_ns
                            : (facts.owner && facts.owner->owner_stat ? facts.owner->owner_stat->mtime_ns : 0);
  for_each_named(facts, [&](double pid, const ProcessFacts& process) {
    const DeathJudgement judged =
        judge_death(process, settings.host, settings.area_uid, written, settings.reuse_tolerance,
                    settings.not_owners);
    bool deciding = first;  // the first pid's proof stands until a weaker one comes
    if (first) {
      const bool remote = verdict.death.remote_filesystem;
      verdict.death = judged;
      verdict.death.remote_filesystem = remote || judged.remote_filesystem;
    } else {
      deciding = verdict.death.merge(judged);
    }
    if (deciding) {
      reason = judged.proof == ProofClass::none ? std::string(live_reason(process, judged))
                                                : std::string(proof_name(judged.reason));
      verdict.blocking_pid = judged.proof == ProofClass::none ? pid_text(pid) : std::string();
    }
    first = false;
  });
  verdict.proof_class = verdict.death.proof;
  verdict.proof = verdict.proof_class == ProofClass::none ? DeathProof::none : verdict.death.reason;
  return reason;
}

/// True when proof 4's test shows `process` to run as another account than the area's and
/// it is not root's (root may run Apnea for any account).
bool another_accounts(const ProcessInfo& process, const JudgingSettings& settings) {
  return detail::another_account(process, settings.host, settings.area_uid) &&
         std::ranges::none_of(process.uids, [](std::uint32_t uid) { return uid == 0; });
}

/// The reclaim guard of a lock (or the guard entry itself) as a paused process may hold it
/// (PROTOCOL.md section 10, the guard row): the first paused process not shown to be
/// another account's that started no later than 60 s after the guard's ctime (every one
/// when the clock is void or its start time is unknown).
void judge_guard_holder(const FileStat& guard, const JudgingSettings& settings, Verdict& verdict) {
  verdict.guard_checked = settings.paused.has_value();
  if (!settings.paused) return;
  constexpr std::int64_t minute_ns = 60'000'000'000;
  const bool clock_trusted = !settings.host.clock_void();
  for (const ProcessInfo& process : *settings.paused) {
    if (process.kernel_thread || another_accounts(process, settings)) continue;
    // ctime, not mtime: an mtime can be set back, a ctime only moves forward.
    if (clock_trusted && process.start_time_ns > 0 && process.start_time_ns > guard.ctime_ns + minute_ns)
      continue;
    verdict.guard_blocker = process;
    return;
  }
}

/// Whether a guard of age `age_ns` is left over. What it shows, by the clock as it is; the
/// removal rule (policy.h) also asks that the clock is not void.
bool guard_old(std::int64_t age_ns, const JudgingSettings& settings) {
  return age_ns >= settings.guard_threshold.count();
}

bool judge_record_pids(const EntryFacts& facts, const JudgingSettings& settings, Verdict& verdict);

/// A changed record's possible owners (PROTOCOL.md section 10): the first process of the
/// area's uid running a recognised runtime that started no later than 60 s after the lock
/// was made (its birth time; without one, the latest of the directory's and owner.json's
/// mtime and ctime). A void clock makes every such process count.
/// True when the working directory `cwd`, or one of its ancestors, is where `facts`'s lock
/// is taken (its name is the lock's): that process runs in the lock's repository (or home).
bool works_in_lock(const EntryFacts& facts, std::string_view cwd) {
  if (cwd.empty() || !cwd.starts_with('/')) return false;
  const LockKind kind = facts.parsed.kind;
  const std::string wanted = facts.parsed.lock_name();
  for (std::string_view at = cwd;;) {
    if (lock_name(kind, lock_key(kind, at)) == wanted) return true;
    if (at == "/") return false;
    const std::size_t slash = at.rfind('/');
    at = slash == 0 ? std::string_view("/") : at.substr(0, slash);
  }
}

void judge_possible_owners(const EntryFacts& facts, const JudgingSettings& settings, Verdict& verdict) {
  verdict.owners_needed = true;
  verdict.owners_checked = settings.runtimes.has_value();
  if (!settings.runtimes) return;
  // When the lock was made: its directory's birth time; without one, the latest of the
  // directory's and owner.json's mtime and ctime (either may be missing: a pid-less entry).
  const OwnerRead& read = *facts.owner;
  const std::optional<FileStat>& dir = read.lock_stat ? read.lock_stat : facts.stat;
  std::int64_t made = 0;
  if (dir && dir->birth_ns != 0) {
    made = dir->birth_ns;
  } else {
    for (const std::optional<FileStat>* stat : {&dir, &read.owner_stat})
      if (*stat) made = std::max({made, (*stat)->mtime_ns, (*stat)->ctime_ns});
  }
  if (made == 0) made = settings.now_ns;  // nothing stat'ed: every process started before now
  constexpr std::int64_t minute_ns = 60'000'000'000;
  const bool clock_trusted = !settings.host.clock_void();
  for (const ProcessInfo& process : *settings.runtimes) {
    // Proof 4: another account's by all four uids (root's too, in an area that is not root's);
    // a zombie holds nothing.
    if (detail::another_account(process, settings.host, settings.area_uid) || detail::exited(process)) continue;
    if (std::ranges::any_of(settings.not_owners, [&](const NotOwner& word) { return names_process(word, process); })) {
      verdict.operator_cleared.push_back(process);  // the operator's word: not this lock's Apnea
      continue;
    }
    if (!clock_trusted || process.start_time_ns <= 0 || process.start_time_ns <= made + minute_ns)
      verdict.possible_owners.push_back(process);
  }
  // Grouped by application, those working in the lock's repository (or home) first: each
  // working directory hashed once, not in every comparison.
  std::vector<std::pair<bool, ProcessInfo>> keyed;
  for (ProcessInfo& process : verdict.possible_owners) {
    const bool here = works_in_lock(facts, process.cwd);
    keyed.emplace_back(here, std::move(process));
  }
  std::ranges::stable_sort(keyed, [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first;
    return a.second.executable < b.second.executable;
  });
  verdict.possible_owners.clear();
  for (auto& [here, process] : keyed) verdict.possible_owners.push_back(std::move(process));
}

/// Judges the owner record of a lock, candidate or tombstone; true when every pid it names
/// is proven dead (or it names none), false when one may be alive. A record changed after
/// it was published proves nothing about its owner: its proof is evidence at most.
bool judge_record(const EntryFacts& facts, const JudgingSettings& settings, Verdict& verdict) {
  const bool dead = judge_record_pids(facts, settings, verdict);
  if (needs_possible_owners(facts, settings)) judge_possible_owners(facts, settings, verdict);
  const auto& read = *facts.owner;
  if (read.lock_stat && read.owner_stat &&
      record_changed(*read.lock_stat, *read.owner_stat, settings.reuse_tolerance)) {
    verdict.record_changed = true;
    if (verdict.proof_class == ProofClass::certain) {
      verdict.proof_class = ProofClass::evidence;
      verdict.death.proof = ProofClass::evidence;
    }
  }
  return dead;
}

/// judge_record's reading of the pids the record names.
bool judge_record_pids(const EntryFacts& facts, const JudgingSettings& settings, Verdict& verdict) {
  const auto& read = *facts.owner;
  if (!read.owner) verdict.failed_check = read.owner.error().reason();
  verdict.pids_unknown = facts.pids_unknown;
  verdict.truncated_pid = facts.truncated_pid;
  verdict.pidless = names_no_pid(facts);
  verdict.filesystem = settings.host.filesystem;
  if (verdict.pids_unknown || verdict.pidless) {
    verdict.death.remote_filesystem = !settings.host.local_filesystem;
    verdict.reason = verdict.failed_check.empty() ? "pid-unprobed" : verdict.failed_check;
    return !verdict.pids_unknown;
  }
  verdict.reason = judge_named(facts, settings, verdict);
  return verdict.proof_class != ProofClass::none;
}

void classify_lock(const EntryFacts& facts, const JudgingSettings& settings, Verdict& verdict) {
  if (facts.kept_changing) {
    verdict.state = EntryState::in_flight;
    verdict.apnea_verdict = ApneaVerdict::raced;
    verdict.reason = "changed-during-scan";
    return;
  }
  if (facts.guard) {
    verdict.guard_age_ns = guard_age(*facts.guard, settings.now_ns);
    verdict.guard = guard_old(*verdict.guard_age_ns, settings) ? GuardState::leftover : GuardState::in_flight;
    if (verdict.guard == GuardState::leftover) judge_guard_holder(*facts.guard, settings, verdict);
  }
  const auto& read = *facts.owner;
  const bool dead = judge_record(facts, settings, verdict);
  if (!read.owner) {
    verdict.apnea_verdict = ApneaVerdict::malformed;
    verdict.needs_attention = true;
    if (!dead) {
      verdict.state = verdict.pids_unknown ? EntryState::malformed : EntryState::live_malformed;
      verdict.reason = verdict.failed_check;
      return;
    }
    verdict.state = EntryState::malformed;
    verdict.reason = verdict.failed_check;
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
  if (!dead) {
    verdict.state = EntryState::live;
    // Apnea calls it stale (its pid is gone) and will refuse to run, but another pid the
    // record names may be alive: a human must look.
    verdict.needs_attention = !apnea_live;
    return;
  }
  verdict.state = EntryState::stale;
  if (verdict.record_changed) verdict.reason = "record-changed";
  const std::int64_t grace_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(repository_reclaim_grace).count();
  verdict.apnea_self_heals = facts.parsed.kind == LockKind::repository && !apnea_live &&
                             verdict.age_ns && *verdict.age_ns >= grace_ns &&
                             verdict.guard == GuardState::none;
  // A dead owner needs a human unless Apnea reclaims it by itself, which it cannot while any
  // reclaim guard is there: a guard of any age makes Apnea refuse ("reclamation is guarded").
  // A working guard lives for milliseconds, so one a survey sees is almost always left by a
  // crash, and a survey that catches a real reclamation sees the lock gone on its next pass.
  verdict.needs_attention = !verdict.apnea_self_heals;
}

/// Candidates and tombstones: in flight while their writer may still be running, or while
/// a record naming no pid is younger than the guard age (by ctime).
void classify_transient(const EntryFacts& facts, const JudgingSettings& settings, Verdict& verdict) {
  if (facts.guard) {
    verdict.guard_age_ns = guard_age(*facts.guard, settings.now_ns);
    if (guard_old(*verdict.guard_age_ns, settings)) judge_guard_holder(*facts.guard, settings, verdict);
  }
  const bool dead = judge_record(facts, settings, verdict);
  bool gone = dead;
  if (verdict.pidless || verdict.pids_unknown) {
    const std::int64_t changed = facts.stat ? facts.stat->ctime_ns : settings.now_ns;
    gone = settings.now_ns - changed >= settings.guard_threshold.count();
  }
  if (!gone) {
    verdict.state = EntryState::in_flight;
    return;
  }
  verdict.state = EntryState::debris;
  if (verdict.record_changed && !verdict.pidless && !verdict.pids_unknown) verdict.reason = "record-changed";
  verdict.needs_attention = true;
}

void classify_guard(const EntryFacts& facts, const JudgingSettings& settings, Verdict& verdict) {
  if (facts.stat) verdict.guard_age_ns = guard_age(*facts.stat, settings.now_ns);
  if (verdict.guard_age_ns && !guard_old(*verdict.guard_age_ns, settings)) {
    verdict.state = EntryState::in_flight;
    verdict.reason = "guard-recent";
    return;
  }
  verdict.state = EntryState::leftover;
  verdict.reason = "guard-abandoned";
  verdict.needs_attention = true;
  if (facts.stat) judge_guard_holder(*facts.stat, settings, verdict);
  if (verdict.guard_blocker) verdict.reason = "guard-holder-paused";
}

}  // namespace

std::int64_t guard_age(const FileStat& guard, std::int64_t now_ns) {
  return now_ns - guard.mtime_ns;
}

bool record_changed(const FileStat& directory, const FileStat& owner_file,
                    std::chrono::nanoseconds tolerance) {
  const std::int64_t tolerance_ns = std::min(tolerance, default_reuse_tolerance).count();
  if (owner_file.ctime_ns > directory.ctime_ns + tolerance_ns) return true;
  if (owner_file.birth_ns != 0) {
    if (owner_file.ctime_ns - owner_file.birth_ns > tolerance_ns) return true;
    if (directory.birth_ns != 0 && (directory.birth_ns > owner_file.birth_ns ||
                                    owner_file.birth_ns - directory.birth_ns > tolerance_ns))
      return true;
  }
  return false;
}

bool needs_possible_owners(const EntryFacts& facts, const JudgingSettings& settings) {
  if (!detail::has_owner_record(facts.parsed.role) || !facts.owner) return false;
  const OwnerRead& read = *facts.owner;
  if (read.lock_stat && read.owner_stat &&
      record_changed(*read.lock_stat, *read.owner_stat, settings.reuse_tolerance))
    return true;
  if (facts.parsed.role == EntryRole::lock && !read.owner) return true;  // malformed
  return names_no_pid(facts);
}

Verdict classify(const EntryFacts& facts, const JudgingSettings& settings, const EntryLabel*) {
  Verdict verdict;
  verdict.role = facts.parsed.role;
  verdict.age_ns = age_of(facts.stat, settings.now_ns);
  verdict.filesystem = settings.host.filesystem;
  if (settings.host.clock_void()) verdict.clock_void_why = settings.host.why_clock_void();
  verdict.death.remote_filesystem = !settings.host.local_filesystem;
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
      if (facts.owner || facts.kept_changing) classify_lock(facts, settings, verdict);
      break;
    case EntryRole::candidate:
    case EntryRole::tombstone:
      if (facts.owner) classify_transient(facts, settings, verdict);
      break;
    case EntryRole::reclaim_guard:
      classify_guard(facts, settings, verdict);
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
