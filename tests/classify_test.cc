// classify(): every state and reason from hand-made facts, no files at all.
#include "apnea_locks/classify.h"
#include "apnea_locks/survey.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "cli/text.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using apnea_locks::testing::bash_words;

namespace {

/// A verdict with the policy's fix for it.
struct Judged : Verdict {
  Fix fix;
};

/// classify, then the policy's fix (judge_entry), as every command judges an entry.
Judged judged(const EntryFacts& facts, JudgingSettings policy, const EntryLabel* label,
              std::optional<std::string> lock_dir = std::nullopt) {
  SurveySettings settings;
  if (!policy.paused) policy.paused = std::vector<ProcessInfo>{};
  if (!policy.runtimes) policy.runtimes = std::vector<ProcessInfo>{};  // read: none runs
  settings.judge = policy;
  settings.flags.guard_age = policy.guard_threshold;
  settings.fix.lock_dir = std::move(lock_dir);
  auto [verdict, decision] = judge_entry(facts, settings, label);
  return Judged{std::move(verdict), std::move(decision.fix)};
}


constexpr std::int64_t s = 1'000'000'000;
constexpr std::int64_t now = 1'700'000'000 * s;
constexpr std::int64_t boot = now - 10'000 * s;
constexpr std::uint32_t uid = 1000;
const std::string key(64, 'a');
const std::string dir = "/tmp/apnea-1000/operation-locks";

FileStat dir_stat(std::int64_t age_ns) {
  FileStat st;
  st.type = FileType::directory;
  st.mode = 0700;
  st.uid = uid;
  st.mtime_ns = now - age_ns;
  st.ctime_ns = st.mtime_ns;
  st.ino = 42;
  return st;
}

OwnerRead accepted(double pid, std::int64_t written_ns, std::int64_t lock_age_ns) {
  OwnerRead read;
  read.lock_stat = dir_stat(lock_age_ns);
  FileStat owner;
  owner.type = FileType::regular;
  owner.mode = 0600;
  owner.uid = uid;
  owner.size = 60;
  owner.mtime_ns = written_ns;
  read.owner_stat = owner;
  read.owner = Owner{pid, "3f1c6a3e-0d7b-4b7e-9a51-5f0c2b1e9d10"};
  return read;
}

OwnerRead rejected(OwnerCheck check, std::int64_t lock_age_ns, std::uint32_t mode = 0) {
  OwnerRead read;
  if (check != OwnerCheck::lock_missing) read.lock_stat = dir_stat(lock_age_ns);
  OwnerRejection rejection;
  rejection.check = check;
  rejection.mode = mode;
  read.owner = std::unexpected(rejection);
  return read;
}

ProcessInfo info(char state, std::int64_t tgid, std::uint32_t owner_uid, std::int64_t start_ns) {
  ProcessInfo process;
  process.state = state;
  process.tgid = tgid;
  process.uid = owner_uid;
  process.uids = {owner_uid, owner_uid, owner_uid, owner_uid};
  process.uids_known = true;
  process.threads = 1;
  process.start_time_ns = start_ns;
  process.command = "node apnea";
  process.mount_namespace = testing::staged_mount_namespace;
  return process;
}

ProcessFacts process(double pid, int signal_errno, std::optional<ProcessInfo> process_info) {
  ProcessFacts facts;
  facts.pid = pid;
  facts.signal_errno = signal_errno;
  facts.info = std::move(process_info);
  facts.namespace_view_read = true;
  return facts;
}

/// A running process written 100 s ago that started 200 s ago: alive, no proof.
ProcessFacts alive(double pid) { return process(pid, 0, info('S', std::int64_t(pid), uid, now - 200 * s)); }

std::string entry_name(EntryRole role, LockKind kind = LockKind::repository) {
  std::string name = lock_name(kind, key);
  switch (role) {
    case EntryRole::candidate: return name + ".candidate.3f1c6a3e-0d7b-4b7e-9a51-5f0c2b1e9d10";
    case EntryRole::tombstone: return name + ".tombstone.9a0f6a3e-0d7b-4b7e-9a51-5f0c2b1e9d10";
    case EntryRole::reclaim_guard: return name + ".reclaim";
    case EntryRole::unknown: return "notes.txt";
    case EntryRole::lock: break;
  }
  return name;
}

EntryFacts facts_for(EntryRole role, std::optional<OwnerRead> read, std::optional<ProcessFacts> proc,
                     std::optional<std::int64_t> entry_age_ns = std::nullopt,
                     LockKind kind = LockKind::repository) {
  EntryFacts facts;
  facts.name = entry_name(role, kind);
  facts.path = dir + "/" + facts.name;
  facts.parsed = parse_entry_name(facts.name);
  if (read) facts.stat = read->lock_stat;
  else if (entry_age_ns) facts.stat = dir_stat(*entry_age_ns);
  facts.owner = std::move(read);
  facts.process = std::move(proc);
  return facts;
}

JudgingSettings policy() {
  JudgingSettings p;
  p.now_ns = now;
  p.area_uid = uid;
  p.host = testing::healthy_host(boot);
  return p;
}

struct Case {
  const char* title;
  EntryFacts facts;
  EntryState state;
  std::optional<ApneaVerdict> apnea;
  std::string reason;
  bool certain = false;
  bool self_heals = false;
  bool attention = false;
  bool force = false;
};

std::vector<Case> lock_cases() {
  const std::int64_t old = 600 * s;    // past Apnea's 60 s grace
  const std::int64_t young = 10 * s;   // inside it
  return {
      {"live owner", facts_for(EntryRole::lock, accepted(100, now - 100 * s, old), alive(100)),
       EntryState::live, ApneaVerdict::live, "pid-alive"},
      {"EPERM without /proc is live for both",
       facts_for(EntryRole::lock, accepted(100, now - 100 * s, old), process(100, EPERM, std::nullopt)),
       EntryState::live, ApneaVerdict::live, "pid-eperm"},
      {"dead owner, old repository lock: Apnea reclaims it",
       facts_for(EntryRole::lock, accepted(100, now - 600 * s, old), process(100, ESRCH, std::nullopt)),
       EntryState::stale, ApneaVerdict::stale, "pid-dead", true, true, false, false},
      {"dead owner inside the grace",
       facts_for(EntryRole::lock, accepted(100, now - 10 * s, young), process(100, ESRCH, std::nullopt)),
       EntryState::stale, ApneaVerdict::stale, "pid-dead", true, false, true, false},
      {"dead owner of the global setup lock: never reclaimed by Apnea",
       facts_for(EntryRole::lock, accepted(100, now - 600 * s, old), process(100, ESRCH, std::nullopt),
                 std::nullopt, LockKind::global_setup),
       EntryState::stale, ApneaVerdict::stale, "pid-dead", true, false, true, false},
      {"pid above pid_max",
       facts_for(EntryRole::lock, accepted(5'000'000, now - 600 * s, old), process(5'000'000, ESRCH, std::nullopt)),
       EntryState::stale, ApneaVerdict::stale, "pid-out-of-range", true, true, false, false},
      {"pid beyond 2^31: Apnea cannot signal it and calls it live",
       facts_for(EntryRole::lock, accepted(1e20, now - 600 * s, old), process(1e20, -1, std::nullopt)),
       EntryState::stale, ApneaVerdict::live, "pid-out-of-range", true, false, true, false},
      {"zombie", facts_for(EntryRole::lock, accepted(100, now - 100 * s, old),
                           process(100, 0, info('Z', 100, uid, now - 200 * s))),
       EntryState::stale, ApneaVerdict::live, "zombie", true, false, true, false},
      {"pid of another account", facts_for(EntryRole::lock, accepted(100, now - 100 * s, old),
                                           process(100, 0, info('S', 100, uid + 1, now - 200 * s))),
       EntryState::stale, ApneaVerdict::live, "pid-other-uid", true, false, true, false},
      {"pid now names a thread", facts_for(EntryRole::lock, accepted(100, now - 100 * s, old),
                                           process(100, 0, info('S', 99, uid, now - 200 * s))),
       EntryState::stale, ApneaVerdict::live, "pid-is-thread", true, false, true, false},
      {"pid reused: started after the record was written",
       facts_for(EntryRole::lock, accepted(100, now - 100 * s, old),
                 process(100, 0, info('S', 100, uid, now - 50 * s))),
       EntryState::stale, ApneaVerdict::live, "pid-reused", false, false, true, true},
      {"start within the tolerance is not reuse",
       facts_for(EntryRole::lock, accepted(100, now - 100 * s, old),
                 process(100, 0, info('S', 100, uid, now - 99 * s))),
       EntryState::live, ApneaVerdict::live, "pid-alive"},
      {"written before the last boot",
       facts_for(EntryRole::lock, accepted(100, boot - 1 * s, old),
                 process(100, 0, info('S', 100, uid, boot))),
       EntryState::stale, ApneaVerdict::live, "predates-boot", false, false, true, true},
      {"owner.json mode 0644", facts_for(EntryRole::lock, rejected(OwnerCheck::owner_open_mode, old, 0644), std::nullopt),
       EntryState::malformed, ApneaVerdict::malformed, "owner-mode-0644", false, false, true, true},
      {"owner.json symlink", facts_for(EntryRole::lock, rejected(OwnerCheck::owner_symlink, old), std::nullopt),
       EntryState::malformed, ApneaVerdict::malformed, "owner-symlink", false, false, true, true},
      {"owner.json too large", facts_for(EntryRole::lock, rejected(OwnerCheck::owner_too_large, old), std::nullopt),
       EntryState::malformed, ApneaVerdict::malformed, "owner-too-large", false, false, true, true},
      {"json syntax", facts_for(EntryRole::lock, rejected(OwnerCheck::json_syntax, old), std::nullopt),
       EntryState::malformed, ApneaVerdict::malformed, "json-syntax", false, false, true, true},
      {"pid not a positive integer",
       facts_for(EntryRole::lock, rejected(OwnerCheck::pid_not_positive_integer, old), std::nullopt),
       EntryState::malformed, ApneaVerdict::malformed, "pid-not-positive-integer", false, false, true, true},
      {"token missing", facts_for(EntryRole::lock, rejected(OwnerCheck::token_missing, old), std::nullopt),
       EntryState::malformed, ApneaVerdict::malformed, "token-missing", false, false, true, true},
      {"lock directory mode 0755",
       facts_for(EntryRole::lock, rejected(OwnerCheck::lock_open_mode, old, 0755), std::nullopt),
       EntryState::malformed, ApneaVerdict::malformed, "lock-mode-0755", false, false, true, true},
      {"lock gone", facts_for(EntryRole::lock, rejected(OwnerCheck::lock_missing, old), std::nullopt),
       EntryState::free, ApneaVerdict::free, "absent"},
  };
}

std::vector<Case> other_cases() {
  const std::int64_t old = 600 * s;
  const std::int64_t young = 1 * s;
  return {
      {"candidate of a running writer",
       facts_for(EntryRole::candidate, accepted(100, now - 1 * s, young), alive(100)),
       EntryState::in_flight, std::nullopt, "pid-alive"},
      {"candidate of a dead writer",
       facts_for(EntryRole::candidate, accepted(100, now - 600 * s, old), process(100, ESRCH, std::nullopt)),
       EntryState::debris, std::nullopt, "pid-dead", true, false, true, false},
      {"tombstone of a dead releaser",
       facts_for(EntryRole::tombstone, accepted(100, now - 600 * s, old), process(100, ESRCH, std::nullopt)),
       EntryState::debris, std::nullopt, "pid-dead", true, false, true, false},
      {"tombstone whose pid was reused",
       facts_for(EntryRole::tombstone, accepted(100, now - 600 * s, old),
                 process(100, 0, info('S', 100, uid, now - 5 * s))),
       EntryState::debris, std::nullopt, "pid-reused", false, false, true, true},
      {"candidate being written (no owner.json yet)",
       facts_for(EntryRole::candidate, rejected(OwnerCheck::owner_missing, young), std::nullopt),
       EntryState::in_flight, std::nullopt, "owner-missing"},
      {"old candidate without owner.json",
       facts_for(EntryRole::candidate, rejected(OwnerCheck::owner_empty, old), std::nullopt),
       EntryState::debris, std::nullopt, "owner-empty", false, false, true, true},
      {"tombstone being removed", facts_for(EntryRole::tombstone, rejected(OwnerCheck::owner_missing, young), std::nullopt),
       EntryState::in_flight, std::nullopt, "owner-missing"},
      {"recent reclaim guard", facts_for(EntryRole::reclaim_guard, std::nullopt, std::nullopt, young),
       EntryState::in_flight, std::nullopt, "guard-recent"},
      {"abandoned reclaim guard", facts_for(EntryRole::reclaim_guard, std::nullopt, std::nullopt, old),
       EntryState::leftover, std::nullopt, "guard-abandoned", false, false, true, true},
      {"unknown entry", facts_for(EntryRole::unknown, std::nullopt, std::nullopt, old),
       EntryState::unknown, std::nullopt, "unrecognised-name"},
  };
}

void check_case(const Case& c) {
  CAPTURE(c.title);
  const Judged v = judged(c.facts, policy(), nullptr);
  CHECK(v.role == c.facts.parsed.role);
  CHECK(state_name(v.state) == state_name(c.state));
  CHECK(v.apnea_verdict.has_value() == c.apnea.has_value());
  if (v.apnea_verdict && c.apnea) CHECK(apnea_verdict_name(*v.apnea_verdict) == apnea_verdict_name(*c.apnea));
  CHECK(v.reason == c.reason);
  CHECK(v.certain() == c.certain);
  CHECK(v.apnea_self_heals == c.self_heals);
  CHECK(v.needs_attention == c.attention);
  CHECK(v.fix.forced == c.force);
  // A fix is offered exactly for what reclaim can act on: dead, malformed, debris, guards.
  const bool actionable = v.state == EntryState::stale || v.state == EntryState::malformed ||
                          v.state == EntryState::debris || v.state == EntryState::leftover;
  CHECK(v.fix.empty() == !actionable);
  if (!v.fix.empty()) {
    CHECK(v.fix.command.starts_with("apnea-locks reclaim "));
    CHECK((v.fix.command.find(" --force ") != std::string::npos) == c.force);
  }
}

}  // namespace

TEST_CASE("locks: both verdicts, reason, self-healing, attention and force") {
  for (const Case& c : lock_cases()) check_case(c);
}

TEST_CASE("candidates, tombstones, reclaim guards and unknown entries") {
  for (const Case& c : other_cases()) check_case(c);
}

TEST_CASE("apnea_verdict is live unless kill gave ESRCH, and malformed on any rejection") {
  for (const Case& c : lock_cases()) {
    CAPTURE(c.title);
    const Verdict v = judged(c.facts, policy(), nullptr);
    REQUIRE(v.apnea_verdict);
    const auto& read = *c.facts.owner;
    if (!read.owner) {
      CHECK((*v.apnea_verdict == ApneaVerdict::malformed || *v.apnea_verdict == ApneaVerdict::free));
    } else {
      CHECK((*v.apnea_verdict == ApneaVerdict::live) == apnea_alive(*c.facts.process));
    }
  }
}

TEST_CASE("the fix command names the repository or home when known, else the path") {
  EntryFacts stale_repo = facts_for(EntryRole::lock, accepted(100, now - 10 * s, 10 * s),
                                    process(100, ESRCH, std::nullopt));
  EntryLabel repo{LockKind::repository, "/home/ann/my repo"};
  CHECK(judged(stale_repo, policy(), &repo).fix.command == "apnea-locks reclaim --repo '/home/ann/my repo'");
  CHECK(judged(stale_repo, policy(), nullptr).fix.command == "apnea-locks reclaim " + stale_repo.path);

  EntryFacts stale_global = facts_for(EntryRole::lock, accepted(100, now - 10 * s, 10 * s),
                                      process(100, ESRCH, std::nullopt), std::nullopt,
                                      LockKind::global_setup);
  EntryLabel home{LockKind::global_setup, "/home/ann"};
  CHECK(judged(stale_global, policy(), &home).fix.command == "apnea-locks reclaim --home /home/ann");

  EntryFacts malformed = facts_for(EntryRole::lock, rejected(OwnerCheck::json_syntax, 600 * s), std::nullopt);
  CHECK(judged(malformed, policy(), &repo, "/var/tmp/locks").fix.command ==
        "apnea-locks reclaim --force --lock-dir /var/tmp/locks --repo '/home/ann/my repo'");

  // Debris and guards are named by their own path, even when the repository is known.
  EntryFacts guard = facts_for(EntryRole::reclaim_guard, std::nullopt, std::nullopt, 600 * s);
  CHECK(judged(guard, policy(), &repo).fix.command == "apnea-locks reclaim --force " + guard.path);
  EntryFacts live = facts_for(EntryRole::lock, accepted(100, now - 100 * s, 600 * s), alive(100));
  CHECK(judged(live, policy(), &repo).fix.empty());
}

TEST_CASE("a reclaim guard changes a stale lock's verdict") {
  EntryFacts lock = facts_for(EntryRole::lock, accepted(100, now - 600 * s, 600 * s),
                              process(100, ESRCH, std::nullopt));
  REQUIRE(judged(lock, policy(), nullptr).apnea_self_heals);

  lock.guard = dir_stat(600 * s);  // left behind by a crashed reclaimer: blocks Apnea
  Judged blocked = judged(lock, policy(), nullptr);
  CHECK(blocked.guard == GuardState::leftover);
  CHECK_FALSE(blocked.apnea_self_heals);
  CHECK(blocked.needs_attention);
  CHECK(blocked.fix.forced);

  // A guard a second old: a reclamation may be running, but one that crashed a second ago
  // looks the same, and either way Apnea is refused ("reclamation is guarded") while it is
  // there: never OK.
  lock.guard = dir_stat(1 * s);
  Judged reclaiming = judged(lock, policy(), nullptr);
  CHECK(reclaiming.guard == GuardState::in_flight);
  CHECK_FALSE(reclaiming.apnea_self_heals);
  CHECK(reclaiming.needs_attention);
  CHECK(reclaiming.state == EntryState::stale);
  CHECK(reclaiming.fix.empty());  // nothing removes it before --guard-age
}

TEST_CASE("tolerance and guard threshold are policy") {
  EntryFacts lock = facts_for(EntryRole::lock, accepted(100, now - 100 * s, 600 * s),
                              process(100, 0, info('S', 100, uid, now - 95 * s)));
  CHECK(judged(lock, policy(), nullptr).reason == "pid-reused");
  JudgingSettings lenient = policy();
  lenient.reuse_tolerance = std::chrono::seconds(10);
  CHECK(judged(lock, lenient, nullptr).reason == "pid-alive");

  EntryFacts guard = facts_for(EntryRole::reclaim_guard, std::nullopt, std::nullopt, 30 * s);
  CHECK(judged(guard, policy(), nullptr).state == EntryState::in_flight);
  JudgingSettings strict = policy();
  strict.guard_threshold = std::chrono::seconds(20);
  CHECK(judged(guard, strict, nullptr).state == EntryState::leftover);
}

TEST_CASE("a lock that kept changing during the scan is in flight, Apnea's 'raced'") {
  EntryFacts lock = facts_for(EntryRole::lock, rejected(OwnerCheck::owner_missing, 0), std::nullopt);
  lock.kept_changing = true;
  Verdict v = judged(lock, policy(), nullptr);
  CHECK(v.state == EntryState::in_flight);
  CHECK(v.apnea_verdict == ApneaVerdict::raced);
  CHECK(v.reason == "changed-during-scan");
  CHECK_FALSE(v.needs_attention);
}

TEST_CASE("a future mtime shows a negative age, never clamped; states round-trip by name") {
  EntryFacts guard = facts_for(EntryRole::reclaim_guard, std::nullopt, std::nullopt, -50 * s);
  Verdict v = judged(guard, policy(), nullptr);
  REQUIRE(v.age_ns);
  CHECK(*v.age_ns == -50 * s);
  CHECK(v.state == EntryState::in_flight);  // not old: never removable by age
  for (auto state : {EntryState::live, EntryState::stale, EntryState::malformed,
                     EntryState::live_malformed, EntryState::free,
                     EntryState::in_flight, EntryState::debris, EntryState::leftover,
                     EntryState::unknown})
    CHECK(parse_state(state_name(state)) == state);
  CHECK_FALSE(parse_state("dead"));
}

TEST_CASE("shell_word quotes only what needs it") {
  CHECK(shell_word("/tmp/a-b_c.lock") == "/tmp/a-b_c.lock");
  CHECK(shell_word("/tmp/a b") == "'/tmp/a b'");
  CHECK(shell_word("it's") == "'it'\\''s'");
  CHECK(shell_word("") == "''");
  CHECK(shell_word("caf\xc3\xa9 au lait") == "'caf\xc3\xa9 au lait'");  // UTF-8 that hides nothing
}

TEST_CASE("shell_word: $'...' for a byte that needs an escape, which bash reads back exactly") {
  CHECK(shell_word("a\x1b[31mb") == "$'a\\x1b[31mb'");
  CHECK(shell_word("it's\\\n") == "$'it\\'s\\\\\\x0a'");
  // A hex digit right after \xHH is escaped too: POSIX leaves \x with more than two unspecified.
  CHECK(shell_word("\x07" "beef") == "$'\\x07\\x62\\x65\\x65\\x66'");
  const std::vector<std::string> hostile{
      "bad\xff\xfe\xc3(",                // invalid UTF-8
      "\xed\xa0\x80 \xe2\x82",            // a surrogate, a cut sequence
      "esc\x1b[31mred\x1b]0;title\x07",   // ESC, BEL
      "nl\nnext\rcr\ttab",
      "rlo\xe2\x80\xae" "txt.exe",        // U+202E
      "lsep\xe2\x80\xa8 zwsp\xe2\x80\x8b bom\xef\xbb\xbf",
      "c1\xc2\x9b" "31m del\x7f",
      "quote' dquote\" back\\slash\x1b",
      "$(touch x) `id` $HOME !! * ?\x01",
      "caf\xc3\xa9\x1b" "0a",              // valid UTF-8 beside a control, a hex digit after
      "\x1f" "-",
  };
  for (const std::string& word : hostile) {
    const std::string quoted = shell_word(word);
    CAPTURE(quoted);
    CHECK(quoted.starts_with("$'"));
    // Printable ASCII only: the text escaper leaves it as it is.
    CHECK(std::all_of(quoted.begin(), quoted.end(), [](char c) { return c >= 0x20 && c < 0x7f; }));
    CHECK(cli::printable(quoted) == quoted);
  }
  // Pasted into bash, every word (the plain and single-quoted ones too) names its bytes.
  std::vector<std::string> words = hostile;
  words.insert(words.end(), {"/tmp/plain", "/tmp/a b", "it's", "", "caf\xc3\xa9", "=x", "/srv/a|z"});
  CHECK(bash_words(shell_command(words)) == words);
  // A '|' (which Nagios output writes as \x7c) is written as an escape too.
  CHECK(shell_word("/srv/a|z") == "$'/srv/a\\x7cz'");
  for (const std::string& word : words) CHECK(bash_words(shell_word(word)) == std::vector{word});
}

TEST_CASE("record_changed: unchanged since publication only as Apnea publishes a record") {
  constexpr std::int64_t s = 1'000'000'000, tolerance = 2 * s;
  const std::int64_t t = 1'700'000'000 * s;
  FileStat dir, file;
  dir.birth_ns = t;              // mkdir of the candidate
  file.birth_ns = t + s / 100;   // owner.json written into it
  file.ctime_ns = t + s / 50;    // its bytes and fsync
  dir.ctime_ns = t + s / 10;     // the rename into place
  CHECK_FALSE(record_changed(dir, file, std::chrono::nanoseconds(tolerance)));
  SUBCASE("rewritten or truncated in place later: its ctime leaves its birth") {
    file.ctime_ns = t + 30 * s;
    CHECK(record_changed(dir, file, std::chrono::nanoseconds(tolerance)));
  }
  SUBCASE("replaced by rename (sed -i, an editor, rsync): born long after its directory") {
    file.birth_ns = t + 30 * s;
    file.ctime_ns = t + 30 * s;
    dir.ctime_ns = t + 30 * s;
    CHECK(record_changed(dir, file, std::chrono::nanoseconds(tolerance)));
  }
  SUBCASE("a directory born after its record (restored by a copy tool) is not Apnea's publication") {
    dir.birth_ns = file.birth_ns + s;
    CHECK(record_changed(dir, file, std::chrono::nanoseconds(tolerance)));
  }
  SUBCASE("no birth time: only the ctime test, which a change in place still fails") {
    dir.birth_ns = file.birth_ns = 0;
    CHECK_FALSE(record_changed(dir, file, std::chrono::nanoseconds(tolerance)));
    file.ctime_ns = dir.ctime_ns + 3 * s;
    CHECK(record_changed(dir, file, std::chrono::nanoseconds(tolerance)));
  }
  SUBCASE("within the tolerance: unchanged") {
    file.ctime_ns = file.birth_ns + tolerance;
    dir.ctime_ns = file.ctime_ns;
    CHECK_FALSE(record_changed(dir, file, std::chrono::nanoseconds(tolerance)));
  }
  SUBCASE("a wide --tolerance does not widen the window: a change 30 s later is still seen") {
    file.ctime_ns = t + 30 * s;
    CHECK(record_changed(dir, file, std::chrono::days(1)));
    file.ctime_ns = file.birth_ns + 3 * s;
    dir.ctime_ns = file.ctime_ns;
    CHECK(record_changed(dir, file, std::chrono::days(1)));
  }
  SUBCASE("a narrow --tolerance narrows it") {
    file.ctime_ns = file.birth_ns + s + s / 2;
    dir.ctime_ns = file.ctime_ns;
    CHECK(record_changed(dir, file, std::chrono::seconds(1)));
  }
}

namespace {

/// The decision `reclaim --force` takes on `facts` under `p` (guard age 5 min).
Decision forced(const EntryFacts& facts, JudgingSettings p) {
  SurveySettings settings;
  if (!p.paused) p.paused = std::vector<ProcessInfo>{};
  if (!p.runtimes) p.runtimes = std::vector<ProcessInfo>{};
  settings.judge = p;
  settings.flags = RemovalFlags{true, p.guard_threshold};
  return judge_entry(facts, settings, nullptr).second;
}

}  // namespace

TEST_CASE("the guard row: which paused processes may hold an old guard") {
  // A guard 10 min old (mtime and ctime): removable under --force unless a paused process
  // that may hold it is there.
  const EntryFacts guard = facts_for(EntryRole::reclaim_guard, std::nullopt, std::nullopt, 600 * s);
  const std::int64_t made = now - 600 * s;
  REQUIRE(forced(guard, policy()).action == PlanAction::remove);
  struct Row {
    const char* what;
    ProcessInfo process;
    bool blocks;
  };
  auto paused = [](ProcessInfo p, Pause why) {
    p.pause = why;
    p.pid = 4242;
    return p;
  };
  ProcessInfo mixed = info('S', 4242, uid, made);
  mixed.uids = {2000, 2000, uid, 2000};  // a saved uid of ours: may be ours
  ProcessInfo unknown_uids = info('S', 4242, 2000, made);
  unknown_uids.uids_known = false;
  ProcessInfo kernel = info('D', 4242, 0, made);
  kernel.kernel_thread = true;
  const std::vector<Row> rows = {
      {.what = "ours, stopped before the guard", .process = paused(info('T', 4242, uid, made - 60 * s), Pause::stopped), .blocks = true},
      {.what = "ours, in D", .process = paused(info('D', 4242, uid, made), Pause::disk_sleep), .blocks = true},
      {.what = "ours, traced", .process = paused(info('S', 4242, uid, made), Pause::traced), .blocks = true},
      {.what = "ours, frozen", .process = paused(info('S', 4242, uid, made), Pause::frozen), .blocks = true},
      {.what = "ours, under an inspector", .process = paused(info('S', 4242, uid, made), Pause::inspector), .blocks = true},
      {.what = "unreadable (nothing known)", .process = paused(ProcessInfo{}, Pause::unreadable), .blocks = true},
      {.what = "root's, stopped", .process = paused(info('T', 4242, 0, made), Pause::stopped), .blocks = true},
      {.what = "a saved uid of ours", .process = paused(mixed, Pause::stopped), .blocks = true},
      {.what = "uids unknown", .process = paused(unknown_uids, Pause::stopped), .blocks = true},
      {.what = "ours, started 59 s after the guard", .process = paused(info('T', 4242, uid, made + 59 * s), Pause::stopped), .blocks = true},
      {.what = "ours, started 61 s after the guard", .process = paused(info('T', 4242, uid, made + 61 * s), Pause::stopped), .blocks = false},
      {.what = "another account's", .process = paused(info('T', 4242, 2000, made), Pause::stopped), .blocks = false},
      {.what = "a kernel thread", .process = paused(kernel, Pause::disk_sleep), .blocks = false},
  };
  for (const Row& row : rows) {
    const std::string what = row.what;
    CAPTURE(what);
    JudgingSettings p = policy();
    p.paused = std::vector<ProcessInfo>{row.process};
    const Verdict verdict = judged(guard, p, nullptr);
    CHECK(verdict.guard_blocker.has_value() == row.blocks);
    const Decision decision = forced(guard, p);
    CHECK(decision.action == (row.blocks ? PlanAction::refuse : PlanAction::remove));
    if (row.blocks) CHECK(decision.why.find(std::string(pause_name(row.process.pause))) != std::string::npos);
    // Another account's process blocks when the area is root's or idmapped: proof 4 fails.
    JudgingSettings idmapped = p;
    idmapped.host.idmapped = true;
    if (!row.process.kernel_thread && row.process.start_time_ns <= made + 60 * s)
      CHECK(judged(guard, idmapped, nullptr).guard_blocker.has_value());
  }
  // Each refusal says how to unblock that kind of pause.
  ProcessInfo traced = paused(info('S', 4242, uid, made), Pause::traced);
  traced.tracer_pid = 777;
  JudgingSettings p = policy();
  p.paused = std::vector<ProcessInfo>{traced};
  CHECK(forced(guard, p).next_step.find("777") != std::string::npos);
  ProcessInfo frozen = paused(info('S', 4242, uid, made), Pause::frozen);
  frozen.frozen_cgroup = "/sys/fs/cgroup/user.slice/box";
  p.paused = std::vector<ProcessInfo>{frozen};
  CHECK(forced(guard, p).next_step.find("thaw its cgroup /sys/fs/cgroup/user.slice/box") != std::string::npos);
  p.paused = std::vector<ProcessInfo>{paused(info('T', 4242, uid, made), Pause::stopped)};
  CHECK(forced(guard, p).next_step.find("kill -CONT 4242") != std::string::npos);
}

TEST_CASE("the guard row: an mtime set back does not make a guard old; the latest of mtime and ctime counts") {
  // `touch -d '1 hour ago'` on a guard a reclaimer made 10 s ago: its mtime says an hour, its
  // ctime (which only moves forward) says 10 s.
  EntryFacts guard = facts_for(EntryRole::reclaim_guard, std::nullopt, std::nullopt, 3600 * s);
  REQUIRE(guard.stat);
  REQUIRE(forced(guard, policy()).action == PlanAction::remove);  // both old: removed
  guard.stat->ctime_ns = now - 10 * s;
  const Verdict shown = judged(guard, policy(), nullptr);
  CHECK(shown.state == EntryState::leftover);  // what status shows follows the mtime
  const Decision kept = forced(guard, policy());
  CHECK(kept.action == PlanAction::refuse);
  CHECK(kept.why.find("changed 10s ago") != std::string::npos);
  CHECK(kept.next_step.find("rmdir -- ") != std::string::npos);
  // And as a lock's guard: the dead owner's lock is refused while its guard is that young.
  EntryFacts lock = facts_for(EntryRole::lock, accepted(100, now - 7200 * s, 7200 * s),
                              process(100, ESRCH, std::nullopt));
  lock.guard = guard.stat;
  const Decision refused = forced(lock, policy());
  CHECK(refused.action == PlanAction::refuse);
  CHECK(refused.why.find("changed 10s ago") != std::string::npos);
  // Once its ctime is as old, both go.
  lock.guard->ctime_ns = now - 3600 * s;
  CHECK(forced(lock, policy()).action == PlanAction::remove);
}

TEST_CASE("a clock step: 30 s stays in the band, 10 min voids every time comparison") {
  const std::int64_t made = now - 600 * s;
  for (const std::int64_t step : {30 * s, 600 * s}) {
    CAPTURE(step / s);
    JudgingSettings p = policy();
    // The clock stepped forward by `step` since boot: btime, computed from it, moved on while
    // the birth time of /dev did not.
    p.host.dev_birth_ns = p.host.boot_time_ns - step;
    const bool void_clock = step > 60 * s;
    REQUIRE(p.host.clock_void() == void_clock);

    // A reclaim guard 10 min old by the clock: shown as the clock says (left over, so a
    // monitor still sees that it blocks Apnea), removed only when the clock is not void.
    const EntryFacts guard = facts_for(EntryRole::reclaim_guard, std::nullopt, std::nullopt, 600 * s);
    CHECK(judged(guard, p, nullptr).state == EntryState::leftover);
    const Decision guard_decision = forced(guard, p);
    CHECK(guard_decision.action == (void_clock ? PlanAction::refuse : PlanAction::remove));
    if (void_clock) CHECK(guard_decision.why.find("the clock is void") != std::string::npos);

    // A dead lock with that guard: the guard blocks it while the clock is void.
    EntryFacts lock = facts_for(EntryRole::lock, accepted(100, made, 600 * s), process(100, ESRCH, std::nullopt));
    lock.guard = dir_stat(600 * s);
    CHECK(judged(lock, p, nullptr).guard == GuardState::leftover);
    const Decision lock_decision = forced(lock, p);
    CHECK(lock_decision.action == (void_clock ? PlanAction::refuse : PlanAction::remove));
    if (void_clock) CHECK(lock_decision.why.find("the clock is void") != std::string::npos);

    // A lock whose record names no pid, unchanged for 10 min: --force removes it only when
    // that age counts.
    EntryFacts empty = facts_for(EntryRole::lock, rejected(OwnerCheck::owner_empty, 600 * s), std::nullopt);
    const Decision empty_decision = forced(empty, p);
    CHECK(empty_decision.action == (void_clock ? PlanAction::refuse : PlanAction::remove));
    if (void_clock) {
      CHECK(empty_decision.why.find("the clock is void") != std::string::npos);
      CHECK(empty_decision.next_step.find("rm -r -- ") != std::string::npos);  // no wait helps
    }

    // A candidate naming no pid, unchanged for 10 min: --force removes it only when that age
    // counts.
    EntryFacts candidate = facts_for(EntryRole::candidate, rejected(OwnerCheck::owner_empty, 600 * s), std::nullopt);
    const Decision candidate_decision = forced(candidate, p);
    if (void_clock) {
      CHECK(candidate_decision.action == PlanAction::keep);  // it may be being written
      CHECK(candidate_decision.why.find("the clock is void") != std::string::npos);
    } else {
      CHECK(candidate_decision.action == PlanAction::remove);
    }

    // A paused process started 2 h after the guard was made cannot hold it; with the clock
    // void its start time proves nothing.
    ProcessInfo late = info('T', 4242, uid, made + 7200 * s);
    late.pid = 4242;
    late.pause = Pause::stopped;
    JudgingSettings with_paused = p;
    with_paused.paused = std::vector<ProcessInfo>{late};
    CHECK(judged(guard, with_paused, nullptr).guard_blocker.has_value() == void_clock);

    // pid-reused: evidence within the band, void beyond it.
    EntryFacts reused = facts_for(EntryRole::lock, accepted(100, now - 100 * s, 600 * s),
                                  process(100, 0, info('S', 100, uid, now - 95 * s)));
    CHECK(judged(reused, p, nullptr).reason == (void_clock ? "clock-void" : "pid-reused"));
  }
  // Another time namespace voids the clock whatever the gap.
  JudgingSettings p = policy();
  p.host.other_time_namespace = true;
  CHECK(p.host.clock_void());
  CHECK(p.host.why_clock_void().find("time namespace") != std::string::npos);
}

TEST_CASE("possible owners: another account's left out, grouped by application, the lock's own repository first") {
  const std::string repo = "/home/ann/site";
  EntryFacts facts = facts_for(EntryRole::lock, accepted(100, now - 600 * s, 600 * s), process(100, ESRCH, std::nullopt));
  facts.name = lock_name(LockKind::repository, lock_key(LockKind::repository, repo));
  facts.path = dir + "/" + facts.name;
  facts.parsed = parse_entry_name(facts.name);
  // Rewritten 30 s after it was published: it proves nothing about its owner.
  facts.owner->owner_stat->ctime_ns = facts.owner->lock_stat->ctime_ns + 30 * s;
  const auto owner = [](std::int64_t pid, std::uint32_t owner_uid, std::string exe, std::string cwd) {
    ProcessInfo process = info('S', pid, owner_uid, now - 3600 * s);
    process.pid = pid;
    process.executable = std::move(exe);
    process.cwd = std::move(cwd);
    process.runtime_sign = "exe";
    return process;
  };
  JudgingSettings p = policy();
  p.runtimes = std::vector<ProcessInfo>{
      owner(11, uid, "/usr/bin/node", "/tmp"),
      owner(12, 0, "/usr/bin/node", repo),  // root's: another account (proof 4)
      owner(13, uid, "/usr/share/code/code", repo + "/src"),
      owner(14, uid, "/usr/bin/bun", "/"),
      owner(15, uid, "/usr/bin/node", "/home"),
  };
  const Verdict verdict = judged(facts, p, nullptr);
  REQUIRE(verdict.record_changed);
  std::vector<std::int64_t> order;
  for (const ProcessInfo& process : verdict.possible_owners) order.push_back(process.pid);
  CHECK(order == std::vector<std::int64_t>{13, 14, 11, 15});
  REQUIRE(!verdict.possible_owners.empty());
  CHECK(verdict.possible_owners.front().pid == 13);
  const Decision decision = forced(facts, p);
  CHECK(decision.action == PlanAction::refuse);
  CAPTURE(decision.why);
  CHECK(decision.why.find("4 processes may be its owner") != std::string::npos);
  CHECK(decision.why.find("/usr/share/code/code: pid 13") < decision.why.find("/usr/bin/bun: pid 14"));
  CHECK(decision.why.find("/usr/bin/node: pid 11") != std::string::npos);
  CHECK(decision.why.find("pid 12") == std::string::npos);
  CHECK(decision.next_step.find("--not-owner 13@") != std::string::npos);
  CHECK(decision.next_step.find("--not-owner 15@") != std::string::npos);
  // The operator's word for all four: removed, each named in what --force trusted.
  JudgingSettings cleared = p;
  for (const std::int64_t pid : {11, 13, 14, 15})
    cleared.not_owners.push_back(NotOwner{pid, (now - 3600 * s) / s});
  const Decision removed = forced(facts, cleared);
  CHECK(removed.action == PlanAction::remove);
  CHECK(std::ranges::count_if(removed.trusts, [](const std::string& t) {
          return t.find("the operator's word") != std::string::npos;
        }) == 4);
}

TEST_CASE("possible owners: a malformed lock and an entry naming no pid need none alive either (section 10's rows)") {
  // A runtime of this account that started before each entry was made.
  ProcessInfo runtime = info('S', 21, uid, now - 3600 * s);
  runtime.pid = 21;
  runtime.executable = "/usr/bin/node";
  runtime.runtime_sign = "exe";
  // A runtime that has exited, the last of its threads (a zombie): it holds nothing.
  ProcessInfo zombie = info('Z', 22, uid, now - 3600 * s);
  zombie.pid = 22;
  zombie.executable = "/usr/bin/node";
  zombie.runtime_sign = "exe";
  // A malformed lock naming a dead pid (owner.json mode 0644).
  EntryFacts bad_mode = facts_for(EntryRole::lock, rejected(OwnerCheck::owner_open_mode, 600 * s, 0644), std::nullopt);
  bad_mode.named.emplace_back(100, process(100, ESRCH, std::nullopt));
  // A malformed lock naming no pid, and a candidate and a tombstone naming none, all old.
  EntryFacts empty = facts_for(EntryRole::lock, rejected(OwnerCheck::owner_empty, 600 * s), std::nullopt);
  EntryFacts candidate = facts_for(EntryRole::candidate, rejected(OwnerCheck::owner_empty, 600 * s), std::nullopt);
  EntryFacts tombstone = facts_for(EntryRole::tombstone, rejected(OwnerCheck::owner_missing, 600 * s), std::nullopt);
  // A valid lock of a dead owner: its proof is its own, possible owners do not matter.
  EntryFacts valid = facts_for(EntryRole::lock, accepted(100, now - 600 * s, 600 * s), process(100, ESRCH, std::nullopt));
  JudgingSettings p = policy();
  struct Row {
    const char* what;
    const EntryFacts& facts;
    bool needs_owners;
    std::string_view damage;
  };
  const Row rows[] = {
      {"malformed, naming a dead pid", bad_mode, true, "its owner record is malformed (owner-mode-0644), and "},
      {"malformed, naming no pid", empty, true, "its owner record names no pid, and "},
      {"candidate naming no pid", candidate, true, "its owner record names no pid, and "},
      {"tombstone naming no pid", tombstone, true, "its owner record names no pid, and "},
      {"valid, dead owner", valid, false, ""},
  };
  for (const Row& row : rows) {
    CAPTURE(row.what);
    CHECK(needs_possible_owners(row.facts, p) == row.needs_owners);
    // None runs (a zombie does not): --force removes it, trusting that Apnea runs only in a
    // recognised runtime.
    JudgingSettings with_zombie = p;
    with_zombie.runtimes = std::vector<ProcessInfo>{zombie};
    const Decision alone = forced(row.facts, with_zombie);
    CHECK(alone.action == PlanAction::remove);
    CHECK(std::ranges::count(alone.trusts, std::string("Apnea runs only in a recognised runtime (Node, Bun, "
                                                       "Deno, Electron)")) == (row.needs_owners ? 1 : 0));
    // One runs: refused, naming it and the operator's word for it.
    JudgingSettings with_runtime = p;
    with_runtime.runtimes = std::vector<ProcessInfo>{runtime, zombie};
    const Decision blocked = forced(row.facts, with_runtime);
    CAPTURE(blocked.why);
    CHECK((blocked.action == PlanAction::refuse) == row.needs_owners);
    if (!row.needs_owners) continue;
    CHECK(blocked.why.starts_with(row.damage));
    CHECK(blocked.why.find("1 process may be its owner") != std::string::npos);
    CHECK(blocked.why.find("/usr/bin/node: pid 21") != std::string::npos);
    CHECK(blocked.next_step.find("--not-owner 21@") != std::string::npos);
    // The process table unreadable: refused too.
    SurveySettings unread;
    unread.judge = p;
    unread.judge.paused = std::vector<ProcessInfo>{};
    unread.judge.runtimes = std::nullopt;
    unread.flags = RemovalFlags{true, p.guard_threshold};
    const auto [verdict, unreadable] = judge_entry(row.facts, unread, nullptr);
    CHECK(verdict.owners_needed);
    CHECK_FALSE(verdict.owners_checked);
    CHECK(unreadable.action == PlanAction::refuse);
    CHECK(unreadable.why.find("the process table could not be read") != std::string::npos);
    // The operator's word for it: removed, the word among the trusts.
    with_runtime.not_owners.push_back(NotOwner{21, (now - 3600 * s) / s});
    CHECK(forced(row.facts, with_runtime).action == PlanAction::remove);
  }
}
