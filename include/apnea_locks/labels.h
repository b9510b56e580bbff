// Naming locks: which repository or home a lock name belongs to (the hash is one-way, so
// candidate paths are hashed and matched).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/system.h"

namespace apnea_locks {

/// Known repositories and homes, by the entry name of their lock.
class LabelIndex {
 public:
  /// Labels the repository lock of `root` (realpath'd like Apnea). Returns the lock's entry
  /// name, or realpath's error.
  SysResult<std::string> add_repository(System& system, const std::string& root);
  /// Labels the global setup lock of `home` (realpath'd). Returns its entry name.
  SysResult<std::string> add_home(System& system, const std::string& home);
  /// Like add_repository for a label no caller needs the name of: the realpath and the
  /// hash wait for the first find() or size(), so a scan with nothing to label never starts
  /// OpenSSL (a millisecond of an empty area's `status`). A path that does not resolve
  /// labels nothing.
  void add_repository_lazily(System& system, const std::string& root);
  /// Like add_home, lazily (see add_repository_lazily).
  void add_home_lazily(System& system, const std::string& home);
  /// The label of the lock named `lock_name` (an EntryName::lock_name()), or null.
  const EntryLabel* find(std::string_view lock_name) const;
  /// Number of labelled locks.
  std::size_t size() const;

 private:
  struct Pending {
    System* system;
    LockKind kind;
    std::string path;
  };
  SysResult<std::string> add(System& system, LockKind kind, const std::string& path) const;
  void resolve_pending() const;
  // Lazily added labels are resolved inside the const lookups.
  mutable std::vector<Pending> pending_;
  /// Looked up by view (no string made per lookup).
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  mutable std::unordered_map<std::string, EntryLabel, NameHash, std::equal_to<>> by_name_;
};

/// Calls `visit` with every folder at or below `root` (at most `max_depth` levels down) that
/// holds a `.apnea` directory. Symlinks are not followed; unreadable folders are skipped.
/// Fails only when `root` itself cannot be listed.
SysResult<void> find_repositories(System& system, const std::string& root, int max_depth,
                                  const std::function<void(const std::string&)>& visit);

}  // namespace apnea_locks
