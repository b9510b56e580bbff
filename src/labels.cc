#include "apnea_locks/labels.h"

#include <vector>

#include "apnea_locks/names.h"
#include "apnea_locks/scan.h"

namespace apnea_locks {

SysResult<std::string> LabelIndex::add(System& system, LockKind kind,
                                       const std::string& path) const {
  auto lock = locate_lock(system, {}, kind, path);  // only its name and root are wanted
  if (!lock) return std::unexpected(lock.error());
  by_name_.insert_or_assign(lock->name, EntryLabel{kind, std::move(lock->root)});
  return std::move(lock->name);
}

SysResult<std::string> LabelIndex::add_repository(System& system, const std::string& root) {
  return add(system, LockKind::repository, root);
}

SysResult<std::string> LabelIndex::add_home(System& system, const std::string& home) {
  return add(system, LockKind::global_setup, home);
}

void LabelIndex::add_repository_lazily(System& system, const std::string& root) {
  pending_.push_back(Pending{&system, LockKind::repository, root});
}

void LabelIndex::add_home_lazily(System& system, const std::string& home) {
  pending_.push_back(Pending{&system, LockKind::global_setup, home});
}

void LabelIndex::resolve_pending() const {
  if (pending_.empty()) return;
  std::vector<Pending> pending;
  pending.swap(pending_);
  for (const Pending& label : pending) (void)add(*label.system, label.kind, label.path);
}

std::size_t LabelIndex::size() const {
  resolve_pending();
  return by_name_.size();
}

const EntryLabel* LabelIndex::find(std::string_view lock_name) const {
  resolve_pending();
  if (by_name_.empty()) return nullptr;
  auto found = by_name_.find(lock_name);
  return found == by_name_.end() ? nullptr : &found->second;
}

namespace {

bool is_directory(System& system, const std::string& path, const DirEntry& entry) {
  if (entry.type != FileType::unknown) return entry.type == FileType::directory;
  auto st = system.lstat(path);
  return st && st->type == FileType::directory;
}

SysResult<void> walk(System& system, const std::string& folder, int depth_left,
                     const std::function<void(const std::string&)>& visit) {
  bool holds_apnea = false;
  std::vector<std::string> children;
  auto listed = system.list_directory(folder, [&](const DirEntry& entry) {
    const std::string path = entry_path(folder, entry.name);
    if (!is_directory(system, path, entry)) return true;
    if (entry.name == ".apnea") holds_apnea = true;
    else if (depth_left > 0) children.push_back(path);
    return true;
  });
  if (!listed) return listed;
  if (holds_apnea) visit(folder);
  for (const std::string& child : children) (void)walk(system, child, depth_left - 1, visit);
  return {};
}

}  // namespace

SysResult<void> find_repositories(System& system, const std::string& root, int max_depth,
                                  const std::function<void(const std::string&)>& visit) {
  return walk(system, root, max_depth, visit);
}

}  // namespace apnea_locks
