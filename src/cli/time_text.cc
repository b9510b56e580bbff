#include "cli/time_text.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <utility>

namespace apnea_locks::cli {

std::string format_age(std::int64_t ns) {
  const std::int64_t seconds = std::max<std::int64_t>(0, ns / 1'000'000'000);
  if (seconds < 60) return fmt::format("{}s", seconds);
  if (seconds < 3600) return fmt::format("{}m{:02}s", seconds / 60, seconds % 60);
  if (seconds < 86400) return fmt::format("{}h{:02}m", seconds / 3600, seconds % 3600 / 60);
  return fmt::format("{}d{:02}h", seconds / 86400, seconds % 86400 / 3600);
}

TimeText format_time_text(std::int64_t ns_since_epoch, bool millis) {
  TimeText out;
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
    const auto written =
        millis ? fmt::format_to_n(out.text, sizeof out.text, "{:%Y-%m-%dT%H:%M:%S}.{:03}Z", tm, rest / 1'000'000)
               : fmt::format_to_n(out.text, sizeof out.text, "{:%Y-%m-%dT%H:%M:%S}Z", tm);
    out.size = std::min(written.size, sizeof out.text);
    return out;
  }
  char* const text = out.text;
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
  text[4] = text[7] = '-';
  text[10] = 'T';
  text[13] = text[16] = ':';
  if (!millis) {
    text[19] = 'Z';
    out.size = 20;
    return out;
  }
  text[19] = '.';
  digits(20, static_cast<int>(rest / 1'000'000), 3);
  text[23] = 'Z';
  out.size = 24;
  return out;
}

std::string format_time(std::int64_t ns_since_epoch, bool millis) {
  return std::string(format_time_text(ns_since_epoch, millis));
}

std::string duration_text(std::int64_t ns) {
  if (ns % ns_per_second != 0) return fmt::format("{}ms", ns / 1'000'000);
  const std::int64_t seconds = ns / ns_per_second;
  if (seconds != 0) {
    for (const auto& [unit, size] : {std::pair{'d', 86400}, {'h', 3600}, {'m', 60}})
      if (seconds % size == 0) return fmt::format("{}{}", seconds / size, unit);
  }
  return fmt::format("{}s", seconds);
}

}  // namespace apnea_locks::cli
