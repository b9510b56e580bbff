#include "apnea_locks/probe.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

namespace apnea_locks {
namespace {
/// The largest pid Node's process.kill accepts (`pid === (pid | 0)`).
constexpr double node_signal_limit = 2147483647.0;

/// Splits `text` at `separator`, keeping empty parts.
template <class Visit>
void split(std::string_view text, char separator, Visit visit) {
  std::size_t at = 0;
  for (;;) {
    const std::size_t end = text.find(separator, at);
    if (end == std::string_view::npos) {
      visit(text.substr(at));
      return;
    }
    visit(text.substr(at, end - at));
    at = end + 1;
  }
}

bool parse_device(std::string_view text, std::uint64_t& major, std::uint64_t& minor) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  const char* end = text.data() + colon;
  auto first = std::from_chars(text.data(), end, major);
  if (first.ec != std::errc() || first.ptr != end || colon == 0) return false;
  const char* last = text.data() + text.size();
  auto second = std::from_chars(end + 1, last, minor);
  return second.ec == std::errc() && second.ptr == last && end + 1 != last;
}

/// One mountinfo line; nothing when it does not have the shape proc(5) describes.
std::optional<MountEntry> parse_mount_line(std::string_view line) {
  std::vector<std::string_view> fields;
  split(line, ' ', [&](std::string_view field) { fields.push_back(field); });
  // id parent major:minor root mount-point options [optional...] - fstype source super
  if (fields.size() < 10) return std::nullopt;
  const auto dash = std::find(fields.begin() + 6, fields.end(), std::string_view("-"));
  if (dash == fields.end() || fields.end() - dash != 4) return std::nullopt;
  MountEntry entry;
  if (!parse_device(fields[2], entry.major, entry.minor)) return std::nullopt;
  entry.mount_point = std::string(fields[4]);
  entry.mount_options = std::string(fields[5]);
  entry.fstype = std::string(dash[1]);
  entry.super_options = std::string(dash[3]);
  return entry;
}

bool has_option(std::string_view options, std::string_view wanted) {
  bool found = false;
  split(options, ',', [&](std::string_view option) { found = found || option == wanted; });
  return found;
}

}  // namespace

bool local_filesystem_magic(std::uint64_t magic) {
  switch (magic) {
    case 0x01021994:  // tmpfs
    case 0xEF53:      // ext2, ext3, ext4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0xF2F52010:  // f2fs
    case 0x2FC12FC1:  // zfs
    case 0xCA451A4E:  // bcachefs
    case 0x794C7630:  // overlay
      return true;
    default: return false;
  }
}

std::string filesystem_name(std::uint64_t magic) {
  switch (magic) {
    case 0x01021994: return "tmpfs";
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0xF2F52010: return "f2fs";
    case 0x2FC12FC1: return "zfs";
    case 0xCA451A4E: return "bcachefs";
    case 0x794C7630: return "overlay";
    case 0x6969: return "nfs";
    case 0xFF534D42: return "cifs";
    case 0xFE534D42: return "smb2";
    case 0x517B: return "smb";
    case 0x65735546: return "fuse";
    case 0x01021997: return "9p";
    case 0x00C36400: return "ceph";
    case 0x5346414F: return "afs";
    case 0x47504653: return "gpfs";
    case 0x0BD00BD0: return "lustre";
    case 0x01161970: return "gfs2";
    case 0x7461636F: return "ocfs2";
    case 0x858458F6: return "ramfs";
    case 0x4D44: return "vfat";
    case 0x73717368: return "squashfs";
    default: break;
  }
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(magic));
  return text;
}

std::vector<MountEntry> parse_mountinfo(std::string_view text, bool* complete) {
  std::vector<MountEntry> entries;
  bool all = true;
  split(text, '\n', [&](std::string_view line) {
    if (line.empty()) return;
    if (auto entry = parse_mount_line(line)) entries.push_back(std::move(*entry));
    else all = false;
  });
  if (complete != nullptr) *complete = all;
  return entries;
}

bool device_idmapped(std::string_view mountinfo, std::uint64_t major, std::uint64_t minor) {
  bool complete = false;
  const std::vector<MountEntry> entries = parse_mountinfo(mountinfo, &complete);
  if (!complete || entries.empty()) return true;
  bool listed = false;
  for (const MountEntry& entry : entries) {
    if (entry.major != major || entry.minor != minor) continue;
    listed = true;
    if (has_option(entry.mount_options, "idmapped")) return true;
  }
  return !listed;
}

std::string proc_super_options(std::string_view mountinfo) {
  std::string options;
  for (const MountEntry& entry : parse_mountinfo(mountinfo)) {
    if (entry.mount_point != "/proc") continue;
    // A later mount on /proc hides the earlier ones; one that is not proc shows no table.
    options = entry.fstype == "proc" ? entry.super_options : std::string();
  }
  return options;
}

bool proc_options_hide_processes(std::string_view super_options) {
  if (super_options.empty()) return true;
  bool hides = false;
  split(super_options, ',', [&](std::string_view option) {
    if (option.starts_with("hidepid=")) {
      const std::string_view value = option.substr(8);
      if (value != "0" && value != "off") hides = true;
    } else if (option.starts_with("subset=")) {
      hides = true;  // subset=pid: the only subset there is
    }
  });
  return hides;
}


ProcessFacts gather_process(System& system, double pid) {
  ProcessFacts facts;
  facts.pid = pid;
  facts.pid_max = system.pid_max();
  facts.boot_time_ns = system.boot_time_ns();
  if (!(pid > 0) || pid > node_signal_limit) return facts;
  const auto number = static_cast<std::int64_t>(pid);
  facts.signal_errno = system.signal_probe(number);
  if (facts.signal_errno == ESRCH || number >= facts.pid_max) return facts;
  facts.info = system.process_info(number);
  // Exited between the signal and the /proc read: ask the kernel again, so the verdict
  // rests on one consistent answer.
  if (!facts.info) facts.signal_errno = system.signal_probe(number);
  return facts;
}

bool apnea_alive(const ProcessFacts& facts) { return facts.signal_errno != ESRCH; }

std::string_view proof_name(DeathProof proof) {
  switch (proof) {
    case DeathProof::none: return "none";
    case DeathProof::pid_out_of_range: return "pid-out-of-range";
    case DeathProof::pid_dead: return "pid-dead";
    case DeathProof::zombie: return "zombie";
    case DeathProof::pid_other_uid: return "pid-other-uid";
    case DeathProof::pid_is_thread: return "pid-is-thread";
    case DeathProof::pid_reused: return "pid-reused";
    case DeathProof::predates_boot: return "predates-boot";
  }
  return "none";
}

bool proof_is_certain(DeathProof proof) {
  return proof != DeathProof::none && proof != DeathProof::pid_reused &&
         proof != DeathProof::predates_boot;
}

DeathProof prove_death(const ProcessFacts& facts, std::uint32_t area_uid, std::int64_t written_ns,
                       std::int64_t tolerance_ns) {
  if (facts.pid > node_signal_limit || (facts.pid_max > 0 && facts.pid >= double(facts.pid_max)))
    return DeathProof::pid_out_of_range;
  if (facts.signal_errno == ESRCH) return DeathProof::pid_dead;
  if (!facts.info) return DeathProof::none;
  const ProcessInfo& info = *facts.info;
  if (info.state == 'Z' || info.state == 'X') return DeathProof::zombie;
  if (info.uid != area_uid) return DeathProof::pid_other_uid;
  if (info.tgid != 0 && double(info.tgid) != facts.pid) return DeathProof::pid_is_thread;
  if (info.start_time_ns > written_ns + tolerance_ns) return DeathProof::pid_reused;
  if (facts.boot_time_ns > 0 && written_ns < facts.boot_time_ns) return DeathProof::predates_boot;
  return DeathProof::none;
}

}  // namespace apnea_locks
