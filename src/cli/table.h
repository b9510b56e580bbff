// Tables for a terminal: aligned columns fitted to a width (free-text columns shortened
// with an ellipsis, low-priority columns hidden, never a line wider than the width), and
// util-linux raw lines. No system calls; output goes to a FILE*.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/text.h"

namespace apnea_locks::cli {

/// One column of a table.
struct TableColumn {
  std::string header;
  bool right_aligned = false;
  /// Free text (a command line, a path): shortened with the ellipsis, down to this many
  /// columns, when the table is wider than its width. 0: never shortened.
  std::size_t min_width = 0;
  /// Free-text columns shrink in this order: rank 1 first, each down to its min_width
  /// before the next one shrinks.
  int shrink_rank = 0;
  Cut cut = Cut::end;  ///< where a shortened cell is cut
  /// Hidden when the table does not fit even with every free-text column at its minimum:
  /// rank 1 first, then 2, ... 0: never hidden.
  int hide_rank = 0;
};

/// An aligned text table: rows are collected, then laid out with each column as wide as
/// its widest cell, fitted to a width. A row may carry an ANSI colour for the whole line.
class Table {
 public:
  /// A table with these columns, in order.
  explicit Table(std::vector<TableColumn> columns) : columns_(std::move(columns)) {}

  /// Adds a row (one cell per column, already escaped); `colour` is an SGR code or empty.
  void add_row(std::vector<std::string> cells, std::string_view colour = {});

  /// The lines (without newlines), header first with `headings`, fitted to `width`
  /// columns (0: unlimited): while the table is too wide, the free-text columns shrink
  /// (by shrink_rank, each to its min_width), and when that is not enough the column with
  /// the lowest hide_rank is hidden (and the shrinking starts again). A line still
  /// too wide is cut at `width` with the ellipsis. Colour escapes do not count.
  std::vector<std::string> lines(bool headings, std::size_t width, std::string_view ellipsis,
                                 bool colour) const;
  /// Writes lines() with a newline after each.
  void print(std::FILE* out, bool headings, std::size_t width = 0, std::string_view ellipsis = "...",
             bool colour = true) const;
  /// The headers of the columns the last lines()/print() hid, in table order.
  const std::vector<std::string>& hidden() const { return hidden_; }
  /// Number of rows added.
  std::size_t size() const { return rows_.size(); }

 private:
  std::vector<TableColumn> columns_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::string> colours_;
  mutable std::vector<std::string> hidden_;
};

/// A cell for raw output: space, backslash and control characters as `\xNN` (util-linux
/// style) so a line splits on spaces; an empty cell is nothing, as in lslocks --raw.
std::string raw_cell(std::string_view text);

/// Writes one raw line: cells separated by one space, each escaped by raw_cell.
void print_raw_line(std::FILE* out, const std::vector<std::string>& cells);

}  // namespace apnea_locks::cli
