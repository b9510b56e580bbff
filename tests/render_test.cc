// The presentation layer's pure parts: JSON writer and escaping, the table fitted to a
// width, raw cells, shortening and wrapping, the time formatter, the field table and the
// column list, the help formatter.
#include "cli/render.h"

#include <doctest/doctest.h>
#include <stdio.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/entry_report.h"
#include "cli/options.h"
#include "cli/terminal.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::cli;

namespace {

/// What `write` printed to a FILE*.
std::string capture(const std::function<void(std::FILE*)>& write) {
  char* buffer = nullptr;
  std::size_t size = 0;
  std::FILE* out = ::open_memstream(&buffer, &size);
  REQUIRE(out != nullptr);
  write(out);
  std::fclose(out);
  std::string text(buffer, size);
  std::free(buffer);
  return text;
}

}  // namespace

TEST_CASE("json_string escapes and always yields valid UTF-8") {
  CHECK(json_string("plain") == "\"plain\"");
  CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json_string("\n\t\x01\x7f") == "\"\\n\\t\\u0001\\u007f\"");
  CHECK(json_string(std::string("nul\0end", 7)) == "\"nul\\u0000end\"");
  CHECK(json_string("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
  CHECK(json_string("bad\xff") == "\"bad\xef\xbf\xbd\"");
}

TEST_CASE("json_string finds a byte that needs escaping at any place in a text of any length") {
  // The plain-text check works 16, 8 or 4 bytes at a time depending on the length: a bad
  // byte must be found at every position of every length, and a plain text left as it is.
  for (std::size_t size = 0; size <= 40; ++size) {
    const std::string plain(size, 'k');
    CHECK(json_string(plain) == "\"" + plain + "\"");
    for (std::size_t at = 0; at < size; ++at) {
      for (const char bad : {'\x00', '\x1f', '\x7f', '"', '\\', '\x80', '\xff'}) {
        std::string text = plain;
        text[at] = bad;
        CAPTURE(size);
        CAPTURE(at);
        CHECK(json_string(text) != "\"" + text + "\"");
      }
    }
  }
  CHECK(json_string("~ !#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}") == "\"~ !#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}\"");
}

TEST_CASE("JsonWriter writes one parseable document as it goes") {
  const std::string out = capture([](std::FILE* file) {
    JsonWriter json(file);
    json.begin_object();
    json.key("s").string("x\"y");
    json.key("n").integer(-5);
    json.key("pid").number_text("1e+21");
    json.key("t").boolean(true);
    json.key("none").optional_string(std::nullopt);
    json.key("list").begin_array();
    json.begin_object();
    json.end_object();
    json.begin_array();
    json.end_array();
    json.string("\xff");
    json.end_array();
    json.end_object();
    json.finish();
  });
  const auto doc = boost::json::parse(out).as_object();
  CHECK(doc.at("s").as_string() == "x\"y");
  CHECK(doc.at("n").as_int64() == -5);
  CHECK(doc.at("pid").as_double() == 1e21);
  CHECK(doc.at("t").as_bool());
  CHECK(doc.at("none").is_null());
  CHECK(doc.at("list").as_array().size() == 3);
  CHECK(out.find("{}") != std::string::npos);
  CHECK(out.find("  \"s\": ") != std::string::npos);  // indented
  CHECK(out.back() == '\n');
}

TEST_CASE("Table aligns columns by display width, right-aligning numbers") {
  Table table({{"NAME", false}, {"PID", true}, {"NOTE", false}});
  table.add_row({"caf\xc3\xa9", "7", "x"});
  table.add_row({"a", "12345", ""});
  CHECK(capture([&](std::FILE* f) { table.print(f, true); }) ==
        "NAME   PID NOTE\n"
        "caf\xc3\xa9     7 x\n"
        "a    12345 \n");
  CHECK(capture([&](std::FILE* f) { table.print(f, false); }) ==
        "caf\xc3\xa9     7 x\n"
        "a    12345 \n");
  Table coloured({{"A", false}});
  coloured.add_row({"x"}, "31");
  CHECK(capture([&](std::FILE* f) { coloured.print(f, false); }) == "\x1b[31mx\x1b[0m\n");
}

TEST_CASE("raw cells keep one field per value") {
  CHECK(raw_cell("").empty());  // nothing, as in lslocks --raw
  CHECK(raw_cell("a b\\c\n") == "a\\x20b\\x5cc\\x0a");
  CHECK(capture([](std::FILE* f) { print_raw_line(f, {"x", "", "y z"}); }) == "x  y\\x20z\n");
}

TEST_CASE("text forms: printable, shorten, ages, times, bytes, modes") {
  CHECK(printable("a\x1b[31m\xff") == "a\\x1b[31m\\xff");
  CHECK(printable("tab\tnl\ndel\x7f") == "tab\\x09nl\\x0adel\\x7f");
  CHECK(printable("csi\xc2\x9b" "2J ok \xc2\xa0 \xe2\x82\xac") == "csi\\u009b2J ok \xc2\xa0 \xe2\x82\xac");
  // The format characters that reorder or hide text: an RLO, a zero-width space, an isolate,
  // U+2028, a BOM; a visible character next to them is kept.
  CHECK(printable("a\xe2\x80\xae" "b\xe2\x80\x8b" "c\xe2\x81\xa6" "d\xe2\x80\xa8" "e\xef\xbb\xbf" "f\xe2\x80\x90") ==
        "a\\u202eb\\u200bc\\u2066d\\u2028e\\ufefff\xe2\x80\x90");
  CHECK(printable("\xed\xa0\x80\xc0\xaf") == "\\xed\\xa0\\x80\\xc0\\xaf");
  CHECK(shorten("6f0d5d0e-1c2b-4a3d", 11) == "6f0d5d0e...");
  CHECK(shorten("short", 11) == "short");
  CHECK(display_width("\xc3\xa9\xc3\xa9") == 2);
  CHECK(format_age(0) == "0s");
  CHECK(format_age(59'999'999'999) == "59s");
  CHECK(format_age(185'000'000'000) == "3m05s");
  CHECK(format_age(7'380'000'000'000) == "2h03m");
  CHECK(format_age(360'000'000'000'000) == "4d04h");
  CHECK(format_age(-5) == "0s");
  CHECK(format_time(0) == "1970-01-01T00:00:00Z");
  CHECK(format_time(1'700'000'000'123'456'789, true) == "2023-11-14T22:13:20.123Z");
  CHECK(format_time(-1, true) == "1969-12-31T23:59:59.999Z");
  CHECK(std::string_view(format_time_text(1'700'000'000'123'456'789)) == "2023-11-14T22:13:20Z");
  CHECK(std::string_view(format_time_text(-1, true)) == "1969-12-31T23:59:59.999Z");
  CHECK(escape_bytes(std::string("{\"a\":\n\x00\xff}", 9)) == "{\\\"a\\\":\\n\\x00\\xff}");
  CHECK(format_mode(0700) == "0700");
}

TEST_CASE("-o parses column lists, +COL extends the defaults") {
  auto chosen = parse_fields("name,STATE,self-heals");
  REQUIRE(chosen);
  CHECK(*chosen == std::vector<Field>{Field::name, Field::state, Field::self_heals});
  auto extended = parse_fields("+path");
  REQUIRE(extended);
  CHECK(extended->size() == default_fields().size() + 1);
  CHECK(extended->back() == Field::path);
  CHECK_FALSE(parse_fields("name,bogus"));
  CHECK(parse_fields("name,bogus").error() == "unknown column 'bogus' (see 'apnea-locks status -o help')");
  CHECK_FALSE(parse_fields(""));
  for (const FieldInfo& info : all_fields()) CHECK(field_info(info.field).name == info.name);
}

namespace {

/// The widest line of `lines`, in display columns, ANSI colour escapes not counted.
std::size_t widest(const std::vector<std::string>& lines) {
  std::size_t out = 0;
  for (const std::string& line : lines) {
    std::string plain;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\x1b') {
        while (i < line.size() && line[i] != 'm') ++i;
        continue;
      }
      plain += line[i];
    }
    out = std::max(out, display_width(plain));
  }
  return out;
}

/// A table like status's: fixed columns, free text that shrinks, columns that may hide.
Table sample_table() {
  Table table({{"STATE", false, 0, 0, Cut::end, 0},
               {"KEY", false, 0, 0, Cut::end, 2},
               {"PID", true, 0, 0, Cut::end, 0},
               {"COMMAND", false, 8, 1, Cut::end, 1},
               {"LABEL", false, 8, 2, Cut::start, 0},
               {"FIX", false, 12, 3, Cut::end, 0}});
  table.add_row({"stale", "8d246a543d0c", "4242", "node /usr/lib/node_modules/@naxodev/apnea/bin/apnea run",
                 "/home/ann/code/web", "apnea-locks reclaim --force --repo /home/ann/code/web"},
                "31");
  table.add_row({"live", "5995c0f93b18", "19125", "vim notes.txt", "/home/ann/code/app", "-"});
  return table;
}

}  // namespace

TEST_CASE("the table keeps everything without a width, and never exceeds one") {
  const Table table = sample_table();
  const auto full = table.lines(true, 0, "...", false);
  CHECK(full[1].find("apnea-locks reclaim --force --repo /home/ann/code/web") != std::string::npos);
  CHECK(full[1].find("node /usr/lib/node_modules/@naxodev/apnea/bin/apnea run") != std::string::npos);
  CHECK(table.hidden().empty());
  for (std::size_t width : {200u, 120u, 100u, 80u, 60u, 40u, 20u, 5u}) {
    CAPTURE(width);
    const auto lines = table.lines(true, width, "\xe2\x80\xa6", true);
    CHECK(widest(lines) <= width);
    CHECK(lines.size() == 3);
  }
}

TEST_CASE("the table shrinks free text in order, hides columns by rank, the fix last") {
  const Table table = sample_table();
  // 120 columns: only COMMAND (shrink rank 1) has to give.
  auto lines = table.lines(true, 120, "...", false);
  CHECK(table.hidden().empty());
  CHECK(lines[1].find("apnea-locks reclaim --force --repo /home/ann/code/web") != std::string::npos);
  CHECK(lines[1].find("node /usr/lib/node_...") != std::string::npos);
  // 70: the fix keeps its width while columns can hide (COMMAND rank 1, KEY rank 2); only
  // then does it shrink.
  lines = table.lines(true, 70, "...", false);
  CHECK(table.hidden() == std::vector<std::string>{"KEY", "COMMAND"});
  CHECK(lines[0].find("COMMAND") == std::string::npos);
  CHECK(lines[1].find("apnea-locks reclaim --force --repo /home/ann/c...") != std::string::npos);
  // 50: LABEL keeps its end ("...e/web"), FIX its start.
  lines = table.lines(true, 50, "...", false);
  CHECK(lines[1].find("...e/web") != std::string::npos);
  CHECK(lines[1].find("apnea-locks reclaim --forc...") != std::string::npos);
  // The colour of a row wraps the fitted line; its escapes do not count.
  const auto coloured = table.lines(true, 50, "...", true);
  CHECK(coloured[1].starts_with("\x1b[31m"));
  CHECK(coloured[1].ends_with("\x1b[0m"));
  CHECK(widest(coloured) <= 50);
}

TEST_CASE("shorten cuts at either end with the ellipsis, by display width") {
  CHECK(shorten("apnea-locks reclaim", 10) == "apnea-l...");
  CHECK(shorten("apnea-locks reclaim", 10, Cut::end, "\xe2\x80\xa6") == "apnea-loc\xe2\x80\xa6");
  CHECK(shorten("/home/ann/code/web", 9, Cut::start) == "...de/web");
  CHECK(shorten("short", 10) == "short");
  CHECK(shorten("abcdef", 2) == "..");
  // Wide characters take two columns and are never cut in half.
  CHECK(display_width("\xe6\x97\xa5\xe6\x9c\xac") == 4);
  CHECK(shorten("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 5) == "\xe6\x97\xa5...");
  CHECK(display_width("e\xcc\x81") == 1);  // a combining accent adds nothing
}

TEST_CASE("wrap breaks prose at spaces and keeps layout") {
  CHECK(wrap("one two three four", 9) == "one two\nthree\nfour");
  CHECK(wrap("one two three four", 9, "  ") == "one two\n  three\n  four");
  CHECK(wrap("  -o, --output   columns to show", 21, "      ") == "  -o, --output\n      columns to show");
  CHECK(wrap("unbreakable-word-longer-than-width next", 10) == "unbreakable-word-longer-than-width\nnext");
  CHECK(wrap("fits", 0) == "fits");
  // Split: a word longer than the width is cut into lines ending in `\` (the shell joins
  // them back), never inside a UTF-8 character, and no line is wider than the width.
  // A command inside the prose is never broken at a space: it is cut with `\`, so the
  // lines from "rm" to the path's end paste as the one command.
  CHECK(wrap("rm -- /a/very/long/path/x next", 10, "  ", LongWords::split) ==
        "rm -- /a/\\\nvery/long\\\n/path/x\n  next");
  CHECK(wrap("fix it: chmod 600 -- /tmp/area/repository-abc.lock/owner.json (it removes nothing)", 30,
             "  ", LongWords::split) ==
        "fix it:\n  chmod 600 -- /tmp/area/repo\\\nsitory-abc.lock/owner.json (it\n  removes nothing)");
  CHECK(wrap("let it go on (kill -CONT 4242) and wait", 20, "  ", LongWords::split) ==
        "let it go on\n  (kill -CONT 4242)\n  and wait");
  const std::string split = wrap("x /\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 4, "", LongWords::split);
  CHECK(split == "x /\\\n\xc3\xa9\xc3\xa9\xc3\xa9\\\n\xc3\xa9\xc3\xa9");
  for (std::size_t at = 0, end = 0; at < split.size(); at = end + 1) {
    end = std::min(split.find('\n', at), split.size());
    CHECK(display_width(std::string_view(split).substr(at, end - at)) <= 4);
  }
}

TEST_CASE("a fix command wraps into lines that still paste as one command") {
  const std::vector<std::string> argv = {"apnea-locks", "reclaim", "--force", "--repo", "/home/ann/my code"};
  CHECK(wrap_command(argv, 0, "  ") == "  apnea-locks reclaim --force --repo '/home/ann/my code'");
  const std::string wrapped = wrap_command(argv, 31, "  ");
  CHECK(wrapped == "  apnea-locks reclaim --force \\\n  --repo '/home/ann/my code'");
  for (std::size_t at = 0, end = 0; at < wrapped.size(); at = end + 1) {
    end = wrapped.find('\n', at);
    if (end == std::string::npos) end = wrapped.size();
    CHECK(end - at <= 31);
  }
}

TEST_CASE("a fix command with hostile bytes prints as ASCII, wraps, and pastes back exactly") {
  // ESC, U+202E, invalid UTF-8, '|' and a quote in the lock directory: $'...' words, cut
  // into pieces (each quoted on its own) when longer than a line.
  const std::string dir = "/tmp/area-\x1b[31m\xe2\x80\xae|it's\xff" "ab";
  const std::vector<std::string> argv = {"apnea-locks", "reclaim", "--lock-dir", dir,
                                         dir + "/repository-" + std::string(64, 'a') + ".lock"};
  for (const std::size_t width : {0, 40}) {
    CAPTURE(width);
    const std::string wrapped = wrap_command(argv, width, "  ");
    CAPTURE(wrapped);
    for (std::size_t at = 0, end = 0; at < wrapped.size(); at = end + 1) {
      end = wrapped.find('\n', at);
      if (end == std::string::npos) end = wrapped.size();
      const std::string line = wrapped.substr(at, end - at);
      CHECK(printable(line) == line);  // nothing for the escaper to change: no lost bytes
      if (width != 0) CHECK(display_width(line) <= width);
    }
    CHECK(testing::bash_words(wrapped) == argv);
  }
}

TEST_CASE("one time and age formatter: durations in their largest exact unit") {
  CHECK(duration_text(0) == "0s");
  CHECK(duration_text(90 * ns_per_second) == "90s");
  CHECK(duration_text(5 * ns_per_minute) == "5m");
  CHECK(duration_text(2 * ns_per_hour) == "2h");
  CHECK(duration_text(30 * ns_per_day) == "30d");
  CHECK(duration_text(250'000'000) == "250ms");
  CHECK(duration_text(1'500'000'000) == "1500ms");
}

TEST_CASE("the field table: one row per field, in enum order, each with its words") {
  std::set<std::string_view> names, keys;
  for (std::size_t i = 0; i < all_fields().size(); ++i) {
    const FieldInfo& info = all_fields()[i];
    CAPTURE(info.name);
    CHECK(static_cast<std::size_t>(info.field) == i);
    CHECK(!info.description.empty());
    CHECK(!info.json_key.empty());
    CHECK((info.text != nullptr));
    CHECK((info.json != nullptr));
    CHECK(names.insert(info.name).second);
    CHECK(keys.insert(info.json_key).second);
    std::string upper;
    for (char c : info.name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(info.header == upper);
    // Free text from outside is escaped; shrinking applies only to free text.
    if (info.min_width > 0) CHECK(info.shrink_rank > 0);
  }
  // The free-text columns of the issue shrink; the fix last.
  for (Field f : {Field::fix, Field::command, Field::token, Field::label}) {
    CHECK(field_info(f).min_width > 0);
    CHECK(field_info(f).escape == Escape::printable);
  }
  CHECK(field_info(Field::fix).shrink_rank > field_info(Field::label).shrink_rank);
  CHECK(field_info(Field::state).hide_rank == 0);
  CHECK(field_info(Field::fix).hide_rank == 0);
  // Prometheus labels are fields too.
  std::vector<std::string_view> labels;
  for (Field f : prometheus_label_fields()) labels.push_back(field_info(f).prometheus_label);
  CHECK(labels == std::vector<std::string_view>{"kind", "role", "state"});
}

TEST_CASE("-o help lists every column with its description, within 80 columns") {
  const std::string list = columns_help(80);
  CHECK(list.starts_with("Available output columns:\n"));
  for (const FieldInfo& info : all_fields()) {
    CAPTURE(info.name);
    CHECK(list.find("  " + std::string(info.name) + " ") != std::string::npos);
  }
  std::istringstream lines(list);
  for (std::string line; std::getline(lines, line);) CHECK(display_width(line) <= 80);
  CHECK(list.find("kind,key,role,state,reason,apnea,pid,token,age,command,started,label,fix.") !=
        std::string::npos);
}

TEST_CASE("help: util-linux style, every option once, 80 columns") {
  po::options_description options("Options");
  std::string lock_dir;
  bool json = false;
  options.add_options()
      ("json,J", po::bool_switch(&json), "one JSON document")
      ("lock-dir", po::value(&lock_dir)->value_name("DIR"), "lock directory to look at, a long description that has to wrap at eighty columns")
      ("scan-depth", po::value<int>()->value_name("N")->default_value(4), "levels to look");
  const CommandHelp help{"demo", "demo [options]", "Does a thing.", "Exit status: 0.", false};
  const std::string text = capture([&](std::FILE* f) { print_help(f, help, options); });
  CHECK(text.starts_with("Usage:\n apnea-locks demo [options]\n\nDoes a thing.\n\nOptions:\n"));
  CHECK(text.find("\n -J, --json ") != std::string::npos);
  CHECK(text.find("\n     --lock-dir DIR ") != std::string::npos);
  CHECK(text.find("levels to look (default: 4)") != std::string::npos);
  CHECK(text.find("\n -h, --help ") != std::string::npos);
  CHECK(text.find("\n -V, --version ") != std::string::npos);
  CHECK(text.find("\n     --color[=WHEN] ") != std::string::npos);
  CHECK(text.find("[ --") == std::string::npos);  // not Boost's "-J [ --json ]"
  CHECK(text.ends_with("Exit status: 0.\n\nFor more details see apnea-locks(1).\n"));
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) CHECK(display_width(line) <= 80);
}

TEST_CASE("colour: auto needs a terminal, no NO_COLOR and a TERM that is not dumb") {
  testing::StagedSystem system(real_system());
  system.terminal = true;
  system.environment["TERM"] = "xterm";
  system.environment["NO_COLOR"] = "";
  CHECK(colour_wanted(system, ColourMode::automatic));
  system.environment["NO_COLOR"] = "1";
  CHECK_FALSE(colour_wanted(system, ColourMode::automatic));
  CHECK(colour_wanted(system, ColourMode::always));  // the flag wins over NO_COLOR
  system.environment["NO_COLOR"] = "";
  system.environment["TERM"] = "dumb";
  CHECK_FALSE(colour_wanted(system, ColourMode::automatic));
  system.environment["TERM"] = "xterm";
  CHECK_FALSE(colour_wanted(system, ColourMode::never));
  system.terminal = false;
  CHECK_FALSE(colour_wanted(system, ColourMode::automatic));
  CHECK(colour_wanted(system, ColourMode::always));
  CHECK(parse_colour_mode("auto") == ColourMode::automatic);
  CHECK_FALSE(parse_colour_mode("yes"));
}

TEST_CASE("the width: the terminal's, else COLUMNS, else 80; none off a terminal") {
  testing::StagedSystem system(real_system());
  system.terminal = false;
  CHECK_FALSE(terminal_width(system).has_value());
  system.terminal = true;
  system.terminal_width = 132;
  CHECK(terminal_width(system) == 132u);
  system.terminal_width.reset();
  system.environment["COLUMNS"] = "100";
  CHECK(terminal_width(system) == 100u);
  system.environment["COLUMNS"] = "wide";
  CHECK(terminal_width(system) == 80u);
  system.environment["COLUMNS"] = "0";
  CHECK(terminal_width(system) == 80u);
  system.terminal_width = 90;
  system.environment["COLUMNS"] = "100";
  CHECK(terminal_width(system) == 90u);  // the terminal's own width first (util-linux)
  CHECK(terminal_view(system, ColourMode::automatic, true).width == 0);  // --notruncate
  system.environment["LANG"] = "C.UTF-8";
  system.environment["LC_ALL"] = "";
  CHECK(terminal_view(system, ColourMode::never, false).ellipsis == "\xe2\x80\xa6");
  system.environment["LC_ALL"] = "C";
  CHECK(terminal_view(system, ColourMode::never, false).ellipsis == "...");
}
