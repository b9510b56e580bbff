#include "cli/summary.h"

#include <fmt/format.h>

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <thread>

#include "apnea_locks/lock_area.h"
#include "apnea_locks/names.h"
#include "apnea_locks/scan.h"
#include "apnea_locks/survey.h"
#include "cli/render.h"

namespace apnea_locks::cli {

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

std::expected<Labels, std::string> build_labels(System& system, const LabelOptions& options) {
  if (options.scan_depth < 0) return std::unexpected(std::string("--scan-depth must be >= 0"));
  Labels labels;
  // Lazily: an area with nothing to label never hashes (OpenSSL's start is ~1 ms).
  labels.index.add_repository_lazily(system, ".");
  const std::string home = node_homedir(system);
  if (!home.empty()) labels.index.add_home_lazily(system, home);
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
         unsigned jobs = 0;
         const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), jobs);
         if (error != std::errc() || end != text.data() + text.size() || jobs < 1 || jobs > max_jobs)
           throw po::error(fmt::format("--jobs '{}': must be a whole number from 1 to {}",
                                       printable(text), max_jobs));
         timing.jobs = jobs;
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

std::expected<SurveySettings, std::string> judging_policy(System& system, const LockArea& area,
                                                          const TimingOptions& timing, bool force) {
  SurveySettings settings = survey_settings(system, area.directory, timing.tolerance_ns,
                                            timing.guard_age_ns, force);
  if (area.explicit_directory) {
    settings.fix.lock_dir = area.directory;
  }
  if (timing.guard_age_ns != default_guard_age_ns)
    settings.fix.guard_age = duration_text(timing.guard_age_ns);
  if (timing.tolerance_ns != default_tolerance_ns)
    settings.fix.tolerance = duration_text(timing.tolerance_ns);
  settings.jobs = timing.jobs != 0 ? timing.jobs : default_jobs();
  return settings;
}

SysResult<std::size_t> judge_area(System& system, const std::string& area,
                                  const SurveySettings& settings, const LabelIndex& labels,
                                  const std::set<std::string>& expected_locks,
                                  const std::function<void(const EntryView&)>& visit) {
  return survey_area(system, area, settings, labels, expected_locks, [&](const JudgedEntry& entry) {
    visit(EntryView{entry.facts, entry.verdict, entry.label, &entry.decision});
  });
}

void judge_absent_locks(const std::string& area, const SurveySettings& settings,
                        const LabelIndex& labels, const std::set<std::string>& names,
                        const std::function<void(const EntryView&)>& visit) {
  for (const std::string& name : names) {
    EntryFacts facts;
    facts.name = name;
    facts.path = entry_path(area, name);
    facts.parsed = parse_entry_name(name);
    const EntryLabel* label = labels.find(facts.parsed.lock_name());
    auto [verdict, decision] = judge_entry(facts, settings, label);
    visit(EntryView{facts, verdict, label, &decision});
  }
}

void AreaSummary::add(const EntryView& entry) {
  const Verdict& verdict = entry.verdict;
  const EntryFacts& facts = entry.facts;
  ++shown;
  if (verdict.needs_attention) ++attention;
  const std::string state(state_name(verdict.state));
  const std::string role(role_name(verdict.role));
  ++states[state];
  ++roles[role];
  ++classes[EntryClass{std::string(kind_name(facts.parsed.kind)), role, state}];
  switch (verdict.role) {
    case EntryRole::lock:
      if (verdict.state == EntryState::free) break;
      ++locks;
      if (verdict.state == EntryState::live) ++live;
      if (verdict.state == EntryState::stale) ++stale;
      if (verdict.state == EntryState::malformed || verdict.state == EntryState::live_malformed)
        ++malformed;
      if (verdict.age_ns)
        oldest_lock_age_ns = std::max(oldest_lock_age_ns.value_or(0), *verdict.age_ns);
      break;
    case EntryRole::candidate:
    case EntryRole::tombstone:
      if (verdict.state == EntryState::debris) ++debris;
      break;
    case EntryRole::reclaim_guard:
      if (verdict.state == EntryState::leftover) ++leftover_guards;
      break;
    case EntryRole::unknown: break;
  }
}

}  // namespace apnea_locks::cli
