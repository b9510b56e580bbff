#include "cli/all_users.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "cli/commands.h"
#include "cli/text.h"

namespace apnea_locks::cli {
namespace {

// The wire between a surveying child and the parent: frames of a type letter and byte
// fields, each count and size a native u64.
constexpr char entry_frame = 'r';    ///< an entry shown (RenderedEntry)
constexpr char report_frame = 'a';   ///< the rest of the report, sent last
constexpr char failure_frame = 'E';  ///< why the child could not survey (one line)

void put_u64(std::string& out, std::uint64_t value) {
  char bytes[8];
  std::memcpy(bytes, &value, sizeof bytes);
  out.append(bytes, sizeof bytes);
}

/// Reads a u64 at `at` of `in`; false when `in` ends first.
bool get_u64(const std::string& in, std::size_t& at, std::uint64_t& value) {
  if (in.size() - at < 8) return false;
  std::memcpy(&value, in.data() + at, 8);
  at += 8;
  return true;
}

/// One message from a surveying child: a type letter and its fields (any bytes).
struct Frame {
  char type = 0;
  std::vector<std::string> fields;
};

/// Sends one frame to the parent (a pipe); a parent that went away ends the child.
void send_frame(int fd, char type, const std::vector<std::string>& fields) {
  std::string out(1, type);
  put_u64(out, fields.size());
  for (const std::string& field : fields) {
    put_u64(out, field.size());
    out += field;
  }
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(exit_unsafe);  // the parent is gone: nobody reads the rest
    done += static_cast<std::size_t>(n);
  }
}

/// Decodes the frames of `in`; false when it ends in the middle of one.
bool decode_frames(const std::string& in, const std::function<void(Frame&)>& on_frame) {
  std::size_t at = 0;
  while (at < in.size()) {
    Frame frame;
    frame.type = in[at++];
    std::uint64_t count = 0;
    if (!get_u64(in, at, count)) return false;
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint64_t size = 0;
      if (!get_u64(in, at, size) || in.size() - at < size) return false;
      frame.fields.emplace_back(in, at, size);
      at += size;
    }
    on_frame(frame);
  }
  return true;
}

/// A frame's fields as they are written: text, numbers, flags and lists.
class FieldWriter {
 public:
  void text(std::string text) { out_.push_back(std::move(text)); }
  void number(std::int64_t value) { out_.push_back(fmt::format("{}", value)); }
  void size(std::size_t value) { out_.push_back(fmt::format("{}", value)); }
  void flag(bool value) { out_.push_back(value ? "1" : "0"); }
  void optional(const std::optional<std::string>& text) {
    flag(text.has_value());
    if (text) out_.push_back(*text);
  }
  void list(const std::vector<std::string>& texts) {
    size(texts.size());
    out_.insert(out_.end(), texts.begin(), texts.end());
  }
  std::vector<std::string>& fields() { return out_; }

 private:
  std::vector<std::string> out_;
};

/// Reads the fields FieldWriter wrote, in the same order; past the end, empty and zero.
class FieldReader {
 public:
  explicit FieldReader(std::vector<std::string>& in) : in_(in) {}
  std::string text() { return at_ < in_.size() ? std::move(in_[at_++]) : std::string(); }
  std::int64_t number() {
    const std::string digits = text();
    const bool negative = !digits.empty() && digits[0] == '-';
    std::int64_t value = 0;
    for (char c : std::string_view(digits).substr(negative ? 1 : 0)) value = value * 10 + (c - '0');
    return negative ? -value : value;
  }
  std::size_t size() { return static_cast<std::size_t>(number()); }
  bool flag() { return text() == "1"; }
  std::optional<std::string> optional() {
    if (!flag()) return std::nullopt;
    return text();
  }
  std::vector<std::string> list() {
    std::vector<std::string> out(size());
    for (std::string& text : out) text = this->text();
    return out;
  }

 private:
  std::vector<std::string>& in_;
  std::size_t at_ = 0;
};

void write_order(FieldWriter& out, const EntryOrder& order) {
  out.number(std::get<0>(order));
  out.number(std::get<1>(order));
  out.number(std::get<2>(order));
  out.text(std::get<3>(order));
}

EntryOrder read_order(FieldReader& in) {
  const int a = static_cast<int>(in.number());
  const int b = static_cast<int>(in.number());
  const int c = static_cast<int>(in.number());
  return EntryOrder{a, b, c, in.text()};
}

void write_entry(FieldWriter& out, const RenderedEntry& entry) {
  write_order(out, entry.order);
  out.text(entry.colour);
  out.list(entry.cells);
}

RenderedEntry read_entry(FieldReader& in) {
  RenderedEntry entry;
  entry.order = read_order(in);
  entry.colour = in.text();
  entry.cells = in.list();
  return entry;
}

template <typename Map>
void write_counts(FieldWriter& out, const Map& counts) {
  out.size(counts.size());
  for (const auto& [name, count] : counts) {
    out.text(name);
    out.size(count);
  }
}

template <typename Map>
void read_counts(FieldReader& in, Map& counts) {
  for (std::size_t i = 0, n = in.size(); i < n; ++i) {
    std::string name = in.text();
    counts[std::move(name)] = in.size();
  }
}

void write_next(FieldWriter& out, const NextStep& x) {
  write_order(out, x.order);
  for (const std::string* text :
       {&x.name, &x.path, &x.description, &x.state, &x.reason, &x.fix, &x.next_step, &x.why})
    out.text(*text);
  out.list(x.fix_argv);
}

NextStep read_next(FieldReader& in) {
  NextStep x;
  x.order = read_order(in);
  for (std::string* text :
       {&x.name, &x.path, &x.description, &x.state, &x.reason, &x.fix, &x.next_step, &x.why})
    *text = in.text();
  x.fix_argv = in.list();
  return x;
}

void write_summary(FieldWriter& out, const AreaSummary& s) {
  for (std::size_t count : {s.scanned, s.shown, s.attention, s.locks, s.live, s.stale, s.malformed,
                            s.debris, s.leftover_guards})
    out.size(count);
  for (const auto* time : {&s.oldest_lock_age_ns, &s.oldest_lock_mtime_ns})
    out.optional(*time ? std::optional(fmt::format("{}", **time)) : std::nullopt);
  write_counts(out, s.states);
  write_counts(out, s.roles);
  out.size(s.classes.size());
  for (const auto& [key, count] : s.classes) {
    out.text(std::get<0>(key));
    out.text(std::get<1>(key));
    out.text(std::get<2>(key));
    out.size(count);
  }
  out.flag(s.next.has_value());
  if (s.next) write_next(out, *s.next);
}

AreaSummary read_summary(FieldReader& in) {
  AreaSummary s;
  for (std::size_t* count : {&s.scanned, &s.shown, &s.attention, &s.locks, &s.live, &s.stale,
                             &s.malformed, &s.debris, &s.leftover_guards})
    *count = in.size();
  for (auto* time : {&s.oldest_lock_age_ns, &s.oldest_lock_mtime_ns})
    if (in.flag()) *time = in.number();
  read_counts(in, s.states);
  read_counts(in, s.roles);
  for (std::size_t i = 0, n = in.size(); i < n; ++i) {
    std::string kind = in.text();
    std::string role = in.text();
    std::string state = in.text();
    s.classes[EntryClass{std::move(kind), std::move(role), std::move(state)}] = in.size();
  }
  if (in.flag()) s.next = read_next(in);
  return s;
}

void write_findings(FieldWriter& out, const CheckFindings& f) {
  for (std::size_t count :
       {f.stale_attention, f.blocking_guards, f.old_locks_warning, f.old_locks_critical})
    out.size(count);
  out.list(f.critical_details);
  out.list(f.details);
  out.list(f.fine);
}

CheckFindings read_findings(FieldReader& in) {
  CheckFindings f;
  for (std::size_t* count :
       {&f.stale_attention, &f.blocking_guards, &f.old_locks_warning, &f.old_locks_critical})
    *count = in.size();
  f.critical_details = in.list();
  f.details = in.list();
  f.fine = in.list();
  return f;
}

/// The report but its entries, as the fields of the child's last frame.
std::vector<std::string> report_fields(const AccountReport& report) {
  FieldWriter out;
  out.optional(report.check);
  out.text(report.message);
  out.optional(report.error);
  out.flag(report.area_safe);
  out.flag(report.scrape_success);
  out.flag(report.summary.has_value());
  if (report.summary) write_summary(out, *report.summary);
  out.number(report.status);
  write_findings(out, report.findings);
  return std::move(out.fields());
}

/// Reads report_fields into `report` (whose entries arrived before).
void read_report(FieldReader& in, AccountReport& report) {
  report.check = in.optional();
  report.message = in.text();
  report.error = in.optional();
  report.area_safe = in.flag();
  report.scrape_success = in.flag();
  if (in.flag()) report.summary = read_summary(in);
  report.status = static_cast<int>(in.number());
  report.findings = read_findings(in);
}

/// In the child: becomes `account` for good, runs `survey` streaming the entries it shows,
/// sends its report, and leaves with _exit (nothing of the parent's, such as its stdout
/// buffer, is flushed twice).
[[noreturn]] void run_survey_child(System& system, const Account& account,
                                   const AccountSurvey& survey, int fd) {
  if (account.uid != system.uid()) {
    if (auto dropped = system.become(account); !dropped) {
      send_frame(fd, failure_frame, {fmt::format("cannot become {}: {}", printable(account.name),
                                                 errno_text(dropped.error()))});
      ::_exit(exit_unsafe);
    }
  }
  try {
    const AccountReport report = survey([fd](const RenderedEntry& entry) {
      FieldWriter out;
      write_entry(out, entry);
      send_frame(fd, entry_frame, out.fields());
    });
    send_frame(fd, report_frame, report_fields(report));
  } catch (const std::exception& error) {
    send_frame(fd, failure_frame,
               {fmt::format("survey as {} failed: {}", printable(account.name), error.what())});
    ::_exit(exit_unsafe);
  }
  ::_exit(0);
}

/// Everything `fd` gives until its end.
std::string read_all(int fd) {
  std::string received;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    received.append(buffer, static_cast<std::size_t>(n));
  }
  return received;
}

/// The report of the frames in `received` from a child that ended with `status`.
AccountReport report_of(const Account& account, const std::string& received, int status) {
  AccountReport report;
  bool sent = false;
  std::optional<std::string> error;
  const bool whole = decode_frames(received, [&](Frame& frame) {
    FieldReader in(frame.fields);
    switch (frame.type) {
      case entry_frame: report.entries.push_back(read_entry(in)); break;
      case report_frame:
        sent = true;
        read_report(in, report);
        break;
      case failure_frame: error = in.text(); break;
      default: break;
    }
  });
  if (!error && whole && sent && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    report.finished = true;
    return report;
  }
  report.scrape_success = false;
  const std::string ended = WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                                : fmt::format("exit {}", WEXITSTATUS(status));
  report.error = error ? *error
                       : fmt::format("the survey as {} did not finish ({})",
                                     printable(account.name), ended);
  return report;
}

/// A report that the survey as `account` could not start: `step` failed with `error`.
AccountReport not_started(const Account& account, std::string_view step, int error) {
  AccountReport report;
  report.scrape_success = false;
  report.error = fmt::format("cannot survey as {}: {}: {}", printable(account.name), step,
                             errno_text(std::error_code(error, std::generic_category())));
  return report;
}

}  // namespace

void CheckFindings::add(const CheckFindings& other) {
  stale_attention += other.stale_attention;
  blocking_guards += other.blocking_guards;
  old_locks_warning += other.old_locks_warning;
  old_locks_critical += other.old_locks_critical;
  critical_details.insert(critical_details.end(), other.critical_details.begin(),
                          other.critical_details.end());
  details.insert(details.end(), other.details.begin(), other.details.end());
  fine.insert(fine.end(), other.fine.begin(), other.fine.end());
}

void add_all_users_option(po::options_description& options, bool& all_users) {
  options.add_options()("all-users", po::bool_switch(&all_users),
                        "(root) every account's lock area under the temp dir, each read as "
                        "that account");
}

void add_survey_options(po::options_description& options, LabelOptions& labels,
                        TimingOptions& timing, AreaOptions& area, bool& all_users) {
  add_label_options(options, labels, "only the entries of this repository's lock, labelled (repeatable)");
  add_timing_options(options, timing);
  add_area_options(options, area);
  add_all_users_option(options, all_users);
}

std::optional<CommandFailure> all_users_usage(System& system, const AreaOptions& area,
                                              std::string_view paths) {
  if (!area.user.empty()) return CommandFailure{exit_usage, "--all-users and --user exclude each other"};
  if (!area.lock_dir.empty())
    return CommandFailure{exit_usage, "--all-users and --lock-dir exclude each other"};
  if (!paths.empty())
    return CommandFailure{exit_usage, fmt::format("--all-users and {} exclude each other", paths)};
  if (system.uid() != 0) return CommandFailure{exit_usage, "--all-users needs root"};
  return std::nullopt;
}

std::string user_name(const AccountArea& area) {
  if (area.account && !area.account->name.empty()) return area.account->name;
  return area.uid ? fmt::format("{}", *area.uid) : std::string();
}

LockArea account_lock_area(const AccountArea& area) {
  LockArea mine;
  mine.directory = area.lock_directory;
  mine.explicit_directory = true;
  mine.may_be_absent = true;
  if (area.account) mine.home = area.account->home;
  return mine;
}

std::string foreign_line(const std::string& tmpdir, const std::vector<const AccountArea*>& foreign) {
  std::string line = fmt::format("{} foreign {} under {}, not judged:", foreign.size(),
                                 foreign.size() == 1 ? "entry" : "entries", printable(tmpdir));
  const char* separator = " ";
  constexpr std::size_t named = 5;  // anyone can make thousands: the line stays one line
  for (std::size_t i = 0; i < foreign.size(); ++i) {
    if (i == named) {
      line += fmt::format(" and {} more", foreign.size() - named);
      break;
    }
    const AccountArea* area = foreign[i];
    const std::string owner = area->problem == AccountAreaProblem::unreadable
                                  ? std::string("owner unknown")
                                  : fmt::format("owner uid {}", area->stat.uid);
    std::string why;
    switch (area->problem) {
      case AccountAreaProblem::bad_name: why = "its name is not apnea-<uid>"; break;
      case AccountAreaProblem::symlink: why = "a symlink"; break;
      case AccountAreaProblem::not_directory: why = "not a directory"; break;
      case AccountAreaProblem::owner_mismatch: why = fmt::format("not uid {}'s", area->uid.value_or(0)); break;
      case AccountAreaProblem::unreadable: why = area->message(); break;
      case AccountAreaProblem::none: why = "an account's area"; break;
    }
    line += fmt::format("{}'{}' ({}; {})", separator, printable(area->entry_name()), owner, why);
    separator = ", ";
  }
  return line;
}

MetricsReport foreign_metrics(const std::string& tmpdir, std::size_t count) {
  MetricsReport metrics = area_metrics(tmpdir);
  metrics.area = false;
  metrics.foreign_entries = count;
  return metrics;
}

AccountReport survey_as_account(System& system, const Account& account,
                                const AccountSurvey& survey) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return not_started(account, "pipe", errno);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return not_started(account, "fork", error);
  }
  if (child == 0) {
    ::close(fds[0]);
    run_survey_child(system, account, survey, fds[1]);
  }
  ::close(fds[1]);
  const std::string received = read_all(fds[0]);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return report_of(account, received, status);
}

MetricsReport account_metrics(const AccountArea& area, const AccountReport* report) {
  MetricsReport metrics = area_metrics(area.lock_directory);
  if (const std::string user = user_name(area); !user.empty()) metrics.user = user;
  if (report == nullptr) {
    metrics.scrape_success = false;
    return metrics;
  }
  metrics.area_safe = report->area_safe;
  metrics.scrape_success = report->scrape_success;
  if (report->finished && report->summary) metrics.summary = &*report->summary;
  return metrics;
}

void merge_summary(AreaSummary& into, const AreaSummary& from) {
  into.scanned += from.scanned;
  into.shown += from.shown;
  into.attention += from.attention;
  for (const auto& [name, count] : from.states) into.states[name] += count;
  for (const auto& [name, count] : from.roles) into.roles[name] += count;
  for (const auto& [key, count] : from.classes) into.classes[key] += count;
  into.locks += from.locks;
  into.live += from.live;
  into.stale += from.stale;
  into.malformed += from.malformed;
  into.debris += from.debris;
  into.leftover_guards += from.leftover_guards;
  if (from.oldest_lock_age_ns &&
      (!into.oldest_lock_age_ns || *from.oldest_lock_age_ns > *into.oldest_lock_age_ns))
    into.oldest_lock_age_ns = from.oldest_lock_age_ns;
  if (from.oldest_lock_mtime_ns &&
      (!into.oldest_lock_mtime_ns || *from.oldest_lock_mtime_ns < *into.oldest_lock_mtime_ns))
    into.oldest_lock_mtime_ns = from.oldest_lock_mtime_ns;
  if (from.next && (!into.next || from.next->order < into.next->order)) into.next = from.next;
}

}  // namespace apnea_locks::cli
