// Property test of PROTOCOL.md section 10's one policy, over generated lock areas and flag
// sets (seeded: APNEA_PROPERTY_SEED, default fixed; APNEA_PROPERTY_RUNS cases, default 300).
//
// Each case builds a random area of real files in a temp dir (locks, candidates, tombstones,
// reclaim guards and stray entries, owner records valid or malformed in the ways Apnea
// rejects, naming pids of a staged process table), a random host (healthy, outside the
// initial PID namespace, clock stepped since boot) and random reclaim flags, and checks:
//   1. dry run equals real run: what one survey decides is exactly what execute_repair,
//      driven in reclaim's order, then does (every `remove` gone, everything else
//      byte-identical, nothing left behind);
//   2. never live: no entry naming a pid that may be its live writer is decided `remove`
//      under either flag, nor removed;
//   3. one fix: status's fix command is non-empty exactly when the reclaim it names would
//      remove the entry, and names --force only when nothing less would.
// A second case drives the real binary against a real live child process.
//
// A failing case prints its seed: APNEA_PROPERTY_SEED=<case seed> APNEA_PROPERTY_RUNS=1
// replays exactly that case. Only the first and the smallest failing case are shown;
// APNEA_PROPERTY_VERBOSE=1 shows every one.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "apnea_locks/owner.h"
#include "apnea_locks/policy.h"
#include "apnea_locks/repair.h"
#include "apnea_locks/lock.h"
#include "detail/lock.h"
#include "apnea_locks/survey.h"
#include "area_builder.h"
#include "detail/probe.h"
#include "run_test_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
using apnea_locks::detail::minimum_reuse_tolerance;

namespace {

constexpr std::int64_t second = 1'000'000'000;
constexpr std::int64_t minute = 60 * second;
constexpr std::int64_t hour = 60 * minute;
constexpr std::int64_t day = 24 * hour;

constexpr std::uint64_t default_seed = 20240917;
constexpr std::uint64_t default_runs = 300;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  return std::stoull(text);
}

std::uint64_t base_seed() { return env_number("APNEA_PROPERTY_SEED", default_seed); }
std::uint64_t run_count() { return env_number("APNEA_PROPERTY_RUNS", default_runs); }

/// A uniformly chosen element of `items`.
template <class T, std::size_t N>
const T& pick(std::mt19937_64& rng, const std::array<T, N>& items) {
  return items[std::uniform_int_distribution<std::size_t>(0, N - 1)(rng)];
}

bool chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

std::string duration_text(std::int64_t ns) {
  if (ns == 0) return "0s";
  if (ns % day == 0) return std::to_string(ns / day) + "d";
  if (ns % hour == 0) return std::to_string(ns / hour) + "h";
  if (ns % minute == 0) return std::to_string(ns / minute) + "m";
  if (ns % second == 0) return std::to_string(ns / second) + "s";
  return std::to_string(ns / 1'000'000) + "ms";
}

/// Sets `path`'s atime and mtime to `ns` (wall clock), without following a symlink.
void set_mtime(const std::string& path, std::int64_t ns) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ns / second;
  times[0].tv_nsec = times[1].tv_nsec = ns % second;
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) std::abort();
}

std::int64_t real_now() {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::int64_t>(now.tv_sec) * second + now.tv_nsec;
}

// ---------------------------------------------------------------------------------------
// The staged process table.

enum class PidKind { live, dead, zombie, zombie_leader, out_of_range, reused_far, reused_near };

std::string_view pid_kind_name(PidKind kind) {
  switch (kind) {
    case PidKind::live: return "live";
    case PidKind::dead: return "dead";
    case PidKind::zombie: return "zombie";
    case PidKind::zombie_leader: return "zombie-leader";
    case PidKind::out_of_range: return "out-of-range";
    case PidKind::reused_far: return "reused-far";
    case PidKind::reused_near: return "reused-near";
  }
  return "?";
}

struct TablePid {
  std::int64_t pid;
  PidKind kind;
};

// Live: state S, one thread, our uid, started 30 days before now (long before any record).
// Zombies: state Z, one thread. Zombie leaders: state Z with 3 threads (alive). Dead: absent
// (ESRCH). Out of range: >= 4194304 (and one >= 2^31). Reused: alive, started 12 hours ago
// (after a 2-day-old record by far more than any tolerance), or 2 days ago plus 1.5 s (after
// a 2-day-old record by 1.5 s: proven only by a 1 s tolerance); both started before the
// younger records, whose writers they may be.
constexpr std::array<TablePid, 15> pid_table = {{
    {7001, PidKind::live},
    {7002, PidKind::live},
    {7003, PidKind::live},
    {7101, PidKind::zombie},
    {7102, PidKind::zombie},
    {7201, PidKind::zombie_leader},
    {7202, PidKind::zombie_leader},
    {7301, PidKind::reused_far},
    {7302, PidKind::reused_near},
    {7401, PidKind::dead},
    {7402, PidKind::dead},
    {7403, PidKind::dead},
    {4194304, PidKind::out_of_range},
    {4194399, PidKind::out_of_range},
    {3000000000, PidKind::out_of_range},
}};

std::optional<TablePid> table_entry(double pid) {
  for (const TablePid& entry : pid_table)
    if (static_cast<double>(entry.pid) == pid) return entry;
  return std::nullopt;
}

constexpr std::int64_t record_ages[] = {10 * second, 1 * hour, 2 * day};

std::int64_t start_offset(PidKind kind) {  // start time = now - this
  switch (kind) {
    case PidKind::reused_far: return 12 * hour;
    case PidKind::reused_near: return 2 * day - 1'500'000'000;
    default: return 30 * day;
  }
}

ProcessInfo staged_info(std::int64_t pid, char state, std::int64_t threads, std::int64_t start,
                        std::uint32_t uid) {
  ProcessInfo info;
  info.state = state;
  info.tgid = pid;
  info.uid = uid;
  info.start_time_ns = start;
  info.command = "node /usr/lib/apnea/cli.js";
  info.pid = pid;
  info.threads = threads;
  info.uids = {uid, uid, uid, uid};
  info.uids_known = true;
  info.nspid = {pid};
  return info;
}

void stage_table(StagedSystem& system, std::int64_t now) {
  const std::uint32_t uid = ::getuid();
  for (const TablePid& entry : pid_table) {
    const std::int64_t start = now - start_offset(entry.kind);
    switch (entry.kind) {
      case PidKind::live:
      case PidKind::reused_far:
      case PidKind::reused_near:
        system.processes[entry.pid] = StagedProcess{0, staged_info(entry.pid, 'S', 1, start, uid)};
        break;
      case PidKind::zombie:
        system.processes[entry.pid] = StagedProcess{0, staged_info(entry.pid, 'Z', 1, start, uid)};
        break;
      case PidKind::zombie_leader:
        system.processes[entry.pid] = StagedProcess{0, staged_info(entry.pid, 'Z', 3, start, uid)};
        break;
      case PidKind::dead:
      case PidKind::out_of_range: break;  // absent: kill says ESRCH
    }
  }
}

/// The oracle of property 2: may the process staged for `entry` be the writer of a record
/// written at `written`? Live processes and zombie leaders (other threads run) may; dead
/// pids, zombies that are the last of their thread group and out-of-range pids may not; a
/// reused pid may unless the clock proves it started after the record (more than the
/// tolerance later, on a clock that did not step).
bool may_be_writer(const TablePid& entry, std::int64_t now, std::int64_t written,
                   std::int64_t tolerance, bool clock_void) {
  switch (entry.kind) {
    case PidKind::live:
    case PidKind::zombie_leader: return true;
    case PidKind::dead:
    case PidKind::zombie:
    case PidKind::out_of_range: return false;
    case PidKind::reused_far:
    case PidKind::reused_near: {
      const std::int64_t start = now - start_offset(entry.kind);
      return clock_void || !(start > written + std::max(tolerance, minimum_reuse_tolerance.count()));
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Owner records.

enum class Record {
  valid, mode_0644, mode_0640, trailing, bom, truncated, duplicate, decimal_string,
  no_pid, empty, missing, oversized,
};

constexpr std::array<Record, 12> all_records = {
    Record::valid,     Record::mode_0644,  Record::mode_0640,      Record::trailing,
    Record::bom,       Record::truncated,  Record::duplicate,      Record::decimal_string,
    Record::no_pid,    Record::empty,      Record::missing,        Record::oversized,
};

std::string_view record_name(Record record) {
  switch (record) {
    case Record::valid: return "valid";
    case Record::mode_0644: return "mode-0644";
    case Record::mode_0640: return "mode-0640";
    case Record::trailing: return "trailing-bytes";
    case Record::bom: return "bom";
    case Record::truncated: return "truncated";
    case Record::duplicate: return "duplicate-pid";
    case Record::decimal_string: return "pid-string";
    case Record::no_pid: return "no-pid";
    case Record::empty: return "empty";
    case Record::missing: return "owner-missing";
    case Record::oversized: return "oversized";
  }
  return "?";
}

int pids_in(Record record) {
  switch (record) {
    case Record::duplicate: return 2;
    case Record::no_pid:
    case Record::empty:
    case Record::missing: return 0;
    default: return 1;
  }
}

mode_t record_mode(Record record) {
  if (record == Record::mode_0644) return 0644;
  if (record == Record::mode_0640) return 0640;
  return 0600;
}

std::string token_member() { return "\"token\":\"" + std::string(test_token) + "\""; }

/// The bytes of a record of kind `record` naming `pids` (pids_in(record) of them).
std::string record_text(Record record, const std::vector<std::int64_t>& pids, std::mt19937_64& rng) {
  const std::string pid = pids.empty() ? std::string() : std::to_string(pids[0]);
  switch (record) {
    case Record::valid:
    case Record::mode_0644:
    case Record::mode_0640: return owner_json(pids[0]);
    case Record::trailing: {
      constexpr std::array<std::string_view, 5> tails = {" trailing", "x", "{}", "\x01", "]"};
      return owner_json(pids[0]) + std::string(pick(rng, tails));
    }
    case Record::bom: return "\xEF\xBB\xBF" + owner_json(pids[0]);
    case Record::truncated: {
      // Cut inside the token: `{"pid":N,"token":"` stays whole, so N is named intact.
      const std::string full = owner_json(pids[0]);
      const std::size_t cut = std::uniform_int_distribution<std::size_t>(2, 37)(rng);
      return full.substr(0, full.size() - cut);
    }
    case Record::duplicate:
      return "{\"pid\":" + std::to_string(pids[0]) + ",\"pid\":" + std::to_string(pids[1]) + "," +
             token_member() + "}";
    case Record::decimal_string: return "{\"pid\":\"" + pid + "\"," + token_member() + "}";
    case Record::no_pid:
      return chance(rng, 0.5) ? "{" + token_member() + "}"
                              : "{\"owner\":{\"name\":\"apnea\"}," + token_member() + "}";
    case Record::empty:
    case Record::missing: return {};
    case Record::oversized:
      return "{\"pid\":" + pid + ",\"token\":\"" + std::string(5000, 'a') + "\"}";
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// Generated areas.

enum class Slot { lock, candidate, tombstone, guard, stray_file, stray_dir, near_miss };

std::string_view slot_name(Slot slot) {
  switch (slot) {
    case Slot::lock: return "lock";
    case Slot::candidate: return "candidate";
    case Slot::tombstone: return "tombstone";
    case Slot::guard: return "guard";
    case Slot::stray_file: return "stray-file";
    case Slot::stray_dir: return "stray-dir";
    case Slot::near_miss: return "near-miss";
  }
  return "?";
}

bool has_record(Slot slot) {
  return slot == Slot::lock || slot == Slot::candidate || slot == Slot::tombstone ||
         slot == Slot::near_miss;
}

struct Planned {
  std::string name;
  Slot slot = Slot::stray_file;
  std::size_t base = 0;
  Record record = Record::valid;
  std::vector<TablePid> pids;
  std::int64_t record_age = 0;  ///< owner.json's mtime is now minus this
  std::int64_t guard_age = 0;   ///< guards: mtime is now minus this
  std::string bytes;            ///< the record (or a stray file's content)
};

/// Every entry's observable identity: type and inode of the entry, bytes of owner.json
/// (or of the file itself).
struct Snapshot {
  FileType type = FileType::unknown;
  std::uint64_t ino = 0;
  std::optional<std::string> bytes;
  bool operator==(const Snapshot&) const = default;
};

std::optional<Snapshot> snapshot_of(System& real, const std::string& path) {
  auto st = real.lstat(path);
  if (!st) return std::nullopt;
  Snapshot snap;
  snap.type = st->type;
  snap.ino = st->ino;
  const std::string file = st->type == FileType::directory ? path + "/owner.json" : path;
  if (auto inner = real.lstat(file); inner && inner->type == FileType::regular) snap.bytes = read_bytes(file);
  return snap;
}

std::vector<std::string> listing(System& real, const std::string& dir) {
  std::vector<std::string> names;
  (void)real.list_directory(dir, [&](const DirEntry& entry) {
    names.push_back(entry.name);
    return true;
  });
  std::sort(names.begin(), names.end());
  return names;
}

/// reclaim's order (src/cli/reclaim.cc): guards, then locks, then the rest; by name.
int reclaim_rank(EntryRole role) {
  switch (role) {
    case EntryRole::reclaim_guard: return 0;
    case EntryRole::lock: return 1;
    default: return 2;
  }
}

bool has_word(const std::vector<std::string>& argv, std::string_view word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

/// One generated case, run: what it was and what went wrong (empty when every property held).
struct CaseReport {
  std::uint64_t seed = 0;
  std::size_t entries = 0;
  std::string description;
  std::vector<std::string> problems;
  /// What the case exercised (so a run that never reaches a branch of the policy shows).
  std::map<std::string, int> seen;
};

const std::array<std::string, 3>& base_names() {
  static const std::array<std::string, 3> names = {fake_lock_name("alpha"), fake_lock_name("beta"),
                                                   fake_lock_name("gamma", LockKind::global_setup)};
  return names;
}

/// `name` with its base lock name shortened to A, B or G, for readable reports.
std::string short_name(std::string name) {
  constexpr std::array<std::string_view, 3> letters = {"A", "B", "G"};
  for (std::size_t i = 0; i < base_names().size(); ++i) {
    const std::string& base = base_names()[i];
    for (auto at = name.find(base); at != std::string::npos; at = name.find(base, at + 1))
      name.replace(at, base.size(), letters[i]);
  }
  return name;
}

CaseReport run_case(std::uint64_t case_seed) {
  CaseReport report;
  report.seed = case_seed;
  auto problem = [&](std::string text) { report.problems.push_back(std::move(text)); };
  std::mt19937_64 rng(case_seed);

  TempDir temp;
  StagedSystem system;
  const std::string dir = temp / "locks";
  make_dir(dir);
  system.staged_area = dir;

  // The flags and the host.
  const bool force = chance(rng, 0.5);
  const std::int64_t guard_age = pick(rng, std::array<std::int64_t, 3>{minute, 5 * minute, hour});
  const std::int64_t tolerance = pick(rng, std::array<std::int64_t, 3>{second, 2 * second, day});
  const bool outside_namespace = chance(rng, 0.3);
  const int clock_variant = std::uniform_int_distribution<int>(0, 4)(rng);  // 3: stepped, 4: unknown
  const bool clock_void = clock_variant >= 3;
  const int paused_variant = std::uniform_int_distribution<int>(0, 5)(rng);
  // How far the staged clock runs ahead of the real one: what ages pid-less entries, whose
  // age is their ctime's (set by the kernel when they were made).
  const std::int64_t offset =
      pick(rng, std::array<std::int64_t, 4>{0, 3 * minute, 30 * minute, 3 * hour});

  // The entries.
  const auto& bases = base_names();
  std::vector<Planned> planned;
  std::set<std::string> names;
  std::array<bool, 3> lock_used{}, guard_used{};
  const int count = std::uniform_int_distribution<int>(1, 12)(rng);
  for (int i = 0; i < count; ++i) {
    Planned entry;
    entry.base = std::uniform_int_distribution<std::size_t>(0, bases.size() - 1)(rng);
    const double roll = std::uniform_real_distribution<double>(0, 1)(rng);
    entry.slot = roll < 0.28   ? Slot::lock
                 : roll < 0.48 ? Slot::candidate
                 : roll < 0.68 ? Slot::tombstone
                 : roll < 0.84 ? Slot::guard
                 : roll < 0.90 ? Slot::stray_file
                 : roll < 0.95 ? Slot::stray_dir
                               : Slot::near_miss;
    if (entry.slot == Slot::lock || entry.slot == Slot::guard) {
      auto& used = entry.slot == Slot::lock ? lock_used : guard_used;
      if (used[entry.base]) {
        const auto free = std::find(used.begin(), used.end(), false);
        if (free == used.end()) entry.slot = Slot::candidate;
        else entry.base = static_cast<std::size_t>(free - used.begin());
      }
      if (entry.slot != Slot::candidate) used[entry.base] = true;
    }
    const std::string& base = bases[entry.base];
    const std::string suffix = std::to_string(rng() % 1'000'000);
    switch (entry.slot) {
      case Slot::lock: entry.name = base; break;
      case Slot::candidate: entry.name = base + ".candidate.c" + suffix; break;
      case Slot::tombstone: entry.name = base + ".tombstone.t" + suffix; break;
      case Slot::guard: entry.name = base + ".reclaim"; break;
      case Slot::stray_file: entry.name = "notes-" + suffix + ".txt"; break;
      case Slot::stray_dir: entry.name = "stray-" + suffix; break;
      case Slot::near_miss: entry.name = base + ".candidate."; break;  // empty suffix: unknown
    }
    if (!names.insert(entry.name).second) continue;
    if (has_record(entry.slot)) {
      entry.record = entry.slot == Slot::near_miss ? Record::valid : pick(rng, all_records);
      std::vector<std::int64_t> pids;
      for (int n = 0; n < pids_in(entry.record); ++n) {
        entry.pids.push_back(pick(rng, pid_table));
        pids.push_back(entry.pids.back().pid);
      }
      entry.record_age = record_ages[rng() % std::size(record_ages)];
      entry.bytes = record_text(entry.record, pids, rng);
    } else if (entry.slot == Slot::guard) {
      entry.guard_age = pick(rng, std::array<std::int64_t, 5>{5 * second, 3 * minute, 30 * minute,
                                                               3 * hour, 3 * day});
    } else if (entry.slot == Slot::stray_file) {
      entry.bytes = "{\"pid\":7001}";  // names a live pid, but is no lock entry: kept
    }
    planned.push_back(std::move(entry));
  }

  for (const Planned& entry : planned) {
    const std::string path = dir + "/" + entry.name;
    if (has_record(entry.slot)) {
      if (entry.record == Record::missing) make_dir(path);
      else make_entry(dir, entry.name, entry.bytes, 0700, record_mode(entry.record));
    } else if (entry.slot == Slot::stray_file) {
      write_file(path, entry.bytes);
    } else {
      make_dir(path);
    }
  }
  // Every ctime is now in the past of the staged clock, which stands still from here on.
  const std::int64_t now = real_now() + offset;
  system.fixed_now_ns = now;
  for (const Planned& entry : planned) {
    const std::string path = dir + "/" + entry.name;
    if (has_record(entry.slot) && entry.record != Record::missing)
      set_mtime(path + "/owner.json", now - entry.record_age);
    if (entry.slot == Slot::guard) set_mtime(path, now - entry.guard_age);
  }
  stage_table(system, now);
  if (outside_namespace) system.namespace_inodes["pid"] = 4026532999;
  if (clock_variant == 3) system.staged_dev_birth_ns = system.staged_boot_ns + 2 * hour;
  if (clock_variant == 4) system.dev_birth_known = false;
  const std::uint32_t uid = ::getuid();
  switch (paused_variant) {
    case 3: {  // a stopped process of ours, started long ago: it may hold any guard
      system.staged_paused = std::vector<ProcessInfo>{staged_info(7777, 'T', 1, now - 30 * day, uid)};
      break;
    }
    case 4: system.staged_paused.reset(); break;  // the process table cannot be listed
    case 5: {  // a stopped process of another account: it holds none of ours
      system.staged_paused = std::vector<ProcessInfo>{staged_info(7778, 'T', 1, now - 30 * day, uid + 1)};
      break;
    }
    default: break;  // nothing paused
  }

  {  // What the case is, for every report.
    std::ostringstream out;
    out << "case seed " << case_seed << " (replay: APNEA_PROPERTY_SEED=" << case_seed
        << " APNEA_PROPERTY_RUNS=1)\n  flags: force=" << (force ? "yes" : "no")
        << " --guard-age " << duration_text(guard_age) << " --tolerance " << duration_text(tolerance)
        << "\n  host: " << (outside_namespace ? "not the initial pid namespace" : "initial namespaces")
        << ", clock "
        << (clock_variant == 3 ? "void (stepped 2h since boot)"
                               : clock_variant == 4 ? "void (/dev birth unknown)" : "trusted")
        << ", paused: "
        << (paused_variant == 3   ? "a stopped process of ours"
            : paused_variant == 4 ? "unreadable"
            : paused_variant == 5 ? "a stopped process of another uid"
                                  : "none")
        << ", staged clock +" << duration_text(offset) << " (ctime ages)\n  entries (A, B: repository "
        << "locks, G: a global-setup lock):";
    for (const Planned& entry : planned) {
      out << "\n    " << short_name(entry.name) << " [" << slot_name(entry.slot);
      if (has_record(entry.slot)) {
        out << ", " << record_name(entry.record);
        for (const TablePid& pid : entry.pids) out << ", pid " << pid.pid << " " << pid_kind_name(pid.kind);
        if (entry.record != Record::missing) out << ", written " << duration_text(entry.record_age) << " ago";
      }
      if (entry.slot == Slot::guard) out << ", mtime " << duration_text(entry.guard_age) << " ago";
      out << "]";
    }
    report.description = out.str();
  }
  report.entries = planned.size();

  // The survey, as reclaim makes it.
  const SurveySettings settings = survey_settings(
      system, dir, Windows{.tolerance = std::chrono::nanoseconds(tolerance), .guard_age = std::chrono::nanoseconds(guard_age)}, force);
  if (settings.judge.host.clock_void() != clock_void) problem("setup: the staged clock is not as intended");
  if (settings.judge.host.can_be_certain() == outside_namespace) problem("setup: the staged host is not as intended");
  SurveySettings judging = settings;  // for judging again outside the survey: the same paused view
  judging.judge.paused = system.paused_processes();
  judging.judge.runtimes = std::vector<ProcessInfo>{};  // the staged table runs no runtime
  struct Judged {
    EntryFacts facts;
    Verdict verdict;
    Decision decision;
  };
  std::map<std::string, Judged> judged;
  LabelIndex labels;
  auto listed = survey_area(system, dir, settings, labels, {}, [&](const JudgedEntry& entry) {
    judged.emplace(entry.facts.name, Judged{entry.facts, entry.verdict, entry.decision});
  });
  if (!listed) {
    problem("survey_area failed");
    return report;
  }
  if (judged.size() != planned.size())
    problem("the survey judged " + std::to_string(judged.size()) + " entries of " +
            std::to_string(planned.size()));

  std::map<std::string, Snapshot> before;
  for (const Planned& entry : planned)
    if (auto snap = snapshot_of(system.real(), dir + "/" + entry.name)) before[entry.name] = *snap;

  // Properties 2 and 3, judged purely on the surveyed facts under both flags.
  for (const Planned& entry : planned) {
    auto found = judged.find(entry.name);
    if (found == judged.end()) continue;
    const Judged& j = found->second;
    const std::string who = short_name(entry.name);
    SurveySettings plain = judging;
    plain.flags.force = false;
    SurveySettings forced = judging;
    forced.flags.force = true;
    const auto [plain_verdict, plain_decision] = judge_entry(j.facts, plain, nullptr);
    const auto [forced_verdict, forced_decision] = judge_entry(j.facts, forced, nullptr);
    const Decision& same_flags = force ? forced_decision : plain_decision;
    if (same_flags.action != j.decision.action)
      problem(who + ": the survey decided " + std::string(plan_action_name(j.decision.action)) +
              " but judging its facts again decides " + std::string(plan_action_name(same_flags.action)));
    const bool plain_removes = plain_decision.action == PlanAction::remove;
    const bool forced_removes = forced_decision.action == PlanAction::remove;
    const std::string role(role_name(j.facts.parsed.role));
    report.seen[role + " removed without --force"] += plain_removes;
    report.seen[role + " removed only with --force"] += !plain_removes && forced_removes;
    report.seen[role + " removed by no flag"] += !forced_removes;
    report.seen["state " + std::string(state_name(j.verdict.state))]++;
    for (const std::string& trust : forced_decision.trusts)
      report.seen["--force removal trusting " + trust.substr(0, trust.find(" ("))] += forced_removes;

    // 2. Never live: every pid the record names (by named_pids, and Apnea's accepted owner
    // pid), and every pid the generator wrote into it.
    std::set<std::int64_t> live;
    if (has_record(entry.slot)) {
      const std::int64_t written = now - entry.record_age;
      std::vector<double> named;
      for (const TablePid& pid : entry.pids) named.push_back(static_cast<double>(pid.pid));
      if (auto bytes = before.count(entry.name) ? before[entry.name].bytes : std::nullopt) {
        for (double pid : named_pids(*bytes)) named.push_back(pid);
        if (auto owner = decode_owner(*bytes)) named.push_back(owner->pid);
      }
      for (double pid : named)
        if (auto table = table_entry(pid); table && may_be_writer(*table, now, written, tolerance, clock_void))
          live.insert(table->pid);
    }
    report.seen["names a live pid"] += !live.empty();
    report.seen["names a live pid in a malformed record"] +=
        !live.empty() && entry.record != Record::valid && entry.slot != Slot::near_miss;
    if (!live.empty()) {
      std::string pids;
      for (std::int64_t pid : live) pids += " " + std::to_string(pid);
      if (plain_removes || forced_removes)
        problem("[2 never-live] " + who + " names live pid(s)" + pids + " but reclaim" +
                (plain_removes ? "" : " --force") + " decides remove: " +
                (plain_removes ? plain_decision.why : forced_decision.why));
    }

    // 3. One fix: status's fix command (fix_command, which judge_entry fills whatever the flags).
    const std::vector<std::string>& fix = plain_decision.fix.argv;
    if (fix != j.decision.fix.argv || fix != forced_decision.fix.argv)
      problem("[3 one-fix] " + who + ": the fix command depends on the flags it is judged under");
    if (fix.empty()) {
      if (plain_removes || forced_removes)
        problem("[3 one-fix] " + who + ": no fix command, but reclaim" + (plain_removes ? "" : " --force") +
                " removes it");
    } else if (has_word(fix, "--force")) {
      if (!forced_removes)
        problem("[3 one-fix] " + who + ": fix `" + join(fix) + "` but reclaim --force decides " +
                std::string(plan_action_name(forced_decision.action)) + ": " + forced_decision.why);
      if (plain_removes) problem("[3 one-fix] " + who + ": fix names --force, but reclaim alone removes it");
    } else if (!plain_removes) {
      problem("[3 one-fix] " + who + ": fix `" + join(fix) + "` but reclaim decides " +
              std::string(plan_action_name(plain_decision.action)) + ": " + plain_decision.why);
    }
  }

  // 4. Taking over is removing: in one case of three (drawn apart from the case's own
  // stream), run's takeover (acquire's take_over) replaces reclaim's run. Each lock is taken
  // over exactly when reclaim without --force, with the default timing run judges with,
  // decides to remove it with its owner's token, and it is past Apnea's 60 s grace; nothing
  // else is touched.
  if (std::mt19937_64(case_seed ^ 0x7a6b3c2d1e0fULL)() % 3 == 0) {
    SurveySettings apnea = survey_settings(system, dir, Windows{}, false);
    apnea.judge.paused = system.paused_processes();
    apnea.judge.runtimes = std::vector<ProcessInfo>{};
    std::set<std::string> taken;
    for (const auto& [name, j] : judged) {
      if (j.facts.parsed.role != EntryRole::lock || !j.facts.stat) continue;
      const std::string who = short_name(name);
      const Decision decision = judge_entry(j.facts, apnea, nullptr).second;
      const bool expected = decision.action == PlanAction::remove &&
                            decision.removal == RemovalKind::lock_owner &&
                            now - j.facts.stat->mtime_ns >= 60 * second;
      LockTarget target;
      target.kind = j.facts.parsed.kind;
      target.lock_path = dir + "/" + name;
      target.resource = name;
      target.area_mode = AreaMode::explicit_directory;
      const detail::Takeover got =
          detail::take_over(system, target, std::chrono::milliseconds(60'000), false);
      const bool took = got.kind == detail::Takeover::Kind::taken_over;
      report.seen[took ? "takeover: taken over" : "takeover: refused"]++;
      if (took != expected)
        problem("[4 takeover=reclaim] " + who + ": reclaim without --force decides " +
                std::string(plan_action_name(decision.action)) + " (" + decision.why + ")" +
                (expected ? "" : " or the lock is inside the grace") + " but run's takeover " +
                (took ? "took it over" : "refused: " + got.error.message));
      if (took) taken.insert(name);
    }
    for (const Planned& entry : planned) {
      const auto after = snapshot_of(system.real(), dir + "/" + entry.name);
      const auto was = before.find(entry.name);
      if (taken.count(entry.name) ? after.has_value()
                                  : (!after || was == before.end() || !(*after == was->second)))
        problem("[4 takeover=reclaim] " + short_name(entry.name) +
                (taken.count(entry.name) ? " was taken over but is still there" : " changed"));
    }
    std::vector<std::string> expected;
    for (const std::string& name : names)
      if (!taken.count(name)) expected.push_back(name);
    if (listing(system.real(), dir) != expected)
      problem("[4 takeover=reclaim] the area holds other entries than before, less those taken over");
    return report;
  }

  // 1. The real run, in reclaim's order, with the decisions of the one survey. No removal
  // is excused as `changed` by an earlier one in the same run: a leftover guard that the
  // policy removes goes first (so the lock, candidate or tombstone behind it finds the guard
  // free), a lock's reclamation takes and drops its own guard before any of its candidates
  // or tombstones is reached, and nothing a removal does touches another entry's inode or
  // owner record. So every `remove` must end `removed`, and the only debris that may wait
  // for a guard is debris the policy itself did not decide to remove.
  std::vector<const Judged*> order;
  for (const auto& [name, j] : judged) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(), [](const Judged* a, const Judged* b) {
    return std::pair(reclaim_rank(a->facts.parsed.role), a->facts.name) <
           std::pair(reclaim_rank(b->facts.parsed.role), b->facts.name);
  });
  std::map<std::string, RepairResult> results;
  std::set<std::string> removals;
  for (const Judged* j : order) {
    if (j->decision.action != PlanAction::remove) continue;
    removals.insert(j->facts.name);
    RepairSettings policy;
    policy.settings = settings;
    policy.resource = j->facts.parsed.lock_name();
    results[j->facts.name] = execute_repair(system, j->facts, j->decision, policy);
    report.seen["run: " + std::string(outcome_name(results[j->facts.name].outcome))]++;
  }
  for (const Planned& entry : planned) {
    auto found = judged.find(entry.name);
    if (found == judged.end()) continue;
    const Judged& j = found->second;
    const std::string who = short_name(entry.name);
    const auto after = snapshot_of(system.real(), dir + "/" + entry.name);
    if (j.decision.action == PlanAction::remove) {
      const RepairResult& result = results[entry.name];
      if (result.outcome != RepairOutcome::removed || after)
        problem("[1 dry=real] " + who + " decided remove (" + std::string(removal_name(j.decision.removal)) +
                ": " + j.decision.why + ") but the run says " + std::string(outcome_name(result.outcome)) +
                (result.detail.empty() ? "" : ": " + short_name(result.detail)) +
                (after ? " and it is still there" : ""));
    } else {
      const auto was = before.find(entry.name);
      if (!after || was == before.end() || !(*after == was->second))
        problem("[1 dry=real] " + who + " decided " + std::string(plan_action_name(j.decision.action)) +
                " (" + j.decision.why + ") but it " + (after ? "changed" : "is gone"));
    }
    if (j.decision.action == PlanAction::remove && !entry.pids.empty()) {
      // Property 2 on disk too: nothing naming a live pid went.
      for (const TablePid& pid : entry.pids)
        if (may_be_writer(pid, now, now - entry.record_age, tolerance, clock_void) && !after)
          problem("[2 never-live] " + who + " names live pid " + std::to_string(pid.pid) + " and was removed");
    }
  }
  // Nothing else appeared or vanished: no tombstone or guard is left behind.
  std::vector<std::string> expected;
  for (const std::string& name : names)
    if (!removals.count(name)) expected.push_back(name);
  const std::vector<std::string> left = listing(system.real(), dir);
  if (left != expected) {
    std::string text = "[1 dry=real] the area holds";
    for (const std::string& name : left) text += " " + short_name(name);
    text += "; expected";
    for (const std::string& name : expected) text += " " + short_name(name);
    problem(text);
  }
  return report;
}

std::string format_report(const CaseReport& report) {
  std::string text = report.description + "\n  what went wrong:";
  for (const std::string& problem : report.problems) text += "\n    " + problem;
  return text;
}

}  // namespace

TEST_CASE("property: one survey's decisions are what the real run does; never a live writer; one fix") {
  const std::uint64_t seed = base_seed();
  const std::uint64_t runs = run_count();
  CAPTURE(seed);
  CAPTURE(runs);
  std::vector<CaseReport> failing;
  std::map<std::string, int> kinds;  // how often each property failed
  std::map<std::string, int> seen;   // what the cases exercised
  for (std::uint64_t i = 0; i < runs; ++i) {
    CaseReport report = run_case(seed + i);
    for (const auto& [what, n] : report.seen) seen[what] += n;
    if (report.problems.empty()) continue;
    for (const std::string& problem : report.problems) kinds[problem.substr(0, problem.find(']') + 1)]++;
    if (env_number("APNEA_PROPERTY_VERBOSE", 0) != 0) MESSAGE(format_report(report));
    failing.push_back(std::move(report));
  }
  std::string coverage = "what the cases exercised:";
  for (const auto& [what, n] : seen) coverage += "\n  " + what + ": " + std::to_string(n);
  if (env_number("APNEA_PROPERTY_VERBOSE", 0) != 0) MESSAGE(coverage);
  if (runs >= default_runs) {
    // The properties are only as strong as the cases reach: every branch of section 10's
    // table must have been taken at least once by the default run.
    for (const char* branch : {
             "lock removed without --force", "lock removed only with --force",
             "candidate removed without --force", "candidate removed only with --force",
             "tombstone removed without --force", "tombstone removed only with --force",
             "reclaim-guard removed only with --force", "reclaim-guard removed by no flag",
             "state live-malformed", "state live", "state debris", "state in-flight",
             "--force removal trusting the wall clock",
             "--force removal trusting no process hidden from apnea-locks shares this temp directory",
             "--force removal trusting an ownerless entry older than --guard-age is abandoned",
             "names a live pid in a malformed record", "run: removed", "takeover: taken over",
             "takeover: refused"})
      CHECK_MESSAGE(seen[branch] > 0, "no case reached: " << branch << "\n" << coverage);
  }
  if (failing.empty()) return;
  // The first failing case, and the smallest one (fewest entries): the counterexamples.
  const CaseReport& first = failing.front();
  const CaseReport& smallest = *std::min_element(
      failing.begin(), failing.end(),
      [](const CaseReport& a, const CaseReport& b) { return a.entries < b.entries; });
  std::string summary = std::to_string(failing.size()) + " of " + std::to_string(runs) +
                        " cases failed (seeds " + std::to_string(seed) + ".." +
                        std::to_string(seed + runs - 1) + "); problems by property:";
  for (const auto& [kind, n] : kinds) summary += " " + kind + " x" + std::to_string(n);
  FAIL_CHECK(summary << "\nfirst failing case:\n"
                     << format_report(first)
                     << (&smallest != &first ? "\nsmallest failing case:\n" + format_report(smallest) : ""));
}

// ---------------------------------------------------------------------------------------
// The real binary against a real live process.

namespace {

/// A record of kind `record` naming `pid` (and `other`, for duplicates: in random order).
std::string real_record(Record record, long long pid, long long other, std::mt19937_64& rng) {
  std::vector<std::int64_t> pids{pid};
  if (record == Record::duplicate) {
    pids.push_back(other);
    if (chance(rng, 0.5)) std::swap(pids[0], pids[1]);
  }
  return record_text(record, pids, rng);
}

}  // namespace

TEST_CASE("property, real processes: reclaim --force never removes a live child's records; its dry run lists what it removes") {
  const std::string bin = locks_bin();
  REQUIRE_MESSAGE(!bin.empty(), "APNEA_LOCKS_BIN names the apnea-locks binary (meson test sets it)");
  const std::uint64_t seed = base_seed();
  const std::uint64_t runs = std::max<std::uint64_t>(1, run_count() / 30);
  CAPTURE(seed);
  CAPTURE(runs);

  Sleeper live;  // blocked reading a pipe until the end of the test
  REQUIRE(live.ok());
  Zombie zombie;
  const pid_t dead = dead_pid();
  constexpr std::array<Record, 9> live_variants = {
      Record::valid,     Record::mode_0644, Record::mode_0640,      Record::trailing, Record::bom,
      Record::truncated, Record::duplicate, Record::decimal_string, Record::oversized};

  for (std::uint64_t i = 0; i < runs; ++i) {
    const std::uint64_t case_seed = seed + i;
    std::mt19937_64 rng(case_seed);
    TempDir temp;
    const std::string dir = temp / "locks";
    make_dir(dir);
    const std::string guard_age = pick(rng, std::array<std::string, 3>{"1m", "5m", "1h"});
    std::ostringstream description;
    description << "case seed " << case_seed << " (replay: APNEA_PROPERTY_SEED=" << case_seed
                << " APNEA_PROPERTY_RUNS=30); live pid " << live.pid() << ", zombie " << zombie.pid()
                << ", dead " << dead << "; reclaim --force --all --guard-age " << guard_age << "\n  entries:";

    std::set<std::string> live_entries;
    std::array<bool, 3> lock_used{};
    int next = 0;
    auto name_for = [&](Slot slot, std::size_t base) {
      const std::string& lock = base_names()[base];
      switch (slot) {
        case Slot::lock: return lock;
        case Slot::candidate: return lock + ".candidate.c" + std::to_string(next++);
        case Slot::tombstone: return lock + ".tombstone.t" + std::to_string(next++);
        default: return lock + ".reclaim";
      }
    };
    auto role_for = [&](std::size_t& base) {
      const double roll = std::uniform_real_distribution<double>(0, 1)(rng);
      Slot slot = roll < 0.4 ? Slot::lock : roll < 0.7 ? Slot::candidate : Slot::tombstone;
      if (slot == Slot::lock) {
        const auto free = std::find(lock_used.begin(), lock_used.end(), false);
        if (free == lock_used.end()) return Slot::candidate;
        base = static_cast<std::size_t>(free - lock_used.begin());
        lock_used[base] = true;
      }
      return slot;
    };
    auto add = [&](Slot slot, std::size_t base, Record record, const std::string& bytes, const char* what) {
      const std::string name = name_for(slot, base);
      if (record == Record::missing) make_dir(dir + "/" + name);
      else make_entry(dir, name, bytes, 0700, record_mode(record));
      description << "\n    " << short_name(name) << " [" << record_name(record) << ", " << what << "]";
      return name;
    };

    // The live child's pid in several malformed (and one valid) records.
    const int live_count = std::uniform_int_distribution<int>(2, 6)(rng);
    for (int n = 0; n < live_count; ++n) {
      std::size_t base = rng() % 3;
      const Slot slot = role_for(base);
      const Record record = pick(rng, live_variants);
      live_entries.insert(add(slot, base, record, real_record(record, live.pid(), dead, rng), "names the live child"));
    }
    // Entries the run may remove, or must refuse for other reasons.
    const int other_count = std::uniform_int_distribution<int>(1, 6)(rng);
    for (int n = 0; n < other_count; ++n) {
      std::size_t base = rng() % 3;
      const Slot slot = role_for(base);
      switch (rng() % 5) {
        case 0: add(slot, base, Record::valid, owner_json(dead), "dead pid"); break;
        case 1: add(slot, base, Record::valid, owner_json(zombie.pid()), "zombie"); break;
        case 2: add(slot, base, Record::mode_0644, owner_json(4194304 + n), "out-of-range pid"); break;
        case 3: add(slot, base, Record::empty, "", "pid-less, just made"); break;
        default: add(slot, base, Record::duplicate, "{\"pid\":" + std::to_string(dead) + ",\"pid\":" +
                     std::to_string(zombie.pid()) + "," + token_member() + "}", "dead and zombie"); break;
      }
    }
    for (std::size_t base = 0; base < 3; ++base) {
      if (!chance(rng, 0.35)) continue;
      const std::string name = name_for(Slot::guard, base);
      make_dir(dir + "/" + name);
      const bool old = chance(rng, 0.6);
      age_path(dir + "/" + name, old ? 7200 : 5);
      description << "\n    " << short_name(name) << " [guard, mtime " << (old ? "2h" : "5s") << " ago]";
    }
    INFO(description.str());

    std::map<std::string, std::string> live_bytes;
    for (const std::string& name : live_entries) live_bytes[name] = read_bytes(dir + "/" + name + "/owner.json");
    const std::vector<std::string> before = listing(real_system(), dir);

    const Finished dry = finish({bin, "reclaim", "--dry-run", "--force", "--json", "--all", "--guard-age",
                                 guard_age, "--lock-dir", dir}, {}, 60s);
    REQUIRE_MESSAGE(dry.status.has_value(), "the dry run did not end");
    CHECK_MESSAGE((*dry.status == 0 || *dry.status == 1), dry.err);
    boost::system::error_code error;
    const boost::json::value document = boost::json::parse(dry.out, error);
    REQUIRE_MESSAGE(!error, dry.out);
    std::set<std::string> would_remove;
    for (const auto& target : document.at("targets").as_array()) {
      const auto& object = target.as_object();
      const std::string path(object.at("path").as_string());
      const std::string name = path.substr(path.rfind('/') + 1);
      const std::string action(object.at("action").as_string());
      if (action != "refuse" && action != "skip") would_remove.insert(name);
      if (live_entries.count(name))
        CHECK_MESSAGE((action == "refuse" || action == "skip"),
                      "the dry run would " << action << " " << short_name(name) << ", which names the live child");
    }

    const Finished real = finish({bin, "reclaim", "--force", "--yes", "--all", "--guard-age", guard_age,
                                  "--lock-dir", dir}, {}, 60s);
    REQUIRE_MESSAGE(real.status.has_value(), "the real run did not end");
    CHECK_MESSAGE((*real.status == 0 || *real.status == 1), real.err);
    const std::vector<std::string> after = listing(real_system(), dir);
    std::set<std::string> removed;
    for (const std::string& name : before)
      if (!std::binary_search(after.begin(), after.end(), name)) removed.insert(name);
    std::string appeared;
    for (const std::string& name : after)
      if (!std::binary_search(before.begin(), before.end(), name)) appeared += " " + short_name(name);
    CHECK_MESSAGE(appeared.empty(), "left behind by the real run:" << appeared << "\n" << real.out);
    if (removed != would_remove) {
      std::string text = "the dry run would remove";
      for (const std::string& name : would_remove) text += " " + short_name(name);
      text += "; the real run removed";
      for (const std::string& name : removed) text += " " + short_name(name);
      FAIL_CHECK(text << "\nreal run:\n" << short_name(real.out));
    }
    for (const auto& [name, bytes] : live_bytes) {
      CHECK_MESSAGE(read_bytes(dir + "/" + name + "/owner.json") == bytes,
                    short_name(name) << " names the live child and was removed or changed");
    }
  }
}
