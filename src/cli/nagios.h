// The Nagios plugin conventions `check` follows: threshold ranges, their consistency, the
// perfdata form, the escaper of its output and the -t timeout. Pure, except arm_timeout (a
// signal and a timer).
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace apnea_locks::cli {

/// A Nagios threshold range (Monitoring Plugins Development Guidelines): `N` is 0..N,
/// `N:` is N..infinity, `~:N` is -infinity..N, `N:M` is N..M; a value outside it alerts,
/// or, with a leading `@`, a value inside it (inclusive).
struct NagiosRange {
  double start = 0;
  double end = 0;
  bool start_infinite = false;  ///< `~`
  bool end_infinite = false;    ///< nothing after `:`
  bool inside = false;          ///< `@`: alert inside the range

  /// True when `value` alerts.
  bool alerts(double value) const;
  /// The range as perfdata and the status line write it, in plain numbers ("@60:3600").
  std::string text() const;
};

/// What a range's numbers are.
enum class RangeUnit {
  count,    ///< plain integers
  seconds,  ///< integers with an optional s, m, h or d suffix (a bare number is seconds)
};

/// Parses `text` as a range (bounded: at most 64 characters, each number at most 12 digits,
/// integers only, an optional leading `-`); the message names the problem and the text.
std::expected<NagiosRange, std::string> parse_range(std::string_view text, RangeUnit unit);

/// True when every value that `critical` alerts on is also one `warning` alerts on: a
/// critical range narrower than the warning one (CRITICAL before WARNING) is inconsistent.
bool consistent(const NagiosRange& warning, const NagiosRange& critical);

/// One threshold option value: `RANGE` (for `default_metric`) or `METRIC=RANGE`.
struct Threshold {
  std::string metric;
  NagiosRange range;
};

/// Parses a -w/-c value. `metrics` lists the names allowed before `=`; `seconds_metrics`
/// those whose numbers are durations. An unknown metric or a bad range is a message.
std::expected<Threshold, std::string> parse_threshold(std::string_view text,
                                                      std::string_view default_metric,
                                                      const std::vector<std::string>& metrics,
                                                      const std::vector<std::string>& seconds_metrics);

/// The number of -v/--verbose words (`-v`, `-vv`, `-vvv`, `--verbose`) before any `--`,
/// at most 3, and the arguments without them.
std::pair<int, std::vector<std::string>> take_verbosity(const std::vector<std::string>& args);

/// Text for a plugin's output, status line or long output (PROTOCOL.md section 10): the
/// text escaper's (printable), and every `|` as `\x7c`, in its notation: Nagios takes what
/// follows the first `|` as perfdata. The one escaper of check's output.
std::string nagios_text(std::string_view text);

/// After `seconds`, writes `line` (prepared now) to standard output and ends the process
/// with `status`, whatever it is doing (SIGALRM; async-signal-safe). `seconds` 0 disarms.
void arm_timeout(unsigned seconds, std::string line, int status);

}  // namespace apnea_locks::cli
