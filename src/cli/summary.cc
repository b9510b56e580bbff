#include "cli/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <tuple>

#include "apnea_locks/names.h"
#include "apnea_locks/policy.h"
#include "cli/text.h"
#include "detail/owner.h"

namespace apnea_locks::cli {
namespace {

/// Sort rank of a state in the table: what needs a human first.
int state_rank(EntryState state) {
  switch (state) {
    case EntryState::malformed:
    case EntryState::live_malformed: return 0;
    case EntryState::stale: return 1;
    case EntryState::leftover: return 2;
    case EntryState::debris: return 3;
    case EntryState::live: return 4;
    case EntryState::in_flight: return 5;
    case EntryState::unknown: return 6;
    case EntryState::free: return 7;
  }
  return 8;
}

/// The states in the order the totals list them.
constexpr EntryState state_order[] = {
    EntryState::malformed, EntryState::live_malformed, EntryState::stale,   EntryState::leftover,
    EntryState::debris,    EntryState::live,           EntryState::in_flight, EntryState::unknown,
    EntryState::free};

}  // namespace

namespace {

/// entry_order with the name viewed, not copied (compared for every entry needing
/// attention, kept for few).
std::tuple<int, int, int, std::string_view> order_view(const EntryView& entry) {
  const bool attention = entry.verdict.needs_attention;
  const bool global = entry.facts.parsed.kind == LockKind::global_setup &&
                      entry.verdict.role == EntryRole::lock;
  return {attention ? 0 : 1, attention && global ? 0 : 1, state_rank(entry.verdict.state),
          entry.facts.name};
}

}  // namespace

EntryOrder entry_order(const EntryView& entry) {
  const auto [attention, global, rank, name] = order_view(entry);
  return {attention, global, rank, std::string(name)};
}

std::string entry_description(const EntryView& entry) {
  const EntryFacts& facts = entry.facts;
  const EntryRole role = facts.parsed.role;
  if (role == EntryRole::lock) {
    const bool global = facts.parsed.kind == LockKind::global_setup;
    if (entry.label != nullptr)
      return fmt::format("the {} lock of {}", global ? "global setup" : "repository",
                         printable(entry.label->path));
    return fmt::format("the {} lock {}", global ? "global setup" : "repository", printable(facts.name));
  }
  if (role == EntryRole::unknown) return fmt::format("the unknown entry {}", printable(facts.name));
  return fmt::format("the {} {}", role == EntryRole::reclaim_guard ? "reclaim guard" : role_name(role),
                     printable(facts.name));
}

void AreaSummary::add(const EntryView& entry) {
  const Verdict& verdict = entry.verdict;
  const EntryFacts& facts = entry.facts;
  ++shown;
  if (verdict.needs_attention) {
    ++attention;
    const auto order = order_view(entry);
    const auto worst = [&] {
      const auto& [attention_rank, global, rank, name] = next->order;
      return std::tuple<int, int, int, std::string_view>(attention_rank, global, rank, name);
    };
    if (!next || order < worst()) {
      NextStep step;
      step.order = entry_order(entry);
      step.name = facts.name;
      step.path = facts.path;
      step.description = entry_description(entry);
      step.state = state_name(verdict.state);
      step.reason = verdict.reason;
      step.fix_argv = entry.decision.fix.argv;
      step.fix = entry.decision.fix.command;
      step.next_step = entry.decision.next_step;
      step.why = entry.decision.why;
      next = std::move(step);
    }
  }
  // Counted by name, looked up without making a string (the names are few).
  auto count = [](auto& by_name, std::string_view name) {
    if (auto found = by_name.find(name); found != by_name.end()) ++found->second;
    else by_name.emplace(std::string(name), 1);
  };
  count(states, state_name(verdict.state));
  count(roles, role_name(verdict.role));
  // The metrics' labels are fields of the one field table (fields.h).
  std::array<std::string, 3> labels;
  const auto& label_fields = prometheus_label_fields();
  for (std::size_t i = 0; i < labels.size() && i < label_fields.size(); ++i) {
    labels[i] = field_text(label_fields[i], entry);
    if (labels[i].empty()) labels[i] = "unknown";
  }
  // Found by view: an entry class is made only the first time it is seen.
  const std::tuple<std::string_view, std::string_view, std::string_view> by_view{labels[0], labels[1],
                                                                                 labels[2]};
  if (auto found = classes.find(by_view); found != classes.end()) ++found->second;
  else classes.emplace(EntryClass{labels[0], labels[1], labels[2]}, 1);
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
      if (entry.facts.stat)
        oldest_lock_mtime_ns = std::min(oldest_lock_mtime_ns.value_or(entry.facts.stat->mtime_ns),
                                        entry.facts.stat->mtime_ns);
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

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string state_totals(const AreaSummary& summary) {
  std::string out;
  for (EntryState state : state_order) {
    const auto found = summary.states.find(std::string(state_name(state)));
    if (found == summary.states.end() || found->second == 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", found->second, found->first);
  }
  return out;
}

void write_summary_json(JsonWriter& json, const AreaSummary& summary) {
  json.begin_object();
  json.key("scanned").integer(static_cast<std::int64_t>(summary.scanned));
  json.key("entries").integer(static_cast<std::int64_t>(summary.shown));
  json.key("needs_attention").integer(static_cast<std::int64_t>(summary.attention));
  json.key("states").begin_object();
  for (const auto& [name, count] : summary.states) json.key_text(name).integer(static_cast<std::int64_t>(count));
  json.end_object();
  json.key("roles").begin_object();
  for (const auto& [name, count] : summary.roles) json.key_text(name).integer(static_cast<std::int64_t>(count));
  json.end_object();
  json.key("next");
  if (!summary.next) {
    json.null();
  } else {
    const NextStep& next = *summary.next;
    json.begin_object();
    json.key("name").string(next.name);
    json.key("path").string(next.path);
    json.key("description").string(next.description);
    json.key("state").string(next.state);
    json.key("reason").string(next.reason);
    json.key("fix").optional_string(next.fix.empty() ? std::nullopt : std::optional(next.fix));
    json.key("fix_argv");
    write_argv(json, next.fix_argv);
    json.key("next_step").optional_string(next.next_step.empty() ? std::nullopt
                                                                 : std::optional(next.next_step));
    json.key("why").string(next.why);
    json.end_object();
  }
  json.end_object();
}

std::string brief_name(std::string_view name, std::string_view ellipsis) {
  const EntryName parsed = parse_entry_name(name);
  if (parsed.role == EntryRole::unknown) return printable(name);
  // "<kind>-" is everything before the key; the 12 digits the table's KEY shows, then the rest.
  const std::size_t key_at = name.find(parsed.key);
  return printable(name.substr(0, key_at + 12)) + std::string(ellipsis) +
         printable(name.substr(key_at + parsed.key.size()));
}

namespace {

/// The shell text of `word`, cut into pieces of at most `first` columns (the first piece)
/// and `rest` columns (every other one), at character boundaries. Each piece is quoted on
/// its own, so the pieces joined by backslash-newlines read back as `word`.
std::vector<std::string> word_pieces(std::string_view word, std::size_t first, std::size_t rest) {
  std::vector<std::string> pieces;
  std::size_t start = 0;
  while (start < word.size()) {
    const std::size_t room = pieces.empty() ? first : rest;
    // Whole UTF-8 sequences (owner.h's step) while the piece fits; at least one, so a room
    // too small for any character still makes progress.
    std::size_t end = start + detail::utf8_step(word.substr(start)).length;
    while (end < word.size()) {
      const std::size_t next = end + detail::utf8_step(word.substr(end)).length;
      if (display_width(printable(shell_word(word.substr(start, next - start)))) > room) break;
      end = next;
    }
    pieces.push_back(printable(shell_word(word.substr(start, end - start))));
    start = end;
  }
  return pieces;
}

}  // namespace

std::string wrap_command(const std::vector<std::string>& argv, std::size_t width,
                         std::string_view indent) {
  std::string out;
  std::string line(indent);
  for (const std::string& word : argv) {
    const std::string quoted = printable(shell_word(word));
    // Room for the word and the " \" continuation that may follow it.
    if (line != indent && width != 0 &&
        display_width(line) + 1 + display_width(quoted) + 2 > width) {
      out += line + " \\\n";
      line = std::string(indent);
    }
    if (width != 0 && display_width(line) + display_width(quoted) + 2 > width &&
        width > display_width(line) + 3) {
      // Longer than a line of its own (a lock path is over 100 columns): continued with a
      // backslash at the end of the line and the rest from column 0 of the next, which the
      // shell joins into the one word. Every line keeps room for its continuation.
      const auto pieces = word_pieces(word, width - display_width(line) - 1, width - 2);
      for (std::size_t i = 0; i + 1 < pieces.size(); ++i) {
        out += line + pieces[i] + "\\\n";
        line.clear();
      }
      line += pieces.back();
      continue;
    }
    if (line != indent) line += ' ';
    line += quoted;
  }
  return out + line;
}

}  // namespace apnea_locks::cli
