#include "apnea_locks/scan.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdlib>

#include "apnea_locks/owner.h"
#include "detail/owner.h"
#include "detail/probe.h"
#include "detail/scan.h"

namespace apnea_locks {
using detail::has_owner_record;
using detail::read_owner_settled;  // detail/owner.h
using detail::SettledRead;
using detail::minimum_reuse_tolerance;  // detail/probe.h
using detail::namespace_carriers;
using detail::pid_max_limit;
using detail::default_reread_limit;  // detail/scan.h
using detail::GuardListing;
using detail::ProcessCache;

namespace {
/// Pids below this (Linux's PID_MAX_LIMIT) are remembered in bitsets; above it no process
/// can exist and each costs a map entry.
constexpr std::size_t bitset_limit = std::size_t{1} << 22;
}  // namespace

ProcessFacts ProcessCache::own(double pid) {
  // Only pids Node can signal are probed; the rest cost no system call to judge.
  if (!(pid > 0) || pid > 2147483647.0) return gather_process(system_, pid, nullptr);
  const auto number = static_cast<std::int64_t>(pid);
  const auto index = static_cast<std::size_t>(number);
  {
    std::lock_guard lock(mutex_);
    if (index < dead_.size() && dead_[index]) {
      ProcessFacts facts;
      facts.pid = pid;
      facts.signal_errno = ESRCH;
      facts.from_cache = true;
      return facts;
    }
    if (auto found = other_.find(number); found != other_.end()) {
      ProcessFacts facts = found->second;
      facts.from_cache = true;
      return facts;
    }
  }

  ProcessFacts facts = gather_process(system_, pid, nullptr);
  const bool dead = facts.signal_errno == ESRCH && !facts.info;
  std::lock_guard lock(mutex_);
  if (dead && index < bitset_limit) {
    if (index >= dead_.size()) dead_.resize(std::max<std::size_t>(4096, std::bit_ceil(index + 1)));
    dead_[index] = true;
  } else {
    other_.emplace(number, facts);
  }
  return facts;
}

ProcessFacts ProcessCache::with_carriers(ProcessFacts facts, bool needed) {
  std::lock_guard lock(mutex_);
  if (!view_ && needed) {  // once: the others wait for it
    view_ = system_.namespace_view();
    for (ProcessInfo& process : *view_) detail::note_runtime_sign(system_, process);
  }
  if (view_) {
    facts.ns_carriers = namespace_carriers(*view_, facts.pid);
    facts.namespace_view_read = true;
  }
  return facts;
}

ProcessFacts ProcessCache::get(double pid, std::uint32_t area_uid, std::int64_t written_ns) {
  ProcessFacts facts = own(pid);
  HostFacts widest = host_;
  {
    std::lock_guard lock(mutex_);
    if (view_) {
      facts.ns_carriers = namespace_carriers(*view_, facts.pid);
      facts.namespace_view_read = true;
      return facts;
    }
    if (widest.boot_time_ns <= 0) {
      if (boot_time_ns_ < 0) boot_time_ns_ = system_.boot_time_ns();
      widest.boot_time_ns = boot_time_ns_;
    }
  }
  // Would any policy's judgement exclude (or miss) the carrier in our namespace? Only then
  // can carriers elsewhere change it.
  widest.idmapped = false;
  const DeathProof reason =
      judge_death(facts, widest, area_uid, written_ns, minimum_reuse_tolerance).reason;
  return with_carriers(std::move(facts), reason != DeathProof::pid_out_of_range &&
                                             (every_carrier_ || reason != DeathProof::none));
}

ProcessFacts ProcessCache::get(double pid) {
  ProcessFacts facts = own(pid);
  const bool in_range = pid >= 1 && pid < double(pid_max_limit);
  return with_carriers(std::move(facts),
                       in_range && (facts.signal_errno == ESRCH || facts.info.has_value()));
}

std::string entry_path(std::string_view directory, std::string_view name) {
  std::string path(directory);
  if (path.empty()) return std::string(name);
  if (path.back() != '/') path += '/';
  path += name;
  return path;
}

namespace {

/// The largest owner record scanned for the pids it names when Apnea would not read it
/// (too large, wrong mode or owner): larger ones count as naming unknown pids.
constexpr std::int64_t record_scan_limit = std::int64_t{1} << 20;

/// Fills `facts.named` (every pid the record names, probed) and `facts.pids_unknown`. A
/// record Apnea rejected before reading its bytes is read here without following a symlink
/// and without blocking on a FIFO, so a malformed record still names its writer.
void name_pids(System& system, const DirRef& dir, EntryFacts& facts, const OwnerRead& read,
               std::uint32_t uid, ProcessCache& processes) {
  std::optional<std::string> bytes = read.bytes;
  if (!bytes && !read.owner) {
    switch (read.owner.error().check) {
      case OwnerCheck::owner_missing:
      case OwnerCheck::owner_empty: return;  // no record: names no pid
      case OwnerCheck::lock_symlink:
      case OwnerCheck::lock_not_directory:
      case OwnerCheck::lock_unreadable:  // nothing is read through a symlink
        facts.pids_unknown = true;
        return;
      default: break;
    }
    std::string relative = facts.name;
    relative += '/';
    relative += owner_file_name;
    if (auto opened = system.open_read_in(dir, relative)) {
      const Descriptor fd(system, *opened);
      auto st = system.fstat(fd.get());
      if (st && st->type == FileType::regular && st->size <= record_scan_limit) {
        if (auto data = read_at_most(system, fd.get(), static_cast<std::size_t>(st->size))) {
          bytes = std::move(*data);
          if (facts.written_ns == 0) facts.written_ns = st->mtime_ns;
        }
      }
    }
    if (!bytes) {
      facts.pids_unknown = true;
      return;
    }
  }
  // An accepted record with one literal "pid" key and no escape (so no key spelled another
  // way) names exactly its owner's pid: no second parse for it. Apnea's own records are so.
  const bool canonical = read.owner && bytes && bytes->find('\\') == std::string::npos &&
                         bytes->find("\"pid\"") == bytes->rfind("\"pid\"");
  std::vector<double> pids = bytes && !canonical ? named_pids(*bytes) : std::vector<double>{};
  // A rejected record whose text ends inside a run of digits that reads as one of the pids
  // it names was cut inside that pid: it names every pid those digits begin.
  if (!read.owner && bytes && !bytes->empty() && bytes->back() >= '0' && bytes->back() <= '9') {
    const auto start = bytes->find_last_not_of("0123456789") + 1;
    const std::string digits = bytes->substr(start);
    const double value = std::strtod(digits.c_str(), nullptr);
    if (std::find(pids.begin(), pids.end(), value) != pids.end()) facts.truncated_pid = digits;
  }
  if (read.owner && std::find(pids.begin(), pids.end(), read.owner->pid) == pids.end())
    pids.push_back(read.owner->pid);
  facts.named.reserve(pids.size());
  for (double pid : pids) {
    if (read.owner && pid == read.owner->pid && facts.process) {
      facts.named.emplace_back(pid, *facts.process);
      continue;
    }
    facts.named.emplace_back(pid, processes.get(pid, uid, facts.written_ns));
  }
}

/// gather_entry, sharing `processes` across a scan.
EntryFacts gather(System& system, const DirRef& dir, std::string_view name, EntryName parsed,
                  std::uint32_t uid, ProcessCache& processes, int reread_limit, GuardListing guard) {
  EntryFacts facts;
  facts.name = std::string(name);
  facts.path = dir.join(name);
  facts.parsed = std::move(parsed);

  if (!has_owner_record(facts.parsed.role)) {
    auto st = system.lstat_in(dir, name);
    if (st) facts.stat = *st;
    return facts;
  }

  auto fill = [&](OwnerRead read) {
    facts.stat = read.lock_stat;
    facts.written_ns = read.owner_stat ? read.owner_stat->mtime_ns : 0;
    if (read.owner) facts.process = processes.get(read.owner->pid, uid, facts.written_ns);
    name_pids(system, dir, facts, read, uid, processes);
    facts.owner = std::move(read);
  };
  OwnerRead read = read_owner(system, dir, name, uid);
  if (!read.owner && read.owner.error().lock_vanished()) return facts;  // gone: no stat
  const bool rejected_lock = facts.parsed.role == EntryRole::lock && !read.owner;
  fill(std::move(read));
  // A lock that changes under the reader (a release, then maybe a new owner reusing the
  // inode number) is read again, never reported malformed: the core's settled-read rule.
  // One lstat after the probes settles it when the directory is unchanged: Apnea never
  // rewrites a published owner.json, and a lock renamed away or replaced has another
  // inode or ctime. Otherwise whole reads follow until two agree (read_owner_settled).
  if (rejected_lock) {
    const std::optional<FileStat>& first = facts.owner->lock_stat;
    const std::optional<FileStat> again =
        first ? system.lstat_in(dir, name).value_or(FileStat{}) : std::optional<FileStat>();
    if (first && again && again->unchanged_since(*first)) {
      facts.confirmed_after_probe = true;
    } else {
      EntryFacts fresh;
      fresh.name = std::move(facts.name);
      fresh.path = std::move(facts.path);
      fresh.parsed = std::move(facts.parsed);
      facts = std::move(fresh);
      SettledRead settled = read_owner_settled(system, dir, name, uid, reread_limit);
      facts.kept_changing = !settled.settled;
      if (!settled.read.owner && settled.read.owner.error().lock_vanished()) return facts;
      fill(std::move(settled.read));
    }
  }
  // A lock's guard decides its reclamation; a candidate's or tombstone's too, since they
  // are removed only while holding it. A survey knows from its listing whether there is one.
  if (!facts.kept_changing && guard != GuardListing::absent) {
    auto found = system.lstat_in(dir, reclaim_guard_path(facts.parsed.lock_name()));
    if (found) facts.guard = *found;
  }
  return facts;
}

}  // namespace

EntryFacts detail::gather_entry(System& system, std::string_view lock_directory, std::string_view name,
                        std::uint32_t uid, ProcessCache& processes, int reread_limit) {
  return gather(system, DirRef{-1, std::string(lock_directory)}, name, parse_entry_name(name), uid,
                processes, reread_limit, GuardListing::unknown);
}

EntryFacts detail::gather_entry_in(System& system, const DirRef& directory, std::string_view name,
                           EntryName parsed, std::uint32_t uid, ProcessCache& processes,
                           GuardListing guard, int reread_limit) {
  return gather(system, directory, name, std::move(parsed), uid, processes, reread_limit, guard);
}

SysResult<void> scan_area(System& system, const std::string& lock_directory, std::uint32_t uid,
                          const std::function<bool(const EntryFacts&)>& visit) {
  ProcessCache processes(system);
  // One pass over the directory: each lock's guard is looked up with one lstat.
  return system.list_directory(lock_directory, [&](const DirEntry& entry) {
    EntryFacts facts = gather(system, DirRef{-1, lock_directory}, entry.name,
                              parse_entry_name(entry.name), uid, processes, default_reread_limit,
                              GuardListing::unknown);
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
  auto opened = system.open_read(path);
  if (!opened) return details;
  const Descriptor fd(system, *opened);
  // One byte past the limit tells whether the file holds more than is shown.
  const auto limit = static_cast<std::size_t>(owner_size_limit);
  auto bytes = read_at_most(system, fd.get(), limit + 1);
  if (!bytes) return details;
  details.raw_truncated = bytes->size() > limit;
  if (details.raw_truncated) bytes->resize(limit);
  details.raw = std::move(*bytes);
  return details;
}

}  // namespace apnea_locks
