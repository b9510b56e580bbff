// Acquire, release and stale reclamation: Apnea's lock protocol (PROTOCOL.md sections 4-6).
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "apnea_locks/names.h"
#include "apnea_locks/owner.h"
#include "apnea_locks/protocol.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// Apnea's OperationLocked reasons.
enum class LockedReason { live, stale, malformed, raced };

/// "live", "stale", "malformed" or "raced".
std::string_view reason_name(LockedReason reason);

/// Apnea's two errors: OperationLocked {message, repository, lock_path, reason, pid} and
/// ConfigError {message, path}. Messages are the reference's texts.
struct LockError {
  enum class Kind { operation_locked, config_error };
  Kind kind = Kind::config_error;
  LockedReason reason = LockedReason::live;  ///< for operation_locked
  std::string message;
  /// The message's first sentence, without Apnea's advice ("... Remove this lock directory
  /// manually: ..."): for tools that give their own next step.
  std::string headline;
  std::string resource;   ///< OperationLocked.repository
  std::string lock_path;  ///< OperationLocked.lock_path
  std::string path;       ///< ConfigError.path
  double pid = 0;
  /// True when a guard held by someone else refused the reclamation.
  bool guarded = false;

  /// True when this is OperationLocked with reason `r`.
  bool is(LockedReason r) const { return kind == Kind::operation_locked && reason == r; }
};

/// A lock operation's result: the value, or why the lock could not be had.
template <class T>
using LockResult = std::expected<T, LockError>;

/// How acquire prepares the lock directory (PROTOCOL.md sections 1 and 10).
enum class AreaMode {
  /// Apnea's own area `<tmpdir>/apnea-<uid>/operation-locks`: both directories are created
  /// (0700) and re-checked on each acquire (not a symlink, a directory, ours), then forced
  /// to 0700, exactly as Apnea does.
  apnea,
  /// A directory the user named (`--lock-dir DIR`): at most DIR itself is created (0700),
  /// never a parent, and nothing that existed before has its mode changed. An existing DIR
  /// must already be safe (not a symlink, a directory, ours, no group/other bits), else
  /// ConfigError naming it.
  explicit_directory,
};

/// What is being locked: the lock path and the resource Apnea names in its messages.
struct LockTarget {
  LockKind kind = LockKind::repository;
  std::string lock_path;
  std::string resource;  ///< the canonical repository, or "global setup at <home>"
  AreaMode area_mode = AreaMode::apnea;  ///< how acquire prepares the lock path's directory
  std::string root;  ///< the canonical repository root or home (names.h locate_lock)
};

/// The repository lock for `root` in `lock_directory` (realpath'd like Apnea).
LockResult<LockTarget> repository_target(System& system, const std::string& lock_directory,
                                         const std::string& root,
                                         AreaMode mode = AreaMode::apnea);
/// The global setup lock for `home` in `lock_directory`.
LockResult<LockTarget> global_setup_target(System& system, const std::string& lock_directory,
                                           const std::string& home,
                                           AreaMode mode = AreaMode::apnea);

/// How acquire behaves on contention.
struct AcquireOptions {
  /// Take over a lock whose directory is at least this old when `reclaim` without --force
  /// would remove it (a certain proof of death; PROTOCOL.md section 10, "Taking over is
  /// removing"), through the one removal gate (repair.h). Apnea: 60 s for repository locks,
  /// never for the global setup lock.
  std::optional<std::chrono::milliseconds> reclaim_grace;
  /// Wait and retry while the owner is live (Apnea's global setup lock), else fail `live`.
  bool wait_while_live = false;
  std::chrono::milliseconds retry_delay{25};
  /// Stop waiting at this wall-clock time (ns since the epoch); none waits forever.
  std::optional<std::int64_t> deadline_ns;
  /// Called with the `live` error each time acquire is about to wait.
  std::function<void(const LockError&)> on_wait;
  /// Called after a dead owner's lock was taken over (past `reclaim_grace`), with that owner
  /// and the lock path, before acquire tries again.
  std::function<void(const Owner&, const std::string&)> on_reclaimed;
  /// Record each takeover (a dead owner's lock removed after the grace) in the system log
  /// (audit.h): `apnea-locks run` does; the tests' stress helpers do not.
  bool audit_takeover = false;
};

/// Apnea's behaviour for the kind: repository locks reclaim after the grace and fail on a
/// live owner; the global setup lock waits while its owner is live and never reclaims.
AcquireOptions apnea_options(LockKind kind);

/// A lock this process holds. Released (token-checked) when destroyed.
class HeldLock {
 public:
  /// Holds the lock at `lock_path`, taken by `owner` (acquire makes these).
  HeldLock(System& system, std::string lock_path, Owner owner);
  /// Takes over `other`'s lock; `other` then holds none.
  HeldLock(HeldLock&& other) noexcept;
  /// Releases the lock held now, then takes over `other`'s.
  HeldLock& operator=(HeldLock&& other) noexcept;
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  /// Releases the lock (token-checked), unless released or abandoned already.
  ~HeldLock();

  /// The lock's path.
  const std::string& lock_path() const { return lock_path_; }
  /// The owner record this process wrote into the lock.
  const Owner& owner() const { return owner_; }
  /// Releases now: true when our lock was removed, false when it was no longer ours
  /// (displaced or replaced: then nothing is removed).
  LockResult<bool> release();
  /// Forgets the lock without releasing it (it stays on disk).
  void abandon() { system_ = nullptr; }

 private:
  System* system_;
  std::string lock_path_;
  Owner owner_;
};

/// Takes the lock once per Apnea's acquire (3 attempts), or waits per `options`.
/// Unlike Apnea 0.2.2, a lock that vanished or was replaced while its owner was being read
/// is retried, never reported `malformed`; and an existing lock is judged by the survey's
/// policy, not by `kill(pid, 0)` alone: it is taken over only where `reclaim` without
/// --force would remove it, and an owner not proven dead is `live` (waited for, or refused).
LockResult<HeldLock> acquire(System& system, const LockTarget& target,
                             const AcquireOptions& options);

}  // namespace apnea_locks
