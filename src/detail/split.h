// Splitting text at a separator, for the core and src/cli: the one loop behind every
// comma-, slash-, space- or newline-separated list that is taken apart.
// Not part of the library's interface (not installed).
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string_view>

namespace apnea_locks::detail {

/// The parts of a text between separators, in order, for a range-for (see split_parts).
class SplitParts {
 public:
  /// Steps from one part to the next.
  class iterator {
   public:
    /// The first part of `text`.
    iterator(std::string_view text, char separator) : text_(text), separator_(separator) {
      find_end();
    }
    /// The current part (a view into the text).
    std::string_view operator*() const { return text_.substr(at_, end_ - at_); }
    /// Moves to the part after the next separator, or past the end after the last part.
    iterator& operator++() {
      at_ = end_ + 1;
      if (at_ <= text_.size()) find_end();
      return *this;
    }
    /// True once the last part has been passed.
    bool operator==(std::default_sentinel_t) const { return at_ > text_.size(); }

   private:
    void find_end() { end_ = std::min(text_.find(separator_, at_), text_.size()); }

    std::string_view text_;
    char separator_;
    std::size_t at_ = 0;   ///< where the current part starts
    std::size_t end_ = 0;  ///< where it ends: its separator, or the end of the text
  };

  /// The parts of `text` between `separator`s.
  SplitParts(std::string_view text, char separator) : text_(text), separator_(separator) {}
  /// The first part.
  iterator begin() const { return iterator(text_, separator_); }
  /// Past the last part.
  std::default_sentinel_t end() const { return {}; }

 private:
  std::string_view text_;
  char separator_;
};

/// Every part of `text` between `separator`s, empty ones kept: "a,,b" gives "a", "", "b";
/// "a," gives "a", ""; "" gives one empty part. The parts view `text`, which must outlive them.
inline SplitParts split_parts(std::string_view text, char separator) {
  return SplitParts(text, separator);
}

}  // namespace apnea_locks::detail
