#include "cli/apnea_message.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

#include "apnea_locks/names.h"

namespace apnea_locks::cli {

const std::vector<ApneaError>& apnea_errors() {
  // The messages of operation-lock.ts (Apnea 0.2.2), most specific first. The fallback
  // "remove-manually" (the end of the stale and malformed messages, pasted alone) comes
  // last: it is reported only when neither of them is recognised.
  static const std::vector<ApneaError> table = {
      {"stale", "OperationLocked stale",
       "Apnea lock owner pid PID is not live at LOCK. Automatic stale cleanup is disabled. Verify "
       "no Apnea process owns it, then Remove this lock directory manually: LOCK",
       "The process the lock's owner record names did not answer kill(PID, 0): Apnea thinks "
       "its owner died. Apnea takes over a dead owner's repository lock by itself once the lock "
       "is 60 s old, but never a global setup lock; until then it stops.",
       {"is not live at", "automatic stale cleanup is disabled"}},
      {"live", "OperationLocked live", "another Apnea operation holds LOCK for RESOURCE (pid PID)",
       "The lock's owner record names a process that is alive (or that Apnea may not signal): "
       "another Apnea is working there, or the pid now belongs to an unrelated program.",
       {"another apnea operation holds"}},
      {"malformed", "OperationLocked malformed",
       "Apnea lock metadata is malformed at LOCK. Automatic cleanup is disabled. Verify no Apnea "
       "process owns it, then Remove this lock directory manually: LOCK",
       "Apnea could not accept the lock's owner record (owner.json missing, unreadable, of the "
       "wrong mode or owner, not JSON, or without a valid pid and token), and never removes such "
       "a lock itself. Apnea also says this when another Apnea released the lock while it read it.",
       {"lock metadata is malformed", "automatic cleanup is disabled"}},
      {"guarded", "OperationLocked stale",
       "Apnea stale-lock reclamation is guarded at GUARD. Retry after the other operation "
       "completes. If the guard persists, stop all Apnea processes using LOCK, then remove this "
       "guard directory manually: GUARD",
       "Apnea found a dead owner's lock and wanted to take it over, but the lock's reclaim guard "
       "(LOCK.reclaim) exists: another process is reclaiming it right now, or one crashed doing "
       "so and left the guard, which Apnea never removes.",
       {"stale-lock reclamation is guarded", "remove this guard directory manually"}},
      {"raced", "OperationLocked raced", "Apnea lock changed repeatedly at LOCK; retry the operation",
       "Three attempts in a row found the lock taken and then gone again: other Apnea processes "
       "are taking and releasing it. Nothing is stuck; run Apnea again.",
       {"lock changed repeatedly"}},
      {"not-owned", "ConfigError", "Apnea lock directory is not owned by the current user: PATH",
       "A directory of the lock area (apnea-<uid> or operation-locks) belongs to another uid than "
       "the one the program runs as: another account made it first, or the program ran as "
       "another account (root) than the area's.",
       {"lock directory is not owned by the current user"}},
      {"unsafe", "ConfigError", "unsafe Apnea lock directory: PATH",
       "A directory of the lock area (apnea-<uid> or operation-locks) is a symbolic link or not "
       "a directory: Apnea refuses to use it.",
       {"unsafe apnea lock directory"}},
      {"acquire-failed", "ConfigError", "could not acquire Apnea operation lock: DETAIL",
       "Taking the lock failed with a system error (DETAIL names it: EACCES, ENOSPC, EROFS...), "
       "not because another process holds it.",
       {"could not acquire apnea operation lock"}},
      {"remove-manually", "OperationLocked stale or malformed",
       "... Verify no Apnea process owns it, then Remove this lock directory manually: LOCK",
       "Apnea refused a lock it does not clean up itself (a dead owner, or a record it cannot "
       "accept) and asks for a removal by hand. Do not remove it by hand: apnea-locks judges "
       "whether it can go and removes it without racing a live Apnea.",
       {"remove this lock directory manually", "verify no apnea process owns it"}},
  };
  return table;
}

namespace {

constexpr std::string_view fallback_id = "remove-manually";

/// A word break: a space, or any control byte (NUL, tab, newline, ESC..., DEL). A path never
/// holds one as printed, and lstat would stop at a NUL: so a path is never judged past one.
bool is_space(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte <= 0x20 || byte == 0x7f;
}

/// The longest directory read in front of an entry name (PATH_MAX): a longer one is none.
constexpr std::size_t max_directory = 4096;

bool is_word(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
}

/// Characters that open a quotation or a group a path may sit in: a path never starts
/// with them in a sentence.
bool opens(char c) { return c == '"' || c == '\'' || c == '`' || c == '(' || c == '<' || c == '[' || c == '{' || c == '='; }

/// The sentence's punctuation after a path.
bool trailing_punctuation(char c) {
  return c == '.' || c == ',' || c == ';' || c == ':' || c == ')' || c == ']' || c == '}' || c == '>' ||
         c == '"' || c == '\'' || c == '`' || c == '!' || c == '?';
}

/// The lines of `text` with their quote markers ("> ", "> > ") and trailing whitespace
/// dropped.
std::vector<std::string_view> unquoted_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t at = 0;
  while (at <= text.size()) {
    std::size_t end = text.find_first_of("\r\n", at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    std::size_t start = 0;
    for (;;) {
      while (start < line.size() && (line[start] == ' ' || line[start] == '\t')) ++start;
      if (start < line.size() && line[start] == '>') {
        ++start;
        continue;
      }
      break;
    }
    line.remove_prefix(start);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    lines.push_back(line);
    if (end == text.size()) break;
    at = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
  }
  return lines;
}

std::optional<std::size_t> entry_name_at(std::string_view text, std::size_t at);

/// True when `text` holds a whole lock name (`<kind>-<key>.lock`).
bool holds_lock_name(std::string_view text) {
  for (std::size_t at = text.find_first_of("rg"); at != std::string_view::npos; at = text.find_first_of("rg", at + 1))
    if (entry_name_at(text, at)) return true;
  return false;
}

/// The lines joined into one: with a space, or (`tight`) with nothing where a line ends
/// inside what looks like a path (its last word holds a `/` or starts an entry name), as a
/// re-wrap breaks one. A word that already holds a whole lock name, or is already as long as
/// a directory may be, is never glued to the next line. Whitespace and control bytes become
/// one space. Linear: what the current word holds is tracked as it grows.
std::string joined(const std::vector<std::string_view>& lines, bool tight) {
  // Longer than any lock name: a name cut at a line end is seen whole once the line is added.
  constexpr std::size_t overlap = 128;
  std::string out;
  std::size_t word_start = 0;  // where the last word of `out` starts
  bool has_slash = false, has_prefix = false, has_name = false;  // what that word holds
  auto new_word = [&] {
    out += ' ';
    word_start = out.size();
    has_slash = has_prefix = has_name = false;
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0 && !out.empty() && out.back() != ' ') {
      const bool inside = tight && !lines[i].empty() && !is_space(lines[i].front()) &&
                          out.size() - word_start <= max_directory && !has_name && (has_slash || has_prefix);
      if (!inside) new_word();
    }
    const std::size_t line_start = out.size();
    for (char c : lines[i]) {
      if (is_space(c)) {
        if (!out.empty() && out.back() != ' ') new_word();
      } else {
        out += c;
        has_slash = has_slash || c == '/';
      }
    }
    // What the last word holds now: only its new part (and a name's length before) is read.
    const std::size_t from = std::max(word_start, line_start > overlap ? line_start - overlap : 0);
    const std::string_view added = std::string_view(out).substr(from);
    has_prefix = has_prefix || added.find(kind_name(LockKind::repository)) != std::string_view::npos ||
                 added.find(kind_name(LockKind::global_setup)) != std::string_view::npos;
    has_name = has_name || holds_lock_name(added);
  }
  return out;
}

/// `text` in ASCII lower case (same length: positions stay), and with `fold_hyphens` "- "
/// folded to "-" (a re-wrap after a hyphen).
std::string lowered(std::string_view text, bool fold_hyphens) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (fold_hyphens && c == ' ' && i > 0 && text[i - 1] == '-') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

/// The entry name that starts at `at` in `text` (a lock name with, maybe, `.reclaim`,
/// `.candidate.TOKEN` or `.tombstone.UUID`): its length, or nothing.
std::optional<std::size_t> entry_name_at(std::string_view text, std::size_t at) {
  std::size_t pos = at;
  for (LockKind kind : {LockKind::repository, LockKind::global_setup}) {
    const std::string_view prefix = kind_name(kind);  // then '-'
    if (text.substr(at, prefix.size()) == prefix && text.substr(at + prefix.size(), 1) == "-")
      pos = at + prefix.size() + 1;
  }
  if (pos == at || !is_lock_key(text.substr(pos, 64))) return std::nullopt;
  pos += 64;
  if (text.substr(pos, lock_name_suffix.size()) != lock_name_suffix) return std::nullopt;
  pos += lock_name_suffix.size();
  const std::size_t guard_end = pos + guard_suffix.size();
  if (text.substr(pos, guard_suffix.size()) == guard_suffix && (guard_end >= text.size() || !is_word(text[guard_end])))
    return guard_end - at;
  for (std::string_view role : {candidate_infix, tombstone_infix}) {
    if (text.substr(pos, role.size()) != role) continue;
    std::size_t end = pos + role.size();
    while (end < text.size() && is_word(text[end])) ++end;
    if (end > pos + role.size()) return end - at;
  }
  return pos - at;
}

/// True for a byte a relative path's first component may end with before its `/`.
bool relative_path_byte(char c) { return is_word(c) || c == '.' || c == '~'; }

/// The directory part in front of the entry name at `name_at`: back to the start of the
/// word, from its first `/` (quotes of any script before it dropped), and across spaces to an
/// earlier word starting with `/` (a TMPDIR with spaces), at most four words back. Empty for a
/// bare name; relative (no leading `/`) when the word is; nothing when longer than PATH_MAX.
std::optional<std::string_view> directory_before(std::string_view text, std::size_t name_at) {
  if (name_at == 0 || text[name_at - 1] != '/') return std::string_view();
  const std::size_t limit = name_at > max_directory ? name_at - max_directory : 0;
  auto word_start = [&](std::size_t end) {
    std::size_t start = end;
    while (start > limit && !is_space(text[start - 1]) && !opens(text[start - 1])) --start;
    // From the word's first '/', unless a relative path's component is in front of it.
    const std::size_t slash = text.find('/', start);
    if (slash < end && slash > start && !relative_path_byte(text[slash - 1])) start = slash;
    return start;
  };
  std::size_t start = word_start(name_at);
  if (start == limit && limit > 0) return std::nullopt;
  std::size_t word = start;
  for (int words = 0; words < 4 && text[word] != '/' && word > limit + 1 && text[word - 1] == ' '; ++words) {
    const std::size_t earlier = word_start(word - 1);
    if (earlier == word - 1 || earlier == limit) break;
    word = earlier;
    if (text[word] == '/') start = word;
  }
  return text.substr(start, name_at - start);
}

/// Every entry path of `text`, in order (a path is what precedes its name, and the name),
/// each (name, path) once; at most `most` of them.
std::vector<std::pair<std::string, std::string>> entry_paths(std::string_view text, std::size_t most) {
  std::vector<std::pair<std::string, std::string>> found;  // (entry name, path)
  for (std::size_t at = 0; at < text.size() && found.size() < most; ++at) {
    if (text[at] != 'r' && text[at] != 'g') continue;
    if (at > 0 && (is_word(text[at - 1]) || text[at - 1] == '.')) continue;
    const auto length = entry_name_at(text, at);
    if (!length) continue;
    const std::string name(text.substr(at, *length));
    at += *length - 1;
    if (parse_entry_name(name).role == EntryRole::unknown) continue;
    const auto directory = directory_before(text, at + 1 - *length);
    if (!directory) continue;  // longer than PATH_MAX: no path Apnea printed
    std::pair<std::string, std::string> entry(name, std::string(*directory) + name);
    if (std::find(found.begin(), found.end(), entry) == found.end()) found.push_back(std::move(entry));
  }
  return found;
}

/// The area path after each of Apnea's area messages (`...: PATH`), punctuation dropped.
std::vector<std::string> area_paths(std::string_view text, std::string_view lower) {
  std::vector<std::string> found;
  for (std::string_view phrase : {std::string_view("lock directory is not owned by the current user: "),
                                  std::string_view("unsafe apnea lock directory: ")}) {
    for (std::size_t at = lower.find(phrase); at != std::string_view::npos; at = lower.find(phrase, at + 1)) {
      std::size_t start = at + phrase.size();
      while (start < text.size() && (text[start] == ' ' || opens(text[start]))) ++start;
      std::size_t end = start;
      while (end < text.size() && !is_space(text[end])) ++end;
      std::string path(text.substr(start, std::min(end - start, max_directory + 1)));
      if (const auto slash = path.find('/'); slash != std::string::npos && slash > 0 && !relative_path_byte(path[slash - 1]))
        path.erase(0, slash);  // “/tmp/apnea-1000”: from the first '/'
      while (!path.empty() && trailing_punctuation(path.back())) path.pop_back();
      if (path.starts_with('/') && path.size() <= max_directory) found.push_back(std::move(path));
    }
  }
  return found;
}

/// Every "pid N" of the text (any case; `pid: N`, `pid=N`, `pid #N`), the digits in order;
/// the first max_pasted_paths of them (each is looked up among those before).
std::vector<std::string> pids_of(std::string_view lower) {
  std::vector<std::string> pids;
  for (std::size_t at = lower.find("pid"); at != std::string_view::npos && pids.size() < max_pasted_paths;
       at = lower.find("pid", at + 1)) {
    if (at > 0 && is_word(lower[at - 1]) && lower[at - 1] != '-') continue;
    std::size_t pos = at + 3;
    while (pos < lower.size() && (lower[pos] == ' ' || lower[pos] == ':' || lower[pos] == '=' ||
                                    lower[pos] == '#' || lower[pos] == '"'))
      ++pos;
    std::size_t end = pos;
    while (end < lower.size() && end - pos < 20 && lower[end] >= '0' && lower[end] <= '9') ++end;
    if (end == pos || (end < lower.size() && is_word(lower[end]))) continue;
    std::string pid(lower.substr(pos, end - pos));
    if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(std::move(pid));
  }
  return pids;
}

}  // namespace

PastedText read_pasted(std::string_view text) {
  PastedText pasted;
  const std::vector<std::string_view> lines = unquoted_lines(text);
  const std::string spaced = joined(lines, false);
  const std::string tight = joined(lines, true);
  const std::string phrases = lowered(spaced, true);

  std::vector<std::pair<std::size_t, const ApneaError*>> matched;
  for (const ApneaError& error : apnea_errors()) {
    std::size_t first = std::string::npos;
    for (std::string_view phrase : error.phrases) first = std::min(first, phrases.find(phrase));
    if (first == std::string::npos) continue;
    if (error.id == fallback_id && !matched.empty()) continue;
    matched.emplace_back(first, &error);
  }
  std::stable_sort(matched.begin(), matched.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [at, error] : matched) pasted.errors.push_back(error);

  // Each entry once, by name: the spaced reading's path when it is absolute, else the tight
  // one's (a path broken by a re-wrap); the other reading kept as an alternative. A tight
  // reading that only extends a spaced absolute path (the next line's first word glued to
  // a whole name: `.candidate.TOKEN` + `Thanks`) is no entry. At most max_pasted_paths.
  auto spaced_paths = entry_paths(spaced, max_pasted_paths + 1);
  auto tight_paths = entry_paths(tight, max_pasted_paths + 1);
  std::erase_if(tight_paths, [&](const auto& tight_entry) {
    return std::any_of(spaced_paths.begin(), spaced_paths.end(), [&](const auto& spaced_entry) {
      return spaced_entry.second.starts_with('/') && spaced_entry.first != tight_entry.first &&
             tight_entry.second.starts_with(spaced_entry.second);
    });
  });
  std::vector<std::string> names;
  for (const auto* list : {&spaced_paths, &tight_paths})
    for (const auto& [name, path] : *list)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  if (names.size() > max_pasted_paths) {
    names.resize(max_pasted_paths);
    pasted.more_paths = true;
  }
  for (const std::string& name : names) {
    std::vector<std::string> readings;
    for (const auto* list : {&spaced_paths, &tight_paths})
      for (const auto& [found, path] : *list)
        if (found == name && std::find(readings.begin(), readings.end(), path) == readings.end())
          readings.push_back(path);
    std::stable_partition(readings.begin(), readings.end(),
                          [](const std::string& path) { return path.starts_with('/'); });
    FoundPath found{readings.front(), false, {readings.begin() + 1, readings.end()}};
    pasted.paths.push_back(std::move(found));
  }
  for (std::string& area : area_paths(spaced, lowered(spaced, false))) {
    if (pasted.paths.size() >= max_pasted_paths) {
      pasted.more_paths = true;
      break;
    }
    const bool seen = std::any_of(pasted.paths.begin(), pasted.paths.end(),
                                  [&](const FoundPath& p) { return p.path == area; });
    if (!seen) pasted.paths.push_back(FoundPath{std::move(area), true, {}});
  }
  pasted.pids = pids_of(lowered(spaced, false));
  return pasted;
}

}  // namespace apnea_locks::cli
