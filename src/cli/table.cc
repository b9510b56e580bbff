#include "cli/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace apnea_locks::cli {

void Table::add_row(std::vector<std::string> cells, std::string_view colour) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
  colours_.emplace_back(colour);
}

std::vector<std::string> Table::lines(bool headings, std::size_t width, std::string_view ellipsis,
                                      bool colour) const {
  const std::size_t n = columns_.size();
  std::vector<std::size_t> natural(n, 0);
  std::vector<std::size_t> floor(n, 0);  // the narrowest a column may get
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t header = headings ? display_width(columns_[i].header) : 0;
    natural[i] = header;
    for (const auto& row : rows_) natural[i] = std::max(natural[i], display_width(row[i]));
    floor[i] = columns_[i].min_width == 0 ? natural[i]
                                          : std::min(natural[i], std::max(columns_[i].min_width, header));
  }
  std::vector<bool> shown(n, true);
  std::vector<std::size_t> widths = natural;
  auto total = [&] {
    std::size_t sum = 0, count = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (shown[i]) {
        sum += widths[i];
        ++count;
      }
    return count == 0 ? 0 : sum + count - 1;
  };
  // The free-text column shrunk last (the fix) keeps its width while a column can still
  // be hidden: it is what the operator came for.
  int last_rank = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (columns_[i].min_width > 0) last_rank = std::max(last_rank, columns_[i].shrink_rank);
  auto can_hide = [&] {
    for (std::size_t i = 0; i < n; ++i)
      if (shown[i] && columns_[i].hide_rank > 0) return true;
    return false;
  };
  bool cut_lines = false;
  while (width != 0 && total() > width) {
    const bool spare_last = can_hide();
    auto floor_of = [&](std::size_t i) {
      return spare_last && columns_[i].shrink_rank == last_rank ? widths[i] : floor[i];
    };
    std::size_t slack = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (shown[i]) slack += widths[i] - floor_of(i);
    if (total() - slack <= width) {
      // Shrink the free-text columns in their order until it fits.
      while (total() > width) {
        std::size_t next = n;
        for (std::size_t i = 0; i < n; ++i)
          if (shown[i] && widths[i] > floor_of(i) &&
              (next == n || columns_[i].shrink_rank < columns_[next].shrink_rank))
            next = i;
        widths[next] -= std::min(widths[next] - floor_of(next), total() - width);
      }
      break;
    }
    std::size_t victim = n;
    for (std::size_t i = 0; i < n; ++i)
      if (shown[i] && columns_[i].hide_rank > 0 &&
          (victim == n || columns_[i].hide_rank < columns_[victim].hide_rank))
        victim = i;
    if (victim == n) {  // nothing left to hide: every free-text column at its floor
      widths = floor;
      cut_lines = true;
      break;
    }
    shown[victim] = false;
    widths = natural;
  }
  hidden_.clear();
  for (std::size_t i = 0; i < n; ++i)
    if (!shown[i]) hidden_.push_back(columns_[i].header);

  std::size_t last = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (shown[i]) last = i;
  auto line = [&](const std::vector<std::string>& cells, std::string_view sgr) {
    std::string text;
    bool first = true;
    for (std::size_t i = 0; i < n; ++i) {
      if (!shown[i]) continue;
      if (!first) text += ' ';
      first = false;
      std::string cell = display_width(cells[i]) > widths[i]
                             ? shorten(cells[i], widths[i], columns_[i].cut, ellipsis)
                             : cells[i];
      const std::size_t pad = widths[i] - std::min(widths[i], display_width(cell));
      if (columns_[i].right_aligned) text.append(pad, ' ');
      text += cell;
      if (!columns_[i].right_aligned && i != last) text.append(pad, ' ');
    }
    if (cut_lines && width != 0 && display_width(text) > width) text = shorten(text, width, Cut::end, ellipsis);
    if (!colour || sgr.empty()) return text;
    return fmt::format("\x1b[{}m{}\x1b[0m", sgr, text);
  };
  std::vector<std::string> out;
  out.reserve(rows_.size() + 1);
  if (headings) {
    std::vector<std::string> header;
    for (const auto& column : columns_) header.push_back(column.header);
    out.push_back(line(header, {}));
  }
  for (std::size_t r = 0; r < rows_.size(); ++r) out.push_back(line(rows_[r], colours_[r]));
  return out;
}

void Table::print(std::FILE* out, bool headings, std::size_t width, std::string_view ellipsis,
                  bool colour) const {
  std::string text;
  for (const std::string& line : lines(headings, width, ellipsis, colour)) {
    text += line;
    text += '\n';
  }
  std::fwrite(text.data(), 1, text.size(), out);
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

}  // namespace apnea_locks::cli
