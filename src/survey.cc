#include "apnea_locks/survey.h"

#include <algorithm>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "apnea_locks/names.h"
#include "detail/policy.h"
#include "detail/scan.h"
#include "detail/spread.h"

namespace apnea_locks {
using detail::gather_entry;  // detail/scan.h
using detail::gather_entry_in;
using detail::GuardListing;
using detail::ProcessCache;
using detail::reclaim_argv;  // detail/policy.h

namespace {

/// How often an entry that looks dead is gathered again because it changed under the probe.
constexpr int reconfirm_limit = 5;

/// True when the entry is still the very directory, unchanged, whose owner record was read:
/// same device and inode, and the same ctime and mtime. A release renames the lock away (a
/// rename sets the ctime) and a new owner publishes another directory (a new inode, or a
/// reused inode number with a new ctime); Apnea never rewrites a published owner.json, and
/// replacing it inside the directory changes the directory's mtime. So this one lstat says
/// "same device, inode and token" without reading the record again.
bool unchanged_since(System& system, const DirRef& dir, const EntryFacts& facts) {
  if (!facts.stat) return true;  // nothing read: nothing to re-confirm
  auto now = system.lstat_in(dir, facts.name);
  return now && now->same_object(*facts.stat) && now->ctime_ns == facts.stat->ctime_ns &&
         now->mtime_ns == facts.stat->mtime_ns;
}

bool needs_paused(const EntryFacts& facts, const SurveySettings& settings) {
  const std::int64_t now = settings.judge.now_ns;
  if (facts.parsed.role == EntryRole::reclaim_guard && facts.stat)
    return now - facts.stat->mtime_ns >= settings.flags.guard_age_ns;
  if (facts.guard) return now - facts.guard->mtime_ns >= settings.flags.guard_age_ns;
  return false;
}

}  // namespace

SurveySettings survey_settings(System& system, const std::string& directory,
                               std::int64_t tolerance_ns, std::int64_t guard_age_ns, bool force,
                               HostRead host) {
  SurveySettings settings;
  settings.judge.now_ns = system.now_ns();
  settings.judge.area_uid = system.uid();
  settings.judge.reuse_tolerance_ns = tolerance_ns;
  settings.judge.guard_threshold_ns = guard_age_ns;
  settings.host_pending = true;
  if (host == HostRead::now) settings = with_host(system, directory, std::move(settings));
  settings.flags.force = force;
  settings.flags.guard_age_ns = guard_age_ns;
  return settings;
}

SurveySettings with_host(System& system, const std::string& directory, SurveySettings settings) {
  if (!settings.host_pending) return settings;
  settings.judge.host = gather_host(system, directory);
  settings.host_pending = false;
  return settings;
}

std::pair<Verdict, Decision> judge_entry(const EntryFacts& facts, const SurveySettings& settings,
                                         const EntryLabel* label) {
  Verdict verdict = classify(facts, settings.judge, label);
  const std::int64_t now = settings.judge.now_ns;
  Decision decision = decide(facts, verdict, settings.flags, now);
  // The one fix: the reclaim without --force if it would remove the entry, else with it.
  RemovalFlags plain = settings.flags;
  plain.force = false;
  RemovalFlags forced = settings.flags;
  forced.force = true;
  const auto removes = [&](const RemovalFlags& flags) {
    if (flags.force == settings.flags.force) return decision.action == PlanAction::remove;
    return decide(facts, verdict, flags, now).action == PlanAction::remove;
  };
  if (removes(plain)) verdict.fix_argv = reclaim_argv(facts, label, false, settings.fix);
  else if (removes(forced)) verdict.fix_argv = reclaim_argv(facts, label, true, settings.fix);
  verdict.fix = shell_command(verdict.fix_argv);
  verdict.force_required =
      verdict.fix_argv.size() > 2 && verdict.fix_argv[2] == "--force";
  return {std::move(verdict), std::move(decision)};
}

namespace {

/// The names of one listing, packed so that 100k entries stay small: a protocol name (kind,
/// role, 64 hex digits, suffix) as its kind and role, 32 bytes of key and its suffix; any
/// other name as its bytes. Index order is listing order.
class PackedNames {
 public:
  /// Adds `name`; returns the name of its lock when it is a reclaim guard, else "".
  std::string add(std::string_view name) {
    starts_.push_back(static_cast<std::uint32_t>(bytes_.size()));
    const Packed packed = pack(name);
    if (packed.role == EntryRole::unknown) {
      bytes_ += '\0';
      bytes_ += name;
      bytes_ += '\0';
      return {};
    }
    const std::size_t at = bytes_.size();
    char head[34];  // the tag, 32 bytes of key, the suffix's size: appended in one piece
    head[0] = static_cast<char>(1 + static_cast<int>(packed.kind) * 8 + static_cast<int>(packed.role));
    std::memcpy(head + 1, packed.key_bytes, 32);
    head[33] = static_cast<char>(packed.suffix.size());
    bytes_.append(head, sizeof head).append(packed.suffix);
    if (packed.role != EntryRole::reclaim_guard) return {};
    std::string lock = name_at(at);
    lock.resize(lock.size() - role_suffix(EntryRole::reclaim_guard).size());
    return lock;
  }
  std::size_t size() const { return starts_.size(); }
  /// Moves the names of `batch` to the end of these, in their order; `batch` is left empty.
  void append(PackedNames& batch) {
    const auto base = static_cast<std::uint32_t>(bytes_.size());
    bytes_ += batch.bytes_;
    for (std::uint32_t start : batch.starts_) starts_.push_back(base + start);
    batch.bytes_.clear();
    batch.starts_.clear();
  }
  /// The name of entry `index` and what it says (parse_entry_name of it, without parsing
  /// it again: the packed form holds its parts).
  std::pair<std::string, EntryName> entry(std::size_t index) const {
    const std::size_t at = starts_[index];
    std::string name = name_at(at);
    const auto tag = static_cast<unsigned char>(bytes_[at]);
    if (tag == 0) return {std::move(name), EntryName{}};
    EntryName parsed;
    parsed.kind = static_cast<LockKind>((tag - 1) / 8);
    parsed.role = static_cast<EntryRole>((tag - 1) % 8);
    const std::size_t key_at = kind_name(parsed.kind).size() + 1;
    parsed.key = name.substr(key_at, 64);
    const std::size_t suffix_size = static_cast<unsigned char>(bytes_[at + 33]);
    parsed.suffix = name.substr(name.size() - suffix_size);
    return {std::move(name), std::move(parsed)};
  }

 private:
  /// The value of each lowercase hex digit; 16 for every other byte.
  static constexpr std::array<unsigned char, 256> hex_values = [] {
    std::array<unsigned char, 256> table{};
    table.fill(16);
    for (int c = '0'; c <= '9'; ++c) table[static_cast<std::size_t>(c)] = static_cast<unsigned char>(c - '0');
    for (int c = 'a'; c <= 'f'; ++c) table[static_cast<std::size_t>(c)] = static_cast<unsigned char>(c - 'a' + 10);
    return table;
  }();

  /// A protocol name taken apart without allocating (parse_entry_name's grammar, exactly:
  /// name_at spells the same name again); role unknown for any other name.
  struct Packed {
    LockKind kind = LockKind::unknown;
    EntryRole role = EntryRole::unknown;
    char key_bytes[32] = {};  ///< the key's 64 digits as bytes
    std::string_view suffix;
  };

  /// The 32 bytes that the 64 lowercase hex digits at `hex` spell, into `out`; false (and
  /// `out` undefined) when one of them is not a lowercase hex digit. Every listed name is
  /// packed, so 16 digits at a time where SSE2 is.
  static bool decode_key(const char* hex, char* out) {
#if defined(__SSE2__)
    const __m128i zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8('9'), a = _mm_set1_epi8('a');
    const __m128i f = _mm_set1_epi8('f'), one = _mm_set1_epi8(1), gap = _mm_set1_epi8('a' - '0' - 10);
    __m128i packed[2];
    for (int half = 0; half < 2; ++half) {
      __m128i pairs[2];
      for (int part = 0; part < 2; ++part) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hex + 32 * half + 16 * part));
        // In range when not below the first and not above the last (bytes >= 0x80 are
        // negative, so below '0' and 'a').
        const __m128i digit = _mm_andnot_si128(_mm_or_si128(_mm_cmplt_epi8(v, zero), _mm_cmpgt_epi8(v, nine)),
                                               _mm_cmpeq_epi8(one, one));
        const __m128i letter = _mm_andnot_si128(_mm_or_si128(_mm_cmplt_epi8(v, a), _mm_cmpgt_epi8(v, f)),
                                                _mm_cmpeq_epi8(one, one));
        if (_mm_movemask_epi8(_mm_or_si128(digit, letter)) != 0xFFFF) return false;
        const __m128i nibble = _mm_sub_epi8(_mm_sub_epi8(v, zero), _mm_and_si128(letter, gap));
        // Each 16-bit lane holds a digit pair, the first digit in its low byte: high << 4 | low.
        pairs[part] = _mm_or_si128(_mm_and_si128(_mm_slli_epi16(nibble, 4), _mm_set1_epi16(0x00F0)),
                                   _mm_srli_epi16(nibble, 8));
      }
      packed[half] = _mm_packus_epi16(pairs[0], pairs[1]);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), packed[0]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), packed[1]);
    return true;
#else
    unsigned not_hex = 0;
    for (std::size_t i = 0; i < 64; i += 2) {
      const unsigned high = hex_values[static_cast<unsigned char>(hex[i])];
      const unsigned low = hex_values[static_cast<unsigned char>(hex[i + 1])];
      not_hex |= (high | low) & 16U;
      out[i / 2] = static_cast<char>(high * 16 + low);
    }
    return not_hex == 0;
#endif
  }

  /// The 64 lowercase hex digits of the 32 bytes at `bytes`, into `out`.
  static void encode_key(const char* bytes, char* out) {
#if defined(__SSE2__)
    const __m128i low_nibbles = _mm_set1_epi8(0x0F), nine = _mm_set1_epi8(9);
    const __m128i zero = _mm_set1_epi8('0'), gap = _mm_set1_epi8('a' - '0' - 10);
    auto digits = [&](__m128i nibbles) {
      return _mm_add_epi8(_mm_add_epi8(nibbles, zero), _mm_and_si128(_mm_cmpgt_epi8(nibbles, nine), gap));
    };
    for (int half = 0; half < 2; ++half) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 16 * half));
      const __m128i high = _mm_and_si128(_mm_srli_epi16(v, 4), low_nibbles);
      const __m128i low = _mm_and_si128(v, low_nibbles);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * half), digits(_mm_unpacklo_epi8(high, low)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * half + 16), digits(_mm_unpackhi_epi8(high, low)));
    }
#else
    static constexpr char digits[] = "0123456789abcdef";
    for (std::size_t i = 0; i < 32; ++i) {
      const auto byte = static_cast<unsigned char>(bytes[i]);
      out[2 * i] = digits[byte >> 4];
      out[2 * i + 1] = digits[byte & 15];
    }
#endif
  }
  static Packed pack(std::string_view name) {
    Packed packed;
    for (LockKind kind : {LockKind::repository, LockKind::global_setup}) {
      const std::string_view prefix = kind_name(kind);
      if (name.size() > prefix.size() && name.starts_with(prefix) && name[prefix.size()] == '-') {
        packed.kind = kind;
        name.remove_prefix(prefix.size() + 1);
        break;
      }
    }
    if (packed.kind == LockKind::unknown || name.size() < 69 || name.substr(64, 5) != ".lock") return {};
    if (!decode_key(name.data(), packed.key_bytes)) return {};
    const std::string_view tail = name.substr(69);
    if (tail.empty()) {
      packed.role = EntryRole::lock;
      return packed;
    }
    for (EntryRole role : {EntryRole::reclaim_guard, EntryRole::candidate, EntryRole::tombstone}) {
      const std::string_view infix = role_suffix(role);
      if (role == EntryRole::reclaim_guard ? tail == infix
                                           : tail.size() > infix.size() && tail.starts_with(infix)) {
        packed.role = role;
        packed.suffix = tail.substr(infix.size());
        if (packed.suffix.size() > 255) return {};  // kept as is (no name is that long)
        return packed;
      }
    }
    return {};
  }
  std::string name_at(std::size_t at) const {
    const auto tag = static_cast<unsigned char>(bytes_[at]);
    if (tag == 0) return std::string(bytes_.c_str() + at + 1);
    const auto kind = static_cast<LockKind>((tag - 1) / 8);
    const auto role = static_cast<EntryRole>((tag - 1) % 8);
    char key[64];
    encode_key(bytes_.data() + at + 1, key);
    const std::size_t suffix_size = static_cast<unsigned char>(bytes_[at + 33]);
    const std::string_view suffix(bytes_.data() + at + 34, suffix_size);
    const std::string_view tail = role_suffix(role);
    const std::string_view prefix = kind_name(kind);
    std::string name;
    name.reserve(prefix.size() + 70 + tail.size() + suffix.size());
    name.append(prefix).append("-").append(key, sizeof key).append(".lock").append(tail).append(suffix);
    return name;
  }

  std::string bytes_;
  std::vector<std::uint32_t> starts_;
};

/// The most entries a survey holds gathered but not yet visited, per job.
constexpr std::size_t window_per_job = 64;

/// Fewer entries than this are surveyed on the calling thread alone.
constexpr std::size_t parallel_threshold = 64;

}  // namespace

SysResult<std::size_t> survey_area(System& system, const std::string& directory,
                                   const SurveySettings& given, const LabelIndex& labels,
                                   const std::set<std::string>& expected_locks,
                                   const std::function<void(const JudgedEntry&)>& visit) {
  // Every per-entry call relative to the directory, opened once (not following a symlink);
  // if it cannot be opened, by path.
  DirRef dir{-1, directory};
  if (auto fd = system.open_directory(directory)) dir.fd = *fd;
  struct CloseDir {
    System& system;
    int fd;
    ~CloseDir() {
      if (fd >= 0) system.close(fd);
    }
  } close_dir{system, dir.fd};

  // The listing, in one pass: the names, and which locks have a guard. With more than one
  // job the entries are surveyed while the listing goes on (once it has named
  // parallel_threshold of them); an entry taken before the listing is whole looks its own
  // guard up (one lstat), since a guard listed after it is not known yet.
  std::mutex names_mutex;  // `names` and `guarded` while the listing adds to them
  PackedNames names;
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  // Lock names with a `.reclaim` entry listed, looked up by view.
  std::unordered_set<std::string, NameHash, std::equal_to<>> guarded;
  std::atomic<std::size_t> published{0};  // entries listed so far: the ones that may be taken
  std::atomic<bool> listed_whole{false};  // the listing is complete (guarded is final)

  // The settings (with the host facts, when they were pending) and the pid cache, made before
  // the first entry is judged: an empty area, the usual one, never reads /proc/self/mountinfo
  // and /proc/stat.
  std::optional<SurveySettings> settings;
  std::optional<ProcessCache> processes;
  auto prepare = [&] {
    if (settings) return;
    settings.emplace(with_host(system, directory, given));
    processes.emplace(system, settings->judge.host);
  };
  // The process table's paused processes, read once, when a guard old enough to need them
  // is judged; each entry is judged with them only if it needs them, so every verdict is
  // the same whatever order the entries are judged in.
  std::once_flag paused_once;
  SurveySettings with_paused;
  auto label_of = [&](const EntryFacts& facts) -> const EntryLabel* {
    if (facts.parsed.role == EntryRole::unknown) return nullptr;
    std::string scratch;
    return labels.find(lock_name_view(facts.name, facts.parsed, scratch));
  };
  auto judge = [&](const EntryFacts& facts, const EntryLabel* label) {
    if (!needs_paused(facts, *settings)) return judge_entry(facts, *settings, label);
    std::call_once(paused_once, [&] {
      with_paused = *settings;
      with_paused.judge.paused = system.paused_processes();
    });
    return judge_entry(facts, with_paused, label);
  };

  struct Judged {
    EntryFacts facts;
    Verdict verdict;
    Decision decision;
    const EntryLabel* label = nullptr;
  };
  // Gathers, judges and re-confirms entry `index` into `out` (an object reused from entry to
  // entry, so each part is moved once); false when the entry vanished.
  auto survey_one = [&](std::size_t index, Judged& out) -> bool {
    // While the listing goes on it may move the names: read under its lock; once it is
    // whole, nothing changes them.
    const bool whole = listed_whole.load();
    std::pair<std::string, EntryName> listed;
    if (whole) {
      listed = names.entry(index);
    } else {
      std::lock_guard lock(names_mutex);
      listed = names.entry(index);
    }
    auto& [name, parsed] = listed;
    GuardListing guard = GuardListing::unknown;
    if (parsed.role != EntryRole::unknown && parsed.role != EntryRole::reclaim_guard && whole) {
      std::string scratch;
      guard = !guarded.empty() && guarded.contains(lock_name_view(name, parsed, scratch))
                  ? GuardListing::present
                  : GuardListing::absent;
    }
    const std::uint32_t uid = settings->judge.area_uid;
    EntryFacts& facts = out.facts;
    facts = gather_entry_in(system, dir, name, std::move(parsed), uid, *processes, guard);
    if (!facts.stat && !facts.kept_changing) return false;  // vanished since the listing
    out.label = label_of(facts);  // the name's: the same for every re-read
    auto judged = judge(facts, out.label);
    // A verdict of death is re-confirmed before it is reported: the lock must still be the
    // same object with the same owner record after the probe, else it changed under us (a
    // release, then a new owner) and is gathered again, with fresh probes. Only a lock's
    // name is reused by a new owner; a candidate's or tombstone's name holds its own token
    // or uuid, so once gone it does not come back. (A guard published since the listing is
    // looked up again here.)
    for (int tries = 0; facts.parsed.role == EntryRole::lock && facts.stat && !facts.kept_changing &&
                        judged.first.proof_class != ProofClass::none;
         ++tries) {
      if (facts.confirmed_after_probe || unchanged_since(system, dir, facts)) break;
      if (tries == reconfirm_limit) {
        facts.kept_changing = true;  // never the same twice: changing, not dead
      } else {
        ProcessCache fresh(system, settings->judge.host);
        facts = gather_entry_in(system, dir, name, parse_entry_name(name), uid, fresh,
                                GuardListing::unknown);
        if (!facts.stat && !facts.kept_changing) return false;  // released for good
      }
      judged = judge(facts, out.label);
    }
    out.verdict = std::move(judged.first);
    out.decision = std::move(judged.second);
    return true;
  };

  std::set<std::string> absent = expected_locks;
  auto deliver = [&](const Judged& judged) {
    if (judged.facts.parsed.role == EntryRole::lock) absent.erase(judged.facts.name);
    visit(JudgedEntry{judged.facts, judged.verdict, judged.decision, judged.label});
  };

  // With more than one job: this thread and `jobs - 1` workers take entries in listing
  // order (an atomic counter) and gather and judge each into a window of slots; this thread
  // visits them in order as they complete, so the output is the same as one job's. While
  // it lists, it visits what is ready between names; then, when the next entry to visit is
  // not ready, it takes one to do itself rather than wait, and sleeps only when every entry
  // is taken. No one takes an entry more than `window` ahead of the visits.
  const std::size_t jobs = std::max(given.jobs, 1U);
  const std::size_t window = jobs * window_per_job;
  struct Slot {
    std::atomic<bool> ready{false};
    bool present = false;  // survey_one's answer: the entry is there, judged in `judged`
    Judged judged;         // reused by every entry that takes this slot
    std::exception_ptr error;
  };
  // Made when the first worker starts: a small area (and an empty one, the usual) never
  // builds the window (some 180 KiB at two jobs, each page of it a fault).
  std::unique_ptr<Slot[]> slots;
  std::atomic<std::size_t> next{0};     // the next index to take
  std::atomic<std::size_t> visited{0};  // entries visited so far
  std::atomic<bool> stopping{false};
  std::atomic<int> sleepers{0};         // workers waiting for an entry to take
  std::atomic<bool> visitor_waiting{false};
  std::mutex mutex;
  std::condition_variable wake_visitor, wake_workers;
  // Takes the next index if there is one listed within the window: the index, `count` (the
  // number listed) when the listing is whole and all are taken, or nothing for now.
  auto take = [&]() -> std::optional<std::size_t> {
    std::size_t index = next.load();
    for (;;) {
      const bool whole = listed_whole.load();
      const std::size_t listed = published.load();
      if (index >= listed) return whole ? std::optional(listed) : std::nullopt;
      if (index >= visited.load() + window) return std::nullopt;
      if (next.compare_exchange_weak(index, index + 1)) return index;
    }
  };
  auto fill = [&](std::size_t index) {
    Slot& slot = slots[index % window];
    try {
      slot.present = survey_one(index, slot.judged);
    } catch (...) {
      slot.error = std::current_exception();
    }
    slot.ready.store(true);
    if (visitor_waiting.load()) {
      std::lock_guard lock(mutex);
      wake_visitor.notify_one();
    }
  };
  auto wake_sleepers = [&] {
    if (sleepers.load() > 0) {
      std::lock_guard lock(mutex);
      wake_workers.notify_all();
    }
  };
  auto work = [&] {
    for (;;) {
      const std::optional<std::size_t> index = take();
      if (stopping.load() || (index && *index == published.load() && listed_whole.load())) return;
      if (index) {
        fill(*index);
        continue;
      }
      std::unique_lock lock(mutex);
      ++sleepers;
      wake_workers.wait(lock, [&] {
        const std::size_t at = next.load();
        return stopping.load() || (at < published.load() && at < visited.load() + window) ||
               (listed_whole.load() && at >= published.load());
      });
      --sleepers;
    }
  };
  // Visits the slot of the next entry to visit, which is ready; hands it back afterwards.
  auto visit_slot = [&] {
    Slot& slot = slots[visited.load() % window];
    const std::exception_ptr error = std::exchange(slot.error, nullptr);
    if (error) std::rethrow_exception(error);
    if (slot.present) deliver(slot.judged);
    slot.ready.store(false);
    visited.fetch_add(1);
  };
  std::vector<std::jthread> workers;
  struct Stop {  // on every way out (a visit may throw): the workers stop and are joined
    std::atomic<bool>& stopping;
    std::mutex& mutex;
    std::condition_variable& wake_workers;
    std::vector<std::jthread>& workers;
    ~Stop() {
      stopping.store(true);
      {
        std::lock_guard lock(mutex);
        wake_workers.notify_all();
      }
      workers.clear();  // joins
    }
  } stop{stopping, mutex, wake_workers, workers};
  // Starts one more worker for every parallel_threshold entries listed, up to jobs - 1 (a
  // small area is not worth a thread per job).
  auto start_workers = [&](std::size_t listed) {
    if (workers.size() + 1 >= jobs || listed < (workers.size() + 1) * parallel_threshold) return;
    if (workers.empty()) {
      slots = std::make_unique<Slot[]>(window);
      prepare();
      (void)labels.size();  // resolves lazy labels now: find() is then read-only, thread-safe
    }
    // Each on another CPU than this thread's at first (detail/spread.h: otherwise the first
    // worker often shares this one's CPU for milliseconds on a 2-CPU machine).
    // The slot is made before the thread: a vector that cannot grow never leaves a running
    // worker to be joined before `stopping` is set.
    while (workers.size() + 1 < jobs && listed >= (workers.size() + 1) * parallel_threshold)
      workers.emplace_back() = detail::start_elsewhere(work).thread;
  };

  // Names are packed in batches of window_per_job outside the lock, then added in one step.
  PackedNames batch;
  std::vector<std::string> batch_guards;
  auto add_batch = [&] {
    std::lock_guard lock(names_mutex);
    names.append(batch);
    for (std::string& lock_name : batch_guards) guarded.insert(std::move(lock_name));
    batch_guards.clear();
    return names.size();
  };
  std::exception_ptr visit_error;  // a visit that failed while the listing went on
  // The listing reads the descriptor the per-entry calls are relative to (no second open
  // by path); by path only when the directory could not be opened.
  auto list = [&](const std::function<bool(const DirEntry&)>& each) {
    return dir.fd >= 0 ? system.list_directory_at(dir.fd, each) : system.list_directory(directory, each);
  };
  auto listing = list([&](const DirEntry& entry) {
    if (std::string lock_name = batch.add(entry.name); !lock_name.empty())
      batch_guards.push_back(std::move(lock_name));
    if (batch.size() < window_per_job) return true;
    const std::size_t count = add_batch();
    published.store(count);
    // Every window_per_job names (not each, which would wake a worker waiting for room in the
    // window for nothing): the workers, what is ready visited in order (so the window moves
    // on while the listing goes on), then the sleepers woken for the names listed since.
    if (jobs <= 1 || count < parallel_threshold) return true;
    start_workers(count);
    try {
      while (visited.load() < count && slots[visited.load() % window].ready.load()) visit_slot();
    } catch (...) {
      visit_error = std::current_exception();
      return false;
    }
    wake_sleepers();
    return true;
  });
  if (visit_error) std::rethrow_exception(visit_error);
  if (!listing) return std::unexpected(listing.error());
  const std::size_t count = add_batch();
  published.store(count);
  listed_whole.store(true);
  wake_sleepers();
  if (count > 0 || !expected_locks.empty()) prepare();

  if (jobs <= 1 || count < parallel_threshold) {
    Judged judged;
    for (std::size_t i = 0; i < count; ++i)
      if (survey_one(i, judged)) deliver(judged);
  } else {
    start_workers(count);
    while (visited.load() < count) {
      Slot& slot = slots[visited.load() % window];
      if (!slot.ready.load()) {
        if (const std::optional<std::size_t> index = take(); index && *index < count) {
          fill(*index);  // help rather than wait
          continue;
        }
        std::unique_lock lock(mutex);
        visitor_waiting.store(true);
        wake_visitor.wait(lock, [&] { return slot.ready.load(); });
        visitor_waiting.store(false);
      }
      visit_slot();
      wake_sleepers();
    }
  }

  for (const std::string& name : absent) {
    EntryFacts facts;
    facts.name = name;
    facts.path = entry_path(directory, name);
    facts.parsed = parse_entry_name(name);
    const EntryLabel* label = label_of(facts);
    const auto judged = judge(facts, label);
    visit(JudgedEntry{facts, judged.first, judged.second, label});
  }
  return count;
}

EntryFacts survey_entry(System& system, const std::string& directory, const std::string& name,
                        const SurveySettings& settings) {
  ProcessCache processes(system, settings.judge.host);
  return gather_entry(system, directory, name, settings.judge.area_uid, processes);
}

}  // namespace apnea_locks
