#include "apnea_locks/lock.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <utility>

#include "apnea_locks/lock_area.h"
#include "detail/lock.h"
#include "detail/owner.h"

namespace apnea_locks {

std::string detail::random_uuid(System& system) {
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

LockError detail::operation_locked(LockedReason reason, std::string headline,
                                   std::string_view advice, const std::string& resource,
                                   const std::string& lock, double pid) {
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

LockError detail::config_error(std::string message, std::string path) {
  LockError error;
  error.kind = LockError::Kind::config_error;
  error.message = std::move(message);
  error.headline = error.message;
  error.path = std::move(path);
  return error;
}

LockError detail::wrapped(const std::error_code& code, std::string_view syscall,
                          const std::string& path, const std::string& resource) {
  return config_error(fmt::format("could not acquire Apnea operation lock: {}, {} '{}'",
                                  errno_text(code), syscall, path),
                      resource);
}

namespace {
using detail::config_error;
using detail::operation_locked;
using detail::random_uuid;
using detail::wrapped;

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

/// One call of Apnea's acquireLock: up to three attempts.
LockResult<HeldLock> acquire_once(System& system, const LockTarget& target,
                                  const AcquireOptions& options) {
  const std::string& lock = target.lock_path;
  if (auto ensured = ensure_directory_for(system, node_dirname(lock), target.resource,
                                         target.area_mode);
      !ensured)
    return failure(ensured.error());

  for (int attempt = 0; attempt < 3; ++attempt) {
    Owner owner{static_cast<double>(system.pid()), random_uuid(system)};
    auto published = publish(system, target, owner);
    if (!published) return failure(published.error());
    if (*published) return HeldLock(system, lock, std::move(owner));
    // Contended: the lock in place is judged as every command judges it, and taken over
    // only through the removal gate (a lock that vanished or changed meanwhile is a race to
    // retry, never malformed metadata as Apnea 0.2.2 says).
    detail::Takeover taken =
        detail::take_over(system, target, options.reclaim_grace, options.audit_takeover);
    switch (taken.kind) {
      case detail::Takeover::Kind::taken_over:
        if (options.on_reclaimed && taken.owner) options.on_reclaimed(*taken.owner, lock);
        continue;
      case detail::Takeover::Kind::retry: continue;
      case detail::Takeover::Kind::refused: return failure(std::move(taken.error));
    }
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
  return detail::release_owned(system, lock_path_, owner_.token);
}

}  // namespace apnea_locks
