#include "cli/json_writer.h"

#include <fmt/format.h>

#include <charconv>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <cstdint>
#include <cstring>

#include "apnea_locks/owner.h"

namespace apnea_locks::cli {

namespace {

/// True when `text` can stand between quotes as it is: printable ASCII without `"` or `\`.
/// Nearly every string status writes (names, paths, tokens, reasons) is like this; status
/// checks some 1,200 bytes per entry, so 16 at a time (SSE2; byte by byte elsewhere).
[[gnu::always_inline]] inline bool plain_ascii(std::string_view text) {
  const std::size_t n = text.size();
  const char* const data = text.data();
#if defined(__SSE2__)
  // A byte is bad when, signed, it is below 0x20 (controls and every byte >= 0x80), or it
  // is DEL, '"' or '\\'. 16 bytes are checked at once; a shorter text is loaded in two
  // overlapping pieces (the rest of the lanes a plain 'a'), so no byte outside it is read.
  const __m128i space = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f);
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  auto bad = [&](__m128i v) {
    const __m128i b = _mm_or_si128(_mm_or_si128(_mm_cmplt_epi8(v, space), _mm_cmpeq_epi8(v, del)),
                                   _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    return _mm_movemask_epi8(b) != 0;
  };
  auto load16 = [](const char* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); };
  auto load8 = [](const char* at) {
    std::uint64_t v;
    std::memcpy(&v, at, 8);
    return v;
  };
  auto load4 = [](const char* at) {
    std::uint32_t v;
    std::memcpy(&v, at, 4);
    return std::uint64_t{v};
  };
  constexpr std::uint64_t plain8 = 0x6161616161616161;  // "aaaaaaaa"
  if (n >= 16) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
      if (bad(load16(data + i))) return false;
    return i == n || !bad(load16(data + n - 16));  // the rest, overlapping
  }
  if (n >= 8)
    return !bad(_mm_set_epi64x(static_cast<long long>(load8(data + n - 8)), static_cast<long long>(load8(data))));
  if (n >= 4) {
    const std::uint64_t both = load4(data) | (load4(data + n - 4) << 32);
    return !bad(_mm_set_epi64x(static_cast<long long>(plain8), static_cast<long long>(both)));
  }
#endif
  unsigned bad_bytes = 0;  // short (or no SSE2): byte by byte
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(data[i]);
    bad_bytes |= static_cast<unsigned>(c < 0x20) | static_cast<unsigned>(c >= 0x7f) |
                 static_cast<unsigned>(c == '"') | static_cast<unsigned>(c == '\\');
  }
  return bad_bytes == 0;
}

/// Appends `text` as a JSON string literal to `out` (see json_string).
void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  if (plain_ascii(text)) {
    out.append(text);
    out += '"';
    return;
  }
  const std::string valid = utf8_with_replacement(text);
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const char c = valid[i];
    const auto byte = static_cast<unsigned char>(c);
    // C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F) as escapes: some terminals obey them.
    if (byte == 0xC2 && i + 1 < valid.size() && static_cast<unsigned char>(valid[i + 1]) < 0xA0) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(valid[++i]));
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (byte < 0x20 || byte == 0x7f) out += fmt::format("\\u{:04x}", byte);
        else out += c;
    }
  }
  out += '"';
}

}  // namespace

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_json_string(out, text);
  return out;
}

JsonWriter::JsonWriter(std::FILE* out, JsonLayout layout)
    : out_(out), one_line_(layout == JsonLayout::one_line), buffer_(new char[chunk_size]) {}

JsonWriter::~JsonWriter() { flush_buffer(); }

void JsonWriter::flush_buffer() {
  if (used_ == 0) return;
  std::fwrite(buffer_.get(), 1, used_, out_);
  used_ = 0;
}

void JsonWriter::put_large(std::string_view text) {
  flush_buffer();
  if (text.size() > chunk_size) {
    std::fwrite(text.data(), 1, text.size(), out_);
    return;
  }
  std::memcpy(buffer_.get(), text.data(), text.size());
  used_ = text.size();
}

void JsonWriter::put_string(std::string_view text) {
  if (!plain_ascii(text)) return put(json_string(text));
  if (chunk_size - used_ < text.size() + 2) {
    put('"');
    put(text);
    put('"');
    return;
  }
  char* at = buffer_.get() + used_;
  *at++ = '"';
  if (!text.empty()) std::memcpy(at, text.data(), text.size());
  at += text.size();
  *at++ = '"';
  used_ = static_cast<std::size_t>(at - buffer_.get());
}

void JsonWriter::newline() {
  if (one_line_) return;
  const std::size_t indent = 2 * stack_.size();
  if (chunk_size - used_ < indent + 1) {
    flush_buffer();
    if (chunk_size < indent + 1) {  // absurdly deep: a line of its own
      put('\n');
      for (std::size_t i = 0; i < indent; ++i) put(' ');
      return;
    }
  }
  buffer_[used_] = '\n';
  std::memset(buffer_.get() + used_ + 1, ' ', indent);
  used_ += indent + 1;
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) return;
  if (!stack_.back().empty) put(',');
  stack_.back().empty = false;
  newline();
}

void JsonWriter::begin_object() {
  before_value();
  put('{');
  stack_.push_back({true, true});
}

void JsonWriter::end_object() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline();
  put('}');
}

void JsonWriter::begin_array() {
  before_value();
  put('[');
  stack_.push_back({false, true});
}

void JsonWriter::end_array() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline();
  put(']');
}

[[gnu::always_inline]] inline char* JsonWriter::open_member(const JsonKey& key, std::size_t value_room) {
  // The common case in one go (indented): `,` newline indent `"name": ` (status writes ~45 members an
  // entry), with fixed-size copies: the indent from a row of spaces, the name from the
  // key's padded bytes (checked when the program was compiled). Deeper than
  // `indent_limit` levels, or with no room even in an empty buffer: not here.
  constexpr std::size_t indent_limit = 32;
  static constexpr char spaces[indent_limit + 1] = "                                ";
  const std::size_t indent = 2 * stack_.size();
  if (after_key_ || stack_.empty() || indent > indent_limit || one_line_) return nullptr;
  constexpr std::size_t most = 1 + 1 + indent_limit + 1 + JsonKey::max_size + 1 + 3;
  if (value_room > chunk_size - most) return nullptr;
  if (chunk_size - used_ < most + value_room) flush_buffer();
  char* at = buffer_.get() + used_;
  if (!stack_.back().empty) *at++ = ',';
  stack_.back().empty = false;
  *at++ = '\n';
  std::memcpy(at, spaces, indent_limit);
  at += indent;
  *at++ = '"';
  std::memcpy(at, key.padded(), JsonKey::max_size + 1);
  at += key.view().size();
  std::memcpy(at, "\": ", 3);
  return at + 3;
}

JsonWriter& JsonWriter::key(const JsonKey& key) {
  char* at = open_member(key, 0);
  if (at == nullptr) return key_text(key.view());
  used_ = static_cast<std::size_t>(at - buffer_.get());
  after_key_ = true;
  return *this;
}

void JsonWriter::member_string(const JsonKey& name, std::string_view text) {
  // A plain text of a usual size: key, quotes and text copied in one piece.
  constexpr std::size_t one_piece = 4096;
  char* at = text.size() <= one_piece && plain_ascii(text) ? open_member(name, text.size() + 2) : nullptr;
  if (at == nullptr) {
    key(name);
    string(text);
    return;
  }
  *at++ = '"';
  if (!text.empty()) std::memcpy(at, text.data(), text.size());
  at += text.size();
  *at++ = '"';
  used_ = static_cast<std::size_t>(at - buffer_.get());
}

void JsonWriter::member_null(const JsonKey& name) {
  char* at = open_member(name, 4);
  if (at == nullptr) {
    key(name);
    null();
    return;
  }
  std::memcpy(at, "null", 4);
  used_ = static_cast<std::size_t>(at + 4 - buffer_.get());
}

void JsonWriter::member_boolean(const JsonKey& name, bool value) {
  char* at = open_member(name, 5);
  if (at == nullptr) {
    key(name);
    boolean(value);
    return;
  }
  const std::string_view text = value ? std::string_view("true") : std::string_view("false");
  std::memcpy(at, text.data(), text.size());
  used_ = static_cast<std::size_t>(at + text.size() - buffer_.get());
}

void JsonWriter::member_integer(const JsonKey& name, std::int64_t value) {
  constexpr std::size_t digits = 20;  // "-9223372036854775808"
  char* at = open_member(name, digits);
  if (at == nullptr) {
    key(name);
    integer(value);
    return;
  }
  at = std::to_chars(at, at + digits, value).ptr;
  used_ = static_cast<std::size_t>(at - buffer_.get());
}

JsonWriter& JsonWriter::key_text(std::string_view name) {
  before_value();
  put_string(name);
  put(one_line_ ? std::string_view(":") : std::string_view(": "));
  after_key_ = true;
  return *this;
}

void JsonWriter::string(std::string_view text) {
  before_value();
  put_string(text);
}

void JsonWriter::optional_string(const std::optional<std::string>& text) {
  if (text) string(std::string_view(*text));
  else null();
}

void JsonWriter::boolean(bool value) {
  before_value();
  put(value ? std::string_view("true") : std::string_view("false"));
}

void JsonWriter::integer(std::int64_t value) {
  before_value();
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  put(std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

void JsonWriter::number_text(std::string_view json_number) {
  before_value();
  put(json_number);
}

void JsonWriter::null() {
  before_value();
  put("null");
}

void JsonWriter::raw_value(std::string_view json) {
  before_value();
  while (!json.empty() && (json.back() == '\n' || json.back() == ' ')) json.remove_suffix(1);
  put(json);
}

void JsonWriter::finish() {
  put('\n');
  flush_buffer();
  std::fflush(out_);
}

void write_schema(JsonWriter& json, std::string_view document) {
  json.key("schema").begin_object();
  json.key("name").string(document);
  json.key("version").integer(json_schema_version);
  json.end_object();
}

void write_argv(JsonWriter& json, const std::vector<std::string>& argv) {
  if (argv.empty()) {
    json.null();
    return;
  }
  json.begin_array();
  for (const std::string& word : argv) json.string(word);
  json.end_array();
}

}  // namespace apnea_locks::cli
