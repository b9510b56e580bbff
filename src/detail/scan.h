// Internals of scan.h: the pid cache a survey shares and the per-entry gathering steps.
// Not part of the library's interface (not installed); for src/ and the tests.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "apnea_locks/facts.h"
#include "apnea_locks/names.h"
#include "apnea_locks/probe.h"
#include "apnea_locks/system.h"

namespace apnea_locks::detail {

/// Probes each distinct pid once and remembers the answer, in little memory: a pid that
/// does not exist (ESRCH) costs one bit, so a scan of many dead owners stays small. It also
/// holds the survey's host facts and its namespace view (System::namespace_view), read at
/// most once: the first time a pid's own-namespace carrier is absent or could be excluded
/// by a proof, so that only then the carriers in nested PID namespaces are looked for. From
/// then on every answer carries them (`namespace_view_read`).
class ProcessCache {
 public:
  /// An empty cache probing through `system`, for a survey of an area on `host`.
  /// With `every_carrier` (the operator named a process: another carrier of the same number
  /// must still block) the namespace view is read for every pid with a carrier.
  explicit ProcessCache(System& system, HostFacts host = {}, bool every_carrier = false)
      : system_(system), host_(std::move(host)), every_carrier_(every_carrier) {}

  /// The survey's host facts, as given.
  const HostFacts& host() const { return host_; }

  /// The facts about `pid` as named by an owner record written at `written_ns` in an area
  /// owned by `area_uid`; probed on first use (gather_process). The namespace view is read
  /// when this record's pid has no carrier in our namespace or one a proof could exclude
  /// (with the smallest tolerance, and idmapped mounts ignored, so no proof judge_death
  /// finds under any policy is missed).
  ProcessFacts get(double pid, std::uint32_t area_uid, std::int64_t written_ns);

  /// The facts about `pid` when no record is at hand: the namespace view is read when the
  /// pid has no carrier in our namespace or has one /proc describes.
  ProcessFacts get(double pid);

 private:
  /// The facts about `pid` in our namespace (no carriers), from the cache or probed.
  ProcessFacts own(double pid);
  /// Reads the namespace view if `needed` and not read yet; adds the carriers when read.
  ProcessFacts with_carriers(ProcessFacts facts, bool needed);

  System& system_;
  HostFacts host_;
  bool every_carrier_ = false;
  std::mutex mutex_;  ///< guards the members below (never held while probing a pid)
  std::vector<bool> dead_;  ///< pids known to answer ESRCH (indexed by pid), one bit each
  std::unordered_map<std::int64_t, ProcessFacts> other_;  ///< every other pid probed
  std::optional<std::vector<ProcessInfo>> view_;  ///< the namespace view, once read
  std::int64_t boot_time_ns_ = -1;                ///< the system's, read when first needed
};

/// True for the roles that hold an owner record: locks, candidates and tombstones.
inline bool has_owner_record(EntryRole role) {
  return role == EntryRole::lock || role == EntryRole::candidate || role == EntryRole::tombstone;
}

/// How hard scan re-reads a lock whose owner was rejected.
inline constexpr int default_reread_limit = 5;

/// Gathers the facts about entry `name` of `lock_directory` for an area owned by `uid`:
/// lstat, the owner record (locks, candidates, tombstones), the owner's process (through
/// `processes`) and, for a lock, its reclaim guard. A lock whose owner is rejected is
/// re-checked (lstat again); if it vanished or is another directory now, it is read again,
/// up to `reread_limit` times (then `kept_changing`). Returns facts with no `stat` when the
/// entry is gone.
EntryFacts gather_entry(System& system, std::string_view lock_directory, std::string_view name,
                        std::uint32_t uid, ProcessCache& processes,
                        int reread_limit = default_reread_limit);

/// What a survey's listing says of an entry's reclaim guard (`<lock>.reclaim`).
enum class GuardListing {
  unknown,  ///< not known: look it up (lstat)
  absent,   ///< the listing holds no guard for this entry's lock: no lookup
  present,  ///< the listing holds one: lstat it for its age
};

/// gather_entry of `name` inside `directory` (opened, or not: DirRef), every per-entry
/// call relative to it (System::lstat_in, open_read_in), with the guard question answered
/// by `guard` where the listing could; `parsed` is parse_entry_name(name).
EntryFacts gather_entry_in(System& system, const DirRef& directory, std::string_view name,
                           EntryName parsed, std::uint32_t uid, ProcessCache& processes,
                           GuardListing guard,
                           int reread_limit = default_reread_limit);

}  // namespace apnea_locks::detail
