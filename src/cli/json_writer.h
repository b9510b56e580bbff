// JSON output: a streaming writer and string escaping that always yield valid UTF-8 with
// nothing a terminal would obey. No system calls; output goes to a FILE*.
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

/// `text` as a JSON string literal: quotes, backslashes and control characters escaped,
/// invalid UTF-8 replaced by U+FFFD (as Node decodes it), so the document is always valid.
std::string json_string(std::string_view text);

/// A member name fixed when the program is compiled, and checked then: printable ASCII
/// without a quote or backslash, so it is written as it is, with no escaping at run time.
class JsonKey {
 public:
  /// The longest name a JsonKey holds.
  static constexpr std::size_t max_size = 31;
  /// `name` must be a string literal; one that would need escaping, or is longer than
  /// max_size, fails to compile.
  template <std::size_t N>
  consteval JsonKey(const char (&name)[N]) : size_(N - 1) {  // NOLINT: implicit on purpose
    if (N - 1 > max_size) throw "a JSON key longer than JsonKey::max_size";
    for (std::size_t i = 0; i < N - 1; ++i) {
      const char c = name[i];
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') throw "a JSON key that needs escaping";
      text_[i] = c;
    }
  }
  /// The name.
  constexpr std::string_view view() const { return {text_, size_}; }
  /// The name padded to max_size + 1 bytes (the writer copies them whole).
  constexpr const char* padded() const { return text_; }

 private:
  char text_[max_size + 1] = {};
  std::size_t size_;
};

/// How a JsonWriter lays its document out.
enum class JsonLayout {
  indented,  ///< two spaces per level, a member or element per line
  one_line,  ///< no whitespace at all: one line per document (run --json's events)
};

/// Writes one JSON document as it goes, handing it to `out` in chunks of 64 KiB (and at
/// finish() or destruction). Calls must nest correctly; keys only inside objects.
class JsonWriter {
 public:
  /// A writer to `out` (not owned).
  explicit JsonWriter(std::FILE* out, JsonLayout layout = JsonLayout::indented);
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
  /// The next value belongs to member `name` (a literal: see JsonKey).
  JsonWriter& key(const JsonKey& name);
  /// The next value belongs to member `name`, a name known only at run time (escaped as
  /// json_string escapes it).
  JsonWriter& key_text(std::string_view name);
  /// The member `name` with the string value `text`: key(name).string(text) in one step.
  void member_string(const JsonKey& name, std::string_view text);
  /// The member `name` with the value null: key(name).null() in one step.
  void member_null(const JsonKey& name);
  /// The member `name` with the value true or false: key(name).boolean(value) in one step.
  void member_boolean(const JsonKey& name, bool value);
  /// The member `name` with an integer value: key(name).integer(value) in one step.
  void member_integer(const JsonKey& name, std::int64_t value);
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
  /// A value already serialized by a JsonWriter (status --all-users: an entry a child wrote).
  void raw_value(std::string_view json);
  /// Ends the document with a newline and flushes.
  void finish();

 private:
  void before_value();
  void newline();
  /// Writes `,` newline indent `"name": ` with room for `value_room` more bytes after it
  /// and returns where the value goes (the caller writes it and sets used_); null when
  /// the member cannot be written in one piece here (after a key, outside an object, too
  /// deep, or too large), and nothing was written.
  char* open_member(const JsonKey& name, std::size_t value_room);
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
  bool one_line_;                   ///< JsonLayout::one_line
  std::unique_ptr<char[]> buffer_;  ///< text not yet handed to out_: used_ bytes
  std::size_t used_ = 0;
  std::vector<Level> stack_;
  bool after_key_ = false;
};

/// The version of every JSON document apnea-locks writes (docs/apnea-locks.schema.json):
/// raised when a field is removed or changes meaning, not when one is added.
inline constexpr int json_schema_version = 1;

/// Writes the member `"schema": {"name": document, "version": json_schema_version}` that
/// starts every JSON document ("status", "inspect", "path", "reclaim", "run-event").
void write_schema(JsonWriter& json, std::string_view document);

/// Writes `argv` as an array of strings, or null when it is empty (fix_argv).
void write_argv(JsonWriter& json, const std::vector<std::string>& argv);

}  // namespace apnea_locks::cli
