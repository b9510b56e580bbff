#include "apnea_locks/lock_area.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "apnea_locks/owner.h"
#include "detail/split.h"

namespace apnea_locks {

std::string node_normalize(std::string_view path) {
  if (path.empty()) return ".";
  const bool absolute = path.front() == '/';
  const bool trailing = path.back() == '/';
  std::vector<std::string_view> parts;
  for (std::string_view part : detail::split_parts(path, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
      }
      continue;
    }
    parts.push_back(part);
  }
  std::string out = absolute ? "/" : "";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  if (out.empty()) return absolute ? "/" : (trailing ? "./" : ".");
  if (trailing && out != "/") out += '/';
  return out;
}

std::string node_join(std::string_view a, std::string_view b) {
  std::string joined;
  for (std::string_view part : {a, b}) {
    if (part.empty()) continue;
    if (!joined.empty()) joined += '/';
    joined += part;
  }
  if (joined.empty()) return ".";
  return node_normalize(joined);
}

std::string node_dirname(std::string_view path) {
  // Node's posix dirname, step for step.
  if (path.empty()) return ".";
  const bool has_root = path.front() == '/';
  std::size_t end = std::string_view::npos;
  bool matched_slash = true;
  for (std::size_t i = path.size() - 1; i >= 1; --i) {
    if (path[i] == '/') {
      if (!matched_slash) {
        end = i;
        break;
      }
    } else {
      matched_slash = false;
    }
  }
  if (end == std::string_view::npos) return has_root ? "/" : ".";
  if (has_root && end == 1) return "//";
  return std::string(path.substr(0, end));
}

std::string node_tmpdir(System& system) {
  return node_tmpdir_from([&](const char* name) { return system.env(name); });
}

std::string node_tmpdir_from(const std::function<std::optional<std::string>(const char*)>& env) {
  std::string path;
  for (const char* name : {"TMPDIR", "TMP", "TEMP"}) {
    auto value = env(name);
    if (value && !value->empty()) {
      path = utf8_with_replacement(*value);
      break;
    }
  }
  if (path.empty()) path = "/tmp";
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

bool recognised_runtime(std::string_view executable) {
  if (executable.ends_with(" (deleted)")) executable.remove_suffix(10);
  const auto slash = executable.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? executable : executable.substr(slash + 1);
  if (base == "apnea-locks") return true;
  for (std::string_view prefix : {"node", "nodejs", "bun", "deno", "electron"})
    if (base.starts_with(prefix)) return true;
  return false;
}

std::vector<std::string> other_lock_areas(System& system, std::uint32_t uid, const std::string& own) {
  std::vector<std::string> areas;
  const auto processes = system.runtime_processes(uid);
  if (!processes) return areas;
  const std::string mine = node_normalize(own);
  for (const RuntimeProcess& process : *processes) {
    const std::string& environ = process.environment;
    const auto lookup = [&](const char* name) -> std::optional<std::string> {
      const std::string key = std::string(name) + "=";
      for (std::size_t at = 0; at < environ.size();) {
        const std::size_t end = std::min(environ.find('\0', at), environ.size());
        if (environ.compare(at, key.size(), key) == 0) return environ.substr(at + key.size(), end - at - key.size());
        at = end + 1;
      }
      return std::nullopt;
    };
    const std::string area = node_normalize(
        node_join(node_join(node_tmpdir_from(lookup), fmt::format("apnea-{}", uid)), "operation-locks"));
    if (area != mine && std::find(areas.begin(), areas.end(), area) == areas.end())
      areas.push_back(area);
  }
  return areas;
}

std::string node_homedir(System& system) {
  auto home = system.env("HOME");
  if (home && !home->empty()) return utf8_with_replacement(*home);
  return utf8_with_replacement(system.passwd_home(system.uid()).value_or(""));
}

std::string lock_directory_for_uid(System& system, std::uint32_t uid) {
  return node_join(node_join(node_tmpdir(system), fmt::format("apnea-{}", uid)),
                   "operation-locks");
}

std::string default_lock_directory(System& system) {
  return lock_directory_for_uid(system, system.uid());
}

std::string_view AreaCheck::name() const {
  switch (problem) {
    case AreaProblem::none: return "ok";
    case AreaProblem::missing: return "missing";
    case AreaProblem::symlink: return "symlink";
    case AreaProblem::not_directory: return "not-directory";
    case AreaProblem::foreign_owner: return "foreign-owner";
    case AreaProblem::open_mode: return "open-mode";
    case AreaProblem::unreadable: return "unreadable";
  }
  return "unknown";
}

std::string AreaCheck::message() const {
  switch (problem) {
    case AreaProblem::none: return "lock area is safe";
    case AreaProblem::missing: return fmt::format("{}: does not exist (no lock taken yet)", path);
    case AreaProblem::symlink:
      return fmt::format("unsafe Apnea lock directory: {}: is a symlink", path);
    case AreaProblem::not_directory:
      return fmt::format("unsafe Apnea lock directory: {}: is not a directory", path);
    case AreaProblem::foreign_owner:
      return fmt::format(
          "Apnea lock directory is not owned by the current user: {}: owner uid {}, expected {}",
          path, stat.uid, expected_uid);
    case AreaProblem::open_mode:
      return fmt::format("unsafe Apnea lock directory: {}: mode {:04o} has group/other bits",
                         path, stat.mode);
    case AreaProblem::unreadable:
      return fmt::format("cannot inspect Apnea lock directory: {}: {}", path, errno_text(error));
  }
  return path;
}

AreaCheck check_area(System& system, const std::string& lock_directory, std::uint32_t uid,
                     bool check_parent) {
  std::vector<std::string> components;
  if (check_parent) components.push_back(node_dirname(lock_directory));
  components.push_back(lock_directory);
  AreaCheck check;
  check.expected_uid = uid;
  for (const std::string& component : components) {
    check.path = component;
    auto st = system.lstat(component);
    if (!st) {
      if (st.error() == std::errc::no_such_file_or_directory) {
        check.problem = AreaProblem::missing;
      } else {
        check.problem = AreaProblem::unreadable;
        check.error = st.error();
      }
      return check;
    }
    check.stat = *st;
    switch (private_directory_problem(*st, uid)) {
      case PrivacyProblem::none: break;
      case PrivacyProblem::symlink: check.problem = AreaProblem::symlink; break;
      case PrivacyProblem::not_directory: check.problem = AreaProblem::not_directory; break;
      case PrivacyProblem::foreign_owner: check.problem = AreaProblem::foreign_owner; break;
      case PrivacyProblem::open_mode: check.problem = AreaProblem::open_mode; break;
    }
    if (!check.safe()) return check;
  }
  check.path.clear();
  return check;
}

std::string_view AccountArea::name() const {
  switch (problem) {
    case AccountAreaProblem::none: return "ok";
    case AccountAreaProblem::bad_name: return "bad-name";
    case AccountAreaProblem::symlink: return "symlink";
    case AccountAreaProblem::not_directory: return "not-directory";
    case AccountAreaProblem::owner_mismatch: return "owner-mismatch";
    case AccountAreaProblem::unreadable: return "unreadable";
  }
  return "unknown";
}

std::string AccountArea::entry_name() const {
  const std::size_t slash = top.rfind('/');
  return slash == std::string::npos ? top : top.substr(slash + 1);
}

std::string AccountArea::message() const {
  switch (problem) {
    case AccountAreaProblem::none: return "an account's lock area";
    case AccountAreaProblem::bad_name: return "name is not apnea-<uid>: not an account's lock area";
    case AccountAreaProblem::symlink: return "is a symlink: not surveyed";
    case AccountAreaProblem::not_directory: return "is not a directory: not surveyed";
    case AccountAreaProblem::owner_mismatch:
      return fmt::format("owned by uid {}, not {} as its name says: not surveyed", stat.uid,
                         uid.value_or(0));
    case AccountAreaProblem::unreadable: return fmt::format("cannot inspect: {}", errno_text(error));
  }
  return {};
}

std::optional<std::uint32_t> decimal_uid(std::string_view text) {
  if (text.empty() || text.size() > 10 || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value >= 0xffffffffULL) return std::nullopt;  // (uid_t)-1 is no uid
  return static_cast<std::uint32_t>(value);
}

Account account_of_uid(System& system, std::uint32_t uid) {
  return system.lookup_uid(uid).value_or(Account{"", uid, no_account_gid, ""});
}

SysResult<std::vector<AccountArea>> find_account_areas(System& system) {
  const std::string tmpdir = node_tmpdir(system);
  std::vector<std::string> names;
  auto listed = system.list_directory(tmpdir, [&](const DirEntry& entry) {
    if (entry.name.starts_with("apnea-")) names.push_back(entry.name);
    return true;
  });
  if (!listed) return std::unexpected(listed.error());
  std::vector<AccountArea> areas;
  for (const std::string& name : names) {
    AccountArea area;
    area.top = node_join(tmpdir, name);
    area.lock_directory = node_join(area.top, "operation-locks");
    area.uid = decimal_uid(std::string_view(name).substr(6));
    auto st = system.lstat(area.top);
    if (st) area.stat = *st;
    if (!area.uid) {
      area.problem = AccountAreaProblem::bad_name;
    } else if (!st) {
      area.problem = AccountAreaProblem::unreadable;
      area.error = st.error();
    } else if (st->type == FileType::symlink) {
      area.problem = AccountAreaProblem::symlink;
    } else if (st->type != FileType::directory) {
      area.problem = AccountAreaProblem::not_directory;
    } else if (st->uid != *area.uid) {
      area.problem = AccountAreaProblem::owner_mismatch;
    } else {
      area.account = account_of_uid(system, *area.uid);
    }
    areas.push_back(std::move(area));
  }
  std::sort(areas.begin(), areas.end(), [](const AccountArea& a, const AccountArea& b) {
    const auto key = [](const AccountArea& x) {
      return std::tuple(!x.uid.has_value(), x.uid.value_or(0), x.top);
    };
    return key(a) < key(b);
  });
  return areas;
}

}  // namespace apnea_locks
