#include "apnea_locks/probe.h"

#include <cerrno>
#include <climits>
#include <cmath>

namespace apnea_locks {
namespace {
/// The largest pid Node's process.kill accepts (`pid === (pid | 0)`).
constexpr double node_signal_limit = 2147483647.0;
}  // namespace

ProcessFacts gather_process(System& system, double pid) {
  ProcessFacts facts;
  facts.pid = pid;
  facts.pid_max = system.pid_max();
  facts.boot_time_ns = system.boot_time_ns();
  if (!(pid > 0) || pid > node_signal_limit) return facts;
  const auto number = static_cast<std::int64_t>(pid);
  facts.signal_errno = system.signal_probe(number);
  if (facts.signal_errno == ESRCH || number >= facts.pid_max) return facts;
  facts.info = system.process_info(number);
  // Exited between the signal and the /proc read: ask the kernel again, so the verdict
  // rests on one consistent answer.
  if (!facts.info) facts.signal_errno = system.signal_probe(number);
  return facts;
}

bool apnea_alive(const ProcessFacts& facts) { return facts.signal_errno != ESRCH; }

std::string_view proof_name(DeathProof proof) {
  switch (proof) {
    case DeathProof::none: return "none";
    case DeathProof::pid_out_of_range: return "pid-out-of-range";
    case DeathProof::pid_dead: return "pid-dead";
    case DeathProof::zombie: return "zombie";
    case DeathProof::pid_other_uid: return "pid-other-uid";
    case DeathProof::pid_is_thread: return "pid-is-thread";
    case DeathProof::pid_reused: return "pid-reused";
    case DeathProof::predates_boot: return "predates-boot";
  }
  return "none";
}

bool proof_is_certain(DeathProof proof) {
  return proof != DeathProof::none && proof != DeathProof::pid_reused &&
         proof != DeathProof::predates_boot;
}

DeathProof prove_death(const ProcessFacts& facts, std::uint32_t area_uid, std::int64_t written_ns,
                       std::int64_t tolerance_ns) {
  if (facts.pid > node_signal_limit || (facts.pid_max > 0 && facts.pid >= double(facts.pid_max)))
    return DeathProof::pid_out_of_range;
  if (facts.signal_errno == ESRCH) return DeathProof::pid_dead;
  if (!facts.info) return DeathProof::none;
  const ProcessInfo& info = *facts.info;
  if (info.state == 'Z' || info.state == 'X') return DeathProof::zombie;
  if (info.uid != area_uid) return DeathProof::pid_other_uid;
  if (info.tgid != 0 && double(info.tgid) != facts.pid) return DeathProof::pid_is_thread;
  if (info.start_time_ns > written_ns + tolerance_ns) return DeathProof::pid_reused;
  if (facts.boot_time_ns > 0 && written_ns < facts.boot_time_ns) return DeathProof::predates_boot;
  return DeathProof::none;
}

}  // namespace apnea_locks
