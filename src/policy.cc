#include "apnea_locks/policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "detail/policy.h"

namespace apnea_locks {

std::string_view plan_action_name(PlanAction action) {
  switch (action) {
    case PlanAction::keep: return "keep";
    case PlanAction::remove: return "remove";
    case PlanAction::refuse: return "refuse";
  }
  return "keep";
}

std::string_view removal_name(RemovalKind kind) {
  switch (kind) {
    case RemovalKind::none: return "none";
    case RemovalKind::lock_owner: return "reclaim";
    case RemovalKind::lock_malformed: return "reclaim-malformed";
    case RemovalKind::debris: return "remove-debris";
    case RemovalKind::guard: return "remove-guard";
  }
  return "none";
}

namespace {

constexpr std::string_view trust_visibility = "no process hidden from apnea-locks shares this temp directory";
constexpr std::string_view trust_malformed = "a malformed owner record names its writer's pids";
constexpr std::string_view trust_ownerless = "an ownerless entry older than --guard-age is abandoned";
constexpr std::string_view trust_runtime = "Apnea runs only in a recognised runtime (Node, Bun, Deno, Electron)";

Decision keep(std::string why) { return Decision{PlanAction::keep, RemovalKind::none, std::move(why), {}, {}, {}}; }

Decision refuse(std::string why, std::string next_step) {
  return Decision{PlanAction::refuse, RemovalKind::none, std::move(why), std::move(next_step), {}, {}};
}

Decision remove(RemovalKind kind, std::string why, std::vector<std::string> trusts = {}) {
  return Decision{PlanAction::remove, kind, std::move(why), {}, std::move(trusts), {}};
}

std::string seconds_text(std::int64_t ns) { return fmt::format("{}s", ns / 1'000'000'000); }
std::string seconds_text(std::chrono::nanoseconds ns) { return seconds_text(ns.count()); }

/// Whether an entry unchanged for `age` is older than --guard-age: never while the clock is
/// void (PROTOCOL.md section 9).
bool older_than_guard_age(const Verdict& verdict, std::int64_t age, const RemovalFlags& flags) {
  return verdict.clock_void_why.empty() && age >= flags.guard_age.count();
}

/// How long a guard has been unchanged as removal counts it (PROTOCOL.md section 10, the
/// guard row): since the latest of its mtime and ctime, where `age` is its age by mtime
/// (guard_age: what status shows). An mtime can be set back (`touch -d`); a ctime only moves
/// forward.
std::int64_t unchanged_for(std::int64_t age, const std::optional<FileStat>& guard) {
  if (!guard) return age;
  return age - std::max<std::int64_t>(0, guard->ctime_ns - guard->mtime_ns);
}

/// What a refusal adds when the clock is void: "" when it is not.
std::string void_clock_note(const Verdict& verdict) {
  if (verdict.clock_void_why.empty()) return {};
  return fmt::format("; the clock is void ({}), so no age counts as old enough", verdict.clock_void_why);
}

/// "pid 42 (node apnea, uid 1000, started ...)" for a carrier that may be the writer.
std::string carrier_text(const ProcessInfo& info) {
  std::string text = fmt::format("pid {}", info.pid);
  if (info.nspid.size() > 1) text += fmt::format(" (NSpid {})", fmt::join(info.nspid, " "));
  if (info.uids_known) text += fmt::format(" uid {}", info.uids[0]);
  if (!info.command.empty()) text += fmt::format(" '{}'", info.command);
  if (info.start_time_ns > 0) text += fmt::format(" started {}", utc_second_text(info.start_time_ns));
  return text;
}

/// The operator's way out for a process the refusal names (PROTOCOL.md section 10): "" when
/// it cannot be named (start time unknown).
std::string not_owner_step(const ProcessInfo& process, const EntryFacts& facts) {
  const std::string word = not_owner_text(process);
  if (word.empty()) return {};
  return fmt::format("; if pid {0} is not this lock's Apnea (ps -o pid,lstart,args -p {0}), "
                     "say so: apnea-locks reclaim --force --not-owner {1} {2}",
                     process.pid, word, shell_word(facts.path));
}

/// What blocks an entry whose named pids are not all proven dead.
std::string alive_blocker(const Verdict& verdict) {
  if (verdict.death.blocker) {
    std::string text = fmt::format("{} may be its writer and is alive", carrier_text(*verdict.death.blocker));
    if (verdict.death.word_mismatch && verdict.death.word_mismatch->pid == verdict.death.blocker->pid)
      text += " (its start time is not the one given to --not-owner: the pid was reused since)";
    return text;
  }
  return fmt::format("its owner pid {} is not proven dead ({})", verdict.blocking_pid, verdict.reason);
}

/// Who traces `traced`: the tracer's pid and command when /proc said, else where to look.
std::string tracer_text(const ProcessInfo& traced) {
  if (traced.tracer_pid <= 0)
    return fmt::format("a debugger or strace; its pid is TracerPid in /proc/{}/status", traced.pid);
  if (traced.tracer_command.empty())
    return fmt::format("tracer pid {}, a debugger or strace", traced.tracer_pid);
  return fmt::format("tracer pid {} '{}'", traced.tracer_pid, traced.tracer_command);
}

std::string stop_step(const Verdict& verdict, const EntryFacts& facts) {
  if (verdict.death.blocker && verdict.death.blocker->state == 'T') {
    // A stopped process takes SIGTERM only when it goes on: `kill PID` alone changes nothing.
    return fmt::format("pid {0} is stopped (state T): if it is a stuck Apnea, end it (kill {0}; "
                       "kill -CONT {0}: the signal waits until it goes on), then run reclaim again; "
                       "otherwise let it go on (kill -CONT {0}) and wait for it{1}",
                       verdict.death.blocker->pid, not_owner_step(*verdict.death.blocker, facts));
  }
  if (verdict.death.blocker && verdict.death.blocker->state == 't') {
    // Under a tracer even SIGKILL leaves it counted alive (a zombie with threads) until the
    // tracer detaches.
    return fmt::format("pid {0} is stopped by a tracer (state t; {1}): detach or quit the tracer first, "
                       "since until then even kill -9 leaves pid {0} alive; then, if it is a stuck "
                       "Apnea, end it (kill {0}) and run reclaim again{2}",
                       verdict.death.blocker->pid, tracer_text(*verdict.death.blocker),
                       not_owner_step(*verdict.death.blocker, facts));
  }
  if (verdict.death.blocker) {
    return fmt::format("if pid {0} is a stuck Apnea, stop it (kill {0}), then run reclaim again; "
                       "otherwise the lock is in use{1}",
                       verdict.death.blocker->pid, not_owner_step(*verdict.death.blocker, facts));
  }
  return fmt::format("make sure no process with pid {} writes {}, then run reclaim again",
                     verdict.blocking_pid, facts.path);
}

/// For a record Apnea rejects only for its mode (`owner-mode-NNNN`, `lock-mode-NNNN`) while
/// the pid it names is alive: the live owner is most likely the Apnea that wrote it, and
/// giving back the mode Apnea writes repairs it without removing anything. Nothing otherwise.
std::optional<std::string> mode_repair_step(const Verdict& verdict, const EntryFacts& facts) {
  std::optional<OwnerCheck> failed;
  if (facts.owner && !facts.owner->owner) failed = facts.owner->owner.error().check;
  const bool owner_mode = failed == OwnerCheck::owner_open_mode;
  const bool lock_mode = failed == OwnerCheck::lock_open_mode;
  if (!owner_mode && !lock_mode) return std::nullopt;
  const std::string pid = verdict.death.blocker ? fmt::format("{}", verdict.death.blocker->pid)
                                                : verdict.blocking_pid;
  const std::string path = owner_mode ? facts.path + "/owner.json" : facts.path;
  return fmt::format("if pid {} is the Apnea that holds this lock (ps -o pid,lstart,args -p {}), "
                     "give the record back the mode Apnea writes: chmod {} -- {} (it removes "
                     "nothing; Apnea then sees its live owner); otherwise stop pid {} or wait "
                     "for it to exit",
                     pid, pid, owner_mode ? "600" : "700", shell_word(path), pid);
}

std::string remote_step(const EntryFacts& facts) {
  return fmt::format("on every machine sharing this directory, check that no Apnea process "
                     "holds it (apnea-locks status there), then remove it by hand: rm -r -- {}",
                     shell_word(facts.path));
}

std::string unreadable_step(const EntryFacts& facts) {
  return fmt::format("read {}/owner.json by hand (as root if need be); if no pid it names is "
                     "alive, remove it: rm -r -- {}",
                     facts.path, shell_word(facts.path));
}

/// The refusal for an entry whose writer can never be proven dead from here: on a network
/// filesystem, or with an owner record that cannot be read. Nothing when it can.
std::optional<Decision> unprovable(const EntryFacts& facts, const Verdict& verdict) {
  if (verdict.death.remote_filesystem)
    return refuse(fmt::format("the lock area is on a {} filesystem: a writer on another machine "
                              "cannot be probed",
                              verdict.filesystem),
                  remote_step(facts));
  if (verdict.pids_unknown)
    return refuse(fmt::format("its owner record cannot be read ({}): it may name a live pid",
                              verdict.failed_check),
                  unreadable_step(facts));
  if (verdict.truncated_pid)
    return refuse(fmt::format("its owner record ends inside the digits of a pid ({}...): it names "
                              "every pid those digits begin, and not all of them can be proven dead",
                              *verdict.truncated_pid),
                  fmt::format("check that no process whose pid begins with {} is the Apnea that "
                              "holds it (ps -e -o pid=,lstart=,args= | grep '^ *{}'), then remove "
                              "it by hand: rm -r -- {}",
                              *verdict.truncated_pid, *verdict.truncated_pid, shell_word(facts.path)));
  return std::nullopt;
}

/// Why an entry that needs its possible owners ruled out (Verdict::owners_needed) proves
/// nothing about its owner by itself.
std::string damage_text(const Verdict& verdict) {
  if (verdict.record_changed) return "its owner record changed after it was published";
  if (verdict.pidless) return "its owner record names no pid";
  return fmt::format("its owner record is malformed ({})", verdict.failed_check);
}

/// The hand step where no age counts or a guard may be left by a crash: the check, then
/// `command -- PATH` (rmdir for a guard, rm -r for a record naming no pid).
std::string by_hand_step(std::string_view command, const std::string& path) {
  return fmt::format("check that no Apnea process of this account runs (ps -u \"$(id -u)\" -o "
                     "pid,stat,lstart,args), then {} -- {}",
                     command, shell_word(path));
}

std::optional<Decision> possible_owner_blocks(const EntryFacts& facts, const Verdict& verdict,
                                              const RemovalFlags& flags);

/// The next step of a refusal that --force would lift, when --force would refuse too (a
/// possible owner is alive): "needs --force" alone leads only to that refusal, so its
/// reason and next step are this one's. Nothing when --force may go on.
std::optional<std::string> force_refuses_too(const EntryFacts& facts, const Verdict& verdict,
                                             const RemovalFlags& flags) {
  const auto forced = possible_owner_blocks(facts, verdict, RemovalFlags{true, flags.guard_age});
  if (!forced) return std::nullopt;
  return fmt::format("needs --force, which refuses too: {}; {}", forced->why, forced->next_step);
}

/// What blocks an entry that --force removes only while no possible owner is alive
/// (PROTOCOL.md section 10: a record changed after it was published, a malformed lock, a
/// record naming no pid): without --force, a changed record itself (the other rows refuse
/// on their own); with it, a possible owner alive, or a process table that could not be
/// read. Nothing when --force may go on (then trusting that Apnea runs only in a
/// recognised runtime).
std::optional<Decision> possible_owner_blocks(const EntryFacts& facts, const Verdict& verdict,
                                              const RemovalFlags& flags) {
  if (!verdict.owners_needed) return std::nullopt;
  if (!flags.force) {
    if (!verdict.record_changed) return std::nullopt;
    const std::string why = "its owner record changed after it was published (record-changed): a "
                            "changed record proves nothing about its owner";
    if (auto step = force_refuses_too(facts, verdict, flags)) return refuse(why, std::move(*step));
    return refuse(why,
                  "needs --force, which removes it only when no process that could have taken "
                  "it (Node, Bun, Deno, Electron or apnea-locks of this account, started before "
                  "it was made) is alive");
  }
  if (!verdict.owners_checked)
    return refuse(fmt::format("{}, and the process table could not be read to rule out a process "
                              "that could have taken it",
                              damage_text(verdict)),
                  "check that no Apnea process of this account runs, then run reclaim --force again");
  if (!verdict.possible_owners.empty()) {
    // Grouped by application, those working in the lock's repository first (classify).
    const std::vector<ProcessInfo>& owners = verdict.possible_owners;
    constexpr std::size_t shown = 8;
    std::string listed;
    std::string words;
    std::string_view application = "\x01";  // no executable is this
    for (std::size_t i = 0; i < owners.size() && i < shown; ++i) {
      const ProcessInfo& owner = owners[i];
      if (owner.executable != application) {
        application = owner.executable;
        listed += fmt::format("{}{}: ", i == 0 ? "" : "; ",
                              owner.executable.empty() ? "(executable unreadable)" : owner.executable);
      } else {
        listed += ", ";
      }
      listed += carrier_text(owner);
      if (!owner.cwd.empty()) listed += fmt::format(" in {}", owner.cwd);
      if (owner.runtime_sign && !owner.runtime_sign->empty()) listed += fmt::format(" [{}]", *owner.runtime_sign);
      if (const std::string word = not_owner_text(owner); !word.empty())
        words += fmt::format(" --not-owner {}", word);
    }
    if (owners.size() > shown) listed += fmt::format("; and {} more", owners.size() - shown);
    std::string step = "end each of them or wait for it to exit (ps -o pid,lstart,args -p PID), then "
                       "run reclaim --force again";
    if (!words.empty() && owners.size() <= shown)
      step += fmt::format("; for those that are not this lock's Apnea, say so: apnea-locks reclaim "
                          "--force{} {}",
                          words, shell_word(facts.path));
    return refuse(fmt::format("{}, and {} process{} may be its owner (a recognised runtime of "
                              "this account, started before the lock was made): {}",
                              damage_text(verdict), owners.size(), owners.size() == 1 ? "" : "es",
                              listed),
                  std::move(step));
  }
  return std::nullopt;
}

/// The trusts a --force removal on `verdict`'s proof rests on.
std::vector<std::string> trusts_of(const Verdict& verdict) {
  std::vector<std::string> trusts;
  if (verdict.death.operator_exempt)
    trusts.push_back(fmt::format("the operator's word (--not-owner) that {} is not this lock's Apnea",
                                 carrier_text(*verdict.death.operator_exempt)));
  for (const ProcessInfo& cleared : verdict.operator_cleared)
    trusts.push_back(fmt::format("the operator's word (--not-owner) that {} is not this lock's Apnea",
                                 carrier_text(cleared)));
  if (verdict.death.uses_clock)
    trusts.push_back(fmt::format("the wall clock (a forward step of between {} and 60s since the "
                                 "lock was written would fake this)",
                                 seconds_text(verdict.death.tolerance)));
  if (verdict.death.uses_visibility) trusts.emplace_back(trust_visibility);
  if (verdict.owners_needed || verdict.death.uses_runtime) trusts.emplace_back(trust_runtime);
  return trusts;
}

/// The decision for an entry whose record names pids, all of them proven dead (certain or
/// evidence), removed as `kind`.
Decision proven_dead(const EntryFacts& facts, const Verdict& verdict, const RemovalFlags& flags,
                     RemovalKind kind, bool force_only) {
  if (auto blocked = possible_owner_blocks(facts, verdict, flags)) return *blocked;
  const std::string_view proof = proof_name(verdict.proof);
  if (verdict.proof_class == ProofClass::certain && !force_only)
    return remove(kind, fmt::format("{} (certain)", proof));
  if (flags.force) {
    auto trusts = trusts_of(verdict);
    if (force_only) trusts.emplace_back(trust_malformed);
    return remove(kind, fmt::format("{} ({})", proof, proof_class_name(verdict.proof_class)),
                  std::move(trusts));
  }
  std::string why = force_only
      ? fmt::format("its owner record is malformed ({}); every pid it names is dead ({}, {})",
                    verdict.failed_check, proof, proof_class_name(verdict.proof_class))
      : fmt::format("its owner is dead by evidence only ({}; it rests on {})", proof,
                    fmt::join(trusts_of(verdict), " and "));
  return refuse(std::move(why), force_refuses_too(facts, verdict, flags).value_or("needs --force"));
}

/// Ownerless (pid-less) entries: only --force, and only when older than --guard-age by ctime.
Decision ownerless(const EntryFacts& facts, const Verdict& verdict, const RemovalFlags& flags,
                   std::int64_t now_ns, RemovalKind kind, std::string_view what) {
  // Unchanged for how long: the latest ctime of the directory and its owner.json.
  std::int64_t changed = facts.stat ? facts.stat->ctime_ns : now_ns;
  if (facts.owner && facts.owner->owner_stat)
    changed = std::max(changed, facts.owner->owner_stat->ctime_ns);
  const std::int64_t age = now_ns - changed;
  const bool young = !older_than_guard_age(verdict, age, flags);
  // A candidate or tombstone that young may be being written or removed right now; a lock
  // is published whole, so it is malformed at any age, but only old enough to be removed.
  if (young && kind == RemovalKind::debris)
    return keep(fmt::format("{} names no pid and changed {} ago: it may be being written; "
                            "it is abandoned after --guard-age {}",
                            what, seconds_text(std::max<std::int64_t>(age, 0)),
                            seconds_text(flags.guard_age)) + void_clock_note(verdict));
  if (!flags.force || young)
    return refuse(fmt::format("{} names no pid (no writer to prove dead) and changed {} ago{}", what,
                              seconds_text(std::max<std::int64_t>(age, 0)), void_clock_note(verdict)),
                  verdict.clock_void_why.empty()
                      ? fmt::format("reclaim --force removes it once it is older than --guard-age {}",
                                    seconds_text(flags.guard_age))
                      // No age ever counts: the tool cannot act, the operator can.
                      : by_hand_step("rm -r", facts.path));
  if (auto blocked = possible_owner_blocks(facts, verdict, flags)) return *blocked;
  std::vector<std::string> trusts{std::string(trust_ownerless)};
  if (verdict.owners_needed) trusts.emplace_back(trust_runtime);
  return remove(kind, fmt::format("{} names no pid, unchanged for {}", what, seconds_text(age)),
                std::move(trusts));
}

/// How to unblock a guard held, maybe, by the paused process `holder`.
std::string unpause_step(const ProcessInfo& holder) {
  const std::int64_t pid = holder.pid;
  switch (holder.pause) {
    case Pause::stopped:
      return fmt::format("let pid {0} go on (kill -CONT {0}) or end it (kill {0}; kill -CONT {0}), "
                         "then run again", pid);
    case Pause::traced:
      return fmt::format("detach the tracer of pid {} ({}: quit the debugger or strace), then run "
                         "again", pid, tracer_text(holder));
    case Pause::disk_sleep:
      return fmt::format("wait until pid {} leaves uninterruptible sleep (state D: its I/O is "
                         "stuck), then run again", pid);
    case Pause::frozen:
      return fmt::format("thaw its cgroup {} (systemctl thaw UNIT, or write 0 to cgroup.freeze; "
                         "THAWED to freezer.state for a v1 freezer), then run again",
                         holder.frozen_cgroup.empty() ? std::string("(see /proc/" + std::to_string(pid) + "/cgroup)")
                                                      : holder.frozen_cgroup);
    case Pause::inspector:
      return fmt::format("let pid {0} go on in its debugger, or end it (kill {0}), then run again", pid);
    case Pause::unreadable:
      return fmt::format("check pid {0} by hand as root (ps -o pid,stat,lstart,args -p {0}; "
                         "/proc/{0}/cgroup), then run again as root", pid);
    case Pause::none: break;
  }
  return fmt::format("end pid {0} (kill {0}) or wait for it to exit, then run again", pid);
}

Decision decide_guard(const EntryFacts& facts, const Verdict& verdict, const RemovalFlags& flags) {
  if (verdict.state == EntryState::free) return keep("it is gone");
  // Its age as shown (by mtime) decides whether it is in flight; removal counts from the
  // latest of its mtime and ctime, and never while the clock is void: refused after what
  // else blocks it.
  const std::int64_t age = verdict.guard_age_ns.value_or(verdict.age_ns.value_or(0));
  const std::int64_t unchanged = unchanged_for(age, facts.stat);
  // While no age counts, only the hand step; else waiting is the other way. (Formatted only
  // for a decision that says it: the survey decides every guard.)
  const auto check = [&] { return by_hand_step("rmdir", facts.path); };
  const auto wait_or_check = [&] {
    return fmt::format("once it has been unchanged for --guard-age {} (in {}), or {}", seconds_text(flags.guard_age),
                       seconds_text(std::max<std::int64_t>(flags.guard_age.count() - unchanged, 0)), check());
  };
  const auto too_young = [&] {
    return refuse(fmt::format("the guard changed {} ago (the latest of its mtime and ctime){}",
                              seconds_text(std::max<std::int64_t>(unchanged, 0)), void_clock_note(verdict)),
                  verdict.clock_void_why.empty() ? "run reclaim --force again " + wait_or_check() : check());
  };
  if (age < flags.guard_age.count()) {
    if (!verdict.clock_void_why.empty()) return too_young();
    // Kept (a reclamation may be at work), with what to do when it stays: Apnea is refused
    // while it is there (named by path, it needs attention).
    Decision kept = keep(fmt::format("the guard is {} old, younger than --guard-age {}: a reclamation may "
                                     "be running (if its lock is there and dead, Apnea is refused until "
                                     "the guard goes: see that lock)",
                                     seconds_text(std::max<std::int64_t>(age, 0)),
                                     seconds_text(flags.guard_age)));
    kept.next_step = "a working guard lives for milliseconds: if it is still there, a crash left it; "
                     "reclaim --force removes it " + wait_or_check();
    return kept;
  }
  if (verdict.death.remote_filesystem)
    return refuse(fmt::format("the lock area is on a {} filesystem: its holder may run on another "
                              "machine",
                              verdict.filesystem),
                  remote_step(facts));
  if (verdict.guard_blocker)
    return refuse(fmt::format("{} may be paused ({}) and may hold this guard between its token "
                              "check and its rename",
                              carrier_text(*verdict.guard_blocker),
                              pause_name(verdict.guard_blocker->pause)),
                  unpause_step(*verdict.guard_blocker));
  if (!verdict.guard_checked)
    return refuse("the process table could not be read to rule out a paused guard holder",
                  fmt::format("check that no Apnea process is stopped, then rmdir -- {}",
                              shell_word(facts.path)));
  if (!older_than_guard_age(verdict, unchanged, flags)) return too_young();
  if (!flags.force)
    return refuse(fmt::format("a reclaim guard left for {}: its holder crashed", seconds_text(age)),
                  "needs --force");
  return remove(RemovalKind::guard,
                fmt::format("reclaim guard unchanged for {} and no paused process could hold it",
                            seconds_text(unchanged)),
                {std::string(trust_ownerless)});
}

/// A lock's guard, as it blocks the lock: nothing when the lock may go on.
std::optional<Decision> guard_blocks(const EntryFacts& facts, const Verdict& verdict,
                                     const RemovalFlags& flags) {
  if (!facts.guard) return std::nullopt;
  const std::int64_t age = verdict.guard_age_ns.value_or(0);
  if (age < flags.guard_age.count())
    return refuse(fmt::format("Apnea stale-lock reclamation is guarded at {} ({} old): Apnea is "
                              "refused until it is gone; a working guard lives for milliseconds, "
                              "so one still there was most likely left by a crash{}",
                              reclaim_guard_path(facts.path), seconds_text(std::max<std::int64_t>(age, 0)),
                              void_clock_note(verdict)),
                  verdict.clock_void_why.empty()
                      ? fmt::format("run reclaim --force again once the guard is older than "
                                    "--guard-age {} (in {}): it removes the guard, then the lock",
                                    seconds_text(flags.guard_age),
                                    seconds_text(std::max<std::int64_t>(flags.guard_age.count() - age, 0)))
                      : by_hand_step("rmdir", reclaim_guard_path(facts.path)) + " and run reclaim again");
  EntryFacts guard;
  guard.name = reclaim_guard_path(facts.name);
  guard.path = reclaim_guard_path(facts.path);
  guard.stat = facts.guard;
  Verdict guard_verdict;
  guard_verdict.role = EntryRole::reclaim_guard;
  guard_verdict.state = EntryState::leftover;
  guard_verdict.age_ns = verdict.guard_age_ns;  // by mtime, as shown: decide_guard adds the ctime
  guard_verdict.guard_age_ns = verdict.guard_age_ns;
  guard_verdict.clock_void_why = verdict.clock_void_why;
  guard_verdict.guard_blocker = verdict.guard_blocker;
  guard_verdict.guard_checked = verdict.guard_checked;
  guard_verdict.death.remote_filesystem = verdict.death.remote_filesystem;
  guard_verdict.filesystem = verdict.filesystem;
  Decision decision = decide_guard(guard, guard_verdict, flags);
  if (decision.action == PlanAction::remove) return std::nullopt;
  decision.why = fmt::format("its reclaim guard is left over: {}", decision.why);
  return decision;
}

Decision decide_lock(const EntryFacts& facts, const Verdict& verdict, const RemovalFlags& flags,
                     std::int64_t now_ns) {
  switch (verdict.state) {
    case EntryState::free: return keep("there is no lock");
    case EntryState::in_flight:
      return refuse("it kept changing while it was inspected", "run again");
    case EntryState::live: return refuse(alive_blocker(verdict), stop_step(verdict, facts));
    case EntryState::live_malformed:
      return refuse(fmt::format("its owner record is malformed ({}) and {}", verdict.failed_check,
                                alive_blocker(verdict)),
                    mode_repair_step(verdict, facts).value_or(stop_step(verdict, facts)));
    default: break;
  }
  if (auto refused = unprovable(facts, verdict)) return *refused;
  if (auto blocked = guard_blocks(facts, verdict, flags)) return *blocked;
  if (verdict.state == EntryState::stale)
    return proven_dead(facts, verdict, flags, RemovalKind::lock_owner, false);
  if (verdict.state == EntryState::malformed) {
    if (verdict.pidless)
      return ownerless(facts, verdict, flags, now_ns, RemovalKind::lock_malformed,
                       fmt::format("its malformed owner record ({})", verdict.failed_check));
    return proven_dead(facts, verdict, flags, RemovalKind::lock_malformed, true);
  }
  return keep(verdict.reason);
}

Decision decide_transient(const EntryFacts& facts, const Verdict& verdict, const RemovalFlags& flags,
                          std::int64_t now_ns) {
  const std::string what(role_name(verdict.role));
  if (verdict.state == EntryState::free) return keep("it is gone");
  if (verdict.state == EntryState::live || verdict.state == EntryState::live_malformed ||
      (verdict.state == EntryState::in_flight && !verdict.pidless && !verdict.pids_unknown))
    return keep(fmt::format("in flight: {}", alive_blocker(verdict)));
  if (auto refused = unprovable(facts, verdict)) return *refused;
  // Removed only while holding its lock's guard: a guard in flight means a reclamation is
  // at work; a leftover one goes first only when this run removes it.
  if (facts.guard) {
    const std::int64_t age = verdict.guard_age_ns.value_or(0);
    if (!older_than_guard_age(verdict, age, flags))
      return keep("a reclamation of its lock is in progress" + void_clock_note(verdict));
    if (auto blocked = guard_blocks(facts, verdict, flags)) return *blocked;
  }
  if (verdict.pidless) return ownerless(facts, verdict, flags, now_ns, RemovalKind::debris, "a " + what + " that");
  return proven_dead(facts, verdict, flags, RemovalKind::debris, false);
}

}  // namespace

Decision decide(const EntryFacts& facts, const Verdict& verdict, const RemovalFlags& flags,
                std::int64_t now_ns) {
  switch (verdict.role) {
    case EntryRole::lock: return decide_lock(facts, verdict, flags, now_ns);
    case EntryRole::candidate:
    case EntryRole::tombstone: return decide_transient(facts, verdict, flags, now_ns);
    case EntryRole::reclaim_guard: return decide_guard(facts, verdict, flags);
    case EntryRole::unknown: break;
  }
  return keep("not an Apnea lock entry: left alone");
}

std::vector<std::string> detail::reclaim_argv(const EntryFacts& facts, const EntryLabel* label,
                                              bool force, const FixContext& context) {
  std::vector<std::string> argv;
  argv.reserve(12);  // every option below and the entry: one allocation
  argv.emplace_back("apnea-locks");
  argv.emplace_back("reclaim");
  if (force) argv.emplace_back("--force");
  if (context.user) {
    argv.emplace_back("--user");
    argv.push_back(*context.user);
  }
  if (context.lock_dir) {
    argv.emplace_back("--lock-dir");
    argv.push_back(*context.lock_dir);
  }
  if (context.guard_age) {
    argv.emplace_back("--guard-age");
    argv.push_back(*context.guard_age);
  }
  if (context.tolerance) {
    argv.emplace_back("--tolerance");
    argv.push_back(*context.tolerance);
  }
  if (facts.parsed.role == EntryRole::lock && label != nullptr) {
    argv.emplace_back(label->kind == LockKind::global_setup ? "--home" : "--repo");
    argv.push_back(label->path);
  } else {
    argv.push_back(facts.path);
  }
  return argv;
}

Fix fix_command(const EntryFacts& facts, const Verdict& verdict, const EntryLabel* label,
                const RemovalFlags& flags, const Decision& decided, std::int64_t now_ns,
                const FixContext& context) {
  const auto removes = [&](bool force) {
    if (force == flags.force) return decided.action == PlanAction::remove;
    return decide(facts, verdict, RemovalFlags{force, flags.guard_age}, now_ns).action ==
           PlanAction::remove;
  };
  if (removes(false)) return Fix{detail::reclaim_argv(facts, label, false, context), false};
  if (removes(true)) return Fix{detail::reclaim_argv(facts, label, true, context), true};
  return {};
}


}  // namespace apnea_locks
