#include "apnea_locks/lock.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <utility>

#include "apnea_locks/audit.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/probe.h"
#include "detail/lock.h"
#include "detail/owner.h"

namespace apnea_locks {
using detail::entry_unremovable;
using detail::remove_entry;

namespace {
/// A new random UUID v4, lowercase (Apnea's tokens).
std::string random_uuid(System& system) {
  std::array<std::byte, 16> bytes{};
  system.random_bytes(bytes);
  bytes[6] = (bytes[6] & std::byte{0x0f}) | std::byte{0x40};
  bytes[8] = (bytes[8] & std::byte{0x3f}) | std::byte{0x80};
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto b = std::to_integer<unsigned>(bytes[i]);
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

LockError operation_locked(LockedReason reason, std::string headline, std::string_view advice,
                           const std::string& resource, const std::string& lock, double pid) {
  LockError error;
  error.kind = LockError::Kind::operation_locked;
  error.reason = reason;
  error.message = advice.empty() ? headline : fmt::format("{}. {}", headline, advice);
  error.headline = std::move(headline);
  error.resource = resource;
  error.lock_path = lock;
  error.pid = pid;
  return error;
}

LockError config_error(std::string message, std::string path) {
  LockError error;
  error.kind = LockError::Kind::config_error;
  error.message = std::move(message);
  error.headline = error.message;
  error.path = std::move(path);
  return error;
}

/// A system error wrapped the way Apnea's withLock wraps unexpected errors.
LockError wrapped(const std::error_code& code, std::string_view syscall, const std::string& path,
                  const std::string& resource) {
  return config_error(fmt::format("could not acquire Apnea operation lock: {}, {} '{}'",
                                  errno_text(code), syscall, path),
                      resource);
}

std::unexpected<LockError> failure(LockError error) { return std::unexpected(std::move(error)); }

bool is(const std::error_code& code, std::errc value) { return code == value; }

/// Apnea's ConfigError for a directory of its lock area that is a symlink, not a directory
/// or another account's; nothing otherwise (open mode bits are the caller's to handle).
std::optional<LockError> refused_area_directory(PrivacyProblem problem, const std::string& path) {
  switch (problem) {
    case PrivacyProblem::symlink:
    case PrivacyProblem::not_directory:
      return config_error(fmt::format("unsafe Apnea lock directory: {}", path), path);
    case PrivacyProblem::foreign_owner:
      return config_error(
          fmt::format("Apnea lock directory is not owned by the current user: {}", path), path);
    case PrivacyProblem::none:
    case PrivacyProblem::open_mode: break;
  }
  return std::nullopt;
}

/// AreaMode::explicit_directory: creates `directory` alone, or checks the existing one
/// without changing it.
LockResult<void> ensure_explicit_directory(System& system, const std::string& directory,
                                           const std::string& resource) {
  auto made = system.mkdir(directory, 0700);
  const bool created = made.has_value();
  if (!created && !is(made.error(), std::errc::file_exists))
    return failure(wrapped(made.error(), "mkdir", directory, resource));
  auto st = system.lstat(directory);
  if (!st) return failure(wrapped(st.error(), "lstat", directory, resource));
  const PrivacyProblem problem = private_directory_problem(*st, system.uid());
  if (auto refused = refused_area_directory(problem, directory)) return failure(*refused);
  if (created) {
    // Ours: the umask may have taken bits Apnea's 0700 asks for.
    if (st->mode != 0700) {
      auto changed = system.chmod(directory, 0700);
      if (!changed) return failure(wrapped(changed.error(), "chmod", directory, resource));
    }
  } else if (problem == PrivacyProblem::open_mode) {
    return failure(config_error(
        fmt::format("unsafe Apnea lock directory: {}: mode {:04o} has group/other bits "
                    "(apnea-locks changes the mode of no directory it did not create)",
                    directory, st->mode),
        directory));
  }
  return {};
}

LockResult<void> ensure_directory_for(System& system, const std::string& lock_directory,
                                      const std::string& resource, AreaMode mode) {
  if (mode == AreaMode::explicit_directory)
    return ensure_explicit_directory(system, lock_directory, resource);
  const std::uint32_t uid = system.uid();
  for (const std::string& component : {node_dirname(lock_directory), lock_directory}) {
    auto made = system.mkdir(component, 0700);
    if (!made && !is(made.error(), std::errc::file_exists))
      return failure(wrapped(made.error(), "mkdir", component, resource));
    auto st = system.lstat(component);
    if (!st) return failure(wrapped(st.error(), "lstat", component, resource));
    if (auto refused = refused_area_directory(private_directory_problem(*st, uid), component))
      return failure(*refused);
    // Apnea forces 0700 with a chmod every time; one that is already 0700 (no other bit,
    // setgid and sticky included) is left as it is, the same mode without an inode write.
    if (st->mode != 0700) {
      auto changed = system.chmod(component, 0700);
      if (!changed) return failure(wrapped(changed.error(), "chmod", component, resource));
    }
  }
  return {};
}

/// Writes a candidate: its directory (0700), owner.json (0600, fsynced), then the directory
/// fsynced.
SysResult<void> write_candidate(System& system, const std::string& candidate, const Owner& owner) {
  if (auto made = system.mkdir(candidate, 0700); !made) return made;
  if (auto written = system.write_new_file(candidate + "/" + std::string(owner_file_name),
                                           encode_owner(owner), 0600);
      !written)
    return written;
  return system.fsync_directory(candidate);
}

std::int64_t lock_age_ms(System& system, const std::string& lock) {
  auto st = system.lstat(lock);
  if (!st) return 0;
  const std::int64_t age = (system.now_ns() - st->mtime_ns) / 1'000'000;
  return age > 0 ? age : 0;
}

LockError malformed_error(const LockTarget& target) {
  return operation_locked(
      LockedReason::malformed, fmt::format("Apnea lock metadata is malformed at {}", target.lock_path),
      fmt::format("Automatic cleanup is disabled. Verify no Apnea process owns it, then Remove "
                  "this lock directory manually: {}",
                  target.lock_path),
      target.resource, target.lock_path, 0);
}

/// One call of Apnea's acquireLock: up to three attempts.
/// One attempt to publish `owner` as the lock (PROTOCOL.md section 4, step 2): true when
/// published, false when contended; the candidate is removed unless it became the lock.
LockResult<bool> publish(System& system, const LockTarget& target, const Owner& owner) {
  const std::string& lock = target.lock_path;
  const std::string candidate = candidate_path(lock, owner.token);
  bool contended = false;
  std::optional<LockError> error;
  if (auto written = write_candidate(system, candidate, owner); !written) {
    error = wrapped(written.error(), "mkdir", candidate, target.resource);
  } else if (auto existing = system.lstat(lock); existing) {
    contended = true;
  } else if (!is(existing.error(), std::errc::no_such_file_or_directory)) {
    error = wrapped(existing.error(), "lstat", lock, target.resource);
  } else if (auto renamed = system.rename(candidate, lock); !renamed) {
    const auto& code = renamed.error();
    if (is(code, std::errc::file_exists) || is(code, std::errc::directory_not_empty) ||
        is(code, std::errc::operation_not_permitted))
      contended = true;
    else
      error = wrapped(code, "rename", candidate, target.resource);
  }
  // Published: the candidate was renamed to the lock, so there is nothing left to clean
  // up (its name holds our own fresh token: no one else makes it).
  if (!error && !contended) return true;
  // Otherwise the candidate is always removed, as Apnea removes it.
  auto removed = system.remove_tree(candidate);
  if (error) return failure(*error);
  if (!removed) return failure(wrapped(removed.error(), "rm", candidate, target.resource));
  return false;
}

/// The audit record of a takeover of `lock` (whose record was `read`) under Apnea's rule.
void audit_takeover(System& system, const std::string& lock, const OwnerRead& read,
                    const ReclaimOutcome& reclaimed, std::chrono::milliseconds grace) {
  AuditEvent event;
  event.action = "takeover";
  event.role = "lock";
  event.path = lock;
  event.tombstone = reclaimed.tombstone;
  event.kept = !reclaimed.removed || !reclaimed.changed.empty();
  event.owner_bytes = read.bytes;
  event.proof = fmt::format(
      "Apnea's rule: owner pid {} is not live (kill: ESRCH) and the lock is older than the "
      "{} s grace",
      pid_text(read.owner->pid), grace.count() / 1000);
  event.for_uid = read.lock_stat ? read.lock_stat->uid : system.uid();
  audit(system, std::move(event));
}

LockResult<HeldLock> acquire_once(System& system, const LockTarget& target,
                                  const AcquireOptions& options) {
  const std::string& lock = target.lock_path;
  if (auto ensured = ensure_directory_for(system, node_dirname(lock), target.resource,
                                         target.area_mode);
      !ensured)
    return failure(ensured.error());
  const std::uint32_t uid = system.uid();

  for (int attempt = 0; attempt < 3; ++attempt) {
    Owner owner{static_cast<double>(system.pid()), random_uuid(system)};
    auto published = publish(system, target, owner);
    if (!published) return failure(published.error());
    if (*published) return HeldLock(system, lock, std::move(owner));

    auto now = system.lstat(lock);
    if (!now) {
      if (is(now.error(), std::errc::no_such_file_or_directory)) continue;
      return failure(wrapped(now.error(), "lstat", lock, target.resource));
    }
    // A release may rename the lock away (and a new owner publish another) while we read
    // it: that is a race to retry, never malformed metadata (Apnea 0.2.2 says malformed).
    detail::SettledRead settled = detail::read_owner_settled(system, lock, uid, 2);
    if (!settled.settled || (!settled.read.owner && settled.read.owner.error().lock_vanished()))
      continue;
    const OwnerRead& read = settled.read;
    if (!read.owner) return failure(malformed_error(target));
    const Owner& existing = *read.owner;
    const ProcessFacts facts = gather_process(system, existing.pid, nullptr);
    if (apnea_alive(facts)) {
      return failure(operation_locked(
          LockedReason::live,
          fmt::format("another Apnea operation holds {} for {} (pid {})", lock, target.resource,
                      pid_text(existing.pid)),
          {}, target.resource, lock, existing.pid));
    }
    if (options.reclaim_grace && lock_age_ms(system, lock) >= options.reclaim_grace->count()) {
      // A dead owner past the grace: a crashed holder. Reclaim under the guard, then try
      // again whatever the guard found (a changed lock is re-examined, not misreported).
      ReclaimExpectation expect;
      expect.token = existing.token;
      auto reclaimed = reclaim_guarded(system, lock, target.resource, expect);
      if (!reclaimed) return failure(reclaimed.error());
      if (reclaimed->removed && options.on_reclaimed) options.on_reclaimed(existing, lock);
      if (options.audit_takeover && !reclaimed->tombstone.empty())
        audit_takeover(system, lock, read, *reclaimed, *options.reclaim_grace);
      continue;
    }
    return failure(operation_locked(
        LockedReason::stale,
        fmt::format("Apnea lock owner pid {} is not live at {}", pid_text(existing.pid), lock),
        fmt::format("Automatic stale cleanup is disabled. Verify no Apnea process owns it, then "
                    "Remove this lock directory manually: {}",
                    lock),
        target.resource, lock, existing.pid));
  }
  return failure(operation_locked(
      LockedReason::raced,
      fmt::format("Apnea lock changed repeatedly at {}; retry the operation", lock), {},
      target.resource, lock, 0));
}

}  // namespace

std::string_view reason_name(LockedReason reason) {
  switch (reason) {
    case LockedReason::live: return "live";
    case LockedReason::stale: return "stale";
    case LockedReason::malformed: return "malformed";
    case LockedReason::raced: return "raced";
  }
  return "live";
}

LockResult<LockTarget> repository_target(System& system, const std::string& lock_directory,
                                         const std::string& root, AreaMode mode) {
  auto lock = locate_lock(system, lock_directory, LockKind::repository, root);
  if (!lock)
    return failure(config_error(
        fmt::format("cannot resolve repository {}: {}", root, errno_text(lock.error())), root));
  return LockTarget{LockKind::repository, std::move(lock->path), lock->root, mode, lock->root};
}

LockResult<LockTarget> global_setup_target(System& system, const std::string& lock_directory,
                                           const std::string& home, AreaMode mode) {
  auto lock = locate_lock(system, lock_directory, LockKind::global_setup, home);
  if (!lock)
    return failure(config_error(
        fmt::format("cannot resolve home {}: {}", home, errno_text(lock.error())), home));
  return LockTarget{LockKind::global_setup, std::move(lock->path), "global setup at " + lock->root,
                    mode, lock->root};
}

AcquireOptions apnea_options(LockKind kind) {
  AcquireOptions options;
  if (kind == LockKind::global_setup) {
    options.wait_while_live = true;
  } else {
    options.reclaim_grace = repository_reclaim_grace;
  }
  return options;
}

LockResult<void> detail::ensure_lock_directory(System& system, const std::string& lock_directory,
                                               AreaMode mode) {
  return ensure_directory_for(system, lock_directory, lock_directory, mode);
}

LockResult<HeldLock> acquire(System& system, const LockTarget& target,
                             const AcquireOptions& options) {
  for (;;) {
    auto held = acquire_once(system, target, options);
    if (held || !options.wait_while_live || !held.error().is(LockedReason::live)) return held;
    if (options.deadline_ns && system.now_ns() >= *options.deadline_ns) return held;
    if (options.on_wait) options.on_wait(held.error());
    auto delay = std::chrono::nanoseconds(options.retry_delay);
    if (options.deadline_ns) {
      const auto left = std::chrono::nanoseconds(*options.deadline_ns - system.now_ns());
      if (left < delay) delay = left;
    }
    if (delay.count() > 0) system.sleep(delay);
  }
}

namespace {

/// entry_unremovable's checks; when `remove`, then the removal itself.
std::optional<std::string> check_and_remove(System& system, const std::string& path,
                                            const FileStat& judged, bool remove) {
  auto opened = system.open_directory(path);
  if (!opened) {
    if (is(opened.error(), std::errc::no_such_file_or_directory)) return "it is already gone";
    if (is(opened.error(), std::errc::too_many_symbolic_link_levels)) return "it is a symlink now";
    return fmt::format("cannot open it: {}", errno_text(opened.error()));
  }
  const Descriptor fd(system, *opened);
  auto self = system.fstat(fd.get());
  if (!self) return fmt::format("cannot stat it: {}", errno_text(self.error()));
  if (!self->same_object(judged)) return "it was replaced since it was judged";
  bool has_owner = false;
  std::optional<std::string> other;  // the first name that is not owner.json: the listing stops
  auto listed = system.list_directory_at(fd.get(), [&](const DirEntry& entry) {
    if (entry.name != owner_file_name) other = entry.name;
    else has_owner = true;
    return !other;
  });
  if (!listed) return fmt::format("cannot list it: {}", errno_text(listed.error()));
  if (other)
    return fmt::format("it holds more than {} (found '{}'): not removed recursively", owner_file_name,
                       *other);
  if (has_owner) {
    auto owner = system.stat_at(fd.get(), std::string(owner_file_name));
    if (!owner) return fmt::format("cannot stat {}: {}", owner_file_name, errno_text(owner.error()));
    if (owner->type != FileType::regular)
      return fmt::format("its {} is a {}, not a file", owner_file_name, file_type_name(owner->type));
    if (owner->dev != self->dev) return fmt::format("its {} is on another device", owner_file_name);
  }
  // Without write and search permission on the entry, owner.json cannot be unlinked: say so
  // before anything is renamed, instead of leaving a tombstone behind.
  if (system.uid() != 0 && (self->mode & 0300) != 0300)
    return fmt::format("its mode {:04o} does not let its owner remove {}", self->mode,
                       owner_file_name);
  if (!remove) return std::nullopt;
  if (has_owner) {
    if (auto unlinked = system.unlink_at(fd.get(), std::string(owner_file_name)); !unlinked)
      return fmt::format("cannot remove {}: {}", owner_file_name, errno_text(unlinked.error()));
  }
  if (auto removed = system.rmdir(path); !removed)
    return fmt::format("cannot remove it: {}", errno_text(removed.error()));
  return std::nullopt;
}

}  // namespace

namespace detail {

std::optional<std::string> entry_unremovable(System& system, const std::string& path,
                                             const FileStat& judged) {
  return check_and_remove(system, path, judged, false);
}

std::optional<std::string> remove_entry(System& system, const std::string& path,
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
  OwnerRead read = read_owner(system, lock, uid);
  if (!read.owner || read.owner->token != token) return std::optional<std::string>();
  const std::string tombstone = tombstone_path(lock, random_uuid(system));
  if (auto renamed = system.rename(lock, tombstone); !renamed) {
    if (is(renamed.error(), std::errc::no_such_file_or_directory))
      return std::optional<std::string>();
    return failure(config_error(
        fmt::format("could not release Apnea operation lock: {}, rename '{}'",
                    errno_text(renamed.error()), lock),
        lock));
  }
  OwnerRead moved = read_owner(system, tombstone, uid);
  if (!moved.owner || moved.owner->token != token) return std::optional<std::string>();
  if (!keep_tombstone) {
    if (auto kept = remove_entry(system, tombstone, *moved.lock_stat))
      return failure(config_error(fmt::format("could not remove tombstone {}: {}", tombstone, *kept),
                                  tombstone));
  }
  return std::optional<std::string>(tombstone);
}

/// Why the lock at `lock` could not be removed once renamed (entry_unremovable of what is
/// there now), so that nothing is renamed that would be left behind as a tombstone.
std::optional<std::string> unremovable_lock(System& system, const std::string& lock) {
  auto now = system.lstat(lock);
  if (!now) return std::nullopt;  // gone: the token check below reports it
  return entry_unremovable(system, lock, *now);
}
}  // namespace

LockResult<ReclaimOutcome> reclaim_guarded(System& system, const std::string& lock,
                                           const std::string& resource,
                                           const ReclaimExpectation& expect, bool keep_tombstone) {
  const std::string guard = reclaim_guard_path(lock);
  if (auto made = system.mkdir(guard, 0700); !made) {
    if (!is(made.error(), std::errc::file_exists))
      return failure(wrapped(made.error(), "mkdir", guard, resource));
    LockError error = operation_locked(
        LockedReason::stale, fmt::format("Apnea stale-lock reclamation is guarded at {}", guard),
        fmt::format("Retry after the other operation completes. If the guard persists, stop all "
                    "Apnea processes using {}, then remove this guard directory manually: {}",
                    lock, guard),
        resource, lock, 0);
    error.guarded = true;
    return failure(std::move(error));
  }
  const std::uint32_t uid = system.uid();
  ReclaimOutcome outcome;
  std::optional<LockError> error;

  if (auto stop = expect.confirm ? expect.confirm() : std::nullopt) {
    outcome.changed = *stop;
  } else if (auto blocked = unremovable_lock(system, lock)) {
    outcome.changed = *blocked;
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
    auto unchanged = [&](const std::string& path) {
      OwnerRead read = read_owner(system, path, uid);
      const bool same_owner_file =
          read.owner_stat.has_value() == expect.owner_identity.has_value() &&
          (!read.owner_stat || (read.owner_stat->same_object(*expect.owner_identity) &&
                                read.owner_stat->size == expect.owner_identity->size &&
                                read.owner_stat->mode == expect.owner_identity->mode &&
                                read.owner_stat->uid == expect.owner_identity->uid &&
                                read.owner_stat->mtime_ns == expect.owner_identity->mtime_ns));
      return read.lock_stat && expect.identity && read.lock_stat->same_object(*expect.identity) &&
             read.lock_stat->mode == expect.identity->mode &&
             read.lock_stat->uid == expect.identity->uid && same_owner_file && !read.owner &&
             read.bytes == expect.owner_bytes;
    };
    if (!unchanged(lock)) {
      outcome.changed = "the lock changed since it was inspected";
    } else {
      const std::string tombstone = tombstone_path(lock, random_uuid(system));
      if (auto renamed = system.rename(lock, tombstone); !renamed) {
        if (is(renamed.error(), std::errc::no_such_file_or_directory))
          outcome.changed = "the lock vanished";
        else
          error = wrapped(renamed.error(), "rename", lock, resource);
      } else if (!unchanged(tombstone)) {
        outcome.tombstone = tombstone;
        outcome.changed = fmt::format("the renamed lock changed; kept as {}", tombstone);
      } else {
        outcome.removed = true;
        outcome.tombstone = tombstone;
        if (!keep_tombstone) {
          if (auto kept = remove_entry(system, tombstone, *expect.identity))
            outcome.changed = fmt::format("renamed to {} but not removed: {}", tombstone, *kept);
        }
      }
    }
  }
  if (auto dropped = system.rmdir(guard); !dropped && !error)
    error = wrapped(dropped.error(), "rmdir", guard, resource);
  if (error) return failure(*error);
  return outcome;
}

HeldLock::HeldLock(System& system, std::string lock_path, Owner owner)
    : system_(&system), lock_path_(std::move(lock_path)), owner_(std::move(owner)) {}

HeldLock::HeldLock(HeldLock&& other) noexcept
    : system_(std::exchange(other.system_, nullptr)),
      lock_path_(std::move(other.lock_path_)),
      owner_(std::move(other.owner_)) {}

HeldLock& HeldLock::operator=(HeldLock&& other) noexcept {
  if (this != &other) {
    if (system_ != nullptr) (void)release();
    system_ = std::exchange(other.system_, nullptr);
    lock_path_ = std::move(other.lock_path_);
    owner_ = std::move(other.owner_);
  }
  return *this;
}

HeldLock::~HeldLock() {
  if (system_ != nullptr) (void)release();
}

LockResult<bool> HeldLock::release() {
  if (system_ == nullptr) return false;
  System& system = *std::exchange(system_, nullptr);
  auto removed = remove_if_owned(system, lock_path_, owner_.token);
  if (!removed) return failure(removed.error());
  return removed->has_value();
}

}  // namespace apnea_locks
