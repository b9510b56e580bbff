// The one time and age formatter: ages, UTC times and durations as the command line prints
// them. Pure: no system calls.
#pragma once

#include <cstdint>
#include <cstddef>
#include <string>
#include <string_view>

namespace apnea_locks::cli {

/// Nanoseconds in a second, a minute, an hour, a day.
inline constexpr std::int64_t ns_per_second = 1'000'000'000;
inline constexpr std::int64_t ns_per_minute = 60 * ns_per_second;
inline constexpr std::int64_t ns_per_hour = 60 * ns_per_minute;
inline constexpr std::int64_t ns_per_day = 24 * ns_per_hour;

/// A compact age: "45s", "3m05s", "2h03m", "4d02h" (a negative age shows as "0s").
std::string format_age(std::int64_t ns);

/// UTC time as "2024-05-01T12:34:56Z" (with ".123" milliseconds when `millis`).
std::string format_time(std::int64_t ns_since_epoch, bool millis = false);

/// format_time's text in a buffer of its own (no allocation: status writes two or three
/// an entry).
struct TimeText {
  char text[40];
  std::size_t size = 0;
  /// The text.
  operator std::string_view() const { return {text, size}; }  // NOLINT: implicit on purpose
};

/// format_time, into a TimeText.
TimeText format_time_text(std::int64_t ns_since_epoch, bool millis = false);

/// A duration in its largest exact unit: "0s", "90s", "5m", "2h", "30d"; below a second,
/// or not a whole number of seconds, in milliseconds: "250ms", "1500ms".
std::string duration_text(std::int64_t ns);

}  // namespace apnea_locks::cli
