#include "cli/nagios.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <limits>

#include "cli/text.h"

namespace apnea_locks::cli {

namespace {

constexpr std::size_t max_range_length = 64;
constexpr std::size_t max_digits = 12;
constexpr double infinity = std::numeric_limits<double>::infinity();

std::string number_text(double value) { return fmt::format("{}", static_cast<std::int64_t>(value)); }

/// One endpoint: `-?[0-9]{1,12}` plus, for durations, an optional s/m/h/d.
std::expected<double, std::string> parse_number(std::string_view text, RangeUnit unit) {
  std::string_view digits = text;
  const bool negative = digits.starts_with('-');
  if (negative) digits.remove_prefix(1);
  double scale = 1;
  if (unit == RangeUnit::seconds && !digits.empty()) {
    switch (digits.back()) {
      case 's': scale = 1; digits.remove_suffix(1); break;
      case 'm': scale = 60; digits.remove_suffix(1); break;
      case 'h': scale = 3600; digits.remove_suffix(1); break;
      case 'd': scale = 86400; digits.remove_suffix(1); break;
      default: break;
    }
  }
  if (digits.empty() || digits.size() > max_digits)
    return std::unexpected(fmt::format("'{}' is not a whole number{}", text,
                                       unit == RangeUnit::seconds ? " of seconds (N[s|m|h|d])" : ""));
  double value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return std::unexpected(fmt::format("'{}' is not a whole number{}", text,
                                         unit == RangeUnit::seconds ? " of seconds (N[s|m|h|d])" : ""));
    value = value * 10 + (c - '0');
  }
  value *= scale;
  return negative ? -value : value;
}

}  // namespace

bool NagiosRange::alerts(double value) const {
  const double low = start_infinite ? -infinity : start;
  const double high = end_infinite ? infinity : end;
  const bool within = value >= low && value <= high;
  return inside ? within : !within;
}

std::string NagiosRange::text() const {
  std::string out = inside ? "@" : "";
  if (start_infinite) out += "~:";
  else if (start != 0 || end_infinite) out += number_text(start) + ":";
  if (!end_infinite) out += number_text(end);
  return out;
}

std::expected<NagiosRange, std::string> parse_range(std::string_view text, RangeUnit unit) {
  auto bad = [&](std::string_view why) {
    return std::unexpected(fmt::format("range '{}': {}", text, why));
  };
  if (text.empty()) return bad("empty");
  if (text.size() > max_range_length) return bad("longer than 64 characters");
  NagiosRange range;
  std::string_view rest = text;
  if (rest.starts_with('@')) {
    range.inside = true;
    rest.remove_prefix(1);
  }
  const auto colon = rest.find(':');
  if (colon == std::string_view::npos) {
    auto end = parse_number(rest, unit);
    if (!end) return bad(end.error());
    range.end = *end;
  } else {
    const std::string_view start = rest.substr(0, colon);
    const std::string_view end = rest.substr(colon + 1);
    if (start == "~") {
      range.start_infinite = true;
    } else {
      auto value = parse_number(start, unit);
      if (!value) return bad(start.empty() ? "nothing before ':' (use ~ for minus infinity)" : value.error());
      range.start = *value;
    }
    if (end.empty()) {
      range.end_infinite = true;
    } else {
      auto value = parse_number(end, unit);
      if (!value) return bad(value.error());
      range.end = *value;
    }
  }
  if (!range.start_infinite && !range.end_infinite && range.start > range.end)
    return bad("its start is above its end");
  return range;
}

bool consistent(const NagiosRange& warning, const NagiosRange& critical) {
  const double ws = warning.start_infinite ? -infinity : warning.start;
  const double we = warning.end_infinite ? infinity : warning.end;
  const double cs = critical.start_infinite ? -infinity : critical.start;
  const double ce = critical.end_infinite ? infinity : critical.end;
  if (!warning.inside && !critical.inside) return ws >= cs && we <= ce;  // OK-ranges nest
  if (warning.inside && critical.inside) return cs >= ws && ce <= we;    // alert ranges nest
  if (critical.inside) return ce < ws || cs > we;  // critical inside, warning outside: disjoint
  // Critical outside [cs, ce], warning inside [ws, we]: both tails must lie in [ws, we].
  const bool low_tail = critical.start_infinite || (warning.start_infinite && cs <= we);
  const bool high_tail = critical.end_infinite || (warning.end_infinite && ce >= ws);
  return low_tail && high_tail;
}

std::expected<Threshold, std::string> parse_threshold(std::string_view text,
                                                      std::string_view default_metric,
                                                      const std::vector<std::string>& metrics,
                                                      const std::vector<std::string>& seconds_metrics) {
  Threshold threshold;
  threshold.metric = std::string(default_metric);
  std::string_view range = text;
  if (const auto eq = text.find('='); eq != std::string_view::npos) {
    threshold.metric = std::string(text.substr(0, eq));
    range = text.substr(eq + 1);
    bool known = false;
    for (const std::string& metric : metrics) known = known || metric == threshold.metric;
    if (!known) {
      std::string names;
      for (const std::string& metric : metrics) names += (names.empty() ? "" : ", ") + metric;
      return std::unexpected(fmt::format("'{}': unknown metric '{}' (one of {})", text,
                                         threshold.metric.substr(0, 32), names));
    }
  }
  bool seconds = false;
  for (const std::string& metric : seconds_metrics) seconds = seconds || metric == threshold.metric;
  auto parsed = parse_range(range, seconds ? RangeUnit::seconds : RangeUnit::count);
  if (!parsed) return std::unexpected(parsed.error());
  threshold.range = *parsed;
  return threshold;
}

std::pair<int, std::vector<std::string>> take_verbosity(const std::vector<std::string>& args) {
  int level = 0;
  std::vector<std::string> rest;
  bool options = true;
  for (const std::string& word : args) {
    if (options && word == "--") options = false;
    if (options && word == "--verbose") {
      ++level;
      continue;
    }
    if (options && word.size() >= 2 && word[0] == '-' && word.find_first_not_of('v', 1) == std::string::npos) {
      level += static_cast<int>(word.size() - 1);
      continue;
    }
    rest.push_back(word);
  }
  return {std::min(level, 3), std::move(rest)};
}

std::string nagios_text(std::string_view text) {
  const std::string escaped = printable(text);
  std::string out;
  out.reserve(escaped.size());
  for (char c : escaped) {
    if (c == '|') out += "\\x7c";
    else out += c;
  }
  return out;
}

namespace {
// What the SIGALRM handler writes and how it exits; set before the timer is armed.
std::string timeout_line;
int timeout_status = 3;

extern "C" void on_timeout(int) {
  const char* data = timeout_line.data();
  std::size_t left = timeout_line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDOUT_FILENO, data, left);
    if (n <= 0) break;
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  ::_exit(timeout_status);
}
}  // namespace

void arm_timeout(unsigned seconds, std::string line, int status) {
  if (seconds == 0) {
    ::alarm(0);
    return;
  }
  ::alarm(0);
  timeout_line = std::move(line);
  timeout_status = status;
  struct sigaction action {};
  action.sa_handler = on_timeout;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGALRM, &action, nullptr);
  sigset_t alarm_only;
  sigemptyset(&alarm_only);
  sigaddset(&alarm_only, SIGALRM);
  ::sigprocmask(SIG_UNBLOCK, &alarm_only, nullptr);
  ::alarm(seconds);
}

}  // namespace apnea_locks::cli
