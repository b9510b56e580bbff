// The built `apnea-locks status --format prometheus`: parsed back by a strict parser, its
// counts checked against `status -J` (the same judgement), and `--output-file` written
// atomically: a concurrent reader sees no file or a complete one, and no temporary stays.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "process_util.h"
#include "prometheus_parser.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;
namespace json = boost::json;

namespace {

CommandResult tool(std::vector<std::string> args, const std::string& env_prefix = "") {
  args.insert(args.begin(), test_env("APNEA_LOCKS_BIN"));
  return run_command(args, env_prefix);
}

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

/// An area with entries in many states.
struct Area {
  TempDir root;
  std::string path = root / "locks";
  Area() {
    make_dir(path);
    const long long me = ::getpid();
    const long long dead = dead_pid();
    auto lock = [&](const std::string& seed, std::string_view owner, LockKind kind = LockKind::repository) {
      const std::string name = fake_lock_name(seed, kind);
      make_entry(path, name, owner);
      return path + "/" + name;
    };
    lock("live", owner_json(me));
    lock("live2", owner_json(me), LockKind::global_setup);
    age_path(lock("old", owner_json(me)), 5000);
    lock("dead", owner_json(dead));
    lock("dead-global", owner_json(dead), LockKind::global_setup);
    lock("syntax", "{");
    const std::string base = fake_lock_name("transient");
    make_entry(path, base + ".candidate.dead", owner_json(dead));
    make_entry(path, base + ".tombstone.live", owner_json(me));
    make_dir(path + "/" + fake_lock_name("abandoned") + ".reclaim");
    age_path(path + "/" + fake_lock_name("abandoned") + ".reclaim", 600);
    write_file(path + "/notes.txt", "x");
  }
};

}  // namespace

TEST_CASE("status --format prometheus: strict exposition, counts as status -J judges them") {
  Area area;
  CommandResult result = tool({"status", "--lock-dir", area.path, "--format", "prometheus"});
  CHECK(result.status == 1);  // status' own exit status: something needs attention
  auto parsed = parse_exposition(result.out);
  REQUIRE_MESSAGE(parsed, parsed.error(), "\n", result.out);

  const std::vector<std::string> families = {
      "apnea_locks_build_info", "apnea_locks_scrape_success", "apnea_locks_area_safe",
      "apnea_locks_entries", "apnea_locks_entries_needing_attention",
      "apnea_locks_oldest_lock_mtime_seconds", "apnea_locks_oldest_lock_age_seconds"};
  REQUIRE(parsed->families.size() == families.size());
  for (std::size_t i = 0; i < families.size(); ++i) {
    CHECK(parsed->families[i].name == families[i]);
    CHECK(parsed->families[i].type == "gauge");
    CHECK(!parsed->families[i].help.empty());
    for (const auto& sample : parsed->families[i].samples)
      if (families[i] != "apnea_locks_build_info") CHECK(sample.labels.at("lock_dir") == area.path);
  }
  for (const auto& sample : parsed->find("apnea_locks_entries")->samples) {
    CHECK(sample.labels.size() == 4);
    CHECK(sample.value >= 0);
    CHECK(sample.value == static_cast<double>(static_cast<long long>(sample.value)));
  }
  CHECK(parsed->value("apnea_locks_scrape_success") == 1);
  CHECK(parsed->value("apnea_locks_area_safe") == 1);
  CHECK(parsed->find("apnea_locks_build_info")->samples.front().labels.count("version") == 1);
  const double oldest = parsed->value("apnea_locks_oldest_lock_age_seconds");
  CHECK(oldest >= 5000);
  CHECK(oldest < 5100);
  // The time of the oldest lock, which stays true while the file ages.
  const double mtime = parsed->value("apnea_locks_oldest_lock_mtime_seconds");
  const double now = static_cast<double>(::time(nullptr));
  CHECK(now - mtime >= 4999);  // now in whole seconds
  CHECK(now - mtime < 5100);

  // The same pass as JSON: every entry counted once, in its (kind, role, state).
  CommandResult doc = tool({"status", "--lock-dir", area.path, "-J"});
  const json::object object = json::parse(doc.out).as_object();
  std::map<std::tuple<std::string, std::string, std::string>, double> expected;
  for (const auto& value : object.at("entries").as_array()) {
    const auto& entry = value.as_object();
    const std::string kind = entry.at("kind").is_null() ? "unknown" : std::string(entry.at("kind").as_string());
    expected[{kind, std::string(entry.at("role").as_string()), std::string(entry.at("state").as_string())}] += 1;
  }
  double total = 0;
  for (const auto& sample : parsed->find("apnea_locks_entries")->samples) {
    const auto key = std::make_tuple(sample.labels.at("kind"), sample.labels.at("role"), sample.labels.at("state"));
    const auto it = expected.find(key);
    CHECK_MESSAGE(sample.value == (it == expected.end() ? 0 : it->second),
                  std::get<0>(key), "/", std::get<1>(key), "/", std::get<2>(key));
    total += sample.value;
  }
  CHECK(total == static_cast<double>(object.at("summary").at("entries").as_int64()));
  CHECK(total == 10);
  for (const auto& [key, count] : expected) {
    const auto& [kind, role, state] = key;
    CHECK(parsed->value("apnea_locks_entries", {{"kind", kind}, {"role", role}, {"state", state}}) == count);
  }
  CHECK(parsed->value("apnea_locks_entries_needing_attention") ==
        static_cast<double>(object.at("summary").at("needs_attention").as_int64()));
  CHECK(parsed->value("apnea_locks_entries", {{"kind", "repository"}, {"role", "lock"}, {"state", "malformed"}}) == 1);
  CHECK(parsed->value("apnea_locks_entries", {{"kind", "repository"}, {"role", "reclaim-guard"}, {"state", "leftover"}}) == 1);
  CHECK(parsed->value("apnea_locks_entries", {{"kind", "unknown"}, {"role", "unknown"}, {"state", "unknown"}}) == 1);

  // Filters apply to the metrics, as to the table.
  CommandResult only = tool({"status", "--lock-dir", area.path, "--format", "prometheus", "--kind", "global-setup"});
  auto filtered = parse_exposition(only.out);
  REQUIRE(filtered);
  double filtered_total = 0;
  for (const auto& sample : filtered->find("apnea_locks_entries")->samples) filtered_total += sample.value;
  CHECK(filtered_total == 2);
}

TEST_CASE("status --format prometheus: empty, missing, unsafe and unreadable areas") {
  TempDir root;
  make_dir(root / "empty");
  CommandResult empty = tool({"status", "--lock-dir", root / "empty", "--format", "prometheus"});
  CHECK(empty.status == 0);
  auto parsed = parse_exposition(empty.out);
  REQUIRE(parsed);
  CHECK(parsed->value("apnea_locks_oldest_lock_age_seconds") == 0);
  CHECK(parsed->value("apnea_locks_entries_needing_attention") == 0);

  // Apnea's own area before any lock was taken: an empty, healthy area.
  CommandResult missing = tool({"status", "--format", "prometheus"}, "TMPDIR=" + shell_quote(root / "empty") + " ");
  CHECK(missing.status == 0);
  auto absent = parse_exposition(missing.out);
  REQUIRE(absent);
  CHECK(absent->value("apnea_locks_area_safe") == 1);
  CHECK(absent->value("apnea_locks_scrape_success") == 1);
  CHECK(absent->find("apnea_locks_entries") != nullptr);

  // A --lock-dir that does not exist is a failed scrape, never an empty area.
  CommandResult typo = tool({"status", "--lock-dir", root / "missing", "--format", "prometheus"});
  CHECK(typo.status == 3);
  auto not_scraped = parse_exposition(typo.out);
  REQUIRE(not_scraped);
  CHECK(not_scraped->value("apnea_locks_scrape_success") == 0);
  CHECK(not_scraped->find("apnea_locks_entries") == nullptr);

  make_dir(root / "open", 0755);
  CommandResult unsafe = tool({"status", "--lock-dir", root / "open", "--format", "prometheus"});
  CHECK(unsafe.status == 3);
  auto bad = parse_exposition(unsafe.out);
  REQUIRE_MESSAGE(bad, unsafe.out);
  CHECK(bad->families.size() == 3);
  CHECK(bad->value("apnea_locks_area_safe") == 0);
  CHECK(bad->value("apnea_locks_scrape_success") == 1);
  CHECK(bad->find("apnea_locks_entries") == nullptr);

  write_file(root / "file", "x");
  CommandResult unreadable = tool({"status", "--lock-dir", root / "file/locks", "--format", "prometheus"});
  CHECK(unreadable.status == 3);
  auto failed = parse_exposition(unreadable.out);
  REQUIRE(failed);
  CHECK(failed->value("apnea_locks_scrape_success") == 0);
  CHECK(failed->value("apnea_locks_area_safe") == 0);
}

TEST_CASE("status --format: usage errors") {
  TempDir root;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--format", "xml"}, {"--output-file", root / "x.prom"},
        {"-J", "--format", "prometheus"}, {"-r", "--format", "json"},
        {"--format", "table", "--output-file", root / "x.prom"}}) {
    std::vector<std::string> all = {"status", "--lock-dir", root.path()};
    all.insert(all.end(), args.begin(), args.end());
    CommandResult result = tool(all, "exec 2>&1; ");
    CHECK_MESSAGE(result.status == 2, result.out);
    CHECK(result.out.find("apnea-locks status: ") == 0);
  }
  CHECK(names_in(root.path()).empty());
  CHECK(tool({"status", "--lock-dir", root.path(), "--format", "json"}).status == 0);
  CHECK(tool({"status", "--lock-dir", root.path(), "--format", "raw"}).status == 0);
  CHECK(tool({"status", "--lock-dir", root.path(), "-J", "--format", "json"}).status == 0);
}

TEST_CASE("status --output-file: written atomically, nothing else left in the directory") {
  Area area;
  TempDir out;
  const std::string file = out / "apnea-locks.prom";
  CommandResult first = tool({"status", "--lock-dir", area.path, "--format", "prometheus", "--output-file", file});
  CHECK(first.status == 1);
  CHECK(first.out.empty());  // the metrics went to the file
  auto parsed = parse_exposition(read_all(file));
  REQUIRE(parsed);
  CHECK(parsed->value("apnea_locks_entries", {{"state", "malformed"}, {"kind", "repository"}}) == 1);
  CHECK(names_in(out.path()) == std::vector<std::string>{"apnea-locks.prom"});

  // Readers race the writer: every read finds a complete exposition (or, before the
  // first write of the new file name, none).
  const std::string raced = out / "raced.prom";
  std::atomic<bool> done{false};
  std::atomic<int> complete{0};
  std::atomic<int> absent{0};
  std::vector<std::string> broken;
  std::thread reader([&] {
    while (!done.load()) {
      std::ifstream in(raced, std::ios::binary);
      if (!in) {
        ++absent;
        continue;
      }
      std::ostringstream text;
      text << in.rdbuf();
      auto read = parse_exposition(text.str());
      if (read && read->find("apnea_locks_oldest_lock_age_seconds") != nullptr) ++complete;
      else if (broken.size() < 3) broken.push_back(text.str());
    }
  });
  for (int i = 0; i < 40; ++i) {
    CommandResult run = tool({"status", "--lock-dir", area.path, "--format", "prometheus", "--output-file", raced});
    CHECK(run.status == 1);
  }
  done = true;
  reader.join();
  CHECK_MESSAGE(broken.empty(), (broken.empty() ? std::string() : broken.front()));
  CHECK(complete.load() > 0);
  MESSAGE("reads: ", complete.load(), " complete, ", absent.load(), " before the first write");
  CHECK(names_in(out.path()) == std::vector<std::string>{"apnea-locks.prom", "raced.prom"});

  // The file keeps the mode it was given.
  REQUIRE(::chmod(file.c_str(), 0640) == 0);
  CHECK(tool({"status", "--lock-dir", area.path, "--format", "prometheus", "--output-file", file}).status == 1);
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
}

TEST_CASE("status --output-file: a write that fails leaves the old file and exits 3") {
  Area area;
  TempDir out;
  CommandResult missing = tool({"status", "--lock-dir", area.path, "--format", "prometheus",
                                "--output-file", out / "no/dir/x.prom"}, "exec 2>&1; ");
  CHECK(missing.status == 3);
  CHECK(missing.out.find("apnea-locks status: cannot write " + out / "no/dir/x.prom") == 0);

  std::filesystem::create_directory(out / "taken.prom");
  CommandResult taken = tool({"status", "--lock-dir", area.path, "--format", "prometheus",
                              "--output-file", out / "taken.prom"}, "exec 2>&1; ");
  CHECK(taken.status == 3);
  CHECK(names_in(out.path()) == std::vector<std::string>{"taken.prom"});

  // An unsafe area still writes its metrics (area_safe 0), and exits 3.
  make_dir(out / "open", 0755);
  const std::string file = out / "unsafe.prom";
  CommandResult unsafe = tool({"status", "--lock-dir", out / "open", "--format", "prometheus", "--output-file", file});
  CHECK(unsafe.status == 3);
  auto parsed = parse_exposition(read_all(file));
  REQUIRE(parsed);
  CHECK(parsed->value("apnea_locks_area_safe") == 0);
}
