#include "cli/area.h"

#include <sched.h>

#include <algorithm>
#include <thread>
#include <fmt/format.h>

#include <utility>

#include "apnea_locks/names.h"
#include "apnea_locks/scan.h"
#include "cli/commands.h"
#include "cli/text.h"
#include "cli/time_text.h"

namespace apnea_locks::cli {

void add_area_options(po::options_description& options, AreaOptions& area) {
  options.add_options()
      ("lock-dir", po::value(&area.lock_dir)->value_name("DIR"),
       "lock directory to look at (default: Apnea's, <tmpdir>/apnea-<uid>/operation-locks)")
      ("user", po::value(&area.user)->value_name("NAME"),
       "(root) act as the account NAME (or a decimal uid), on its lock area unless --lock-dir");
}

std::optional<std::string> typed_area_path(std::string_view typed) {
  std::string path(typed);
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    if (path.compare(start, end - start, "..") == 0) return std::nullopt;
    start = end + 1;
  }
  for (;;) {
    if (path.size() > 1 && path.ends_with('/')) {
      path.pop_back();
    } else if (path.size() > 2 && path.ends_with("/.")) {
      path.resize(path.size() - 2);
      if (path.empty()) path = "/";
    } else {
      break;
    }
  }
  return path;
}

std::string dotdot_refused(std::string_view option, std::string_view typed) {
  return fmt::format("{} '{}': a '..' component is refused (name the directory without it)",
                     option, printable(std::string(typed)));
}

std::string account_default_area(std::uint32_t uid) {
  return fmt::format("/tmp/apnea-{}/operation-locks", uid);
}

std::expected<LockArea, CommandFailure> open_lock_area(System& system, const AreaOptions& options) {
  LockArea area;
  if (!options.user.empty()) {
    if (system.uid() != 0) return std::unexpected(CommandFailure{exit_usage, "--user needs root"});
    auto account = system.lookup_account(options.user);
    // A uid in decimal that no account's name is: that uid without a passwd entry (a
    // DynamicUser's area), as --all-users labels it.
    if (!account)
      if (auto uid = decimal_uid(options.user)) account = account_of_uid(system, *uid);
    if (!account)
      return std::unexpected(CommandFailure{
          exit_usage, fmt::format("--user {}: no such account", printable(options.user))});
    const std::string directory = account_default_area(account->uid);
    // Everything from here on runs as that account: ownership checks and anything created
    // stay theirs, and nothing of root's is read by mistake. (Root asking for itself is
    // already that account.)
    if (account->uid != system.uid())
      if (auto dropped = system.become(*account); !dropped)
        return std::unexpected(CommandFailure{
            exit_unsafe, fmt::format("cannot become {}: {}", printable(options.user), errno_text(dropped.error()))});
    area.home = account->home;
    area.user = options.user;
    if (options.lock_dir.empty()) {
      area.directory = directory;
      area.explicit_directory = true;
      area.may_be_absent = true;  // the account's own area, like Apnea's: not taken yet
      return area;
    }
  } else {
    area.home = node_homedir(system);
  }
  if (!options.lock_dir.empty()) {
    const std::optional<std::string> directory = typed_area_path(options.lock_dir);
    if (!directory)
      return std::unexpected(CommandFailure{exit_usage, dotdot_refused("--lock-dir", options.lock_dir)});
    area.directory = *directory;
    area.explicit_directory = true;
  } else {
    area.directory = default_lock_directory(system);
  }
  return area;
}

namespace {

/// U+2026 in UTF-8: how status and the footers cut a long name; "..." where the locale is
/// not UTF-8 (no entry name holds two dots in a row).
constexpr std::string_view ellipsis = "\xE2\x80\xA6";
constexpr std::string_view ascii_ellipsis = "...";

/// Where `name` is cut, and the cut's length; npos when it is not.
std::pair<std::size_t, std::size_t> cut_in(std::string_view name) {
  if (const std::size_t at = name.find(ellipsis); at != std::string_view::npos) return {at, ellipsis.size()};
  if (const std::size_t at = name.find(ascii_ellipsis); at != std::string_view::npos) return {at, ascii_ellipsis.size()};
  return {std::string_view::npos, 0};
}

/// Replaces each `…`-cut name of `paths` by the one entry of `area` it matches (a listing of
/// the area, only once it has been checked safe).
std::expected<void, std::string> resolve_elided(System& system, const LockArea& area,
                                                std::vector<LockPath>& paths) {
  const auto cut = std::find_if(paths.begin(), paths.end(), [](const LockPath& p) { return p.elided; });
  if (cut == paths.end()) return {};
  const AreaCheck check = check_lock_area(system, area);
  if (check.problem == AreaProblem::missing)
    return std::unexpected(fmt::format("{}: no entry matches it: {} does not exist", printable(cut->given),
                                       printable(area.directory)));
  if (!check.safe()) return {};  // the command's own check says why
  std::vector<std::string> names;
  if (auto listed = system.list_directory(area.directory, [&](const DirEntry& entry) {
        if (parse_entry_name(entry.name).role != EntryRole::unknown) names.push_back(entry.name);
        return true;
      });
      !listed)
    return std::unexpected(fmt::format("{}: {}", printable(area.directory), errno_text(listed.error())));
  for (LockPath& lock : paths) {
    if (!lock.elided) continue;
    const auto [at, size] = cut_in(lock.name);
    const std::string_view prefix = std::string_view(lock.name).substr(0, at);
    const std::string_view suffix = std::string_view(lock.name).substr(at + size);
    if (cut_in(suffix).first != std::string_view::npos)
      return std::unexpected(fmt::format("{}: more than one '…' (keep one, where the name was cut)",
                                         printable(lock.given)));
    if (prefix.empty())
      return std::unexpected(fmt::format("{}: the name's start is cut away (give it up to the '…')",
                                         printable(lock.given)));
    std::vector<std::string> matches;  // the cut stands for at least one character
    for (const std::string& name : names)
      if (name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix))
        matches.push_back(name);
    if (matches.empty())
      return std::unexpected(fmt::format("{}: no entry of {} matches it (it was released or removed "
                                         "since it was listed, or the name is cut elsewhere)",
                                         printable(lock.given), printable(area.directory)));
    if (matches.size() > 1) {
      std::sort(matches.begin(), matches.end());
      std::string shown;
      for (std::size_t i = 0; i < matches.size() && i < 3; ++i)
        shown += (i == 0 ? "" : ", ") + printable(matches[i]);
      return std::unexpected(fmt::format("{}: {} entries of {} match it ({}{}): give more of the name",
                                         printable(lock.given), matches.size(), printable(area.directory),
                                         shown, matches.size() > 3 ? ", ..." : ""));
    }
    lock.name = matches.front();
    lock.entry = parse_entry_name(lock.name);
    lock.path = lock.directory.empty() ? lock.name : lock.directory + "/" + lock.name;
    lock.elided = false;
  }
  return {};
}

}  // namespace

std::expected<std::vector<LockPath>, std::string> read_lock_paths(
    System& system, const std::vector<std::string>& given, LockArea& area, bool area_fixed,
    bool apnea_names) {
  std::vector<LockPath> paths;
  std::optional<std::size_t> located;  // the first that names a directory
  for (const std::string& typed : given) {
    if (!typed_area_path(typed))
      return std::unexpected(fmt::format("{}: a '..' component is refused (name the entry without it)", printable(typed)));
    LockPath lock{typed, node_normalize(typed), {}, {}, {}};
    while (lock.path.size() > 1 && lock.path.back() == '/') lock.path.pop_back();
    const auto slash = lock.path.rfind('/');
    lock.name = slash == std::string::npos ? lock.path : lock.path.substr(slash + 1);
    if (slash != std::string::npos) lock.directory = node_dirname(lock.path);
    lock.entry = parse_entry_name(lock.name);
    lock.elided = cut_in(lock.name).first != std::string::npos;
    // A path copied with the sentence around it ("... manually: LOCK."): no entry name ends
    // in punctuation, so one that parses without it is that entry.
    if (lock.entry.role == EntryRole::unknown) {
      std::string trimmed = lock.name;
      while (!trimmed.empty() && std::string_view(".,;:!?)\"'`").find(trimmed.back()) != std::string_view::npos)
        trimmed.pop_back();
      // A cut name is matched later, without the punctuation either (but with its cut).
      if (lock.elided) {
        const auto [at, size] = cut_in(lock.name);
        if (trimmed.size() < at + size) trimmed = lock.name.substr(0, at + size);
      }
      if (trimmed != lock.name && (lock.elided || parse_entry_name(trimmed).role != EntryRole::unknown)) {
        lock.path.resize(lock.path.size() - (lock.name.size() - trimmed.size()));
        lock.name = trimmed;
        lock.entry = parse_entry_name(lock.name);
      }
    }
    if (apnea_names && lock.entry.role == EntryRole::unknown && !lock.elided)
      return std::unexpected(fmt::format("{}: not an Apnea lock entry name", typed));
    if (!lock.directory.empty() && located && paths[*located].directory != lock.directory)
      return std::unexpected(
          fmt::format("{}: not in the same lock area as {}", typed, paths[*located].directory));
    if (!located && !lock.directory.empty()) located = paths.size();
    paths.push_back(std::move(lock));
  }
  if (located && paths[*located].directory != node_normalize(area.directory)) {
    if (area_fixed)
      return std::unexpected(fmt::format("{}: not an entry of the lock area {}",
                                         paths[*located].given, node_normalize(area.directory)));
    area.directory = paths[*located].directory;
    area.explicit_directory = area.directory != node_normalize(default_lock_directory(system));
    area.may_be_absent = false;
  }
  if (auto resolved = resolve_elided(system, area, paths); !resolved) return std::unexpected(resolved.error());
  return paths;
}

std::string area_problem(System& system, const AreaCheck& check) {
  std::string text = check.message();
  if (check.problem != AreaProblem::foreign_owner) return text;
  const std::uint32_t owner = check.stat.uid;
  // The uid an `apnea-<uid>` component of the path names: Apnea's areas say whose they are.
  std::optional<std::uint32_t> named;
  for (std::size_t at = check.path.find("/apnea-"); at != std::string::npos; at = check.path.find("/apnea-", at + 1)) {
    const std::size_t start = at + 7;
    named = decimal_uid(std::string_view(check.path).substr(start, check.path.find('/', start) - start));
    if (named) break;
  }
  const auto account = system.lookup_uid(owner);
  if (named && *named != owner)
    return text + fmt::format(" (its name says uid {}: another account made it first, and Apnea of uid "
                              "{} cannot run until it is gone: see docs/runbook.md on a squatted area)",
                              *named, *named);
  if (!account)
    return text + fmt::format(" (no account has uid {}: see docs/runbook.md on a squatted area)", owner);
  const std::string name = printable(account->name);
  return text + fmt::format(" (it is {0}'s: run this as {0}, or as root add --user {0}{1})", name,
                            named ? "" : " and this --lock-dir");
}

AreaCheck check_lock_area(System& system, const LockArea& area) {
  AreaCheck check = check_area(system, area.directory, system.uid(), !area.explicit_directory);
  if (!area.explicit_directory || area.may_be_absent) return check;
  // Explicit paths are promises: a typo is an error naming it, never an empty, healthy area.
  if (check.problem == AreaProblem::missing) {
    check.problem = AreaProblem::unreadable;
    check.error = std::make_error_code(std::errc::no_such_file_or_directory);
  } else if (check.problem == AreaProblem::not_directory) {
    check.problem = AreaProblem::unreadable;
    check.error = std::make_error_code(std::errc::not_a_directory);
  }
  return check;
}

std::expected<void, std::string> typed_directory(System& system, std::string_view option,
                                                 const std::string& path) {
  auto fail = [&](std::string_view why) {
    return std::unexpected(fmt::format("{} '{}': {}", option, printable(path), why));
  };
  auto resolved = system.realpath(path);
  if (!resolved) return fail(errno_text(resolved.error()));
  auto st = system.lstat(*resolved);
  if (!st) return fail(errno_text(st.error()));
  if (st->type != FileType::directory) return fail("not a directory");
  return {};
}

std::optional<std::uint32_t> sudo_invoker(System& system) {
  auto text = system.env("SUDO_UID");
  if (!text) return std::nullopt;
  constexpr std::uint32_t nobody = 0xfffffffe;  // (uid_t)-2: owns nothing here
  const std::uint32_t uid = decimal_uid(*text).value_or(nobody);
  if (uid == system.uid()) return std::nullopt;
  return uid;
}

namespace {

/// Whether `uid` may search (and, with `read`, list) the directory `st` by its owner's and
/// everyone's permission bits.
bool permitted(const FileStat& st, std::uint32_t uid, bool read) {
  if (uid == 0) return true;
  const std::uint32_t need = read ? 05 : 01;
  if (st.uid == uid) return ((st.mode >> 6) & need) == need;
  return (st.mode & need) == need;
}

/// Whether nobody but root and `owner` can change what `st` names or holds: owned by one of
/// them, and (a directory) not writable by group or others unless sticky (as /tmp is: only
/// an entry's owner may rename it).
bool fixed(const FileStat& st, std::uint32_t owner) {
  if (st.uid != 0 && st.uid != owner) return false;
  return st.type != FileType::directory || (st.mode & 022) == 0 || (st.mode & 01000) != 0;
}

/// Each directory from `/` down to `path` (absolute, no `..`), as lstat sees it: the ones
/// before the last must be searchable by `uid`, the last readable, and each `fixed` for
/// `owner` (so that `uid` cannot swap a component between this check and its use). An
/// error or a symlink on the way (the typed chain is checked up to it, the link itself
/// fixed; the resolved chain has none) stops the walk as not permitted unless
/// `stop_at_link`.
bool chain_permitted(System& system, const std::string& path, std::uint32_t uid, std::uint32_t owner,
                     bool stop_at_link) {
  std::vector<std::string> parts;
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    if (end > start && path.compare(start, end - start, ".") != 0)
      parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  std::string prefix = "/";
  for (std::size_t i = 0;; ++i) {
    auto st = system.lstat(prefix);
    if (!st || !fixed(*st, owner)) return false;
    if (st->type == FileType::symlink) return stop_at_link;
    if (st->type != FileType::directory || !permitted(*st, uid, i == parts.size())) return false;
    if (i == parts.size()) return true;
    prefix += (prefix == "/" ? "" : "/") + parts[i];
  }
}

}  // namespace

std::vector<std::pair<std::string_view, std::string>> typed_paths(
    const AreaOptions& area, const LabelOptions& labels, const std::vector<std::string>& lock_paths) {
  std::vector<std::pair<std::string_view, std::string>> paths;
  if (!area.lock_dir.empty()) paths.emplace_back("--lock-dir", area.lock_dir);
  for (const std::string& repo : labels.repos) paths.emplace_back("--repo", repo);
  for (const std::string& scan : labels.scans) paths.emplace_back("--scan", scan);
  for (const std::string& lock_path : lock_paths)
    if (const auto slash = lock_path.rfind('/'); slash != std::string::npos)
      paths.emplace_back("LOCKPATH", slash == 0 ? "/" : lock_path.substr(0, slash));
  return paths;
}

std::optional<std::string> sudo_refusal(
    System& system, const std::string& output_file,
    const std::vector<std::pair<std::string_view, std::string>>& paths) {
  const auto invoker = sudo_invoker(system);
  if (!invoker) return std::nullopt;
  const std::string by = fmt::format("under sudo (invoked by uid {})", *invoker);
  const std::uint32_t owner = system.uid();
  const auto cwd = system.realpath(".");
  if (!output_file.empty())
    return fmt::format("--output-file '{}' is refused {}: it would write with this account's rights "
                       "(write standard output to a file of your own instead)",
                       printable(output_file), by);
  for (const auto& [option, typed] : paths) {
    const std::string absolute =
        typed.starts_with('/') ? typed : cwd.value_or(std::string("/nonexistent")) + "/" + typed;
    auto resolved = system.realpath(typed);
    const bool allowed = absolute.find("/../") == std::string::npos && !absolute.ends_with("/..") &&
                         chain_permitted(system, absolute, *invoker, owner, true) && resolved &&
                         chain_permitted(system, *resolved, *invoker, owner, false);
    if (!allowed)
      return fmt::format("{} '{}' is refused {}: every directory of the path, as typed and as "
                         "resolved, must be one that account could read itself (by the owner's "
                         "and everyone's permission bits) and could not change (owned by root or "
                         "this account, no group or other write unless sticky)",
                         option, printable(typed), by);
  }
  return std::nullopt;
}

void add_label_options(po::options_description& options, LabelOptions& labels,
                       const char* repo_help) {
  options.add_options()
      ("repo", po::value(&labels.repos)->composing()->value_name("PATH"), repo_help)
      ("scan", po::value(&labels.scans)->composing()->value_name("DIR"),
       "label the repositories (folders holding .apnea/) under DIR (repeatable)")
      ("scan-depth",
       po::value(&labels.scan_depth)->value_name("N")->default_value(4)->notifier([](int depth) {
         if (depth < 0) throw po::error("--scan-depth must be >= 0");
       }),
       "how many levels below each --scan DIR to look");
}

std::expected<Labels, std::string> build_labels(System& system, const LockArea& area,
                                                const LabelOptions& options) {
  if (options.scan_depth < 0) return std::unexpected(std::string("--scan-depth must be >= 0"));
  Labels labels;
  // Lazily: an area with nothing to label never hashes (starting OpenSSL would cost more
  // than surveying an empty area; docs/performance.md). The current directory and every
  // ancestor: Apnea locks its working directory, which is often the repository root above
  // the operator's shell.
  if (auto here = system.realpath("."); here && here->starts_with('/')) {
    std::string folder = *here;
    while (true) {
      labels.index.add_repository_lazily(system, folder);
      if (folder == "/") break;
      folder = node_dirname(folder);
    }
  } else {
    labels.index.add_repository_lazily(system, ".");
  }
  if (!area.home.empty()) {
    labels.index.add_home_lazily(system, area.home);
    labels.index.add_repository_lazily(system, area.home);
  }
  for (const std::string& root : options.scans) {
    auto found = find_repositories(system, root, options.scan_depth, [&](const std::string& repo) {
      labels.index.add_repository_lazily(system, repo);
    });
    if (!found)
      return std::unexpected(fmt::format("--scan '{}': {}", printable(root), errno_text(found.error())));
  }
  for (const std::string& root : options.repos) {
    if (auto typed = typed_directory(system, "--repo", root); !typed)
      return std::unexpected(typed.error());
    auto name = labels.index.add_repository(system, root);
    if (!name)
      return std::unexpected(fmt::format("--repo '{}': {}", printable(root), errno_text(name.error())));
    labels.repo_locks.insert(*name);
  }
  return labels;
}

void add_timing_options(po::options_description& options, TimingOptions& timing,
                        const char* guard_help) {
  const std::string tolerance_help =
      "a process started this much after its owner record was written is a reused pid" +
      duration_help(tolerance_range);
  const std::string guard_age_help =
      std::string(guard_help != nullptr
                      ? guard_help
                      : "reclaim guards (and unreadable candidates/tombstones) older than this "
                        "are left over") +
      duration_help(guard_age_range);
  options.add_options()
      ("tolerance",
       duration_value("--tolerance", tolerance_range, timing.tolerance_ns)->default_value("2s"),
       tolerance_help.c_str())
      ("guard-age",
       duration_value("--guard-age", guard_age_range, timing.guard_age_ns)->default_value("5m"),
       guard_age_help.c_str())
      ("jobs",
       po::value<std::string>()->value_name("N")->notifier([&timing](const std::string& text) {
         auto jobs = parse_whole_number("--jobs", text, 1, max_jobs);
         if (!jobs) throw po::error(jobs.error());
         timing.jobs = static_cast<unsigned>(*jobs);
       }),
       "gather the entries with N threads (1 to 64; default: one per CPU)");
}

unsigned default_jobs() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  int count = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
  if (count <= 0) count = static_cast<int>(std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::clamp(count, 1, static_cast<int>(max_jobs)));
}

std::expected<SurveySettings, std::string> judging_settings(System& system, const LockArea& area,
                                                            const TimingOptions& timing, bool force,
                                                            HostRead host) {
  const Windows windows{.tolerance = std::chrono::nanoseconds(timing.tolerance_ns),
                        .guard_age = std::chrono::nanoseconds(timing.guard_age_ns)};
  SurveySettings settings = survey_settings(system, area.directory, windows, force, host);
  if (area.explicit_directory) {
    settings.fix.lock_dir = area.directory;
  }
  if (!area.user.empty()) {
    // The fix acts for the account (reclaim --user NAME), in its own area unless another.
    settings.fix.user = area.user;
    if (node_normalize(area.directory) == account_default_area(system.uid())) settings.fix.lock_dir.reset();
  }
  if (windows.guard_age != default_guard_age)
    settings.fix.guard_age = duration_text(timing.guard_age_ns);
  if (windows.tolerance != default_reuse_tolerance)
    settings.fix.tolerance = duration_text(timing.tolerance_ns);
  settings.jobs = timing.jobs != 0 ? timing.jobs : default_jobs();
  return settings;
}

SysResult<std::size_t> judge_area(System& system, const std::string& area,
                                  const SurveySettings& settings, const LabelIndex& labels,
                                  const std::set<std::string>& expected_locks,
                                  const std::function<void(const EntryView&)>& visit) {
  return survey_area(system, area, settings, labels, expected_locks, [&](const JudgedEntry& entry) {
    visit(EntryView{entry.facts, entry.verdict, entry.decision, entry.label});
  });
}

void judge_absent_locks(System& system, const std::string& area, const SurveySettings& given,
                        const LabelIndex& labels, const std::set<std::string>& names,
                        const std::function<void(const EntryView&)>& visit) {
  if (names.empty()) return;
  EntryJudge judge(system, area, given);
  for (const std::string& name : names) {
    const Judgement judged = judge.absent(name, labels.find(parse_entry_name(name).lock_name()));
    visit(EntryView{judged.facts, judged.verdict, judged.decision, judged.label});
  }
}

}  // namespace apnea_locks::cli
