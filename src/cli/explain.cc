// apnea-locks explain: from Apnea's message (or a ticket around it) to the judgement of each
// entry it names and the one next step. The text is read by apnea_message.h; every entry is
// judged by the survey's EntryJudge and decided by the policy, as inspect judges it.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apnea_locks/classify.h"
#include "apnea_locks/labels.h"
#include "apnea_locks/lock_area.h"
#include "apnea_locks/names.h"
#include "apnea_locks/owner.h"
#include "apnea_locks/policy.h"
#include "apnea_locks/scan.h"
#include "apnea_locks/survey.h"
#include "cli/apnea_message.h"
#include "cli/area.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/entry_report.h"
#include "cli/json_writer.h"
#include "cli/options.h"
#include "cli/terminal.h"
#include "cli/text.h"

namespace apnea_locks::cli {
namespace {

constexpr CommandHelp help{
    "explain",
    "explain [options] [TEXT...]\nexplain [options] < FILE",
    "Reads Apnea's message, or a ticket around it: TEXT (its words joined by spaces), or\n"
    "standard input when no TEXT is given (paste it, then Ctrl-D; at most 256 KiB). Says\n"
    "which of Apnea's errors it is and what Apnea meant, finds every lock, reclaim guard,\n"
    "candidate and tombstone path and every pid in it (the sentence's punctuation and quote\n"
    "markers dropped, a path broken by re-wrapping joined), judges each entry now as inspect\n"
    "does (a guard with its lock), and prints the one next command, or the check to make\n"
    "first. Run as root, a path in another account's area is judged as that account (read\n"
    "from the path's apnea-<uid>). Changes nothing.",
    "Exit status: 0 every path named was judged and none needs attention (an entry that is\n"
    "gone: Apnea can run), 1 something does, or a path was not judged (another area, '..',\n"
    "relative, over 64 paths), 2 usage error, TEXT or standard input over 256 KiB, or (root)\n"
    "a path outside an apnea-<uid> area without --user, 3 the lock area is unsafe,\n"
    "unreadable or another account's, 4 the text names no lock, guard, candidate, tombstone\n"
    "or lock area path."};

constexpr std::string_view command_name = help.name;

/// The text names nothing explain can judge.
constexpr int exit_nothing_found = 4;

struct ExplainOptions {
  AreaOptions area;  ///< --user only: the area is the one the text names
  std::vector<std::string> text;
  bool json = false;
  TimingOptions timing;
};

/// One entry the text names (a guard's lock too), judged or why not.
struct Explained {
  std::string path;                  ///< the path judged (or found)
  std::optional<Judgement> judged;   ///< nothing when it could not be judged (`note` says why)
  const EntryLabel* label = nullptr;
  std::string note;                  ///< why not judged; or what the message's pid tells
  bool area = false;                 ///< a lock area path (Apnea's area errors)
  std::string state, reason, next;   ///< for an area: its check and the next step
  std::optional<AreaCheck> check;    ///< for an area: the check made

  bool gone() const { return judged && !judged->facts.stat; }
  bool needs_attention() const { return judged && named_needs_attention(judged->facts, judged->verdict); }
  /// The one next command: the fix, else the policy's next step (`next`, set by
  /// judge_entries).
  std::string next_step() const {
    if (judged && !judged->decision.fix.empty()) return judged->decision.fix.command;
    return next;
  }
};

struct Explanation {
  PastedText pasted;
  std::optional<std::string> lock_dir;
  std::optional<AreaCheck> check;
  std::string acting_for;            ///< the account judged as (--user, or the path's owner)
  std::vector<Explained> entries;
  std::optional<std::string> problem;  ///< why nothing (more) could be judged: one line
  int status = exit_ok;
  std::optional<LabelIndex> labels;  ///< the labels the entries point into
};

std::expected<po::variables_map, int> parse_options(const std::vector<std::string>& args,
                                                    ExplainOptions& o) {
  po::options_description options("Options");
  options.add_options()
      ("json,J", po::bool_switch(&o.json), "one JSON document")
      ("user", po::value(&o.area.user)->value_name("NAME"),
       "(root) judge as the account NAME (or a decimal uid); default: the owner the path names");
  add_timing_options(options, o.timing, "reclaim guards older than this are left over");
  return parse_command_line(help, args, options, "text", o.text);
}

/// Standard input, at most max_pasted_bytes; a prompt first when it is a terminal.
std::expected<std::string, int> read_standard_input(System& system) {
  if (system.is_terminal(0))
    fmt::print(stderr, "Paste Apnea's message (or the ticket), then press Ctrl-D:\n");
  std::string text;
  char buffer[8192];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, stdin);
    text.append(buffer, n);
    if (text.size() > max_pasted_bytes) {
      return std::unexpected(command_error(
          command_name, exit_usage,
          fmt::format("standard input is larger than {} KiB: paste Apnea's message alone, or pass it as TEXT",
                      max_pasted_bytes / 1024)));
    }
    if (n < sizeof buffer) break;
  }
  if (std::ferror(stdin)) {
    return std::unexpected(command_error(command_name, exit_usage, "cannot read standard input"));
  }
  return text;
}

/// True when the directory of the absolute `path` may exist (lstat does not say ENOENT or
/// ENOTDIR): the reading of a re-wrapped path to prefer.
bool plausible(System& system, const std::string& path) {
  auto st = system.lstat(node_dirname(node_normalize(path)));
  return st || (st.error() != std::errc::no_such_file_or_directory && st.error() != std::errc::not_a_directory);
}

/// The uid whose area `directory` is, from the shape Apnea prints only:
/// `<tmp>/apnea-<uid>/operation-locks`. Nothing for any other directory (its owner says
/// nothing about whose Apnea used it).
std::optional<std::uint32_t> area_uid(const std::string& directory) {
  if (base_name(directory) != "operation-locks") return std::nullopt;
  const std::string top = base_name(node_dirname(directory));
  if (!top.starts_with("apnea-")) return std::nullopt;
  return decimal_uid(std::string_view(top).substr(6));
}

/// The account name of `uid` as --user takes it: its name, else the uid in decimal.
std::string user_word(System& system, std::uint32_t uid) {
  const Account account = account_of_uid(system, uid);
  return account.name.empty() ? std::to_string(uid) : account.name;
}

/// Says which account to run as for an area of `uid` that is not this account's.
std::string other_account(System& system, const std::string& path, std::uint32_t uid) {
  const std::string user = user_word(system, uid);
  return fmt::format("{} is in the lock area of {} (uid {}), not of this account (uid {}): run "
                     "apnea-locks explain as {}, or as root (it then judges as {}; else add --user {})",
                     path, user, uid, system.uid(), user, user, user);
}

/// Explains a lock area path (Apnea's "unsafe" and "not owned" errors): its check, as the
/// account its name says, and what to do.
Explained explain_area(System& system, const std::string& given) {
  Explained out;
  out.area = true;
  out.path = given;
  std::string path = node_normalize(given);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string directory = base_name(path).starts_with("apnea-") ? node_join(path, "operation-locks") : path;
  const std::string top = node_dirname(directory);
  const std::optional<std::uint32_t> uid = area_uid(directory);
  const AreaCheck check = check_area(system, directory, uid.value_or(system.uid()));
  out.check = check;
  out.state = check.name();
  out.reason = check.message();
  switch (check.problem) {
    case AreaProblem::none:
      out.reason = fmt::format("the lock area is safe for uid {}", uid.value_or(system.uid()));
      if (uid && *uid != system.uid())
        out.next = fmt::format("nothing to repair: run Apnea as {} (apnea-locks as root: add --user {})",
                               user_word(system, *uid), user_word(system, *uid));
      break;
    case AreaProblem::missing:
      out.reason = "the lock area is gone: Apnea makes it again, so Apnea can run";
      out.state = "gone";
      break;
    case AreaProblem::foreign_owner:
      out.next = check.stat.uid == 0
                     ? fmt::format("a root-run tool wrote into it: check nothing inside is a symlink "
                                   "(find {} -type l), then chown -R {}: {}",
                                   shell_word(top), user_word(system, check.expected_uid), shell_word(top))
                     : fmt::format("squatting by uid {}, possibly an attack on uid {}'s Apnea: find out "
                                   "who made it (stat -- {}) before removing it as root; Apnea makes it again",
                                   check.stat.uid, check.expected_uid, shell_word(check.path));
      break;
    case AreaProblem::open_mode:
      out.next = fmt::format("chmod 700 -- {} {}", shell_word(top), shell_word(directory));
      break;
    case AreaProblem::symlink:
    case AreaProblem::not_directory:
      out.next = fmt::format("an attempt to redirect the locks, or a mistake: investigate (ls -ld -- {}), "
                             "then remove it (a link, not its target)",
                             shell_word(check.path));
      break;
    case AreaProblem::unreadable:
      if (uid && *uid != system.uid() && system.uid() != 0) out.next = other_account(system, path, *uid);
      break;
  }
  return out;
}

/// The entries of the text in one lock area, judged as inspect judges (EntryJudge), the
/// lock of each guard first.
void judge_entries(System& system, const ExplainOptions& given, Explanation& ex,
                   const std::vector<std::string>& paths) {
  ExplainOptions o = given;
  // The account: --user, else the owner the first path names (root judges as it; anyone
  // else is told to run as it).
  const auto first = std::find_if(paths.begin(), paths.end(),
                                  [](const std::string& path) { return path.find('/') != std::string::npos; });
  if (o.area.user.empty() && first != paths.end()) {
    const std::string directory = node_dirname(node_normalize(*first));
    const std::optional<std::uint32_t> uid = area_uid(directory);
    if (!uid && system.uid() == 0 &&
        node_normalize(directory) != node_normalize(lock_directory_for_uid(system, system.uid()))) {
      ex.problem = fmt::format("{} is not in a lock area of the shape Apnea prints "
                               "(<tmp>/apnea-<uid>/operation-locks): cannot tell whose it is; add --user NAME",
                               *first);
      ex.status = exit_usage;
      return;
    }
    if (uid && *uid != system.uid()) {
      if (system.uid() != 0) {
        ex.problem = other_account(system, *first, *uid);
        ex.status = exit_unsafe;
        return;
      }
      o.area.user = user_word(system, *uid);
    }
  }
  auto opened = open_lock_area(system, o.area);
  if (!opened) {
    ex.problem = opened.error().message;
    ex.status = opened.error().exit_status;
    return;
  }
  LockArea area = std::move(*opened);
  ex.acting_for = o.area.user;
  auto read = read_lock_paths(system, paths, area, false, true);
  if (!read) {
    ex.problem = read.error();
    ex.status = exit_usage;
    return;
  }
  ex.lock_dir = area.directory;
  auto built = build_labels(system, area, LabelOptions{});
  if (!built) {
    ex.problem = built.error();
    ex.status = exit_bad_path;
    return;
  }
  ex.labels = std::move(built->index);
  auto settings = judging_settings(system, area, o.timing);
  if (!settings) {
    ex.problem = settings.error();
    ex.status = exit_usage;
    return;
  }
  if (!ex.acting_for.empty()) {
    // The fix acts for the account (reclaim --user NAME), in its own area unless the path
    // names another one.
    settings->fix.user = ex.acting_for;
    if (node_normalize(area.directory) == node_normalize(lock_directory_for_uid(system, system.uid())))
      settings->fix.lock_dir.reset();
  }
  const AreaCheck check = check_lock_area(system, area);
  ex.check = check;
  if (!check.safe() && check.problem != AreaProblem::missing) {
    ex.problem = check.message();
    ex.status = exit_unsafe;
    return;
  }
  // Each entry once: a guard's lock before the guard.
  std::vector<std::pair<std::string, std::string>> wanted;  // (name, path)
  auto want = [&](const std::string& name, const std::string& path) {
    if (std::none_of(wanted.begin(), wanted.end(), [&](const auto& w) { return w.first == name; }))
      wanted.emplace_back(name, path);
  };
  for (const LockPath& lock : *read) {
    const std::string path = lock.directory.empty() ? entry_path(area.directory, lock.name) : lock.path;
    if (lock.entry.role == EntryRole::reclaim_guard)
      want(lock.entry.lock_name(), node_join(node_dirname(path), lock.entry.lock_name()));
    want(lock.name, path);
  }
  EntryJudge judge(system, area.directory, *settings);
  for (const auto& [name, path] : wanted) {
    Explained entry;
    entry.path = path;
    entry.label = ex.labels->find(parse_entry_name(name).lock_name());
    if (check.safe()) {
      EntryFacts facts = judge.gather(name);
      facts.path = path;
      entry.judged = judge.judge(std::move(facts), entry.label);
    } else {
      entry.judged = judge.absent(name, entry.label);
      entry.judged->facts.path = path;
    }
    const EntryFacts& facts = entry.judged->facts;
    // The policy's next step, as inspect prints it for the same entry.
    entry.next = entry.judged->decision.next_step;
    // Only a text with one pid says which pid the message named for this entry.
    if (facts.owner && facts.owner->owner && ex.pasted.pids.size() == 1) {
      const std::string pid = pid_text(facts.owner->owner->pid);
      if (ex.pasted.pids.front() != pid)
        entry.note = fmt::format("the text names pid {}; the record now names pid {}: the lock was "
                                 "taken again since",
                                 ex.pasted.pids.front(), pid);
    }
    ex.entries.push_back(std::move(entry));
  }
  const bool attention = std::any_of(ex.entries.begin(), ex.entries.end(),
                                     [](const Explained& e) { return e.needs_attention(); });
  ex.status = attention ? exit_attention : exit_ok;
}

Explanation explain(System& system, const ExplainOptions& o, const std::string& text) {
  Explanation ex;
  ex.pasted = read_pasted(text);
  // Each entry path's reading (the first whose directory may exist), those of the first
  // path's area judged together; any other area's only named.
  std::vector<std::string> in_area;
  std::optional<std::string> area_directory;
  std::vector<Explained> elsewhere;
  for (const FoundPath& found : ex.pasted.paths) {
    if (found.area) continue;
    std::string path = found.path;
    // Only between absolute readings: a bare name (a line broken after a '/') would move the
    // judgement to this account's own area.
    if (path.starts_with('/'))
      for (const std::string& reading : found.alternatives)
        if (reading.starts_with('/') && !plausible(system, path) && plausible(system, reading)) path = reading;
    if (path.find('/') != std::string::npos && !path.starts_with('/')) {
      elsewhere.push_back(Explained{path, std::nullopt, nullptr,
                                    "not judged: a relative path (paste the absolute path Apnea printed)",
                                    false, {}, {}, {}, {}});
      continue;
    }
    if (!typed_area_path(path)) {
      elsewhere.push_back(Explained{path, std::nullopt, nullptr, "not judged: a '..' component", false, {}, {}, {}, {}});
      continue;
    }
    const std::string directory = path.find('/') == std::string::npos ? std::string() : node_dirname(node_normalize(path));
    if (!area_directory && !directory.empty()) area_directory = directory;
    if (directory.empty() || directory == *area_directory) {
      in_area.push_back(path);
    } else {
      elsewhere.push_back(Explained{path, std::nullopt, nullptr,
                                    fmt::format("not judged: in another lock area than {} (run apnea-locks "
                                                "explain on it alone)",
                                                *area_directory),
                                    false, {}, {}, {}, {}});
    }
  }
  if (!in_area.empty()) {
    judge_entries(system, o, ex, in_area);
  } else {
    for (const FoundPath& found : ex.pasted.paths) {
      if (!found.area) continue;
      ex.entries.push_back(explain_area(system, found.path));
      if (!ex.check) ex.check = ex.entries.back().check;  // the JSON's "area": the first checked
    }
    for (const Explained& area : ex.entries) {
      if (area.state != "ok" && area.state != "gone")
        ex.status = exit_unsafe;
    }
  }
  const bool judged = !ex.entries.empty() || ex.problem;
  const std::size_t not_judged = elsewhere.size();
  for (Explained& other : elsewhere) ex.entries.push_back(std::move(other));
  if (judged && !ex.problem && (not_judged > 0 || ex.pasted.more_paths)) {
    // Something named was not judged: never "nothing needs attention".
    ex.problem = ex.pasted.more_paths
                     ? fmt::format("the text names more than {} paths: only the first {} were read; "
                                   "explain the rest separately",
                                   max_pasted_paths, max_pasted_paths)
                     : fmt::format("{} path(s) of the text were not judged (each entry says why)", not_judged);
    ex.status = std::max(ex.status, exit_attention);
  }
  if (ex.pasted.paths.empty()) {
    ex.problem = "the text names no lock, reclaim guard, candidate, tombstone or lock area path: "
                 "paste Apnea's whole message (it names the lock's path)";
    ex.status = exit_nothing_found;
  } else if (!judged) {
    ex.problem = "no path of the text could be judged (each entry says why)";
    ex.status = exit_nothing_found;
  }
  return ex;
}

/// One "key: value" line, as inspect prints them.
void line(std::string_view key, std::string_view value) {
  fmt::print("{:<11}{}\n", fmt::format("{}:", key), value);
}

std::string state_text(const Explained& e) {
  if (e.area) return fmt::format("{} ({})", e.state, printable(e.reason));
  const Verdict& verdict = e.judged->verdict;
  return fmt::format("{} ({}{})", state_name(verdict.state), verdict.reason,
                     verdict.state == EntryState::stale ? (verdict.certain() ? "; certain proof" : "; evidence only")
                                                        : "");
}

void print_text(const Explanation& ex) {
  const std::size_t width = terminal_width(real_system()).value_or(0);
  if (ex.pasted.errors.empty()) {
    fmt::print("Apnea's error: not recognised (no message of Apnea's lock code in the text)\n");
  } else {
    for (const ApneaError* error : ex.pasted.errors) {
      fmt::print("Apnea's error: {} ({})\n", error->id, error->error);
      fmt::print("{}\n", wrap("Apnea meant: " + std::string(error->meaning), width, "  "));
    }
  }
  if (!ex.pasted.pids.empty()) {
    std::string pids;
    for (const std::string& pid : ex.pasted.pids) pids += (pids.empty() ? "" : ", ") + pid;
    fmt::print("Pids in the text: {}\n", pids);
  }
  if (!ex.acting_for.empty()) fmt::print("Judged as: {}\n", printable(ex.acting_for));
  for (const Explained& e : ex.entries) {
    fmt::print("\n");
    line("path", printable(e.path));
    if (!e.judged && !e.area) {
      line("note", printable(e.note));
      continue;
    }
    if (e.area) {
      line("area", state_text(e));
    } else if (e.gone()) {
      line("state", fmt::format("gone ({} is not there): Apnea can run again",
                                role_name(e.judged->verdict.role)));
    } else {
      const Judgement& j = *e.judged;
      line("entry", fmt::format("{} ({})", role_name(j.facts.parsed.role), kind_name(j.facts.parsed.kind)));
      if (e.label) line("label", printable(e.label->path));
      line("state", state_text(e));
      if (j.verdict.apnea_verdict) line("apnea", apnea_verdict_name(*j.verdict.apnea_verdict));
      line("attention", e.needs_attention() ? "yes" : "no");
      line("why", printable(j.decision.why));
    }
    if (!e.note.empty()) line("note", printable(e.note));
    const std::string next = e.next_step();
    line("next", next.empty() ? "-" : printable(next));
  }
  std::fflush(stdout);
}

void write_json(const Explanation& ex) {
  JsonWriter json(stdout);
  json.begin_object();
  write_schema(json, "explain");
  auto write_error = [&](const ApneaError* error) {
    json.begin_object();
    json.key("id").string(error->id);
    json.key("class").string(error->error);
    json.key("message").string(error->pattern);
    json.key("meaning").string(error->meaning);
    json.end_object();
  };
  json.key("error");
  if (ex.pasted.errors.empty()) json.null();
  else write_error(ex.pasted.errors.front());
  json.key("errors").begin_array();
  for (const ApneaError* error : ex.pasted.errors) write_error(error);
  json.end_array();
  json.key("pids").begin_array();
  for (const std::string& pid : ex.pasted.pids) {
    // Digits as written ("007", twenty of them) are no JSON number: only a pid 1..2^31-1.
    std::int32_t value = 0;
    const auto [end, error] = std::from_chars(pid.data(), pid.data() + pid.size(), value);
    if (error == std::errc() && end == pid.data() + pid.size() && value > 0) json.integer(value);
  }
  json.end_array();
  json.key("lock_dir").optional_string(ex.lock_dir);
  json.key("user").optional_string(ex.acting_for.empty() ? std::nullopt : std::optional(ex.acting_for));
  json.key("area");
  if (ex.check) {
    json.begin_object();
    json.key("check").string(ex.check->name());
    json.key("path").string(ex.check->path.empty() ? ex.lock_dir.value_or("") : ex.check->path);
    json.key("message").string(ex.check->message());
    json.end_object();
  } else {
    json.null();
  }
  json.key("problem").optional_string(ex.problem);
  json.key("entries").begin_array();
  for (const Explained& e : ex.entries) {
    auto optional = [](std::string text) {
      return text.empty() ? std::nullopt : std::optional<std::string>(std::move(text));
    };
    json.begin_object();
    json.key("path").string(e.path);
    if (e.area) {
      json.key("role").string("area");
      json.key("state").string(e.state);
      json.key("reason").string(e.reason);
    } else if (e.judged) {
      json.key("role").string(role_name(e.judged->verdict.role));
      json.key("state").string(e.gone() ? "gone" : state_name(e.judged->verdict.state));
      json.key("reason").string(e.judged->verdict.reason);
    } else {
      json.key("role").null();
      json.key("state").null();
      json.key("reason").null();
    }
    json.key("apnea_verdict");
    if (e.judged && e.judged->verdict.apnea_verdict && !e.gone())
      json.string(apnea_verdict_name(*e.judged->verdict.apnea_verdict));
    else
      json.null();
    json.key("attention").boolean(e.needs_attention());
    json.key("label").optional_string(e.label ? std::optional(e.label->path) : std::nullopt);
    json.key("pid");
    if (e.judged && e.judged->facts.owner && e.judged->facts.owner->owner)
      json.number_text(pid_text(e.judged->facts.owner->owner->pid));
    else
      json.null();
    json.key("why").optional_string(e.judged ? optional(e.judged->decision.why) : std::nullopt);
    const bool fix = e.judged && !e.judged->decision.fix.empty();
    json.key("fix").optional_string(fix ? std::optional(e.judged->decision.fix.command) : std::nullopt);
    json.key("fix_argv");
    write_argv(json, fix ? e.judged->decision.fix.argv : std::vector<std::string>{});
    json.key("next").optional_string(optional(e.next_step()));
    json.key("note").optional_string(optional(e.note));
    json.end_object();
  }
  json.end_array();
  json.end_object();
  json.finish();
}

}  // namespace

int explain_command(const std::vector<std::string>& args) {
  ExplainOptions o;
  auto parsed = parse_options(args, o);
  if (!parsed) return parsed.error();
  System& system = real_system();
  std::string text;
  if (o.text.empty()) {
    auto read = read_standard_input(system);
    if (!read) return read.error();
    text = std::move(*read);
  } else {
    for (const std::string& word : o.text) {
      text += (text.empty() ? "" : " ") + word;
      if (text.size() > max_pasted_bytes) {
        return command_error(command_name, exit_usage,
                             fmt::format("TEXT is larger than {} KiB: pass Apnea's message alone",
                                         max_pasted_bytes / 1024));
      }
    }
  }
  const Explanation ex = explain(system, o, text);
  if (o.json) {
    write_json(ex);
  } else {
    print_text(ex);
    if (ex.problem) return command_error(command_name, ex.status, *ex.problem);
  }
  return ex.status;
}

}  // namespace apnea_locks::cli
