// Differential check of the owner-record decoder against the reference (apnea-peer, whose
// readOwner is Apnea's acceptance rules): generated owner.json files, each in its own lock
// `repository-<64 hex>.lock` (0700, file 0600), are classified by one `apnea-peer
// classify-all DIR` and by read_owner in-process. For every record the reference's verdict is
// "malformed" exactly when read_owner rejects, and otherwise its printed owner is ours.
//
// The owner is compared at the escape level: the reference prints JSON.stringify's bytes
// (lone surrogates as `\udXXX`, which Boost.JSON refuses to parse), so our decoded owner,
// re-encoded by encode_owner (JSON.stringify's bytes, pid as JavaScript prints numbers),
// must appear verbatim as the line's "owner" value. That compares the pid exactly (the
// shortest round-trip text of a double names it uniquely) and the token code unit by code
// unit, with no JSON parser of ours involved on the reference's side.
//
// Environment (defaults give the short CI run; `scripts/dev soak` runs a long one):
//   APNEA_DIFF_RECORDS  generated records besides the seed corpus (default 300)
//   APNEA_DIFF_SEED     generator seed (default 20260101)
//   APNEA_DIFF_CORPUS   colon-separated directories of further inputs (e.g. a libFuzzer corpus)
#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "apnea_locks/owner.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

/// splitmix64: the same records on every platform and standard library.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
  template <class T, std::size_t N>
  const T& pick(const T (&items)[N]) {
    return items[below(N)];
  }

 private:
  std::uint64_t state_;
};

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string escaped(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7F && c != '\\')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

// Pieces the generator draws from: the edge cases of JSON.parse, Buffer.toString("utf8")
// and Apnea's pid/token checks.
// clang-format off
constexpr const char* pid_numbers[] = {
    "1", "7", "1234", "4194304", "2147483647", "2147483648", "4294967296", "1e3", "1E3", "1e+3",
    "5.0", "5.000", "0.1e1", "100e-2", "1.5", "0.5", "0", "-0", "-0.0", "-1", "-1e3", "1e400",
    "-1e400", "1e-400", "5e-324", "9007199254740993", "9007199254740992.5", "4.9999999999999999999",
    "1e20", "1e21", "1E+21", "123456789012345678901234567890", "1.7976931348623157e308",
    "1.7976931348623159e308", "0e99999999999999999999", "1e99999999999999999999",
    "-1e-99999999999999999999", "1e0000000000000000000000003", "1152921504606846976",
    "306919007199254740993.001", "999999999999999868928", "1e15", "9007199254740994",
    "18014398509481985"};
constexpr const char* bad_numbers[] = {
    "00", "01", "+1", ".5", "1.", "1e", "0x10", "NaN", "Infinity", "-", "1_0", "12 3", "1e+", "--1"};
constexpr const char* string_pieces[] = {
    "0b9f3c1e-4b1a-4e5f-9c2d-1a2b3c4d5e6f", "a", "t", "token", "pid", " ", "\\u0000", "\\ud800",
    "\\udbff", "\\udc00", "\\udfff", "\\ud83d\\ude00", "\\ud83d", "\\ude00", "\\uD800\\u0041",
    "\\u0041", "\\u00e9", "\\uFFFD", "\\ufeff", "\\n", "\\t", "\\\"", "\\\\", "\\/", "\\b", "\\f",
    "\\r", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbd", "\xe2\x80\xa8", "\xff",
    "\xfe", "\x80", "\xc0\xaf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x9f\x98", "\xe0\x80",
    "\xf4\x90\x80\x80", "\x7f"};
constexpr const char* bad_string_pieces[] = {
    "\\x41", "\\u12", "\\u12g4", "\x01", "\t", "\n", "\\", "\\U0041"};
constexpr const char* other_values[] = {
    "null", "true", "false", "[]", "{}", "[1]", "\"\"", "\"1\"", "{\"pid\":1,\"token\":\"t\"}",
    "[{\"pid\":1}]", "[[[[[[[[[[]]]]]]]]]]", "-1e400"};
constexpr const char* keys[] = {
    "pid", "token", "pid", "token", "x", "p\\u0069d", "t\\u006fken", "__proto__", "PID", "pid ",
    "\\ud800", "pid\xff", ""};
constexpr const char* whitespace[] = {
    "", "", "", "", " ", "\n", "\t", "\r\n  "};
constexpr const char* bad_whitespace[] = {
    "\x0c", "\x0b", "\xc2\xa0", "\xe2\x80\xa8", "\xef\xbb\xbf"};
constexpr const char* bad_values[] = {
    "tru", "nul", "undefined", "'t'", "[1,]", "{,}", "[", "}"};
constexpr const char* insertions[] = {
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\"pid\":", "\"token\":", "1e400", "-0", "5.0",
    "null", "\\ud800", "\\udc00", "\\u0000", "\xef\xbb\xbf", "\xff", "\xed\xa0\x80",
    "\xf0\x9f\x98\x80", " ", "\n", "9007199254740993", "\"pid\":0,", ",\"pid\":2",
    ",\"token\":\"\"", ",\"token\":\"z\""};
// clang-format on

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : random_(seed) {}

  std::string number() {
    if (random_.chance(2)) return random_.pick(bad_numbers);
    if (random_.chance(75)) return random_.pick(pid_numbers);
    std::string out = random_.chance(10) ? "-" : "";
    out += std::to_string(random_.below(random_.chance(50) ? 100000 : 10));
    if (random_.chance(30))
      out += "." + std::string(1 + random_.below(3), '0') + (random_.chance(50) ? "1" : "");
    if (random_.chance(30))
      out += fmt::format("e{}{}", random_.chance(30) ? "-" : "+", random_.below(400));
    return out;
  }

  std::string string_literal(bool may_be_empty = true) {
    std::string out = "\"";
    const std::size_t pieces = may_be_empty && random_.chance(10) ? 0 : 1 + random_.below(4);
    for (std::size_t i = 0; i < pieces; ++i)
      out += random_.chance(1) ? random_.pick(bad_string_pieces) : random_.pick(string_pieces);
    return out + "\"";
  }

  std::string value(int depth) {
    switch (random_.below(depth > 3 ? 4 : 6)) {
      case 0: return number();
      case 1: return string_literal();
      case 2:
      case 3: return random_.chance(3) ? random_.pick(bad_values) : random_.pick(other_values);
      case 4: {
        std::string out = "[";
        for (std::size_t i = 0, n = random_.below(3); i < n; ++i)
          out += (i ? "," : "") + value(depth + 1);
        return out + "]";
      }
      default: return object(depth + 1, false);
    }
  }

  std::string member(const std::string& key, const std::string& value) {
    return ws() + "\"" + key + "\"" + ws() + ":" + ws() + value + ws();
  }

  /// An object; at the top (`owner`), usually with pid and token, sometimes duplicated.
  std::string object(int depth, bool owner) {
    std::vector<std::string> members;
    if (owner) {
      if (random_.chance(92))
        members.push_back(member("pid", random_.chance(85) ? number() : value(depth)));
      if (random_.chance(92))
        members.push_back(
            member("token", random_.chance(85) ? string_literal(false) : value(depth)));
      if (random_.chance(12)) members.push_back(member("pid", number()));
      if (random_.chance(12)) members.push_back(member("token", string_literal()));
    }
    for (std::size_t i = 0, n = random_.below(owner ? 3 : 4); i < n; ++i)
      members.push_back(member(random_.pick(keys), value(depth)));
    for (std::size_t i = members.size(); i > 1; --i)
      std::swap(members[i - 1], members[random_.below(i)]);
    std::string out = "{";
    for (std::size_t i = 0; i < members.size(); ++i) out += (i ? "," : "") + members[i];
    return out + "}";
  }

  std::string record() {
    std::string out = ws() + object(0, true) + ws();
    if (random_.chance(3)) out = "\xef\xbb\xbf" + out;
    if (random_.chance(3)) out += random_.pick(other_values);
    if (random_.chance(2))
      out = std::string(random_.below(2) ? "[" : "{\"n\":") + out + (out[0] == '[' ? "]" : "}");
    return out;
  }

  /// One to three byte-level edits of `input`, or a splice with `other`.
  std::string mutate(std::string input, const std::string& other) {
    for (std::size_t e = 0, n = 1 + random_.below(3); e < n; ++e) {
      const std::size_t at = random_.below(input.size() + 1);
      switch (random_.below(6)) {
        case 0:
          if (at < input.size()) input[at] = static_cast<char>(input[at] ^ (1 << random_.below(8)));
          break;
        case 1: input.insert(at, 1, static_cast<char>(random_.below(256))); break;
        case 2: input.erase(at, 1 + random_.below(4)); break;
        case 3:
        case 4: input.insert(at, random_.pick(insertions)); break;
        default: input = input.substr(0, at) + other.substr(random_.below(other.size() + 1)); break;
      }
    }
    return input;
  }

  Random& random() { return random_; }

 private:
  std::string ws() {
    return random_.below(400) == 0 ? random_.pick(bad_whitespace) : random_.pick(whitespace);
  }
  Random random_;
};

struct Record {
  std::string origin;
  std::string bytes;
};

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const std::string text = test_env(name);
  return text.empty() ? fallback : std::stoull(text);
}

/// Every regular file of `dir`, sorted by name (a fixed order keeps the run reproducible).
std::vector<Record> corpus_records(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ignored))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<Record> records;
  for (const auto& file : files) records.push_back({file.string(), read_bytes(file)});
  return records;
}

std::vector<Record> make_records() {
  const std::string source = test_env("APNEA_LOCKS_SOURCE");
  REQUIRE_MESSAGE(!source.empty(), "APNEA_LOCKS_SOURCE (set by tests/meson.build) is missing");
  std::vector<Record> records = corpus_records(source + "/tests/fuzz/corpus/owner");
  REQUIRE_MESSAGE(records.size() > 50, "the owner seed corpus is missing");
  std::istringstream extra(test_env("APNEA_DIFF_CORPUS"));
  for (std::string dir; std::getline(extra, dir, ':');)
    if (!dir.empty())
      for (auto& record : corpus_records(dir)) records.push_back(std::move(record));

  const std::size_t seeds = records.size();
  const std::uint64_t seed = env_number("APNEA_DIFF_SEED", 20260101);
  const std::size_t count = env_number("APNEA_DIFF_RECORDS", 300);
  Generator generator(seed);
  for (std::size_t i = 0; i < count; ++i) {
    const std::string& other = records[generator.random().below(seeds)].bytes;
    switch (i % 4) {
      case 0:
      case 1: records.push_back({fmt::format("generated #{}", i), generator.record()}); break;
      case 2:
        records.push_back(
            {fmt::format("mutated record #{}", i), generator.mutate(generator.record(), other)});
        break;
      default: {
        const Record& base = records[generator.random().below(seeds)];
        records.push_back(
            {fmt::format("mutated {} #{}", base.origin, i), generator.mutate(base.bytes, other)});
      }
    }
  }
  return records;
}

std::string lock_name_of(std::size_t index) {
  return fmt::format("repository-{:064x}.lock", index);
}

/// Writes `bytes` as `<lock>/owner.json`, the lock 0700 and the file 0600.
void write_lock(const std::string& lock, const std::string& bytes) {
  REQUIRE(::mkdir(lock.c_str(), 0700) == 0);
  REQUIRE(::chmod(lock.c_str(), 0700) == 0);
  const std::string path = lock + "/" + std::string(owner_file_name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::fchmod(fd, 0600) == 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

/// The record index named by a classify-all line (`..."lock":"<dir>/repository-<hex>.lock"...`).
std::optional<std::size_t> line_index(const std::string& line) {
  const std::string marker = ".lock\",\"verdict\":\"";
  const auto end = line.find(marker);
  if (end == std::string::npos || end < 64) return std::nullopt;
  return std::stoull(line.substr(end - 64, 64), nullptr, 16);
}

/// The value of the line's "verdict".
std::string line_verdict(const std::string& line) {
  const std::string marker = "\"verdict\":\"";
  const auto at = line.find(marker);
  if (at == std::string::npos) return {};
  const auto start = at + marker.size();
  return line.substr(start, line.find('"', start) - start);
}

/// The raw text of the line's "owner" value, up to the next member ("age_ms").
std::string line_owner(const std::string& line) {
  const std::string marker = "\",\"owner\":";
  const std::string next = ",\"age_ms\":";
  const auto at = line.find(marker);
  const auto end = line.rfind(next);
  if (at == std::string::npos || end == std::string::npos || end < at + marker.size()) return {};
  return line.substr(at + marker.size(), end - at - marker.size());
}

}  // namespace

TEST_CASE("read_owner accepts and decodes exactly what the reference's readOwner does") {
  const std::vector<Record> records = make_records();
  TempDir dir;
  for (std::size_t i = 0; i < records.size(); ++i)
    write_lock(dir / lock_name_of(i), records[i].bytes);

  // Into a file, not a pipe: the reference's harness ends with process.exit(), which drops
  // whatever stdout writes to a full pipe are still pending (`classify-all DIR | (sleep 8;
  // wc -l)` counts 288 of 20,000 lines); writes to a file are synchronous in Node.
  TempDir output;
  const std::string output_file = output / "classify-all.jsonl";
  CommandResult result = run_command({"sh", "-c", "exec \"$0\" classify-all \"$1\" >\"$2\"",
                                      test_env("APNEA_REFERENCE"), dir.path(), output_file});
  REQUIRE_MESSAGE(result.status == 0,
                  "apnea-peer classify-all exited with status " << result.status);
  result.out = read_bytes(output_file);

  std::map<std::size_t, std::string> lines;
  std::istringstream stream(result.out);
  for (std::string line; std::getline(stream, line);) {
    const auto index = line_index(line);
    REQUIRE_MESSAGE(index.has_value(), "unexpected reference output: " << line);
    REQUIRE(*index < records.size());
    lines[*index] = line;
  }
  if (lines.size() != records.size()) {
    std::string missing;
    for (std::size_t i = 0, shown = 0; i < records.size() && shown < 5; ++i)
      if (!lines.contains(i))
        missing += fmt::format(" {} ({})", lock_name_of(i), records[i].origin), ++shown;
    FAIL("apnea-peer classified " << lines.size() << " of " << records.size()
                                  << " locks; missing:" << missing);
  }

  const auto uid = static_cast<std::uint32_t>(::getuid());
  std::size_t accepted = 0, rejected = 0, divergences = 0;
  std::map<std::string, std::size_t> reasons;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string& line = lines[i];
    const OwnerRead ours = read_owner(real_system(), dir / lock_name_of(i), uid);
    const std::string verdict = line_verdict(line);
    const std::string theirs = line_owner(line);
    bool agree = false;
    std::string mine;
    if (ours.owner) {
      ++accepted;
      mine = encode_owner(*ours.owner);
      agree = (verdict == "live" || verdict == "stale") && theirs == mine;
    } else {
      ++rejected;
      ++reasons[ours.owner.error().reason()];
      mine = "rejected: " + ours.owner.error().reason();
      agree = verdict == "malformed" && theirs == "null";
    }
    if (!agree) {
      ++divergences;
      FAIL_CHECK("divergence on " << records[i].origin << "\n  bytes: \""
                                  << escaped(records[i].bytes) << "\"\n  ours: " << mine
                                  << "\n  reference: " << line);
    }
  }

  std::string histogram;
  for (const auto& [reason, n] : reasons) histogram += fmt::format(" {}={}", reason, n);
  const std::string summary = fmt::format(
      "owner differential: {} records compared ({} accepted, {} rejected:{}), {} divergences",
      records.size(), accepted, rejected, histogram, divergences);
  MESSAGE(summary);
  // The generator must exercise both sides, or agreement would prove little.
  CHECK(accepted * 10 >= records.size());
  CHECK(rejected * 10 >= records.size());
  CHECK(divergences == 0);
}
