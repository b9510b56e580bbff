#include "apnea_locks/scan.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>

#include "apnea_locks/owner.h"

namespace apnea_locks {

namespace {
/// Pids below this (Linux's PID_MAX_LIMIT) are remembered in bitsets; above it no process
/// can exist and each costs a map entry.
constexpr std::size_t bitset_limit = std::size_t{1} << 22;
}  // namespace

ProcessFacts ProcessCache::get(double pid) {
  // Only pids Node can signal are probed; the rest cost no system call to judge.
  if (!(pid > 0) || pid > 2147483647.0) return gather_process(system_, pid);
  const auto number = static_cast<std::int64_t>(pid);
  const auto index = static_cast<std::size_t>(number);
  if (index < dead_.size() && dead_[index]) {
    ProcessFacts facts;
    facts.pid = pid;
    facts.signal_errno = ESRCH;
    facts.pid_max = pid_max_;
    facts.boot_time_ns = boot_time_ns_;
    return facts;
  }
  if (auto found = other_.find(number); found != other_.end()) return found->second;

  ProcessFacts facts = gather_process(system_, pid);
  pid_max_ = facts.pid_max;
  boot_time_ns_ = facts.boot_time_ns;
  const bool dead = facts.signal_errno == ESRCH && !facts.info;
  if (dead && index < bitset_limit) {
    if (index >= dead_.size()) dead_.resize(std::max<std::size_t>(4096, std::bit_ceil(index + 1)));
    dead_[index] = true;
  } else {
    other_.emplace(number, facts);
  }
  return facts;
}

std::string entry_path(std::string_view directory, std::string_view name) {
  std::string path(directory);
  if (path.empty()) return std::string(name);
  if (path.back() != '/') path += '/';
  path += name;
  return path;
}

namespace {

bool has_owner_record(EntryRole role) {
  return role == EntryRole::lock || role == EntryRole::candidate || role == EntryRole::tombstone;
}

/// gather_entry, sharing `processes` across a scan.
EntryFacts gather(System& system, std::string_view lock_directory, std::string_view name,
                  std::uint32_t uid, ProcessCache& processes, int reread_limit) {
  EntryFacts facts;
  facts.name = std::string(name);
  facts.path = entry_path(lock_directory, name);
  facts.parsed = parse_entry_name(name);

  if (!has_owner_record(facts.parsed.role)) {
    auto st = system.lstat(facts.path);
    if (st) facts.stat = *st;
    return facts;
  }

  // A lock that changes under the reader (a release, then maybe a new owner reusing the
  // inode number) is read again, never reported malformed: the core's settled-read rule.
  OwnerRead read;
  if (facts.parsed.role == EntryRole::lock) {
    SettledRead settled = read_owner_settled(system, facts.path, uid, reread_limit + 1);
    facts.kept_changing = !settled.settled;
    read = std::move(settled.read);
  } else {
    read = read_owner(system, facts.path, uid);
  }
  if (!read.owner && read.owner.error().lock_vanished()) return facts;  // gone: no stat
  facts.stat = read.lock_stat;
  if (read.owner) facts.process = processes.get(read.owner->pid);
  facts.owner = std::move(read);
  if (facts.parsed.role == EntryRole::lock && !facts.kept_changing) {
    auto guard = system.lstat(facts.path + ".reclaim");
    if (guard) facts.guard = *guard;
  }
  return facts;
}

}  // namespace

EntryFacts gather_entry(System& system, std::string_view lock_directory, std::string_view name,
                        std::uint32_t uid, ProcessCache& processes, int reread_limit) {
  return gather(system, lock_directory, name, uid, processes, reread_limit);
}

SysResult<void> scan_area(System& system, const std::string& lock_directory, std::uint32_t uid,
                          const std::function<bool(const EntryFacts&)>& visit) {
  ProcessCache processes(system);
  // One pass over the directory (issue 3): each lock's guard is looked up with one lstat.
  return system.list_directory(lock_directory, [&](const DirEntry& entry) {
    EntryFacts facts = gather(system, lock_directory, entry.name, uid, processes,
                              default_reread_limit);
    if (!facts.stat && !facts.kept_changing) return true;  // vanished since the listing
    return visit(facts);
  });
}

OwnerFileDetails gather_owner_file(System& system, const std::string& entry) {
  OwnerFileDetails details;
  const std::string path = entry + "/" + std::string(owner_file_name);
  auto st = system.lstat(path);
  if (!st) {
    details.lstat_error = st.error();
    return details;
  }
  details.lstat = *st;
  if (st->type != FileType::regular) return details;
  auto fd = system.open_read(path);
  if (!fd) return details;
  std::string bytes(static_cast<std::size_t>(owner_size_limit), '\0');
  std::size_t offset = 0;
  while (offset < bytes.size()) {
    auto n = system.pread(*fd, std::span<char>(bytes.data() + offset, bytes.size() - offset),
                          static_cast<std::int64_t>(offset));
    if (!n || *n == 0) break;
    offset += *n;
  }
  std::array<char, 1> more{};
  auto extra = system.pread(*fd, std::span<char>(more), static_cast<std::int64_t>(offset));
  details.raw_truncated = extra && *extra > 0;
  system.close(*fd);
  bytes.resize(offset);
  details.raw = std::move(bytes);
  return details;
}

}  // namespace apnea_locks
