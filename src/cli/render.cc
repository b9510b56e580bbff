#include "cli/render.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "apnea_locks/owner.h"

namespace apnea_locks::cli {

std::string json_string(std::string_view text) {
  const std::string valid = utf8_with_replacement(text);
  std::string out;
  out.reserve(valid.size() + 2);
  out += '"';
  for (char c : valid) {
    const auto byte = static_cast<unsigned char>(c);
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
  return out;
}

void JsonWriter::newline() {
  std::fputc('\n', out_);
  for (std::size_t i = 0; i < stack_.size(); ++i) std::fputs("  ", out_);
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) return;
  if (!stack_.back().empty) std::fputc(',', out_);
  stack_.back().empty = false;
  newline();
}

void JsonWriter::begin_object() {
  before_value();
  std::fputc('{', out_);
  stack_.push_back({true, true});
}

void JsonWriter::end_object() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline();
  std::fputc('}', out_);
}

void JsonWriter::begin_array() {
  before_value();
  std::fputc('[', out_);
  stack_.push_back({false, true});
}

void JsonWriter::end_array() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline();
  std::fputc(']', out_);
}

JsonWriter& JsonWriter::key(std::string_view name) {
  before_value();
  fmt::print(out_, "{}: ", json_string(name));
  after_key_ = true;
  return *this;
}

void JsonWriter::string(std::string_view text) {
  before_value();
  std::fputs(json_string(text).c_str(), out_);
}

void JsonWriter::optional_string(const std::optional<std::string>& text) {
  if (text) string(std::string_view(*text));
  else null();
}

void JsonWriter::boolean(bool value) {
  before_value();
  std::fputs(value ? "true" : "false", out_);
}

void JsonWriter::integer(std::int64_t value) {
  before_value();
  fmt::print(out_, "{}", value);
}

void JsonWriter::number_text(std::string_view json_number) {
  before_value();
  std::fwrite(json_number.data(), 1, json_number.size(), out_);
}

void JsonWriter::null() {
  before_value();
  std::fputs("null", out_);
}

void JsonWriter::finish() {
  std::fputc('\n', out_);
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
  const std::string valid = utf8_with_replacement(text);
  std::string out;
  out.reserve(valid.size());
  for (char c : valid) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) out += fmt::format("\\x{:02x}", byte);
    else out += c;
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
  std::tm tm{};
  const auto t = static_cast<std::time_t>(seconds);
  ::gmtime_r(&t, &tm);
  if (millis) return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", tm, rest / 1'000'000);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", tm);
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
