// The Prometheus renderer (pure) and the atomic file writer, checked with a strict parser
// of the exposition format (tests/prometheus_parser.h), which is itself checked first.
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/atomic_file.h"
#include "cli/prometheus.h"
#include "cli/summary.h"
#include "cli/text.h"
#include "prometheus_parser.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::cli;
using namespace apnea_locks::testing;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) out.push_back(entry.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("the strict exposition parser rejects what Prometheus rejects") {
  const std::string good =
      "# HELP a_b Help.\n# TYPE a_b gauge\na_b{x=\"1\",y=\"q\\\"\\\\\\n\"} 1.5\na_b 2\n";
  auto parsed = parse_exposition(good);
  REQUIRE_MESSAGE(parsed, parsed.error());
  CHECK(parsed->value("a_b", {{"y", "q\"\\\n"}}) == 1.5);
  CHECK(parsed->value("a_b", {}) == 1.5);  // first match
  const char* bad[] = {
      "a_b 1\n",                                              // no HELP/TYPE
      "# HELP a_b h\na_b 1\n",                                // no TYPE
      "# HELP a_b h\n# TYPE a_b gauge\na_b 1",                // no final newline
      "# HELP a_b h\n# TYPE a_b gauge\na_b{x=1} 1\n",         // unquoted label value
      "# HELP a_b h\n# TYPE a_b gauge\na_b{x=\"\\t\"} 1\n",   // bad escape
      "# HELP a_b h\n# TYPE a_b gauge\na_b{x=\"1\",x=\"2\"} 1\n",  // repeated label
      "# HELP a_b h\n# TYPE a_b gauge\na_b 1\na_b 2\n",       // repeated series
      "# HELP a_b h\n# TYPE a_b gauge\na_b one\n",            // bad value
      "# HELP a_b h\n# TYPE a_b gauge\na_b 1 2 3\n",          // trailing text
      "# HELP a_b h\n# TYPE a_b gauge\nc_d 1\n",              // sample outside its family
      "# HELP 1a h\n# TYPE 1a gauge\n1a 1\n",                 // bad name
      "# HELP a_b h\n# TYPE a_b gauge\na_b{__x=\"1\"} 1\n",   // reserved label
      "# HELP a_b h\n# TYPE a_b gauge\n\na_b 1\n",            // empty line
      "# HELP a_b h\n# TYPE a_b bogus\na_b 1\n",              // unknown type
      "# HELP a_b h\n# TYPE a_b gauge\na_b 1\n# HELP a_b h\n# TYPE a_b gauge\n",  // family repeated
      "# HELP a_b h\n# TYPE a_b gauge\na_b{x=\"\xff\"} 1\n",  // not UTF-8
  };
  for (const char* text : bad) CHECK_MESSAGE(!parse_exposition(text), text);
}

TEST_CASE("prometheus_text: every family typed, zero samples for empty classes, counts") {
  AreaSummary summary;
  summary.classes[{"repository", "lock", "stale"}] = 3;
  summary.classes[{"repository", "lock", "free"}] = 1;  // not in the fixed set: still written
  summary.attention = 4;
  summary.oldest_lock_age_ns = 7'384'512'000'000;
  summary.oldest_lock_mtime_ns = 1'700'000'000'125'000'000;
  MetricsReport report;
  report.lock_dir = "/tmp/apnea-1000/operation-locks";
  report.version = "1.2.3";
  report.summary = &summary;
  const std::string text = prometheus_text(report);
  auto parsed = parse_exposition(text);
  REQUIRE_MESSAGE(parsed, parsed.error(), "\n", text);
  for (const auto& family : parsed->families) {
    CHECK(family.type == "gauge");
    CHECK(family.name.starts_with("apnea_locks_"));
    // build_info is about the program: its one sample has the version alone.
    for (const auto& sample : family.samples)
      if (family.name == "apnea_locks_build_info") CHECK(sample.labels == std::map<std::string, std::string>{{"version", "1.2.3"}});
      else CHECK(sample.labels.at("lock_dir") == report.lock_dir);
  }
  CHECK(parsed->find("apnea_locks_check_status") == nullptr);
  CHECK(parsed->value("apnea_locks_build_info", {{"version", "1.2.3"}}) == 1);
  CHECK(parsed->value("apnea_locks_oldest_lock_mtime_seconds") == doctest::Approx(1700000000.125));
  CHECK(parsed->find("apnea_locks_oldest_lock_age_seconds")->help.starts_with("Deprecated"));
  CHECK(parsed->value("apnea_locks_scrape_success") == 1);
  CHECK(parsed->value("apnea_locks_area_safe") == 1);
  CHECK(parsed->value("apnea_locks_entries_needing_attention") == 4);
  CHECK(parsed->value("apnea_locks_oldest_lock_age_seconds") == doctest::Approx(7384.512));
  auto entries = [&](const char* kind, const char* role, const char* state) {
    return parsed->value("apnea_locks_entries", {{"kind", kind}, {"role", role}, {"state", state}});
  };
  CHECK(entries("repository", "lock", "stale") == 3);
  CHECK(entries("repository", "lock", "free") == 1);
  for (const char* kind : {"repository", "global-setup"}) {
    CHECK(entries(kind, "lock", "malformed") == 0);
    CHECK(entries(kind, "lock", "live") == 0);
    CHECK(entries(kind, "lock", "in-flight") == 0);
    CHECK(entries(kind, "candidate", "debris") == 0);
    CHECK(entries(kind, "tombstone", "in-flight") == 0);
    CHECK(entries(kind, "reclaim-guard", "leftover") == 0);
  }
  CHECK(entries("unknown", "unknown", "unknown") == 0);
  CHECK(parsed->find("apnea_locks_entries")->samples.size() == 24);  // live-malformed per kind  // 2 * 10 + 1 + free
}

TEST_CASE("prometheus_text: an area that was not listed has no counts; check status") {
  MetricsReport report;
  report.lock_dir = "x";
  report.version = "v";
  report.area_safe = false;
  report.scrape_success = false;
  report.check_status = 3;
  auto parsed = parse_exposition(prometheus_text(report));
  REQUIRE(parsed);
  CHECK(parsed->families.size() == 4);
  CHECK(parsed->value("apnea_locks_area_safe") == 0);
  CHECK(parsed->value("apnea_locks_scrape_success") == 0);
  CHECK(parsed->value("apnea_locks_check_status") == 3);
  CHECK(parsed->find("apnea_locks_entries") == nullptr);
}

TEST_CASE("prometheus_label_value escapes and repairs label values") {
  // Controls and invalid UTF-8 through the one escaper first, then the format's escapes.
  CHECK(prometheus_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\\\x0ad");
  CHECK(prometheus_label_value("esc\x1b[2J\xc2\x9b") == "esc\\\\x1b[2J\\\\u009b");
  CHECK(prometheus_label_value("bad\xff") == "bad\\\\xff");
  CHECK(prometheus_label_value("rlo\xe2\x80\xae") == "rlo\\\\u202e");
  // Through the exposition format and back: a quote, a backslash, a newline, ESC, U+202E and
  // invalid UTF-8 read back as the text escaper wrote them, each escape's backslash intact.
  MetricsReport report;
  report.lock_dir = "/tmp/we\"ird\\dir\nx\xfe\x1b[2J\xe2\x80\xae" "end";
  report.version = "v";
  auto parsed = parse_exposition(prometheus_text(report));
  REQUIRE_MESSAGE(parsed, parsed.error());
  const PromFamily* scraped = parsed->find("apnea_locks_scrape_success");
  REQUIRE(scraped != nullptr);
  CHECK(scraped->samples.front().labels.at("lock_dir") == "/tmp/we\"ird\\dir\\x0ax\\xfe\\x1b[2J\\u202eend");
  CHECK(scraped->samples.front().labels.at("lock_dir") == printable(report.lock_dir));
}

TEST_CASE("AreaSummary counts locks, debris, guards and the oldest lock age") {
  auto add = [](AreaSummary& summary, EntryRole role, EntryState state, std::int64_t age_ns,
                bool attention = false) {
    EntryFacts facts;
    facts.parsed.role = role;
    facts.parsed.kind = LockKind::repository;
    Verdict verdict;
    verdict.role = role;
    verdict.state = state;
    verdict.age_ns = age_ns;
    verdict.needs_attention = attention;
    FileStat stat;
    stat.mtime_ns = 1000 - age_ns;  // now is 1000
    facts.stat = stat;
    const Decision decision;
    summary.add(EntryView{facts, verdict, decision, nullptr});
  };
  AreaSummary s;
  add(s, EntryRole::lock, EntryState::live, 5);
  add(s, EntryRole::lock, EntryState::stale, 50, true);
  add(s, EntryRole::lock, EntryState::malformed, 20, true);
  add(s, EntryRole::lock, EntryState::free, 0);
  add(s, EntryRole::candidate, EntryState::debris, 999, true);
  add(s, EntryRole::tombstone, EntryState::in_flight, 1);
  add(s, EntryRole::reclaim_guard, EntryState::leftover, 999, true);
  add(s, EntryRole::reclaim_guard, EntryState::in_flight, 1);
  CHECK(s.shown == 8);
  CHECK(s.locks == 3);
  CHECK(s.live == 1);
  CHECK(s.stale == 1);
  CHECK(s.malformed == 1);
  CHECK(s.debris == 1);
  CHECK(s.leftover_guards == 1);
  CHECK(s.attention == 4);
  CHECK(s.oldest_lock_age_ns == 50);  // guards and debris are not locks
  CHECK(s.oldest_lock_mtime_ns == 950);
  CHECK(s.classes.at({"repository", "reclaim-guard", "leftover"}) == 1);
  CHECK(s.states.at("in-flight") == 2);
  CHECK(s.roles.at("lock") == 4);
}

TEST_CASE("write_file_atomically replaces the file, keeps its mode, leaves nothing else") {
  TempDir dir;
  const std::string path = dir / "apnea.prom";
  REQUIRE(write_file_atomically(real_system(), path, "one\n"));
  CHECK(read_all(path) == "one\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((st.st_mode & 07777) == (0644 & ~mask));
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  const ino_t first = st.st_ino;
  REQUIRE(write_file_atomically(real_system(), path, "two\n"));
  CHECK(read_all(path) == "two\n");
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_ino != first);  // a new file renamed over the old one, not rewritten in place
  CHECK(names_in(dir.path()) == std::vector<std::string>{"apnea.prom"});

  // A relative path lands in the current directory's file.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  CHECK(write_file_atomically(real_system(), "relative.prom", "three\n"));
  std::filesystem::current_path(cwd);
  CHECK(read_all(dir / "relative.prom") == "three\n");
}

TEST_CASE("write_file_atomically fails cleanly") {
  TempDir dir;
  auto missing = write_file_atomically(real_system(), dir / "no/such/dir/x.prom", "x");
  REQUIRE(!missing);
  CHECK(missing.error().find("cannot write " + dir / "no/such/dir/x.prom") == 0);
  CHECK(missing.error().find("ENOENT: no such file or directory") != std::string::npos);

  // The target is a directory: the rename fails and the temporary file is removed.
  std::filesystem::create_directory(dir / "taken.prom");
  auto taken = write_file_atomically(real_system(), dir / "taken.prom", "x");
  REQUIRE(!taken);
  CHECK(taken.error().find("EISDIR") != std::string::npos);  // rename onto a directory
  CHECK(names_in(dir.path()) == std::vector<std::string>{"taken.prom"});
  CHECK(!write_file_atomically(real_system(), dir / "", "x"));
}
