// Renderers for the command line: an aligned table, raw lines, a streaming JSON writer and
// the text forms of ages, times and bytes. No system calls; output goes to a FILE*.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace apnea_locks::cli {

/// Serialized JSON (Boost.JSON's) made safe for a terminal: invalid UTF-8 replaced by
/// U+FFFD, C1 controls and DEL (which only strings can hold) as \u escapes.
std::string json_safe(std::string_view serialized);

/// `text` as a JSON string literal: quotes, backslashes and control characters escaped,
/// invalid UTF-8 replaced by U+FFFD (as Node decodes it), so the document is always valid.
std::string json_string(std::string_view text);

/// Writes one JSON document as it goes, indented by two spaces per level, handing it to
/// `out` in chunks of 64 KiB (and at finish() or destruction). Calls must nest correctly;
/// keys only inside objects.
class JsonWriter {
 public:
  /// A writer to `out` (not owned).
  explicit JsonWriter(std::FILE* out);
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;
  /// Hands what is still buffered to `out`.
  ~JsonWriter();

  /// Opens an object as the next value.
  void begin_object();
  /// Closes the innermost object.
  void end_object();
  /// Opens an array as the next value.
  void begin_array();
  /// Closes the innermost array.
  void end_array();
  /// The next value belongs to member `name`.
  JsonWriter& key(std::string_view name);
  /// A string value (see json_string).
  void string(std::string_view text);
  /// A string, or null when there is none.
  void optional_string(const std::optional<std::string>& text);
  /// true or false.
  void boolean(bool value);
  /// An integer value.
  void integer(std::int64_t value);
  /// A number already in JSON syntax (e.g. a pid as JavaScript prints it).
  void number_text(std::string_view json_number);
  /// null.
  void null();
  /// Ends the document with a newline and flushes.
  void finish();

 private:
  void before_value();
  void newline();
  void flush_buffer();
  // Appending to the buffer, inline: status calls these a few dozen times per entry.
  void put(std::string_view text) {
    if (text.empty()) return;  // its data may be null, which memcpy must not get
    if (chunk_size - used_ < text.size()) return put_large(text);
    std::memcpy(buffer_.get() + used_, text.data(), text.size());
    used_ += text.size();
  }
  void put(char c) {
    if (used_ == chunk_size) flush_buffer();
    buffer_[used_++] = c;
  }
  void put_large(std::string_view text);
  void put_string(std::string_view text);

  /// The writer hands its text to `out` in chunks of this size.
  static constexpr std::size_t chunk_size = 64 * 1024;

  struct Level {
    bool object;
    bool empty;
  };
  std::FILE* out_;
  std::unique_ptr<char[]> buffer_;  ///< text not yet handed to out_: used_ bytes
  std::size_t used_ = 0;
  std::vector<Level> stack_;
  bool after_key_ = false;
};

/// One column of a table.
struct TableColumn {
  std::string header;
  bool right_aligned = false;
};

/// An aligned text table: rows are collected, then printed with each column as wide as its
/// widest cell. A row may carry an ANSI colour for the whole line.
class Table {
 public:
  /// A table with these columns, in order.
  explicit Table(std::vector<TableColumn> columns) : columns_(std::move(columns)) {}

  /// Adds a row (one cell per column); `colour` is an SGR code ("31") or empty.
  void add_row(std::vector<std::string> cells, std::string_view colour = {});
  /// Prints the table; with `headings` the header line first.
  void print(std::FILE* out, bool headings) const;
  /// Number of rows added.
  std::size_t size() const { return rows_.size(); }

 private:
  std::vector<TableColumn> columns_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::string> colours_;
};

/// Writes one raw line: cells separated by one space, each escaped by raw_cell.
void print_raw_line(std::FILE* out, const std::vector<std::string>& cells);

/// A cell for raw output: space, backslash and control characters as `\xNN` (util-linux
/// style) so a line splits on spaces; an empty cell is "-".
std::string raw_cell(std::string_view text);

/// The one escaper for text output (PROTOCOL.md section 10): C0 controls (`\n` and `\t`
/// included) and DEL as `\xNN`, C1 controls as `\u0080`..`\u009f`, each byte of invalid
/// UTF-8 as `\xNN`; everything else as is. Every string from disk, /proc or the
/// environment passes it before it reaches a terminal.
std::string printable(std::string_view text);

/// Number of code points (display columns, near enough) of UTF-8 text.
std::size_t display_width(std::string_view text);

/// `text` cut to `width` code points, ending in "..." when cut.
std::string shorten(std::string_view text, std::size_t width);

/// A compact age: "45s", "3m05s", "2h03m", "4d02h".
std::string format_age(std::int64_t ns);

/// UTC time as "2024-05-01T12:34:56Z" (with ".123" milliseconds when `millis`).
std::string format_time(std::int64_t ns_since_epoch, bool millis = false);

/// Bytes as a C-like literal body: printable ASCII as is, `\\`, `\"`, `\n`, `\t`, `\r`,
/// and `\xNN` for everything else, so any content is shown losslessly on one line.
std::string escape_bytes(std::string_view bytes);

/// File mode as four octal digits ("0700").
std::string format_mode(std::uint32_t mode);

}  // namespace apnea_locks::cli
