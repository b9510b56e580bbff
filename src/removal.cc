// The removal gate (PROTOCOL.md section 10: "Taking over is removing", "How removal is
// done"): the only code that renames or removes an entry of a lock area. Every command's
// removal, and `run`'s takeover, goes through execute_repair: decided by the survey's policy,
// re-decided under the lock's reclaim guard, then carried out by the steps below (a lock
// renamed to a tombstone first; an entry removed through an O_NOFOLLOW descriptor, never
// recursively). Apnea's own release of its own lock (token-checked) is here too.
// tests/structure_test.cc fails when another file of src/ calls rename, rmdir, unlink or
// remove_tree (besides publishing one's own candidate and writing output files).
#include "apnea_locks/repair.h"

#include <fmt/format.h>

#include "apnea_locks/audit.h"
#include "apnea_locks/lock.h"
#include "apnea_locks/lock_area.h"
#include "detail/lock.h"
#include "detail/owner.h"

namespace apnea_locks {
using detail::config_error;
using detail::ReclaimExpectation;
using detail::ReclaimOutcome;
using detail::entry_removable;
using detail::operation_locked;
using detail::random_uuid;
using detail::remove_entry;
using detail::wrapped;

namespace {
std::unexpected<LockError> failure(LockError error) { return std::unexpected(std::move(error)); }

bool is(const std::error_code& code, std::errc value) { return code == value; }

/// Apnea's refusal when another reclamation holds the lock's guard.
LockError guarded_error(const std::string& lock, const std::string& resource) {
  const std::string guard = reclaim_guard_path(lock);
  LockError error = operation_locked(
      LockedReason::stale, fmt::format("Apnea stale-lock reclamation is guarded at {}", guard),
      fmt::format("Retry after the other operation completes. If the guard persists, stop all "
                  "Apnea processes using {}, then remove this guard directory manually: {}",
                  lock, guard),
      resource, lock, 0);
  error.guarded = true;
  return error;
}
}  // namespace

namespace {

/// The lock area of an entry, opened once with O_NOFOLLOW|O_DIRECTORY: every rename and
/// removal of the entry goes through this descriptor (PROTOCOL.md section 10, "How removal
/// is done"), so a symlink put in place of the area's path is never followed.
struct AreaOf {
  Descriptor fd;
  DirRef dir;        ///< the descriptor, and the area's path for messages
  std::string name;  ///< the entry's name in the area
};

/// Opens the area of the entry at `path`; the error when it cannot be opened.
SysResult<AreaOf> open_area_of(System& system, const std::string& path) {
  const std::string directory = node_dirname(path);
  auto opened = system.open_directory(directory);
  if (!opened) return std::unexpected(opened.error());
  AreaOf area{Descriptor(system, *opened), DirRef{*opened, directory},
              path.substr(path.rfind('/') + 1)};
  return area;
}

/// Why an entry was not removed (check_and_remove's error).
std::unexpected<std::string> not_removed(std::string why) {
  return std::unexpected(std::move(why));
}

/// entry_removable's checks on `name` in `area`; when `remove`, then the removal itself.
/// Why it was not removed (or is not removable), as the error.
std::expected<void, std::string> check_and_remove(System& system, const DirRef& area,
                                                  const std::string& name, const FileStat& judged,
                                                  bool remove) {
  auto opened = system.open_directory_in(area, name);
  if (!opened) {
    if (is(opened.error(), std::errc::no_such_file_or_directory))
      return not_removed("it is already gone");
    if (is(opened.error(), std::errc::too_many_symbolic_link_levels))
      return not_removed("it is a symlink now");
    return not_removed(fmt::format("cannot open it: {}", errno_text(opened.error())));
  }
  const Descriptor fd(system, *opened);
  auto self = system.fstat(fd.get());
  if (!self) return not_removed(fmt::format("cannot stat it: {}", errno_text(self.error())));
  if (!self->same_object(judged)) return not_removed("it was replaced since it was judged");
  // In use whatever its record says: `apnea-locks run` keeps a shared flock on its lock
  // directory in run and in the shim that leads its command's session, so a lock whose
  // recorded pid (run's) was killed while that session runs on is refused here, until the
  // shim has ended the session. Held exclusively while this removal goes on. Only a
  // conflicting lock refuses: a filesystem without flock gives no such evidence either way.
  if (auto locked = system.lock_exclusive(fd.get());
      !locked && is(locked.error(), std::errc::resource_unavailable_try_again))
    return not_removed("a process holds a flock on it (the command of an apnea-locks run whose run "
                       "was killed may still run): in use");
  bool has_owner = false;
  std::optional<std::string> other;  // the first name that is not owner.json: the listing stops
  auto listed = system.list_directory_at(fd.get(), [&](const DirEntry& entry) {
    if (entry.name != owner_file_name)
      other = entry.name;
    else
      has_owner = true;
    return !other;
  });
  if (!listed) return not_removed(fmt::format("cannot list it: {}", errno_text(listed.error())));
  if (other)
    return not_removed(fmt::format("it holds more than {} (found '{}'): not removed recursively",
                                   owner_file_name, *other));
  // A mount on the entry or inside it: never removed (device numbers mislead on overlayfs
  // and btrfs, so the mount id where the kernel gives one).
  const auto other_mount = [&](const FileStat& inner, const FileStat& outer) {
    return inner.dev != outer.dev ||
           (inner.mount_id != 0 && outer.mount_id != 0 && inner.mount_id != outer.mount_id);
  };
  if (auto outer = system.fstat(area.fd); outer && other_mount(*self, *outer))
    return not_removed("a filesystem is mounted on it");
  if (has_owner) {
    auto owner = system.stat_at(fd.get(), std::string(owner_file_name));
    if (!owner)
      return not_removed(
          fmt::format("cannot stat {}: {}", owner_file_name, errno_text(owner.error())));
    if (owner->type != FileType::regular)
      return not_removed(
          fmt::format("its {} is a {}, not a file", owner_file_name, file_type_name(owner->type)));
    if (other_mount(*owner, *self))
      return not_removed(fmt::format("its {} is a mount", owner_file_name));
  }
  // Without write and search permission on the entry, owner.json cannot be unlinked: say so
  // before anything is renamed, instead of leaving a tombstone behind.
  if (system.uid() != 0 && (self->mode & 0300) != 0300)
    return not_removed(fmt::format("its mode {:04o} does not let its owner remove {}", self->mode,
                                   owner_file_name));
  if (!remove) return {};
  if (has_owner) {
    if (auto unlinked = system.unlink_at(fd.get(), std::string(owner_file_name)); !unlinked)
      return not_removed(
          fmt::format("cannot remove {}: {}", owner_file_name, errno_text(unlinked.error())));
  }
  if (auto removed = system.rmdir_in(area, name); !removed)
    return not_removed(fmt::format("cannot remove it: {}", errno_text(removed.error())));
  return {};
}

/// check_and_remove of the entry at `path`, through its area's descriptor.
std::expected<void, std::string> check_and_remove(System& system, const std::string& path,
                                                  const FileStat& judged, bool remove) {
  auto area = open_area_of(system, path);
  if (!area)
    return not_removed(fmt::format("cannot open its lock area: {}", errno_text(area.error())));
  return check_and_remove(system, area->dir, area->name, judged, remove);
}

}  // namespace

namespace detail {

std::expected<void, std::string> entry_removable(System& system, const std::string& path,
                                                 const FileStat& judged) {
  return check_and_remove(system, path, judged, false);
}

std::expected<void, std::string> remove_entry(System& system, const std::string& path,
                                              const FileStat& judged) {
  return check_and_remove(system, path, judged, true);
}

}  // namespace detail

namespace {
/// Apnea's token-checked removal: if `lock` still has `token`, rename it to a tombstone,
/// re-read the tombstone's token and, if still ours, remove it (or keep it when
/// `keep_tombstone`). Returns the tombstone path when removed/kept, nothing when the lock
/// was not (or no longer) ours.
LockResult<std::optional<std::string>> remove_if_owned(System& system, const std::string& lock,
                                                       const std::string& token,
                                                       bool keep_tombstone = false) {
  const std::uint32_t uid = system.uid();
  auto area = open_area_of(system, lock);
  if (!area) {
    if (is(area.error(), std::errc::no_such_file_or_directory)) return std::optional<std::string>();
    return failure(config_error(fmt::format("could not release Apnea operation lock: {}, open '{}'",
                                            errno_text(area.error()), node_dirname(lock)),
                                lock));
  }
  OwnerRead read = read_owner(system, area->dir, area->name, uid);
  if (!read.owner || read.owner->token != token) return std::optional<std::string>();
  const std::string tombstone = tombstone_path(lock, random_uuid(system));
  const std::string tombstone_name = tombstone.substr(tombstone.rfind('/') + 1);
  if (auto renamed = system.rename_in(area->dir, area->name, tombstone_name); !renamed) {
    if (is(renamed.error(), std::errc::no_such_file_or_directory))
      return std::optional<std::string>();
    return failure(config_error(
        fmt::format("could not release Apnea operation lock: {}, rename '{}'",
                    errno_text(renamed.error()), lock),
        lock));
  }
  OwnerRead moved = read_owner(system, area->dir, tombstone_name, uid);
  if (!moved.owner || moved.owner->token != token) return std::optional<std::string>();
  if (!keep_tombstone) {
    if (auto removed = check_and_remove(system, area->dir, tombstone_name, *moved.lock_stat, true);
        !removed)
      return failure(config_error(
          fmt::format("could not remove tombstone {}: {}", tombstone, removed.error()), tombstone));
  }
  return std::optional<std::string>(tombstone);
}

/// Whether the lock at `lock` could be removed once renamed (entry_removable of what is
/// there now), so that nothing is renamed that would be left behind as a tombstone.
std::expected<void, std::string> lock_removable(System& system, const std::string& lock) {
  auto now = system.lstat(lock);
  if (!now) return {};  // gone: the token check below reports it
  return entry_removable(system, lock, *now);
}
}  // namespace

LockResult<bool> detail::release_owned(System& system, const std::string& lock,
                                       const std::string& token) {
  auto removed = remove_if_owned(system, lock, token);
  if (!removed) return failure(removed.error());
  return removed->has_value();
}

namespace {

/// A malformed lock re-read under the guard is still what was inspected: the very directory
/// and owner.json (same objects, modes, owners, size and mtime; or still no owner.json),
/// still rejected, with the very bytes.
bool still_as_inspected(const OwnerRead& read, const ReclaimExpectation& expect) {
  const auto same = [](const FileStat& now, const FileStat& then) {
    return now.same_object(then) && now.mode == then.mode && now.uid == then.uid;
  };
  const std::optional<FileStat>& file = read.owner_stat;
  const std::optional<FileStat>& expected_file = expect.owner_identity;
  const bool same_owner_file =
      file.has_value() == expected_file.has_value() &&
      (!file || (same(*file, *expected_file) && file->size == expected_file->size &&
                 file->mtime_ns == expected_file->mtime_ns));
  return read.lock_stat && expect.identity && same(*read.lock_stat, *expect.identity) &&
         same_owner_file && !read.owner && read.bytes == expect.owner_bytes;
}

}  // namespace

LockResult<ReclaimOutcome> detail::reclaim_guarded(System& system, const std::string& lock,
                                                   const std::string& resource,
                                                   const ReclaimExpectation& expect,
                                                   bool keep_tombstone) {
  const std::string guard = reclaim_guard_path(lock);
  if (auto made = system.mkdir(guard, 0700); !made) {
    if (!is(made.error(), std::errc::file_exists))
      return failure(wrapped(made.error(), "mkdir", guard, resource));
    return failure(guarded_error(lock, resource));
  }
  const std::uint32_t uid = system.uid();
  ReclaimOutcome outcome;
  std::optional<LockError> error;

  if (auto confirmed = expect.confirm ? expect.confirm() : std::expected<void, std::string>();
      !confirmed) {
    outcome.changed = confirmed.error();
  } else if (auto removable = lock_removable(system, lock); !removable) {
    outcome.changed = removable.error();
  } else if (expect.token) {
    auto tombstone = remove_if_owned(system, lock, *expect.token, keep_tombstone);
    if (!tombstone) {
      error = tombstone.error();
    } else if (*tombstone) {
      outcome.removed = true;
      outcome.tombstone = **tombstone;
    } else {
      outcome.changed = "the lock no longer has the owner that was judged dead";
    }
  } else {
    // A malformed lock has no token to check: it must still be the very directory, with
    // the very bytes (or lack of them), that were inspected, both before and after the
    // rename.
    auto area = open_area_of(system, lock);
    auto unchanged = [&](const std::string& name) {
      return still_as_inspected(read_owner(system, area->dir, name, uid), expect);
    };
    if (!area) {
      error = wrapped(area.error(), "open", node_dirname(lock), resource);
    } else if (!unchanged(area->name)) {
      outcome.changed = "the lock changed since it was inspected";
    } else {
      const std::string tombstone = tombstone_path(lock, random_uuid(system));
      const std::string tombstone_name = tombstone.substr(tombstone.rfind('/') + 1);
      if (auto renamed = system.rename_in(area->dir, area->name, tombstone_name); !renamed) {
        if (is(renamed.error(), std::errc::no_such_file_or_directory))
          outcome.changed = "the lock vanished";
        else
          error = wrapped(renamed.error(), "rename", lock, resource);
      } else if (!unchanged(tombstone_name)) {
        outcome.tombstone = tombstone;
        outcome.changed = fmt::format("the renamed lock changed; kept as {}", tombstone);
      } else {
        outcome.removed = true;
        outcome.tombstone = tombstone;
        if (!keep_tombstone) {
          if (auto removed = check_and_remove(system, area->dir, tombstone_name, *expect.identity, true);
              !removed)
            outcome.changed = fmt::format("renamed to {} but not removed: {}", tombstone, removed.error());
        }
      }
    }
  }
  // The guard this reclamation made, through the area's descriptor too.
  auto guard_area = open_area_of(system, guard);
  if (auto dropped = guard_area ? system.rmdir_in(guard_area->dir, guard_area->name)
                                : SysResult<void>(std::unexpected(guard_area.error()));
      !dropped && !error)
    error = wrapped(dropped.error(), "rmdir", guard, resource);
  if (error) return failure(*error);
  return outcome;
}


namespace {

RepairResult result(RepairOutcome outcome, std::string detail, std::string tombstone = {}) {
  return RepairResult{outcome, std::move(detail), std::move(tombstone), std::nullopt};
}

RepairResult from_reclaim(const LockResult<ReclaimOutcome>& reclaimed) {
  if (!reclaimed) {
    const LockError& error = reclaimed.error();
    return result(error.guarded ? RepairOutcome::guard_held : RepairOutcome::failed, error.message);
  }
  if (reclaimed->removed && reclaimed->changed.empty())
    return result(RepairOutcome::removed, {}, reclaimed->tombstone);
  return result(RepairOutcome::changed, reclaimed->changed, reclaimed->tombstone);
}

bool same_record(const EntryFacts& was, const EntryFacts& now) {
  if (!was.stat || !now.stat || !was.stat->same_object(*now.stat)) return false;
  if (was.owner.has_value() != now.owner.has_value()) return false;
  if (!was.owner) return true;
  if (was.owner->owner.has_value() != now.owner->owner.has_value()) return false;
  if (was.owner->owner && was.owner->owner->token != now.owner->owner->token) return false;
  return was.owner->bytes == now.owner->bytes;
}

/// Under the guard we hold: the entry gathered again with fresh probes (and, for an old
/// guard, the paused processes read again), judged and decided by the same policy. Fails with
/// why it may not be removed now, unless the decision still stands.
std::expected<void, std::string> redecide(System& system, const EntryFacts& facts,
                                          const Decision& decision, const RepairSettings& repair,
                                          bool we_hold_guard) {
  SurveySettings settings = repair.settings;
  settings.judge.now_ns = system.now_ns();
  EntryJudge judge(system, node_dirname(facts.path), settings);
  EntryFacts now = judge.gather(facts.name);
  if (!now.stat) return std::unexpected(std::string("it is already gone"));
  if (!same_record(facts, now))
    return std::unexpected(std::string("it changed since it was inspected"));
  if (we_hold_guard && now.parsed.role != EntryRole::reclaim_guard) now.guard.reset();  // ours
  const Judgement again = judge.judge(std::move(now), nullptr);
  if (again.decision.action != PlanAction::remove || again.decision.removal != decision.removal)
    return std::unexpected(fmt::format("it is no longer removable: {}", again.decision.why));
  return {};
}

/// Holds `<lock>.reclaim` for the removal of a candidate or tombstone.
class GuardHold {
 public:
  GuardHold(System& system, std::string guard) : system_(system), guard_(std::move(guard)) {
    auto made = system_.mkdir(guard_, 0700);
    if (made) held_ = true;
    else error_ = made.error();
  }
  ~GuardHold() {
    if (!held_) return;
    if (auto area = open_area_of(system_, guard_)) (void)system_.rmdir_in(area->dir, area->name);
  }
  GuardHold(const GuardHold&) = delete;
  GuardHold& operator=(const GuardHold&) = delete;
  bool held() const { return held_; }
  const std::error_code& error() const { return error_; }

 private:
  System& system_;
  std::string guard_;
  bool held_ = false;
  std::error_code error_;
};

/// An exclusive flock of the lock area, held while a reclaim removes a guard it does not
/// hold. Apnea and reclaim remove only the guard they made; this removal is the one that
/// removes someone else's, by path after an lstat, so two of them must not interleave: the
/// second one's rmdir would remove the guard the first one has just made for its own
/// reclamation (docs/model/). The kernel drops the flock when reclaim dies.
class AreaRemovalLock {
 public:
  AreaRemovalLock(System& system, const std::string& directory) {
    auto fd = system.open_directory(directory);
    if (!fd) {
      error_ = fd.error();
      return;
    }
    fd_ = Descriptor(system, *fd);
    if (auto locked = system.lock_exclusive(fd_.get()); !locked) error_ = locked.error();
  }
  bool held() const { return fd_ && !error_; }
  const std::error_code& error() const { return error_; }

 private:
  Descriptor fd_;
  std::error_code error_;
};

}  // namespace

std::string_view outcome_name(RepairOutcome outcome) {
  switch (outcome) {
    case RepairOutcome::removed: return "removed";
    case RepairOutcome::skipped: return "skipped";
    case RepairOutcome::refused: return "refused";
    case RepairOutcome::changed: return "changed";
    case RepairOutcome::guard_held: return "guard-held";
    case RepairOutcome::failed: return "failed";
  }
  return "failed";
}

namespace {

RepairResult carry_out(System& system, const EntryFacts& facts, const Decision& decision,
                       const RepairSettings& repair) {
  if (decision.action == PlanAction::keep) return result(RepairOutcome::skipped, decision.why);
  if (decision.action == PlanAction::refuse) return result(RepairOutcome::refused, decision.why);
  if (!facts.stat) return result(RepairOutcome::changed, "it is already gone");
  const std::string directory = node_dirname(facts.path);
  const std::string guard_path = entry_path(directory, reclaim_guard_path(facts.parsed.lock_name()));

  switch (decision.removal) {
    case RemovalKind::lock_owner:
    case RemovalKind::lock_malformed: {
      ReclaimExpectation expect;
      if (decision.removal == RemovalKind::lock_owner) {
        expect.token = facts.owner->owner->token;
      } else {
        expect.identity = facts.owner->lock_stat;
        expect.owner_identity = facts.owner->owner_stat;
        expect.owner_bytes = facts.owner->bytes;
      }
      expect.confirm = [&]() { return redecide(system, facts, decision, repair, true); };
      return from_reclaim(detail::reclaim_guarded(system, facts.path, repair.resource, expect,
                                          repair.keep_tombstone));
    }
    case RemovalKind::debris: {
      GuardHold guard(system, guard_path);
      if (!guard.held()) {
        if (guard.error() == std::errc::file_exists)
          return result(RepairOutcome::guard_held,
                        fmt::format("a reclamation holds {}: run again when it is done", guard_path));
        return result(RepairOutcome::failed,
                      fmt::format("cannot take {}: {}", guard_path, errno_text(guard.error())));
      }
      if (auto stands = redecide(system, facts, decision, repair, true); !stands)
        return result(RepairOutcome::changed, stands.error());
      if (auto removed = detail::remove_entry(system, facts.path, *facts.stat); !removed)
        return result(RepairOutcome::changed, removed.error());
      return result(RepairOutcome::removed, {});
    }
    case RemovalKind::guard: {
      AreaRemovalLock removal_lock(system, directory);
      if (!removal_lock.held()) {
        if (removal_lock.error() == std::errc::resource_unavailable_try_again)
          return result(RepairOutcome::guard_held,
                        fmt::format("another apnea-locks reclaim is removing a reclaim guard in {}: "
                                    "run again when it is done",
                                    directory));
        return result(RepairOutcome::failed, fmt::format("cannot lock {}: {}", directory,
                                                         errno_text(removal_lock.error())));
      }
      if (auto stands = redecide(system, facts, decision, repair, false); !stands)
        return result(RepairOutcome::changed, stands.error());
      // A guard has no token: its identity is device, inode, birth time and ctime (and
      // mtime: anything made inside it changes both).
      auto area = open_area_of(system, facts.path);
      if (!area)
        return result(RepairOutcome::failed, fmt::format("cannot open {}: {}", directory,
                                                         errno_text(area.error())));
      auto now = system.lstat_in(area->dir, area->name);
      if (!now || !now->unchanged_since(*facts.stat) || now->type != FileType::directory)
        return result(RepairOutcome::changed, "it was replaced since it was inspected");
      // A guard is an empty directory: rmdir refuses anything else.
      if (auto removed = system.rmdir_in(area->dir, area->name); !removed)
        return result(RepairOutcome::failed,
                      fmt::format("cannot remove {}: {}", facts.path, errno_text(removed.error())));
      return result(RepairOutcome::removed, {});
    }
    case RemovalKind::none: break;
  }
  return result(RepairOutcome::failed, "no removal to carry out");
}

}  // namespace

RepairResult execute_repair(System& system, const EntryFacts& facts, const Decision& decision,
                            const RepairSettings& repair) {
  RepairResult done = carry_out(system, facts, decision, repair);
  // The audit trail: what was removed (or renamed away from the lock path), once it was.
  if (done.outcome == RepairOutcome::removed || !done.tombstone.empty()) {
    if (!repair.audit) return done;
    AuditEvent event;
    event.action = repair.audit_action;
    event.role = role_name(facts.parsed.role);
    event.path = facts.path;
    event.tombstone = done.tombstone;
    event.kept = !done.tombstone.empty() && (repair.keep_tombstone || done.outcome != RepairOutcome::removed);
    if (facts.owner) event.owner_bytes = facts.owner->bytes;
    event.proof = decision.why;
    for (const std::string& trust : decision.trusts)
      event.trusts.append(event.trusts.empty() ? "" : "; ").append(trust);
    event.for_uid = facts.stat ? facts.stat->uid : system.uid();
    event.for_user = repair.acted_for;
    event.label = repair.resource;
    done.audited = audit(system, std::move(event), repair.acting_uid);
  }
  return done;
}

namespace {

LockError malformed_error(const LockTarget& target) {
  return operation_locked(
      LockedReason::malformed, fmt::format("Apnea lock metadata is malformed at {}", target.lock_path),
      fmt::format("Automatic cleanup is disabled. Verify no Apnea process owns it, then Remove "
                  "this lock directory manually: {}",
                  target.lock_path),
      target.resource, target.lock_path, 0);
}

detail::Takeover refused(LockError error) {
  detail::Takeover out;
  out.kind = detail::Takeover::Kind::refused;
  out.error = std::move(error);
  return out;
}

/// A dead owner's lock that `run` may take over (a certain proof, past the grace): carried
/// out through execute_repair, which re-decides under the guard.
detail::Takeover remove_for_takeover(System& system, const LockTarget& target,
                                     const Judgement& judged, const RepairSettings& repair) {
  const RepairResult done = execute_repair(system, judged.facts, judged.decision, repair);
  detail::Takeover out;
  switch (done.outcome) {
    case RepairOutcome::removed:
      out.kind = detail::Takeover::Kind::taken_over;
      out.owner = *judged.facts.owner->owner;
      return out;
    case RepairOutcome::changed: return out;  // retry: judged again from the start
    case RepairOutcome::guard_held: return refused(guarded_error(target.lock_path, target.resource));
    case RepairOutcome::skipped:
    case RepairOutcome::refused:
    case RepairOutcome::failed: break;
  }
  return refused(config_error(
      fmt::format("could not acquire Apnea operation lock: {}: {}", target.lock_path, done.detail),
      target.resource));
}

}  // namespace

detail::Takeover detail::take_over(System& system, const LockTarget& target,
                                   std::optional<std::chrono::milliseconds> grace, bool audit) {
  const std::string& lock = target.lock_path;
  const std::string directory = node_dirname(lock);
  RepairSettings repair;
  repair.settings = survey_settings(system, directory, Windows{}, /*force=*/false);
  repair.resource = target.resource;
  repair.audit = audit;
  repair.audit_action = "takeover";
  const EntryLabel label{target.kind, target.root};
  EntryJudge judge(system, directory, repair.settings);
  const Judgement judged = judge.entry(lock.substr(lock.rfind('/') + 1), &label);
  const EntryFacts& facts = judged.facts;
  const Verdict& verdict = judged.verdict;
  if (!facts.stat || facts.kept_changing) return {};  // gone, or changing: try again
  // A record Apnea rejects is malformed to it, whoever it names: never taken over.
  if (!facts.owner || !facts.owner->owner) return refused(malformed_error(target));
  const double pid = facts.owner->owner->pid;
  switch (verdict.state) {
    case EntryState::free:
    case EntryState::in_flight: return {};
    case EntryState::stale: break;
    default:
      return refused(operation_locked(
          LockedReason::live,
          fmt::format("another Apnea operation holds {} for {} (pid {})", lock, target.resource,
                      pid_text(pid)),
          {}, target.resource, lock, pid));
  }
  const bool removable = judged.decision.action == PlanAction::remove &&
                         judged.decision.removal == RemovalKind::lock_owner;
  if (!removable && verdict.proof_class != ProofClass::certain) {
    // Never proven dead (another PID namespace, a filesystem shared with other machines, a
    // hidden process): as good as live, whatever kill() says here.
    return refused(operation_locked(
        LockedReason::live,
        fmt::format("Apnea lock owner pid {} at {} is not proven dead: {}", pid_text(pid), lock,
                    judged.decision.why),
        {}, target.resource, lock, pid));
  }
  if (!removable && verdict.guard != GuardState::none)
    return refused(guarded_error(lock, target.resource));
  const std::int64_t age_ns = system.now_ns() - facts.stat->mtime_ns;
  if (removable && grace && age_ns >= std::chrono::nanoseconds(*grace).count())
    return remove_for_takeover(system, target, judged, repair);
  return refused(operation_locked(
      LockedReason::stale,
      fmt::format("Apnea lock owner pid {} is not live at {}", pid_text(pid), lock),
      fmt::format("Automatic stale cleanup is disabled. Verify no Apnea process owns it, then "
                  "Remove this lock directory manually: {}",
                  lock),
      target.resource, lock, pid));
}

}  // namespace apnea_locks
