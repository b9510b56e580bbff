#include "apnea_locks/probe.h"

#include <sys/sysmacros.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "detail/probe.h"
#include "detail/split.h"

namespace apnea_locks {
using detail::device_idmapped;
using detail::filesystem_name;
using detail::local_filesystem_magic;
using detail::minimum_reuse_tolerance;
using detail::initial_pid_namespace_inode;
using detail::initial_user_namespace_inode;
using detail::MountEntry;
using detail::namespace_carriers;
using detail::parse_mountinfo;
using detail::pid_max_limit;
using detail::proc_options_hide_processes;
using detail::proc_super_options;

namespace {
/// How far btime and the birth of /dev may differ before clock evidence is void: 60 s.
constexpr std::int64_t clock_step_limit_ns = 60'000'000'000;

/// The largest pid Node's process.kill accepts (`pid === (pid | 0)`).
constexpr double node_signal_limit = 2147483647.0;

/// A pid number that may reach kill(): an integer in 1..2^31-1.
bool signalable(double pid) { return pid >= 1 && pid <= node_signal_limit && pid == std::floor(pid); }

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
  for (std::string_view field : detail::split_parts(line, ' ')) fields.push_back(field);
  // id parent major:minor root mount-point options [optional...] - fstype source super
  if (fields.size() < 10) return std::nullopt;
  const auto dash = std::find(fields.begin() + 6, fields.end(), std::string_view("-"));
  if (dash == fields.end() || fields.end() - dash != 4) return std::nullopt;
  MountEntry entry;
  if (!parse_device(fields[2], entry.major, entry.minor)) return std::nullopt;
  entry.root = std::string(fields[3]);
  entry.mount_point = std::string(fields[4]);
  entry.mount_options = std::string(fields[5]);
  entry.fstype = std::string(dash[1]);
  entry.super_options = std::string(dash[3]);
  return entry;
}

bool has_option(std::string_view options, std::string_view wanted) {
  bool found = false;
  for (std::string_view option : detail::split_parts(options, ',')) found = found || option == wanted;
  return found;
}

/// How one carrier is shown not to be the writer without a clock (none: it is not).
/// `carrier_pid` is its pid in our namespace.
DeathProof certain_exclusion(const ProcessInfo& carrier, std::int64_t carrier_pid,
                             const HostFacts& host, std::uint32_t area_uid) {
  if (detail::exited(carrier)) return DeathProof::zombie;
  // A kernel thread runs no user program: whatever its uid (root's), it is not the writer.
  if (carrier.kernel_thread) return DeathProof::pid_is_kernel_thread;
  // Another account by every uid it could have written with. Root's area (a root writer may
  // have dropped privileges since) and idmapped mounts (the file's uid is translated) make
  // the difference meaningless.
  if (detail::another_account(carrier, host, area_uid)) return DeathProof::pid_other_uid;
  // A thread that is not its process's leader: the writer's pid was its own leader's.
  if (carrier.tgid > 0 && carrier_pid > 0 && carrier.tgid != carrier_pid)
    return DeathProof::pid_is_thread;
  return DeathProof::none;
}

/// How one carrier is shown not to be the writer by the clock (none: it is not).
DeathProof clock_exclusion(const ProcessInfo& carrier, const HostFacts& host,
                           std::int64_t written_ns, std::chrono::nanoseconds tolerance) {
  if (carrier.start_time_ns > written_ns + tolerance.count()) return DeathProof::pid_reused;
  if (host.boot_time_ns > 0 && written_ns < host.boot_time_ns) return DeathProof::predates_boot;
  return DeathProof::none;
}

bool clock_proof(DeathProof proof) {
  return proof == DeathProof::pid_reused || proof == DeathProof::predates_boot;
}

/// Whether `carrier` was seen to run no recognised runtime (PROTOCOL.md section 9, proof 9):
/// its sign was read and nothing said so ("unreadable: ..." is a sign).
bool runs_no_runtime(const ProcessInfo& carrier) {
  return carrier.runtime_sign && carrier.runtime_sign->empty();
}

/// The weaker of two proofs (the enum lists them strongest first).
DeathProof weaker(DeathProof a, DeathProof b) { return std::max(a, b); }
}  // namespace

std::string_view proof_class_name(ProofClass c) {
  switch (c) {
    case ProofClass::none: return "none";
    case ProofClass::evidence: return "evidence";
    case ProofClass::certain: return "certain";
  }
  return "none";
}

bool HostFacts::clock_void() const {
  if (other_time_namespace || boot_time_ns <= 0 || !dev_birth_ns) return true;
  const std::int64_t gap = boot_time_ns - *dev_birth_ns;
  return gap > clock_step_limit_ns || gap < -clock_step_limit_ns;
}

std::string HostFacts::why_clock_void() const {
  if (!clock_void()) return {};
  if (other_time_namespace) return "apnea-locks runs in a time namespace of its own";
  if (boot_time_ns <= 0) return "the boot time (btime) is unknown";
  if (!dev_birth_ns) return "/dev has no birth time to check the boot time against";
  return fmt::format("the wall clock stepped {} s since boot (btime and /dev's birth differ)",
                     (boot_time_ns - *dev_birth_ns) / 1'000'000'000);
}

bool HostFacts::sees_every_process() const {
  return initial_pid_namespace && initial_user_namespace && process_table_complete && exported_by.empty() &&
         served_by.empty();
}

bool HostFacts::can_be_certain() const { return local_filesystem && sees_every_process(); }

std::string HostFacts::why_not_certain() const {
  if (!local_filesystem)
    return "the lock area is on " + (filesystem.empty() ? std::string("an unknown filesystem") : filesystem) +
           ", not a local filesystem";
  if (!initial_pid_namespace) return "apnea-locks runs outside the initial PID namespace";
  if (!initial_user_namespace) return "apnea-locks runs outside the initial user namespace";
  if (!process_table_complete) return "/proc hides other users' processes (hidepid or subset=pid)";
  if (!exported_by.empty())
    return "the lock area is exported over NFS (" + exported_by +
           " in /proc/fs/nfsd/exports): another machine's Apnea may hold its locks";
  if (!served_by.empty())
    return "a file server or sync process reaches the lock area (" + served_by +
           "): another machine's Apnea may hold its locks";
  return {};
}

namespace detail {

bool exited(const ProcessInfo& process) {
  return (process.state == 'Z' || process.state == 'X') && process.threads == 1;
}

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
  for (std::string_view line : split_parts(text, '\n')) {
    if (line.empty()) continue;
    if (auto entry = parse_mount_line(line)) entries.push_back(std::move(*entry));
    else all = false;
  }
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
  for (std::string_view option : split_parts(super_options, ',')) {
    if (option.starts_with("hidepid=")) {
      const std::string_view value = option.substr(8);
      if (value != "0" && value != "off") hides = true;
    } else if (option.starts_with("subset=")) {
      hides = true;  // subset=pid: the only subset there is
    }
  }
  return hides;
}

}  // namespace detail

namespace {
HostFacts gather(System& system, const std::string& area_directory,
                 std::optional<std::uint64_t> area_dev) {
  HostFacts host;
  // mountinfo tells both the options of /proc and the area's mount: read once, when first
  // needed (root needs neither the /proc options nor, for an area that is gone, the mount).
  std::optional<std::string> mountinfo;
  auto mounts = [&]() -> const std::string& {
    if (!mountinfo) mountinfo = system.mount_info();
    return *mountinfo;
  };
  host.initial_pid_namespace = system.namespace_inode("pid") == initial_pid_namespace_inode;
  host.initial_user_namespace = system.namespace_inode("user") == initial_user_namespace_inode;
  const std::optional<std::uint64_t> time_namespace = system.namespace_inode("time");
  host.other_time_namespace = time_namespace && *time_namespace != detail::initial_time_namespace_inode;
  host.mount_namespace = system.namespace_inode("mnt");
  host.process_table_complete =
      system.euid() == 0 || !proc_options_hide_processes(proc_super_options(mounts()));
  if (auto magic = system.filesystem_magic(area_directory)) {
    host.filesystem = filesystem_name(*magic);
    host.local_filesystem = local_filesystem_magic(*magic);
  } else {
    host.filesystem = "unknown";
  }
  host.area_device = area_dev;
  if (area_dev) {
    const auto dev = static_cast<dev_t>(*area_dev);
    host.idmapped = device_idmapped(mounts(), major(dev), minor(dev));
  }
  host.boot_time_ns = system.boot_time_ns();
  host.dev_birth_ns = system.birth_time_ns("/dev");
  // Exports and the descriptors file servers keep open name real paths: compare with the area's (as
  // typed when it cannot be resolved).
  const SysResult<std::string> real = system.realpath(area_directory);
  const std::string& area_path = real ? *real : area_directory;
  if (const std::optional<std::string> exports = system.nfs_exports(); exports && !exports->empty())
    host.exported_by = detail::export_covering(*exports, area_path);
  host.served_by = system.file_server_reaching(area_path).value_or("the process table cannot be listed");
  return host;
}
}  // namespace

HostFacts gather_host(System& system, const std::string& area_directory, std::uint64_t area_dev) {
  return gather(system, area_directory, area_dev);
}

HostFacts gather_host(System& system, const std::string& area_directory) {
  auto st = system.lstat(area_directory);
  return gather(system, area_directory, st ? std::optional(st->dev) : std::nullopt);
}

std::string detail::export_covering(std::string_view exports, std::string_view path) {
  for (std::string_view line : split_parts(exports, '\n')) {
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos || line[start] == '#') continue;
    line.remove_prefix(start);
    const std::string_view field = line.substr(0, line.find_first_of(" \t"));
    std::string exported;
    for (std::size_t i = 0; i < field.size(); ++i) {
      if (field[i] == '\\' && i + 3 < field.size() &&
          std::all_of(field.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                      field.begin() + static_cast<std::ptrdiff_t>(i) + 4,
                      [](char c) { return c >= '0' && c <= '7'; })) {
        exported += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
        i += 3;
      } else {
        exported += field[i];
      }
    }
    while (exported.size() > 1 && exported.back() == '/') exported.pop_back();
    if (exported.empty()) continue;
    const bool covers = exported == "/" || path == exported ||
                        (path.starts_with(exported) && path.size() > exported.size() &&
                         path[exported.size()] == '/');
    if (covers) return exported;
  }
  return {};
}

void detail::note_runtime_sign(System& system, ProcessInfo& carrier) {
  // A zombie or a kernel thread is settled by other proofs.
  if (carrier.kernel_thread || carrier.state == 'Z' || carrier.state == 'X' || carrier.pid <= 0) return;
  carrier.runtime_sign = system.runtime_sign(carrier.pid);
}

std::vector<ProcessInfo> detail::namespace_carriers(const std::vector<ProcessInfo>& view,
                                                    double pid) {
  std::vector<ProcessInfo> carriers;
  if (!signalable(pid)) return carriers;
  const auto number = static_cast<std::int64_t>(pid);
  for (const ProcessInfo& process : view) {
    if (std::find(process.nspid.begin() + std::min<std::size_t>(1, process.nspid.size()),
                  process.nspid.end(), number) != process.nspid.end())
      carriers.push_back(process);
  }
  return carriers;
}

ProcessFacts gather_process(System& system, double pid, const std::vector<ProcessInfo>* view) {
  ProcessFacts facts;
  facts.pid = pid;
  if (signalable(pid)) {
    const auto number = static_cast<std::int64_t>(pid);
    facts.signal_errno = system.signal_probe(number);
    if (facts.signal_errno != ESRCH) {
      facts.info = system.process_info(number);
      // Exited between the signal and the /proc read: ask the kernel again, so the verdict
      // rests on one consistent answer.
      if (!facts.info) facts.signal_errno = system.signal_probe(number);
      else detail::note_runtime_sign(system, *facts.info);
    }
  }
  if (view != nullptr) {
    facts.ns_carriers = namespace_carriers(*view, pid);
    facts.namespace_view_read = true;
  }
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
    case DeathProof::pid_is_kernel_thread: return "pid-is-kernel-thread";
    case DeathProof::pid_reused: return "pid-reused";
    case DeathProof::predates_boot: return "predates-boot";
    case DeathProof::pid_not_runtime: return "pid-not-runtime";
    case DeathProof::operator_word: return "operator";
  }
  return "none";
}

namespace {
/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}
}  // namespace

std::string utc_second_text(std::int64_t ns) {
  std::int64_t seconds = ns / 1'000'000'000;
  if (ns < 0 && ns % 1'000'000'000 != 0) --seconds;  // rounded down
  std::int64_t days = seconds / 86400;
  std::int64_t rest = seconds % 86400;
  if (rest < 0) {
    rest += 86400;
    --days;
  }
  // civil_from_days (Howard Hinnant).
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const auto doe = static_cast<unsigned>(days - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", y, m, d, rest / 3600, rest / 60 % 60, rest % 60);
}

std::optional<NotOwner> parse_not_owner(std::string_view text) {
  const std::size_t at = text.find('@');
  if (at == std::string_view::npos || at == 0 || at > 10) return std::nullopt;
  NotOwner word;
  const std::string_view pid = text.substr(0, at);
  if (!std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  auto [end, error] = std::from_chars(pid.data(), pid.data() + pid.size(), word.pid);
  if (error != std::errc() || end != pid.data() + pid.size() || word.pid < 1 || word.pid > 2147483647)
    return std::nullopt;
  // YYYY-MM-DDTHH:MM:SSZ, exactly.
  const std::string_view when = text.substr(at + 1);
  if (when.size() != 20 || when[4] != '-' || when[7] != '-' || when[10] != 'T' || when[13] != ':' ||
      when[16] != ':' || when[19] != 'Z')
    return std::nullopt;
  auto number = [&](std::size_t from, std::size_t length) -> std::optional<unsigned> {
    unsigned value = 0;
    for (std::size_t i = from; i < from + length; ++i) {
      if (when[i] < '0' || when[i] > '9') return std::nullopt;
      value = value * 10 + static_cast<unsigned>(when[i] - '0');
    }
    return value;
  };
  const auto y = number(0, 4), mo = number(5, 2), d = number(8, 2), h = number(11, 2),
             mi = number(14, 2), se = number(17, 2);
  if (!y || !mo || !d || !h || !mi || !se || *y < 1970 || *mo < 1 || *mo > 12 || *d < 1 ||
      *h > 23 || *mi > 59 || *se > 59)
    return std::nullopt;
  const std::int64_t days = days_from_civil(*y, *mo, *d);
  // A day that does not exist (31 April) comes back as another date.
  if (utc_second_text(days * 86'400'000'000'000).substr(0, 10) != when.substr(0, 10)) return std::nullopt;
  word.start_s = days * 86400 + *h * 3600 + *mi * 60 + *se;
  return word;
}

std::string not_owner_text(const ProcessInfo& process) {
  if (process.start_time_ns <= 0 || process.pid <= 0) return {};
  return fmt::format("{}@{}", process.pid, utc_second_text(process.start_time_ns));
}

bool names_process(const NotOwner& word, const ProcessInfo& process) {
  return process.start_time_ns > 0 && word.pid == process.pid &&
         word.start_s == process.start_time_ns / 1'000'000'000;
}

bool detail::another_account_by_uids(const ProcessInfo& process, const HostFacts& host,
                                     std::uint32_t area_uid) {
  return process.uids_known && area_uid != 0 && !host.idmapped &&
         std::none_of(process.uids.begin(), process.uids.end(),
                      [&](std::uint32_t uid) { return uid == area_uid; });
}

bool detail::another_account(const ProcessInfo& process, const HostFacts& host, std::uint32_t area_uid) {
  if (!another_account_by_uids(process, host, area_uid)) return false;
  // In another mount namespace an idmapped mount we cannot see may translate its uid: ours,
  // or its own mounts show none of the area's device (listed, and none idmapped).
  if (process.mount_namespace)
    return host.mount_namespace && *process.mount_namespace == *host.mount_namespace;
  if (!process.mount_info || !host.area_device) return false;
  const auto dev = static_cast<dev_t>(*host.area_device);
  return !device_idmapped(*process.mount_info, major(dev), minor(dev));
}

bool detail::proof_is_certain(DeathProof proof) {
  return proof != DeathProof::none && proof != DeathProof::operator_word &&
         proof != DeathProof::pid_not_runtime && !clock_proof(proof);
}

bool DeathJudgement::merge(const DeathJudgement& other) {
  if (!operator_exempt) operator_exempt = other.operator_exempt;
  if (!word_mismatch) word_mismatch = other.word_mismatch;
  uses_clock = uses_clock || other.uses_clock;
  uses_visibility = uses_visibility || other.uses_visibility;
  uses_runtime = uses_runtime || other.uses_runtime;
  tolerance = std::max(tolerance, other.tolerance);
  clock_void = clock_void || other.clock_void;
  remote_filesystem = remote_filesystem || other.remote_filesystem;
  if (other.proof >= proof) return false;
  proof = other.proof;
  reason = other.reason;
  blocker = other.blocker;
  return true;
}

namespace {

/// What judge_death shows one carrier with.
struct Exclusions {
  const HostFacts& host;
  std::uint32_t area_uid;
  std::int64_t written_ns;
  std::chrono::nanoseconds tolerance;
  std::span<const NotOwner> not_owners;

  /// The proof that `carrier` (pid `carrier_pid` in our namespace) is not the writer, none
  /// when nothing shows it. Records in `judged` the operator's word it used, or a word that
  /// names its pid with another start time; sets `other_mounts` when the proof rests on a
  /// uid seen from another (or an unknown) mount namespace.
  DeathProof of(const ProcessInfo& carrier, std::int64_t carrier_pid, DeathJudgement& judged,
                bool& other_mounts) const {
    DeathProof proof = certain_exclusion(carrier, carrier_pid, host, area_uid);
    // Another account by its uids, but in another (or an unknown) mount namespace: evidence.
    if (proof == DeathProof::none && detail::another_account_by_uids(carrier, host, area_uid)) {
      proof = DeathProof::pid_other_uid;
      other_mounts = true;
    }
    if (proof == DeathProof::none) proof = clock_exclusion(carrier, host, written_ns, tolerance);
    const bool unproven = proof == DeathProof::none || (clock_proof(proof) && host.clock_void());
    // No clock needed: a process that runs no recognised runtime is not an Apnea.
    if (unproven && runs_no_runtime(carrier)) return DeathProof::pid_not_runtime;
    if (!unproven) return proof;
    // The operator's word covers a carrier nothing else excludes (or only void clock
    // evidence does), and only the process it names: same pid, same start.
    for (const NotOwner& word : not_owners) {
      if (word.pid != carrier_pid) continue;
      if (names_process(word, carrier)) {
        proof = DeathProof::operator_word;
        judged.operator_exempt = carrier;
      } else if (!judged.word_mismatch) {
        judged.word_mismatch = carrier;
      }
    }
    return proof;
  }
};

}  // namespace

DeathJudgement judge_death(const ProcessFacts& facts, const HostFacts& host, std::uint32_t area_uid,
                           std::int64_t written_ns, std::chrono::nanoseconds tolerance,
                           std::span<const NotOwner> not_owners) {
  DeathJudgement judged;
  judged.remote_filesystem = !host.local_filesystem;
  const bool sees_everything = host.sees_every_process();
  // Which carriers' exclusions rest on the clock or on the runtime (each a trust of --force),
  // or on a uid seen from another mount namespace (visibility).
  bool used_clock = false, used_runtime = false, other_mounts = false;
  // Fills the class of a proof that covers every carrier.
  auto conclude = [&](DeathProof reason, bool needs_view) {
    judged.reason = reason;
    judged.uses_clock = used_clock || clock_proof(reason);
    judged.uses_runtime = used_runtime;
    judged.uses_visibility = !sees_everything || (needs_view && !facts.namespace_view_read) || other_mounts;
    const bool certain = !judged.uses_visibility && !judged.uses_clock && !judged.uses_runtime &&
                         host.local_filesystem && detail::proof_is_certain(reason);
    judged.proof = certain ? ProofClass::certain : ProofClass::evidence;
    return judged;
  };

  const double pid = facts.pid;
  if (!(pid >= 1) || pid != std::floor(pid)) return judged;  // no pid at all: nothing to prove
  // No Linux has such a process, in any namespace: no carrier to look for.
  if (pid >= 2147483648.0 || pid >= double(pid_max_limit))
    return conclude(DeathProof::pid_out_of_range, false);

  const std::int64_t number = static_cast<std::int64_t>(pid);
  judged.tolerance = std::max(tolerance, minimum_reuse_tolerance);  // smaller counts as 1 s
  const bool clock_counts = !host.clock_void();
  DeathProof weakest = DeathProof::pid_dead;  // no carrier at all
  DeathProof void_clock = DeathProof::none;   // the weakest clock proof that did not count
  std::optional<ProcessInfo> blocker;         // a carrier nothing excludes
  std::optional<ProcessInfo> void_blocker;    // a carrier only void clock evidence excludes

  const Exclusions exclusions{host, area_uid, written_ns, judged.tolerance, not_owners};
  // Whether `carrier` (pid `carrier_pid` in our namespace) is shown not to be the writer.
  auto examine = [&](const ProcessInfo& carrier, std::int64_t carrier_pid) {
    const DeathProof proof = exclusions.of(carrier, carrier_pid, judged, other_mounts);
    if (clock_proof(proof) && !clock_counts) {
      judged.clock_void = true;
      void_clock = weaker(void_clock, proof);
      if (!void_blocker) void_blocker = carrier;
      return;
    }
    if (proof == DeathProof::none) {
      if (!blocker) blocker = carrier;
      return;
    }
    used_clock = used_clock || clock_proof(proof);
    used_runtime = used_runtime || proof == DeathProof::pid_not_runtime;
    weakest = weaker(weakest, proof);
  };

  // The carrier in our namespace: none when kill said ESRCH.
  if (facts.signal_errno != ESRCH) {
    if (facts.signal_errno != -1 && facts.info) {
      examine(*facts.info, number);
    } else if (!blocker) {
      // kill reached something (or was never tried) and /proc said nothing: it may be the
      // writer, and all we know of it is its number.
      ProcessInfo unknown;
      unknown.pid = number;
      blocker = unknown;
    }
  }
  for (const ProcessInfo& carrier : facts.ns_carriers) examine(carrier, carrier.pid);

  if (blocker || void_blocker) {
    judged.blocker = blocker ? blocker : void_blocker;
    // Named so it can be shown, but it does not count.
    if (!blocker) judged.reason = weaker(weakest, void_clock);
    return judged;
  }
  return conclude(weakest, true);
}

}  // namespace apnea_locks
