#include "apnea_locks/owner.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "detail/owner.h"
#include "pid_spellings.h"
#include "staged_system.h"

using namespace apnea_locks;
using apnea_locks::detail::read_owner_settled;
using apnea_locks::detail::SettledRead;
using apnea_locks::testing::StagedSystem;
using apnea_locks::testing::TempDir;

namespace {
OwnerCheck rejected(std::string_view bytes) {
  auto decoded = decode_owner(bytes);
  REQUIRE_FALSE(decoded.has_value());
  return decoded.error().check;
}
Owner accepted(std::string_view bytes) {
  auto decoded = decode_owner(bytes);
  if (!decoded) FAIL("rejected: " << decoded.error().reason() << " " << decoded.error().detail);
  return *decoded;
}
}  // namespace

TEST_CASE("decode_owner accepts what JSON.parse and Apnea's checks accept") {
  CHECK(accepted(R"({"pid":42,"token":"t"})").pid == 42);
  CHECK(accepted(R"({"pid":42,"token":"t"})").token == "t");
  CHECK(accepted(" \t\r\n{\"pid\":1,\"token\":\"x\"} \n").pid == 1);
  CHECK(accepted(R"({"pid":1e3,"token":"t"})").pid == 1000);
  CHECK(accepted(R"({"pid":5.0,"token":"t"})").pid == 5);
  CHECK(accepted(R"({"pid":50e-1,"token":"t"})").pid == 5);
  // JavaScript rounds to the nearest double: 4.9999999999999999999 is 5.
  CHECK(accepted(R"({"pid":4.9999999999999999999,"token":"t"})").pid == 5);
  CHECK(accepted(R"({"pid":1e20,"token":"t"})").pid == 1e20);
  // Duplicate keys: the last one wins.
  CHECK(accepted(R"({"pid":-1,"pid":7,"token":"a","token":"b"})").pid == 7);
  CHECK(accepted(R"({"pid":-1,"pid":7,"token":"a","token":"b"})").token == "b");
  // Any characters in the token, NUL included; escapes decoded.
  CHECK(accepted(R"({"pid":1,"token":"\u0000"})").token == std::string(1, '\0'));
  CHECK(accepted(R"({"pid":1,"token":"\u00e9\n"})").token == "\xc3\xa9\n");
  CHECK(accepted(R"({"\u0070id":3,"token":"k"})").pid == 3);
  // Other members, nested values and nested "pid"s do not matter.
  CHECK(accepted(R"({"x":{"pid":-5},"pid":9,"token":"t","y":[1,{"token":2}]})").pid == 9);
}

TEST_CASE("decode_owner reads Apnea's own form exactly as the parser reads it") {
  // Apnea's records take a path without the JSON parser; a leading space sends the same
  // record through the parser, and both must agree, at every edge of that form.
  for (const std::string record :
       {"{\"pid\":1,\"token\":\"a\"}", "{\"pid\":4242,\"token\":\"6f0d5d0e-1c2b-4a3d-8e9f-0123456789ab\"}",
        "{\"pid\":999999999999999,\"token\":\"Z-9\"}", "{\"pid\":9999999999999999,\"token\":\"t\"}",
        "{\"pid\":0,\"token\":\"t\"}", "{\"pid\":01,\"token\":\"t\"}", "{\"pid\":1,\"token\":\"\"}",
        "{\"pid\":1,\"token\":\"a b\"}", "{\"pid\":1,\"token\":\"a\\\"b\"}", "{\"pid\":1,\"token\":\"t\"}}",
        "{\"pid\":1,\"token\":\"t\",\"pid\":2}", "{\"pid\":-1,\"token\":\"t\"}", "{\"pid\":1.5,\"token\":\"t\"}",
        "{\"pid\":\"1\",\"token\":\"t\"}", "{\"pid\":,\"token\":\"t\"}", "{\"pid\":\"}",
        "{\"pid\":10000000000000000000000000000000,\"token\":\"t\"}"}) {
    CAPTURE(record);
    const auto direct = decode_owner(record);
    const auto parsed = decode_owner(" " + record);
    REQUIRE(direct.has_value() == parsed.has_value());
    if (direct) {
      CHECK(direct->pid == parsed->pid);
      CHECK(direct->token == parsed->token);
    } else {
      CHECK(direct.error().check == parsed.error().check);
    }
  }
}

TEST_CASE("decode_owner keeps invalid UTF-8 as U+FFFD, like Buffer.toString") {
  const Owner owner = accepted("{\"pid\":1,\"token\":\"a\xff" "b\"}");
  CHECK(owner.token == "a\xEF\xBF\xBD" "b");
  CHECK(utf8_with_replacement("\xF0\x9F\x98") == "\xEF\xBF\xBD");              // truncated 4-byte
  CHECK(utf8_with_replacement("\xE0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD");      // overlong lead
  CHECK(utf8_with_replacement("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(utf8_with_replacement("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  CHECK(utf8_with_replacement("ok \xE2\x82\xAC") == "ok \xE2\x82\xAC");
}

TEST_CASE("decode_owner accepts lone surrogate escapes as JSON.parse does") {
  // A JavaScript string holds the lone code unit; we hold its WTF-8 bytes.
  CHECK(accepted(R"({"pid":1,"token":"\ud800"})").token == "\xED\xA0\x80");
  CHECK(accepted(R"({"pid":1,"token":"a\udc00b"})").token == "a\xED\xB0\x80" "b");
  CHECK(accepted(R"({"pid":1,"token":"\ud800\ud800"})").token == "\xED\xA0\x80\xED\xA0\x80");
  // A proper pair is one character; escaped quotes and backslashes do not confuse the scan.
  CHECK(accepted(R"({"pid":1,"token":"\ud83d\ude00"})").token == "\xF0\x9F\x98\x80");
  CHECK(accepted(R"({"pid":1,"token":"\\ud800"})").token == "\\ud800");
  CHECK(accepted(R"({"pid":1,"token":"\"\ud800"})").token == "\"\xED\xA0\x80");
  CHECK(accepted(R"({"\ud800":1,"pid":2,"token":"t"})").pid == 2);
  // Outside strings it is still a syntax error, and raw invalid bytes are still U+FFFD.
  CHECK(rejected(R"({"pid":1,"token":"t"}\ud800)") == OwnerCheck::json_syntax);
  CHECK(accepted("{\"pid\":1,\"token\":\"\\ud800\xED\xA0\x80\"}").token ==
        "\xED\xA0\x80\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("decode_owner accepts nesting far deeper than Boost.JSON's default") {
  std::string deep = R"({"pid":1,"token":"t","deep":)";
  deep += std::string(1900, '[') + std::string(1900, ']') + "}";
  REQUIRE(deep.size() <= 4096);
  CHECK(accepted(deep).pid == 1);
}

TEST_CASE("decode_owner rejects with the check that failed") {
  CHECK(rejected("") == OwnerCheck::json_syntax);
  CHECK(rejected("\xEF\xBB\xBF{\"pid\":1,\"token\":\"t\"}") == OwnerCheck::json_syntax);  // BOM
  CHECK(rejected(R"({"pid":1,"token":"t"} x)") == OwnerCheck::json_syntax);
  CHECK(rejected(R"({"pid":1,"token":"t"}{})") == OwnerCheck::json_syntax);
  CHECK(rejected(R"({"pid":1,"token":"t",})") == OwnerCheck::json_syntax);
  CHECK(rejected(R"({"pid":01,"token":"t"})") == OwnerCheck::json_syntax);
  CHECK(rejected(R"({'pid':1})") == OwnerCheck::json_syntax);
  CHECK(rejected(R"(/*c*/{"pid":1,"token":"t"})") == OwnerCheck::json_syntax);
  CHECK(rejected(R"([1,2])") == OwnerCheck::not_object);
  CHECK(rejected(R"(null)") == OwnerCheck::not_object);
  CHECK(rejected(R"("pid")") == OwnerCheck::not_object);
  CHECK(rejected(R"({"token":"t"})") == OwnerCheck::pid_missing);
  CHECK(rejected(R"({"pid":"5","token":"t"})") == OwnerCheck::pid_not_number);
  CHECK(rejected(R"({"pid":null,"token":"t"})") == OwnerCheck::pid_not_number);
  CHECK(rejected(R"({"pid":[5],"token":"t"})") == OwnerCheck::pid_not_number);
  CHECK(rejected(R"({"pid":0,"token":"t"})") == OwnerCheck::pid_not_positive_integer);
  CHECK(rejected(R"({"pid":-0,"token":"t"})") == OwnerCheck::pid_not_positive_integer);
  CHECK(rejected(R"({"pid":-3,"token":"t"})") == OwnerCheck::pid_not_positive_integer);
  CHECK(rejected(R"({"pid":1.5,"token":"t"})") == OwnerCheck::pid_not_positive_integer);
  CHECK(rejected(R"({"pid":1e400,"token":"t"})") == OwnerCheck::pid_not_positive_integer);
  CHECK(rejected(R"({"pid":1e-400,"token":"t"})") == OwnerCheck::pid_not_positive_integer);
  CHECK(rejected(R"({"pid":1})") == OwnerCheck::token_missing);
  CHECK(rejected(R"({"pid":1,"token":""})") == OwnerCheck::token_empty);
  CHECK(rejected(R"({"pid":1,"token":5})") == OwnerCheck::token_not_string);
  CHECK(rejected(R"({"pid":1,"token":"t","token":null})") == OwnerCheck::token_not_string);
  // The reason names status shows.
  CHECK(decode_owner(R"({"pid":1.5,"token":"t"})").error().reason() == "pid-not-positive-integer");
  CHECK(decode_owner(R"({"pid":1.5,"token":"t"})").error().detail == "1.5");
}

TEST_CASE("encode_owner writes JSON.stringify's bytes") {
  CHECK(encode_owner({1234, "0b9f3c1e-4b1a-4e5f-9c2d-1a2b3c4d5e6f"}) ==
        R"({"pid":1234,"token":"0b9f3c1e-4b1a-4e5f-9c2d-1a2b3c4d5e6f"})");
  CHECK(encode_owner({1, "a\"b\\c\n\x01"}) == R"({"pid":1,"token":"a\"b\\c\n\u0001"})");
  CHECK(pid_text(1e21) == "1e+21");
  CHECK(pid_text(100) == "100");
  const Owner round = accepted(encode_owner({77, "a\"b\\c\n\x01"}));
  CHECK(round.token == "a\"b\\c\n\x01");
}

// Found by the fuzzers (tests/fuzz/): the owner_fuzz round trip and the differential check.
TEST_CASE("encode_owner writes a lone surrogate as JSON.stringify does, so it decodes back") {
  const Owner lone = accepted(R"({"pid":1,"token":"\ud800x\uDC00"})");
  CHECK(encode_owner(lone) == R"({"pid":1,"token":"\ud800x\udc00"})");
  CHECK(accepted(encode_owner(lone)).token == lone.token);
  const Owner mixed = accepted(R"({"pid":1,"token":"\ud800\ud83d\ude00\u00e9"})");
  CHECK(encode_owner(mixed) == "{\"pid\":1,\"token\":\"\\ud800\xF0\x9F\x98\x80\xC3\xA9\"}");
}

TEST_CASE("decode_owner reads any exponent as JSON.parse does (Infinity or 0), never a syntax error") {
  // Boost.JSON fails an exponent beyond INT_MAX ("exponent overflow"); JSON.parse does not.
  CHECK(accepted(R"({"pid":1,"token":"t","x":1e99999999999999999999})").pid == 1);
  CHECK(accepted(R"({"pid":1,"token":"t","x":-1e-99999999999999999999})").pid == 1);
  CHECK(accepted(R"({"pid":1,"token":"t","x":0.0e+2147483648})").pid == 1);
  CHECK(accepted(R"({"pid":12,"token":"t"} )").pid == 12);
  CHECK(rejected(R"({"pid":1e99999999999999999999,"token":"t"})") ==
        OwnerCheck::pid_not_positive_integer);
  CHECK(rejected(R"({"pid":0e99999999999999999999,"token":"t"})") ==
        OwnerCheck::pid_not_positive_integer);
  CHECK(rejected(R"({"pid":1e-99999999999999999999,"token":"t"})") ==
        OwnerCheck::pid_not_positive_integer);
  // The digits of exponents inside strings are left alone.
  CHECK(accepted(R"({"pid":1,"token":"1e99999999999999999999"})").token == "1e99999999999999999999");
  CHECK(accepted(R"({"pid":1e0000000000000000000000003,"token":"t"})").pid == 1000);
}

TEST_CASE("pid_text prints integers beyond 2^53 as JavaScript does: shortest digits, then zeros") {
  CHECK(pid_text(0x1p53) == "9007199254740992");
  CHECK(pid_text(0x1p53 + 2) == "9007199254740994");
  CHECK(pid_text(0x1p60) == "1152921504606847000");
  CHECK(pid_text(-0x1p60) == "-1152921504606847000");
  CHECK(pid_text(306919007199254740992.0) == "306919007199254740000");
  CHECK(pid_text(123456789012345678901.0) == "123456789012345680000");
  CHECK(pid_text(999999999999999868928.0) == "999999999999999900000");
  CHECK(encode_owner(accepted(R"({"pid":306919007199254740993.001,"token":"t"})")) ==
        R"({"pid":306919007199254740000,"token":"t"})");
}

namespace {
/// A lock directory with an owner.json holding `bytes` (mode 0600).
std::string make_lock(const TempDir& temp, std::string_view bytes, std::uint32_t owner_mode = 0600) {
  const std::string lock = temp / "repository-x.lock";
  REQUIRE(::mkdir(lock.c_str(), 0700) == 0);
  if (!bytes.empty()) {
    std::ofstream(lock + "/owner.json") << bytes;
    ::chmod((lock + "/owner.json").c_str(), owner_mode);
  }
  return lock;
}
std::string reason_of(const OwnerRead& read) {
  REQUIRE_FALSE(read.owner.has_value());
  return read.owner.error().reason();
}
}  // namespace

TEST_CASE("read_owner accepts a well-formed lock and reports its facts") {
  TempDir temp;
  StagedSystem system;
  const std::string lock = make_lock(temp, R"({"pid":5,"token":"abc"})");
  OwnerRead read = read_owner(system, lock, ::getuid());
  REQUIRE(read.owner.has_value());
  CHECK(read.owner->pid == 5);
  CHECK(read.owner->token == "abc");
  REQUIRE(read.lock_stat);
  CHECK(read.lock_stat->type == FileType::directory);
  REQUIRE(read.owner_stat);
  CHECK(read.owner_stat->size == 23);
  CHECK(read.bytes == R"({"pid":5,"token":"abc"})");
  // Five calls: lstat, open, fstat, one pread (the close is not counted).
  CHECK(system.calls.size() == 4);
}

TEST_CASE("read_owner applies every lstat/fstat rule") {
  TempDir temp;
  StagedSystem system;
  const std::uint32_t uid = ::getuid();
  const std::string lock = temp / "repository-x.lock";

  CHECK(reason_of(read_owner(system, lock, uid)) == "lock-missing");

  const std::string elsewhere = temp / "elsewhere";
  REQUIRE(::mkdir(elsewhere.c_str(), 0700) == 0);
  REQUIRE(::symlink(elsewhere.c_str(), lock.c_str()) == 0);
  CHECK(reason_of(read_owner(system, lock, uid)) == "lock-symlink");
  ::unlink(lock.c_str());

  REQUIRE(system.real().write_new_file(lock, "{}", 0600));
  CHECK(reason_of(read_owner(system, lock, uid)) == "lock-file");
  ::unlink(lock.c_str());

  REQUIRE(::mkdir(lock.c_str(), 0700) == 0);
  CHECK(reason_of(read_owner(system, lock, uid + 1)) == "lock-foreign-owner");
  ::chmod(lock.c_str(), 0750);
  CHECK(reason_of(read_owner(system, lock, uid)) == "lock-mode-0750");
  ::chmod(lock.c_str(), 0700);

  CHECK(reason_of(read_owner(system, lock, uid)) == "owner-missing");

  const std::string owner = lock + "/owner.json";
  const std::string outside = temp / "outside.json";
  REQUIRE(system.real().write_new_file(outside, R"({"pid":1,"token":"t"})", 0600));
  REQUIRE(::symlink(outside.c_str(), owner.c_str()) == 0);
  CHECK(reason_of(read_owner(system, lock, uid)) == "owner-symlink");
  ::unlink(owner.c_str());

  // A FIFO must not hang the reader.
  REQUIRE(::mkfifo(owner.c_str(), 0600) == 0);
  CHECK(reason_of(read_owner(system, lock, uid)) == "owner-fifo");
  ::unlink(owner.c_str());

  REQUIRE(::mkdir(owner.c_str(), 0700) == 0);
  CHECK(reason_of(read_owner(system, lock, uid)) == "owner-directory");
  ::rmdir(owner.c_str());

  REQUIRE(system.real().write_new_file(owner, R"({"pid":1,"token":"t"})", 0644));
  ::chmod(owner.c_str(), 0644);
  CHECK(reason_of(read_owner(system, lock, uid)) == "owner-mode-0644");
  ::chmod(owner.c_str(), 0600);
  if (uid == 0) {  // only root can give the file away
    REQUIRE(::chown(owner.c_str(), 4242, static_cast<gid_t>(-1)) == 0);
    CHECK(reason_of(read_owner(system, lock, uid)) == "owner-foreign-owner");
  }
  ::unlink(owner.c_str());

  REQUIRE(system.real().write_new_file(owner, "", 0600));
  CHECK(reason_of(read_owner(system, lock, uid)) == "owner-empty");
  ::unlink(owner.c_str());

  std::string big = R"({"pid":1,"token":")" + std::string(4096, 'x') + "\"}";
  REQUIRE(system.real().write_new_file(owner, big, 0600));
  CHECK(reason_of(read_owner(system, lock, uid)) == "owner-too-large");
  ::unlink(owner.c_str());

  // Exactly 4096 bytes is still accepted.
  std::string limit = R"({"pid":1,"token":")";
  limit += std::string(4096 - limit.size() - 2, 'y') + "\"}";
  REQUIRE(limit.size() == 4096);
  REQUIRE(system.real().write_new_file(owner, limit, 0600));
  CHECK(read_owner(system, lock, uid).owner.has_value());
  ::unlink(owner.c_str());

  REQUIRE(system.real().write_new_file(owner, R"({"pid":1,"token":""})", 0600));
  CHECK(reason_of(read_owner(system, lock, uid)) == "token-empty");
}

TEST_CASE("read_owner reports a record truncated while it is read") {
  TempDir temp;
  StagedSystem system;
  const std::string lock = make_lock(temp, R"({"pid":5,"token":"abc"})");
  system.before = [&](std::string_view op, const std::string&) {
    if (op == "pread") REQUIRE(::truncate((lock + "/owner.json").c_str(), 4) == 0);
  };
  OwnerRead read = read_owner(system, lock, ::getuid());
  CHECK(reason_of(read) == "owner-short-read");
  CHECK(read.bytes == R"({"pi)");
}

TEST_CASE("a 1 GiB sparse owner.json is refused by size without reading it") {
  TempDir temp;
  StagedSystem system;
  const std::string lock = make_lock(temp, "{}");
  REQUIRE(::truncate((lock + "/owner.json").c_str(), 1LL << 30) == 0);
  CHECK(reason_of(read_owner(system, lock, ::getuid())) == "owner-too-large");
  CHECK(system.count("pread") == 0);
}

TEST_CASE("read_owner_settled tells a malformed lock from one changing under the reader") {
  TempDir temp;
  StagedSystem system;
  const std::uint32_t uid = ::getuid();

  SUBCASE("an accepted owner is read once") {
    const std::string lock = make_lock(temp, R"({"pid":5,"token":"abc"})");
    SettledRead settled = read_owner_settled(system, lock, uid);
    CHECK(settled.settled);
    CHECK(settled.read.owner.has_value());
    CHECK(system.count("lstat") == 1);
  }
  SUBCASE("a malformed lock reads the same twice and is settled") {
    const std::string lock = make_lock(temp, R"({"pid":0,"token":"abc"})");
    SettledRead settled = read_owner_settled(system, lock, uid);
    CHECK(settled.settled);
    CHECK(reason_of(settled.read) == "pid-not-positive-integer");
    CHECK(system.count("lstat") == 2);
  }
  SUBCASE("a lock replaced before every read never settles, within the read limit") {
    const std::string lock = make_lock(temp, R"({"pid":0,"token":"0"})");
    int generation = 0;
    system.before = [&](std::string_view op, const std::string& path) {
      if (op != "lstat" || path != lock) return;
      // Released and republished: new bytes each time (a half-written record, say).
      REQUIRE(system.real().rename(lock, temp / ("old" + std::to_string(generation))));
      REQUIRE(::mkdir(lock.c_str(), 0700) == 0);
      REQUIRE(system.real().write_new_file(lock + "/owner.json",
                                           "{\"pid\":0,\"token\":\"" + std::to_string(++generation) + "\"}",
                                           0600));
    };
    SettledRead settled = read_owner_settled(system, lock, uid, 4);
    CHECK_FALSE(settled.settled);
    CHECK(generation == 4);
  }
  SUBCASE("a lock that vanished is reported as such, not retried") {
    const std::string lock = temp / "repository-gone.lock";
    SettledRead settled = read_owner_settled(system, lock, uid);
    CHECK(settled.settled);
    CHECK(settled.read.owner.error().lock_vanished());
    CHECK(system.count("lstat") == 1);
  }
}

TEST_CASE("named_pids: every pid a record could mean (the never-live rule)") {
  using V = std::vector<double>;
  CHECK(named_pids(R"({"pid":42,"token":"t"})") == V{42});
  // Malformed records still name their writer.
  CHECK(named_pids(R"({"pid":42,"token":"t"}trailing)") == V{42});
  CHECK(named_pids("\xEF\xBB\xBF{\"pid\":42,\"token\":\"t\"}") == V{42});
  CHECK(named_pids(R"({"pid":42,"tok)") == V{42});                      // truncated
  CHECK(named_pids(R"({"pid":7,"pid":42,"token":"t"})") == V{7, 42});   // duplicates
  CHECK(named_pids(R"({"a":{"b":[{"pid":9}]},"token":"t"})") == V{9});  // any depth
  CHECK(named_pids(R"({"pid":"123","token":"t"})") == V{123});          // decimal string
  CHECK(named_pids(R"({"p\u0069d":77})") == V{77});                     // escaped key
  // Each run of digits counts too: 1e3 names 1 and 3 besides 1000.
  CHECK(named_pids(R"({"pid":1e3})") == V{1, 3, 1000});
  CHECK(named_pids(R"({"pid":5}{"pid":6})") == V{5, 6});                // a second value
  CHECK(named_pids("{\"pid\":42,\"token\":\"\xff\xfe\"}") == V{42});      // invalid UTF-8
  std::string deep;
  for (int i = 0; i < 1500; ++i) deep += "[";
  deep += R"({"pid":31})";
  CHECK(named_pids(deep) == V{31});
  // Only 1..2^31-1 ever reaches kill() (kill(-5, 0) would probe process group 5); the
  // digits of a negative number or a fraction still name pids (each run of digits).
  CHECK(named_pids(R"({"pid":-5})") == V{5});
  CHECK(named_pids(R"({"pid":0})").empty());
  CHECK(named_pids(R"({"pid":1.5})") == V{1, 5});
  CHECK(named_pids(R"({"pid":"abc"})").empty());
  CHECK(named_pids("").empty());
  CHECK(named_pids("\x01\x02 binary").empty());
  CHECK(named_pids(R"({"token":"t"})").empty());
  CHECK(named_pids(R"({"pid":99999999999})").empty());  // out of range: left out
  CHECK(named_pids(R"({"pid":2147483648})").empty());
  CHECK(named_pids(R"({"pid":2147483647})") == V{2147483647});
  // Not in a pid member: not named.
  CHECK(named_pids(R"({"token":"20506"})").empty());
  CHECK(named_pids(R"({"x":20506,"pid":1})") == V{1});
  CHECK(named_pids(R"({"pid":1,"x":20506})") == V{1});
  CHECK(named_pids(R"({"pid":1,"v2":3,"token":"t"})") == V{1});  // the next key is not read
  CHECK(named_pids(R"({"a":{"pid":1},"b":20506})") == V{1});   // its object ended
  CHECK(named_pids(R"({"pid":1,"token":"pid"})") == V{1});
  CHECK(named_pids(R"({"ppid":20506,"pid_file":"x20506"})").empty());
}

TEST_CASE("named_pids: every damaged spelling of a pid names it") {
  struct Row {
    const char* what;
    std::string bytes;
    std::vector<double> must_include;
  };
  std::vector<Row> rows;
  for (auto& spelling : apnea_locks::testing::pid_spellings(20506))
    rows.push_back({.what = spelling.what, .bytes = std::move(spelling.bytes), .must_include = {20506}});
  // Each number of the value, read as every JavaScript form and as each run of digits.
  rows.push_back({.what = "exponent: the form and its runs of digits",
                  .bytes = R"({"pid":2.0506e4})",
                  .must_include = {2, 4, 506, 20506}});
  rows.push_back({.what = "hexadecimal: the form and its runs of digits",
                  .bytes = R"({"pid":0x5016})",
                  .must_include = {5016, 0x5016}});
  rows.push_back({.what = "several numbers in one value",
                  .bytes = R"({"pid":[20506, "7 8"], "token":"t"})",
                  .must_include = {7, 8, 20506}});
  rows.push_back({.what = "a key inside the value is inside the value",
                  .bytes = R"({"pid":{"20506":true}})",
                  .must_include = {20506}});
  rows.push_back({.what = "a pid key inside a pid value",
                  .bytes = R"({"pid":{"pid":20506,"x":7}})",
                  .must_include = {7, 20506}});
  std::vector<std::string> missed;
  for (const Row& row : rows) {
    const std::string what = row.what;
    CAPTURE(what);
    const std::vector<double> named = named_pids(row.bytes);
    bool all = true;
    for (double pid : row.must_include)
      all = all && std::find(named.begin(), named.end(), pid) != named.end();
    if (!all) missed.push_back(row.what);
    CHECK_MESSAGE(all, "named_pids misses a pid of: " << row.what);
    // Only integers 1..2^31-1 ever come out (kill(-5, 0) would probe a process group).
    for (double pid : named) CHECK((pid >= 1 && pid <= 2147483647.0 && pid == static_cast<std::int64_t>(pid)));
  }
  std::string list;
  for (const auto& what : missed) list += "\n  " + what;
  MESSAGE(rows.size() << " rows, " << missed.size() << " missed" << list);
}

TEST_CASE("named_pids: 1 MiB records finish without deep recursion or quadratic work") {
  const std::size_t mib = std::size_t{1} << 20;
  CHECK(named_pids(std::string(mib, '[')).empty());
  CHECK(named_pids(std::string(mib, '{')).empty());
  CHECK(named_pids(R"({"pid":)" + std::string(mib - 8, '[') + "7").size() == 1);
  std::string keys = "{";
  for (int i = 0; i < 100000; ++i) keys += R"("pid":1,)";
  CHECK(named_pids(keys) == std::vector<double>{1});
  std::string many = "{";
  for (int i = 1; many.size() < mib; ++i) many += "pid:" + std::to_string(i) + ",";
  CHECK(named_pids(many).size() > 100000);
  // Each a worst case for one part of the scanner: runs of digits, separators, exponents,
  // hexadecimal digits, escapes, an unterminated string or comment, NUL bytes (every
  // decoding), unpaired surrogates.
  for (const std::string& unit : {std::string("1"), std::string("1_"), std::string("1e"), std::string("0x"),
                                  std::string("\\u0031"), std::string("\\"), std::string("/*"),
                                  std::string("\"'"), std::string(1, '\0'), std::string("\xD8\x00", 2)}) {
    std::string value = R"({"pid":")";
    while (value.size() < mib) value += unit;
    CHECK(named_pids(value).size() <= 4);
  }
}
