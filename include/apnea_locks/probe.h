// Is an owner's process alive? Apnea's answer, and our proofs of death (PROTOCOL.md
// section 9).
//
// A proof is judged in two steps: the facts are read (gather_host once per survey,
// gather_process once per pid, System::namespace_view at most once per survey) and then
// judged by judge_death, which is pure. Whatever cannot be read counts as "the writer may be
// alive": an unknown field never supports a proof.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "apnea_locks/system.h"

namespace apnea_locks {

/// How strong a proof of death is.
enum class ProofClass { none, evidence, certain };

/// "none", "evidence" or "certain".
std::string_view proof_class_name(ProofClass c);

/// Facts about this machine that every proof rests on; read once per survey (gather_host).
/// A default-constructed HostFacts knows nothing, so nothing judged on it is certain.
struct HostFacts {
  bool initial_pid_namespace = false;   ///< /proc/self/ns/pid inode == 4026531836
  bool initial_user_namespace = false;  ///< /proc/self/ns/user inode == 4026531837
  bool process_table_complete = false;  ///< /proc without hidepid/subset=pid, or euid 0
  std::string filesystem;               ///< the area's filesystem type name ("tmpfs", "ext4", "nfs", "0x1234abcd")
  bool local_filesystem = false;        ///< statfs type in the allowlist of section 9
  bool idmapped = true;                 ///< a mount of the area's device is idmapped (true when unknown)
  std::optional<std::uint64_t> mount_namespace;  ///< /proc/self/ns/mnt's inode (proof 4)
  std::optional<std::uint64_t> area_device;     ///< the area directory's st_dev (proof 4)
  std::int64_t boot_time_ns = 0;        ///< btime
  std::optional<std::int64_t> dev_birth_ns;  ///< birth time of /dev
  /// /proc/self/ns/time names another time namespace than the initial one (4026531834); a
  /// kernel without time namespaces (before 5.6) has no such link and counts as initial.
  bool other_time_namespace = false;
  /// The clock is void (PROTOCOL.md section 9): dev_birth unknown, boot time unknown,
  /// |boot_time - dev_birth| > 60 s (the wall clock stepped since boot), or another time
  /// namespace. Then every comparison of a file timestamp with the clock, or with a process
  /// start time, is void too: no entry counts as old enough, every process as started in
  /// time.
  bool clock_void() const;
  /// Why the clock is void, one phrase ("the wall clock stepped 600 s since boot (btime
  /// and /dev's birth differ)", ...); "" when it is not.
  std::string why_clock_void() const;
  /// An NFS export of this kernel that covers the area (the export's path), "" when none:
  /// then another machine's Apnea may hold its locks (PROTOCOL.md section 9: no other kernel
  /// reaches the area through this machine), a process apnea-locks cannot see.
  std::string exported_by{};
  /// A file-server or sync process that reaches the area (System::file_server_reaching), ""
  /// when none: another kernel (a VM, a remote client) may hold its locks.
  std::string served_by{};
  /// The process table shows every process that may hold the area's locks: initial pid and
  /// user namespaces, a complete table, no NFS export of the area and no file server
  /// reaching it.
  bool sees_every_process() const;
  /// local fs && sees_every_process().
  bool can_be_certain() const;
  /// One phrase naming the first failed precondition of can_be_certain(), "" when none.
  std::string why_not_certain() const;
};

/// Reads the host facts for a lock area directory whose lstat gave device `area_dev`.
HostFacts gather_host(System& system, const std::string& area_directory, std::uint64_t area_dev);

/// gather_host for `area_directory`, taking its device from lstat; when lstat fails the
/// device is unknown, so `idmapped` stays true.
HostFacts gather_host(System& system, const std::string& area_directory);

/// Everything the system says about one pid, gathered once (per pid, per survey).
struct ProcessFacts {
  double pid = 0;
  int signal_errno = -1;            ///< kill(pid,0): 0 sent, else errno; -1 when not tried (pid outside 1..2^31-1)
  std::optional<ProcessInfo> info;  ///< the process with this pid in our namespace, when kill did not say ESRCH
  std::vector<ProcessInfo> ns_carriers;  ///< processes whose NSpid holds pid in a field other than the first
  bool namespace_view_read = false;      ///< ns_carriers came from a namespace view
  /// Answered from a survey's cache (probed earlier for another record), not probed for
  /// this one: a "dead" answer so given is probed again before it is reported (survey.h).
  bool from_cache = false;
};

/// Probes pid (kill when 1 <= pid <= 2^31-1, then /proc); `view` (may be null) is the
/// survey's namespace_view(), searched for carriers (with the runtime signs the view has:
/// ProcessCache reads them when it reads the view). The live process with that pid in our
/// namespace has its runtime_sign read (System::runtime_sign), unless it is a zombie or a
/// kernel thread.
ProcessFacts gather_process(System& system, double pid, const std::vector<ProcessInfo>* view);

/// Apnea 0.2.2's liveness: alive unless kill(pid, 0) failed with ESRCH (so EPERM and pids
/// Node cannot signal count as alive). Pure.
bool apnea_alive(const ProcessFacts& facts);

/// Our proof that the owner's process is gone (PROTOCOL.md section 9), strongest first.
enum class DeathProof {
  none,              ///< no proof: the owner may be alive (fail closed)
  pid_out_of_range,  ///< >= PID_MAX_LIMIT (4194304) or >= 2^31: no such process can exist
  pid_dead,          ///< no carrier: kill(pid, 0) failed with ESRCH and no NSpid holds it
  zombie,            ///< exited, the last of its thread group, waiting to be reaped
  pid_other_uid,     ///< the number now belongs to another account (all four uids)
  pid_is_thread,     ///< the number now names a non-leader thread
  pid_is_kernel_thread,  ///< the number now names a kernel thread (PF_KTHREAD), never Apnea
  pid_reused,        ///< started after the owner record was written (clock-based)
  predates_boot,     ///< the owner record was written before the last boot (clock-based)
  pid_not_runtime,   ///< the number now names a process that runs no recognised runtime
  operator_word,     ///< the operator named the carrier as not the lock's Apnea (--not-owner)
};

/// The operator's word (PROTOCOL.md section 10, `reclaim --force LOCK --not-owner
/// PID@START`): the process with pid `pid` in apnea-locks' namespace that started within
/// second `start_s` (UTC, as its start time is shown) is not the lock's Apnea.
struct NotOwner {
  std::int64_t pid = 0;
  std::int64_t start_s = 0;
};

/// "2026-12-05T15:04:37Z": a time in nanoseconds since the epoch, to the second (rounded
/// down), in UTC.
std::string utc_second_text(std::int64_t ns);

/// Parses `PID@YYYY-MM-DDTHH:MM:SSZ` (the form not_owner_text prints); nothing when it is
/// malformed, the pid is outside 1..2^31-1 or the date does not exist.
std::optional<NotOwner> parse_not_owner(std::string_view text);

/// `PID@START` for `process` (its pid in our namespace and its start time); "" when its
/// start time is unknown.
std::string not_owner_text(const ProcessInfo& process);

/// True when `word` names `process`: the same pid in our namespace, started in that second.
bool names_process(const NotOwner& word, const ProcessInfo& process);

/// "pid-dead", "pid-out-of-range", ... ("none" for none).
std::string_view proof_name(DeathProof proof);

/// The judgement on one pid number.
struct DeathJudgement {
  /// The proof named (with several carriers: the weakest one used). When `proof` is none
  /// this is none, except for void clock evidence (`clock_void`), which is named so it can be
  /// shown but does not count.
  DeathProof reason = DeathProof::none;
  ProofClass proof = ProofClass::none;
  bool uses_clock = false;       ///< rests on clock evidence (pid-reused / predates-boot)
  /// Rests on seeing every process, which a precondition of section 9 denies (not initial
  /// namespaces, incomplete table) or which was not checked (namespace view not read): a
  /// proof that would be certain is evidence. Set for clock proofs too, so `--force` can name
  /// both trusts it uses.
  bool uses_visibility = false;
  /// Rests on `pid-not-runtime` for some carrier: `--force`'s third trust, that Apnea runs
  /// only in a recognised runtime.
  bool uses_runtime = false;
  /// The tolerance the clock proofs used (at least 1 s): with the 60 s of the void-clock
  /// test, the band of forward clock steps that would fake them.
  std::chrono::nanoseconds tolerance{0};
  bool clock_void = false;       ///< a clock proof was seen but the clock stepped: not counted
  bool remote_filesystem = false;///< the area is not on a local filesystem: never removable
  /// The carrier the operator's word excluded (proof operator_word), when one was.
  std::optional<ProcessInfo> operator_exempt;
  /// A carrier whose pid the operator named with another start time: the pid was reused
  /// since the operator looked, so the word does not cover it (it blocks).
  std::optional<ProcessInfo> word_mismatch;
  /// A carrier not shown to be someone else (the live one). When /proc could not be read
  /// for it, only `pid` is known (state '?').
  std::optional<ProcessInfo> blocker;

  /// Adds the judgement of another pid the same record names: every trust either rests on
  /// and every flag either raised are kept (the first operator's word and mismatch); the
  /// proof, its reason and its blocker become `other`'s when it is weaker. True when it was.
  bool merge(const DeathJudgement& other);
};

/// Section 9 exactly: every carrier (our-namespace pid P and every ns carrier) must be shown
/// not to be the writer; certain proofs only when host.can_be_certain(); pid-out-of-range only
/// for P >= pid_max_limit or P >= 2^31 (never from the current pid_max); zombie only when
/// state Z/X AND threads == 1; pid-other-uid only when all four uids differ from area_uid,
/// area_uid != 0 and !host.idmapped, and uids are known; pid-is-thread when tgid != pid;
/// pid-reused / predates-boot are evidence and do not count when host.clock_void();
/// pid-not-runtime (evidence, no clock) for a carrier nothing else excludes whose
/// `runtime_sign` was read and is empty. Pure.
///
/// Decisions beyond the letter of section 9:
/// - a field /proc did not give (state '?', tgid 0, threads 0, uids unknown) proves nothing:
///   that carrier may be the writer (proof none, it is the blocker);
/// - a uid difference that is not a proof (only some uids differ, area uid 0, idmapped or
///   unknown mounts) proves nothing either: `--force`'s two trusts (the clock, and no
///   hidden process) do not cover it, so it is none, not evidence;
/// - when a precondition fails, a proof that would be certain is evidence with
///   `uses_visibility`; on a non-local filesystem `remote_filesystem` is set and the proof is
///   at most evidence;
/// - when the namespace view was not read (`facts.namespace_view_read` false) nested
///   namespaces' carriers are unknown, so every proof but pid-out-of-range is at most
///   evidence with `uses_visibility`: pass the view when certainty is wanted;
/// - `tolerance` is at least 1 s (smaller values count as 1 s);
/// - a pid that is not an integer >= 1 is no pid: none.
///
/// `not_owners` (the operator's word) excludes each carrier it names (names_process) with
/// proof operator_word, evidence only; a carrier of a named pid with another start time is
/// not excluded and is recorded as `word_mismatch`.
DeathJudgement judge_death(const ProcessFacts& facts, const HostFacts& host, std::uint32_t area_uid,
                           std::int64_t written_ns, std::chrono::nanoseconds tolerance,
                           std::span<const NotOwner> not_owners = {});

/// The default tolerance for `pid-reused` (`--tolerance`): 2 s.
inline constexpr std::chrono::nanoseconds default_reuse_tolerance = std::chrono::seconds(2);

}  // namespace apnea_locks
