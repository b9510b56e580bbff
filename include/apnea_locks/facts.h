// The facts of one entry of the lock area, as a survey gathers them (scan.h) and judgement
// reads them (classify.h): the first stage of facts, then judgement, then action.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apnea_locks/names.h"
#include "apnea_locks/owner.h"
#include "apnea_locks/probe.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// Everything gathered about one entry of the lock area (see scan.h).
struct EntryFacts {
  std::string name;                     ///< the entry name
  std::string path;                     ///< the entry's path (lock directory + name)
  EntryName parsed;                     ///< what the name says
  std::optional<FileStat> stat;         ///< lstat of the entry; none when it is gone
  std::optional<OwnerRead> owner;       ///< for locks, candidates and tombstones
  std::optional<ProcessFacts> process;  ///< the accepted owner's pid, probed
  /// Every pid the owner record names (named_pids, the accepted owner's pid included), each
  /// probed: the never-live rule judges them all.
  std::vector<std::pair<double, ProcessFacts>> named;
  /// The record's bytes could not be read (unreadable, not a regular file, a symlink, too
  /// large to scan): the pids it names are unknown, so it may name a live one.
  bool pids_unknown = false;
  /// The malformed record's text ends inside the digits of a pid it names (`{"pid":2050`,
  /// truncated): it names every pid those digits begin (20506 too), and not all of them
  /// are probed, so its writer is never proven dead (PROTOCOL.md section 10).
  std::optional<std::string> truncated_pid;
  /// When the record was written (owner.json's mtime), for the clock proofs; 0 unknown.
  std::int64_t written_ns = 0;
  /// For a lock or a tombstone: lstat of `<lock>.reclaim` if it exists.
  std::optional<FileStat> guard;
  bool kept_changing = false;           ///< a lock replaced on every re-read during the scan
  /// The lock was found unchanged (same device, inode, ctime and mtime: the same record) by
  /// an lstat after its pids were probed; a survey need not re-confirm it.
  bool confirmed_after_probe = false;
};

/// A repository root or home an entry is known to belong to.
struct EntryLabel {
  LockKind kind = LockKind::repository;
  std::string path;  ///< the canonical repository root, or the home (global setup lock)
};

}  // namespace apnea_locks
