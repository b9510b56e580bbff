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

namespace {

/// How a table is laid out: each column's width, which are shown, and whether a line
/// still too wide is cut at the width.
struct Layout {
  std::vector<std::size_t> widths;
  std::vector<bool> shown;
  bool cut_lines = false;
  std::size_t last = 0;  ///< the last column shown: not padded on the right

  /// The width of a line: the shown columns and a space between each two.
  std::size_t total() const {
    std::size_t sum = 0, count = 0;
    for (std::size_t i = 0; i < widths.size(); ++i)
      if (shown[i]) {
        sum += widths[i];
        ++count;
      }
    return count == 0 ? 0 : sum + count - 1;
  }
};

/// Each column's natural width (its widest cell, and its header with `headings`) and its
/// floor (the narrowest it may get).
struct Widths {
  std::vector<std::size_t> natural;
  std::vector<std::size_t> floor;
};

Widths widths_of(const std::vector<TableColumn>& columns,
                 const std::vector<std::vector<std::string>>& rows, bool headings) {
  const std::size_t n = columns.size();
  Widths out{std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t header = headings ? display_width(columns[i].header) : 0;
    out.natural[i] = header;
    for (const auto& row : rows) out.natural[i] = std::max(out.natural[i], display_width(row[i]));
    out.floor[i] = columns[i].min_width == 0
                       ? out.natural[i]
                       : std::min(out.natural[i], std::max(columns[i].min_width, header));
  }
  return out;
}

/// Fits the columns to `width` (0: unlimited): see Table::lines.
Layout fit(const std::vector<TableColumn>& columns, const Widths& widths, std::size_t width) {
  const std::size_t n = columns.size();
  Layout layout{widths.natural, std::vector<bool>(n, true), false, 0};
  // The free-text column shrunk last (the fix) keeps its width while a column can still
  // be hidden: it is what the operator came for.
  int last_rank = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (columns[i].min_width > 0) last_rank = std::max(last_rank, columns[i].shrink_rank);
  auto can_hide = [&] {
    for (std::size_t i = 0; i < n; ++i)
      if (layout.shown[i] && columns[i].hide_rank > 0) return true;
    return false;
  };
  while (width != 0 && layout.total() > width) {
    const bool spare_last = can_hide();
    auto floor_of = [&](std::size_t i) {
      return spare_last && columns[i].shrink_rank == last_rank ? layout.widths[i] : widths.floor[i];
    };
    std::size_t slack = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (layout.shown[i]) slack += layout.widths[i] - floor_of(i);
    if (layout.total() - slack <= width) {
      // Shrink the free-text columns in their order until it fits.
      while (layout.total() > width) {
        std::size_t next = n;
        for (std::size_t i = 0; i < n; ++i)
          if (layout.shown[i] && layout.widths[i] > floor_of(i) &&
              (next == n || columns[i].shrink_rank < columns[next].shrink_rank))
            next = i;
        const std::size_t excess = layout.total() - width;
        layout.widths[next] -= std::min(layout.widths[next] - floor_of(next), excess);
      }
      break;
    }
    std::size_t victim = n;
    for (std::size_t i = 0; i < n; ++i)
      if (layout.shown[i] && columns[i].hide_rank > 0 &&
          (victim == n || columns[i].hide_rank < columns[victim].hide_rank))
        victim = i;
    if (victim == n) {  // nothing left to hide: every free-text column at its floor
      layout.widths = widths.floor;
      layout.cut_lines = true;
      break;
    }
    layout.shown[victim] = false;
    layout.widths = widths.natural;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (layout.shown[i]) layout.last = i;
  return layout;
}

/// One line of the table laid out as `layout`: cells shortened to their column, padded and
/// separated by a space, the whole line in `sgr` when colour is on.
std::string layout_line(const std::vector<TableColumn>& columns, const Layout& layout,
                        const std::vector<std::string>& cells, std::string_view sgr,
                        std::size_t width, std::string_view ellipsis, bool colour) {
  std::string text;
  bool first = true;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (!layout.shown[i]) continue;
    if (!first) text += ' ';
    first = false;
    const std::size_t column_width = layout.widths[i];
    std::string cell = display_width(cells[i]) > column_width
                           ? shorten(cells[i], column_width, columns[i].cut, ellipsis)
                           : cells[i];
    const std::size_t pad = column_width - std::min(column_width, display_width(cell));
    if (columns[i].right_aligned) text.append(pad, ' ');
    text += cell;
    if (!columns[i].right_aligned && i != layout.last) text.append(pad, ' ');
  }
  if (layout.cut_lines && width != 0 && display_width(text) > width)
    text = shorten(text, width, Cut::end, ellipsis);
  if (!colour || sgr.empty()) return text;
  return fmt::format("\x1b[{}m{}\x1b[0m", sgr, text);
}

}  // namespace

std::vector<std::string> Table::lines(bool headings, std::size_t width, std::string_view ellipsis,
                                      bool colour) const {
  const Layout layout = fit(columns_, widths_of(columns_, rows_, headings), width);
  hidden_.clear();
  for (std::size_t i = 0; i < columns_.size(); ++i)
    if (!layout.shown[i]) hidden_.push_back(columns_[i].header);
  std::vector<std::string> out;
  out.reserve(rows_.size() + 1);
  if (headings) {
    std::vector<std::string> header;
    for (const auto& column : columns_) header.push_back(column.header);
    out.push_back(layout_line(columns_, layout, header, {}, width, ellipsis, colour));
  }
  for (std::size_t r = 0; r < rows_.size(); ++r)
    out.push_back(layout_line(columns_, layout, rows_[r], colours_[r], width, ellipsis, colour));
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
