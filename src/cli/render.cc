#include "cli/render.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "apnea_locks/owner.h"

namespace apnea_locks::cli {

namespace {

/// True when `text` can stand between quotes as it is: printable ASCII without `"` or `\`.
/// Nearly every string status writes (names, paths, tokens, reasons) is like this; status
/// checks some 800 bytes per entry, so 16 at a time (GCC/Clang vector extensions).
bool plain_ascii(std::string_view text) {
  using bytes16 = unsigned char __attribute__((vector_size(16)));
  auto plain16 = [](const char* at) {
    bytes16 v;
    std::memcpy(&v, at, 16);
    const auto bad = (v < 0x20) | (v >= 0x7f) | (v == '"') | (v == '\\');
    std::uint64_t halves[2];
    std::memcpy(halves, &bad, 16);
    return (halves[0] | halves[1]) == 0;
  };
  const std::size_t n = text.size();
  if (n >= 16) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
      if (!plain16(text.data() + i)) return false;
    return i == n || plain16(text.data() + n - 16);  // the rest, overlapping
  }
  char padded[16];  // short (most keys): padded with a plain byte, checked the same way
  std::memset(padded, 'a', sizeof padded);
  if (n > 0) std::memcpy(padded, text.data(), n);  // (an empty view's data may be null)
  return plain16(padded);
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

std::string json_safe(std::string_view serialized) {
  const std::string valid = utf8_with_replacement(serialized);
  std::string out;
  out.reserve(valid.size());
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const auto byte = static_cast<unsigned char>(valid[i]);
    if (byte == 0xC2 && i + 1 < valid.size() && static_cast<unsigned char>(valid[i + 1]) < 0xA0)
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(valid[++i]));
    else if (byte == 0x7f)
      out += "\\u007f";
    else
      out += valid[i];
  }
  return out;
}

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_json_string(out, text);
  return out;
}

JsonWriter::JsonWriter(std::FILE* out) : out_(out), buffer_(new char[chunk_size]) {}

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
  put('"');
  put(text);
  put('"');
}

void JsonWriter::newline() {
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

JsonWriter& JsonWriter::key(std::string_view name) {
  // The common case in one go: `,` newline indent `"name": ` (status writes ~35 keys/entry).
  const std::size_t indent = 2 * stack_.size();
  const std::size_t size = indent + name.size() + 6;
  if (after_key_ || stack_.empty() || size > chunk_size || !plain_ascii(name)) {
    before_value();
    put_string(name);
    put(": ");
    after_key_ = true;
    return *this;
  }
  if (chunk_size - used_ < size) flush_buffer();
  char* at = buffer_.get() + used_;
  if (!stack_.back().empty) *at++ = ',';
  stack_.back().empty = false;
  *at++ = '\n';
  std::memset(at, ' ', indent);
  at += indent;
  *at++ = '"';
  if (!name.empty()) std::memcpy(at, name.data(), name.size());
  at += name.size();
  *at++ = '"';
  *at++ = ':';
  *at++ = ' ';
  used_ = static_cast<std::size_t>(at - buffer_.get());
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

void JsonWriter::finish() {
  put('\n');
  flush_buffer();
  std::fflush(out_);
}

void Table::add_row(std::vector<std::string> cells, std::string_view colour) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
  colours_.emplace_back(colour);
}

void Table::print(std::FILE* out, bool headings) const {
  std::vector<std::size_t> widths(columns_.size(), 0);
  if (headings)
    for (std::size_t i = 0; i < columns_.size(); ++i) widths[i] = display_width(columns_[i].header);
  for (const auto& row : rows_)
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  auto line = [&](const std::vector<std::string>& cells, std::string_view colour) {
    std::string text;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::size_t pad = widths[i] - display_width(cells[i]);
      const bool last = i + 1 == cells.size();
      if (columns_[i].right_aligned) text.append(pad, ' ');
      text += cells[i];
      if (!columns_[i].right_aligned && !last) text.append(pad, ' ');
      if (!last) text += ' ';
    }
    if (colour.empty()) fmt::print(out, "{}\n", text);
    else fmt::print(out, "\x1b[{}m{}\x1b[0m\n", colour, text);
  };
  if (headings) {
    std::vector<std::string> header;
    for (const auto& column : columns_) header.push_back(column.header);
    line(header, {});
  }
  for (std::size_t r = 0; r < rows_.size(); ++r) line(rows_[r], colours_[r]);
}

std::string raw_cell(std::string_view text) {
  if (text.empty()) return "-";
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f || c == '\\') out += fmt::format("\\x{:02x}", byte);
    else out += c;
  }
  return out;
}

void print_raw_line(std::FILE* out, const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) line += ' ';
    line += raw_cell(cells[i]);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), out);
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if (byte < 0x20 || byte == 0x7f) out += fmt::format("\\x{:02x}", byte);
      else out += text[i];
      ++i;
      continue;
    }
    // A valid UTF-8 sequence is kept, but C1 controls (U+0080..U+009F) are escaped; every
    // byte of an invalid sequence becomes a visible \xNN.
    const Utf8Step step = utf8_step(text.substr(i));
    if (!step.valid) {
      out += fmt::format("\\x{:02x}", byte);
      ++i;
      continue;
    }
    const std::size_t length = step.length;
    if (byte == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0)
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));
    else
      out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

std::size_t display_width(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string shorten(std::string_view text, std::size_t width) {
  if (display_width(text) <= width) return std::string(text);
  const std::size_t keep = width > 3 ? width - 3 : 0;
  std::size_t points = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    if ((static_cast<unsigned char>(text[at]) & 0xC0) != 0x80) {
      if (points == keep) break;
      ++points;
    }
    ++at;
  }
  return std::string(text.substr(0, at)) + "...";
}

std::string format_age(std::int64_t ns) {
  const std::int64_t seconds = std::max<std::int64_t>(0, ns / 1'000'000'000);
  if (seconds < 60) return fmt::format("{}s", seconds);
  if (seconds < 3600) return fmt::format("{}m{:02}s", seconds / 60, seconds % 60);
  if (seconds < 86400) return fmt::format("{}h{:02}m", seconds / 3600, seconds % 3600 / 60);
  return fmt::format("{}d{:02}h", seconds / 86400, seconds % 86400 / 3600);
}

std::string format_time(std::int64_t ns_since_epoch, bool millis) {
  std::int64_t seconds = ns_since_epoch / 1'000'000'000;
  std::int64_t rest = ns_since_epoch % 1'000'000'000;
  if (rest < 0) {
    rest += 1'000'000'000;
    --seconds;
  }
  // Status writes two or three times per entry: the civil date by hand (Howard Hinnant's
  // days-to-civil), as gmtime_r takes a lock and fmt's chrono formatting is slow.
  std::int64_t days = seconds / 86'400, second_of_day = seconds % 86'400;
  if (second_of_day < 0) {
    second_of_day += 86'400;
    --days;
  }
  days += 719'468;
  const std::int64_t era = (days >= 0 ? days : days - 146'096) / 146'097;
  const std::int64_t day_of_era = days - era * 146'097;
  const std::int64_t year_of_era =
      (day_of_era - day_of_era / 1'460 + day_of_era / 36'524 - day_of_era / 146'096) / 365;
  const std::int64_t day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const std::int64_t shifted_month = (5 * day_of_year + 2) / 153;
  const std::int64_t day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
  const std::int64_t month = shifted_month < 10 ? shifted_month + 3 : shifted_month - 9;
  const std::int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  if (year < 0 || year > 9999) {  // rare: let fmt print the year (sign, more digits)
    std::tm tm{};
    const auto t = static_cast<std::time_t>(seconds);
    ::gmtime_r(&t, &tm);
    if (millis) return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", tm, rest / 1'000'000);
    return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", tm);
  }
  char text[] = "0000-00-00T00:00:00.000Z";
  auto digits = [&](std::size_t at, std::int64_t value, int width) {
    for (int i = width - 1; i >= 0; --i, value /= 10)
      text[at + static_cast<std::size_t>(i)] = static_cast<char>('0' + value % 10);
  };
  digits(0, year, 4);
  digits(5, month, 2);
  digits(8, day, 2);
  digits(11, second_of_day / 3'600, 2);
  digits(14, second_of_day / 60 % 60, 2);
  digits(17, second_of_day % 60, 2);
  if (!millis) return std::string(text, 19) + "Z";
  digits(20, static_cast<int>(rest / 1'000'000), 3);
  return std::string(text, 24);
}

std::string escape_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (byte < 0x20 || byte >= 0x7f) out += fmt::format("\\x{:02x}", byte);
        else out += c;
    }
  }
  return out;
}

std::string format_mode(std::uint32_t mode) { return fmt::format("{:04o}", mode); }

}  // namespace apnea_locks::cli
