// The command line's renderers: JSON writer and escaping, table alignment, raw cells, and
// the column list of status.
#include "cli/render.h"

#include <doctest/doctest.h>
#include <stdio.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <functional>
#include <string>

#include "cli/entry_report.h"

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
  CHECK(raw_cell("") == "-");
  CHECK(raw_cell("a b\\c\n") == "a\\x20b\\x5cc\\x0a");
  CHECK(capture([](std::FILE* f) { print_raw_line(f, {"x", "", "y z"}); }) == "x - y\\x20z\n");
}

TEST_CASE("text forms: printable, shorten, ages, times, bytes, modes") {
  CHECK(printable("a\x1b[31m\xff") == "a\\x1b[31m\\xff");
  CHECK(printable("tab\tnl\ndel\x7f") == "tab\\x09nl\\x0adel\\x7f");
  CHECK(printable("csi\xc2\x9b" "2J ok \xc2\xa0 \xe2\x82\xac") == "csi\\u009b2J ok \xc2\xa0 \xe2\x82\xac");
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
  CHECK(parse_fields("name,bogus").error() == "unknown column 'bogus'");
  CHECK_FALSE(parse_fields(""));
  for (const FieldInfo& info : all_fields()) CHECK(field_info(info.field).name == info.name);
}
