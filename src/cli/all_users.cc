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

#include "cli/commands.h"
#include "cli/text.h"

namespace apnea_locks::cli {
namespace {

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

/// Decodes the frames of `in`; false when it ends in the middle of one.
bool decode_frames(const std::string& in, const std::function<void(const Frame&)>& on_frame) {
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

std::size_t number(const std::string& text) {
  std::size_t value = 0;
  for (char c : text) value = value * 10 + static_cast<std::size_t>(c - '0');
  return value;
}

}  // namespace

void FrameWriter::send(char type, const std::vector<std::string>& fields) {
  std::string out(1, type);
  put_u64(out, fields.size());
  for (const std::string& field : fields) {
    put_u64(out, field.size());
    out += field;
  }
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::write(fd_, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(exit_unsafe);  // the parent is gone: nobody reads the rest
    done += static_cast<std::size_t>(n);
  }
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

std::string misfit_line(const AccountArea& area) {
  return fmt::format("{}: {}", printable(area.top), area.message());
}

std::expected<void, std::string> survey_as_account(
    System& system, const Account& account, const std::function<void(FrameWriter&)>& survey,
    const std::function<void(const Frame&)>& on_frame) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return std::unexpected(fmt::format("cannot survey as {}: pipe: {}", printable(account.name),
                                       errno_text(std::error_code(errno, std::generic_category()))));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return std::unexpected(fmt::format("cannot survey as {}: fork: {}", printable(account.name),
                                       errno_text(std::error_code(error, std::generic_category()))));
  }
  if (child == 0) {
    // The child: becomes the account for good, surveys, and leaves with _exit (nothing of
    // the parent's, such as its stdout buffer, is flushed twice).
    ::close(fds[0]);
    FrameWriter writer(fds[1]);
    if (account.uid != system.uid()) {
      if (auto dropped = system.become(account); !dropped) {
        writer.send('E', {fmt::format("cannot become {}: {}", printable(account.name),
                                      errno_text(dropped.error()))});
        ::_exit(exit_unsafe);
      }
    }
    try {
      survey(writer);
    } catch (const std::exception& error) {
      writer.send('E', {fmt::format("survey as {} failed: {}", printable(account.name), error.what())});
      ::_exit(exit_unsafe);
    }
    writer.send('.', {});
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string received;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    received.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  bool finished = false;
  std::optional<std::string> error;
  const bool whole = decode_frames(received, [&](const Frame& frame) {
    if (frame.type == '.') finished = true;
    else if (frame.type == 'E') error = frame.fields.empty() ? std::string() : frame.fields[0];
    else on_frame(frame);
  });
  if (error) return std::unexpected(*error);
  if (!whole || !finished || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return std::unexpected(fmt::format("the survey as {} did not finish ({})", printable(account.name),
                                       WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                                           : fmt::format("exit {}", WEXITSTATUS(status))));
  return {};
}

std::vector<std::string> summary_fields(const AreaSummary& s) {
  auto n = [](std::size_t value) { return fmt::format("{}", value); };
  std::vector<std::string> out = {n(s.scanned), n(s.shown), n(s.attention), n(s.locks),
                                  n(s.live), n(s.stale), n(s.malformed), n(s.debris),
                                  n(s.leftover_guards),
                                  s.oldest_lock_age_ns ? fmt::format("{}", *s.oldest_lock_age_ns) : ""};
  out.push_back(n(s.states.size()));
  for (const auto& [name, count] : s.states) {
    out.push_back(name);
    out.push_back(n(count));
  }
  out.push_back(n(s.roles.size()));
  for (const auto& [name, count] : s.roles) {
    out.push_back(name);
    out.push_back(n(count));
  }
  out.push_back(n(s.classes.size()));
  for (const auto& [key, count] : s.classes) {
    out.push_back(std::get<0>(key));
    out.push_back(std::get<1>(key));
    out.push_back(std::get<2>(key));
    out.push_back(n(count));
  }
  out.push_back(s.next ? "1" : "0");
  if (s.next) {
    const NextStep& x = *s.next;
    out.push_back(fmt::format("{}", std::get<0>(x.order)));
    out.push_back(fmt::format("{}", std::get<1>(x.order)));
    out.push_back(fmt::format("{}", std::get<2>(x.order)));
    for (const std::string* text : {&std::get<3>(x.order), &x.name, &x.path, &x.description, &x.state,
                                    &x.reason, &x.fix, &x.next_step, &x.why})
      out.push_back(*text);
    out.push_back(n(x.fix_argv.size()));
    for (const std::string& word : x.fix_argv) out.push_back(word);
  }
  return out;
}

AreaSummary summary_from_fields(const std::vector<std::string>& in) {
  AreaSummary s;
  std::size_t at = 0;
  auto next = [&]() -> const std::string& {
    static const std::string none;
    return at < in.size() ? in[at++] : none;
  };
  s.scanned = number(next());
  s.shown = number(next());
  s.attention = number(next());
  s.locks = number(next());
  s.live = number(next());
  s.stale = number(next());
  s.malformed = number(next());
  s.debris = number(next());
  s.leftover_guards = number(next());
  if (const std::string& oldest = next(); !oldest.empty())
    s.oldest_lock_age_ns = static_cast<std::int64_t>(std::stoll(oldest));
  for (std::size_t i = 0, count = number(next()); i < count; ++i) {
    std::string name = next();
    s.states[name] = number(next());
  }
  for (std::size_t i = 0, count = number(next()); i < count; ++i) {
    std::string name = next();
    s.roles[name] = number(next());
  }
  for (std::size_t i = 0, count = number(next()); i < count; ++i) {
    std::string kind = next();
    std::string role = next();
    std::string state = next();
    s.classes[EntryClass{kind, role, state}] = number(next());
  }
  if (next() == "1") {
    NextStep x;
    const int a = std::stoi(next());
    const int b = std::stoi(next());
    const int c = std::stoi(next());
    std::string key = next();
    x.order = EntryOrder{a, b, c, key};
    for (std::string* text : {&x.name, &x.path, &x.description, &x.state, &x.reason, &x.fix,
                              &x.next_step, &x.why})
      *text = next();
    for (std::size_t i = 0, count = number(next()); i < count; ++i) x.fix_argv.push_back(next());
    s.next = std::move(x);
  }
  return s;
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
  if (from.next && (!into.next || from.next->order < into.next->order)) into.next = from.next;
}

}  // namespace apnea_locks::cli
