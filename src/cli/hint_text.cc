#include "cli/hint_text.h"

#include <fmt/format.h>

#include <utility>

#include "apnea_locks/owner.h"
#include "cli/summary.h"
#include "cli/terminal.h"
#include "cli/text.h"

namespace apnea_locks::cli {

Hint lock_hint_text(std::string kind, const LockHint& judged, std::string message) {
  Hint hint;
  hint.kind = std::move(kind);
  hint.message = std::move(message);
  hint.lock_path = judged.lock.path;
  hint.root = judged.lock.root;
  hint.state = state_name(judged.state);
  hint.reason = judged.reason;
  hint.fix_argv = judged.fix.argv;
  hint.fix = judged.fix.command;
  if (hint.fix.empty()) hint.next_step = judged.next_step;
  return hint;
}

std::optional<Hint> global_setup_hint_text(const GlobalSetupHint& judged, const std::string& next_step) {
  if (!judged.present || !judged.needs_attention) return std::nullopt;
  Hint hint = lock_hint_text(
      "global-setup", judged,
      fmt::format("The global setup lock of {} is {} ({}{}): Apnea never reclaims it, so every "
                  "Apnea run of this account stops on it.",
                  judged.lock.root, state_name(judged.state), judged.reason,
                  judged.pid ? fmt::format(", pid {}", pid_text(*judged.pid)) : std::string()));
  hint.next_step = next_step;
  return hint;
}

std::optional<Hint> enclosing_hint_text(const LocatedLock& enclosing, const std::string& here,
                                        const EntryView* entry) {
  if (enclosing.root == here) return std::nullopt;
  Hint hint;
  hint.kind = "enclosing-repository";
  hint.lock_path = enclosing.path;
  hint.root = enclosing.root;
  if (entry == nullptr || !entry->facts.stat) {
    hint.state = "free";
    hint.reason = "absent";
    hint.message = fmt::format(
        "{} is inside the repository {}, whose lock is free: Apnea run there is not blocked "
        "by a lock.",
        here, enclosing.root);
    return hint;
  }
  hint.state = state_name(entry->verdict.state);
  hint.reason = entry->verdict.reason;
  hint.fix_argv = entry->decision.fix.argv;
  hint.fix = entry->decision.fix.command;
  if (hint.fix.empty()) hint.next_step = entry->decision.next_step;
  const std::string pid = field_text(Field::pid, *entry);
  hint.message = fmt::format(
      "{} is inside the repository {}; Apnea run there uses its lock, which is {} ({}{}).", here,
      enclosing.root, hint.state, hint.reason, pid.empty() ? "" : ", pid " + pid);
  if (hint.fix.empty() && hint.next_step.empty())
    hint.next_step = "apnea-locks inspect " + shell_word(enclosing.path);
  return hint;
}

std::string hints_text(const std::vector<Hint>& hints, std::size_t width, bool colour) {
  std::string out;
  for (const Hint& hint : hints) {
    out += paint(wrap(printable(hint.message), width), sgr_bold, colour && hint.kind == "global-setup") + "\n";
    if (!hint.fix_argv.empty()) {
      out += "  fix: " + wrap_command(hint.fix_argv, width == 0 ? 0 : width, "       ").substr(7) + "\n";
    } else if (!hint.next_step.empty()) {
      out += wrap("  next step: " + printable(hint.next_step), width, "    ") + "\n";
    }
  }
  return out;
}

void write_hints_json(JsonWriter& json, const std::vector<Hint>& hints) {
  json.begin_array();
  for (const Hint& hint : hints) {
    json.begin_object();
    json.key("kind").string(hint.kind);
    json.key("message").string(hint.message);
    json.key("lock_path").string(hint.lock_path);
    json.key("root").string(hint.root);
    json.key("state").string(hint.state);
    json.key("reason").string(hint.reason);
    json.key("fix").optional_string(hint.fix.empty() ? std::nullopt : std::optional(hint.fix));
    json.key("fix_argv");
    write_argv(json, hint.fix_argv);
    json.key("next_step").optional_string(hint.next_step.empty() ? std::nullopt
                                                                 : std::optional(hint.next_step));
    json.end_object();
  }
  json.end_array();
}

}  // namespace apnea_locks::cli
