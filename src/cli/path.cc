// apnea-locks path: the lock path Apnea uses for a repository (or a home's global setup).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "apnea_locks/lock_area.h"
#include "apnea_locks/names.h"
#include "cli/area.h"
#include "cli/commands.h"
#include "cli/json_writer.h"
#include "cli/options.h"
#include "cli/text.h"

namespace apnea_locks::cli {
namespace {

constexpr CommandHelp help{
    "path",
    "path [options] [--repo PATH | --home PATH]",
    "Print the lock path Apnea uses for the repository at PATH (default: the current\n"
    "directory), or for the global setup lock of home PATH. Only computes a name: the lock\n"
    "directory need not exist.",
    "Exit status: 0, or 2 when PATH cannot be resolved (or a usage error)."};
constexpr std::string_view command_name = help.name;

}  // namespace

int path_command(const std::vector<std::string>& args) {
  AreaOptions area_options;
  std::string repo;
  std::string home;
  bool json = false;
  po::options_description options("Options");
  options.add_options()
      ("repo", po::value(&repo)->value_name("PATH"), "the repository at PATH (default: .)")
      ("home", po::value(&home)->value_name("PATH"), "the global setup lock of home PATH")
      ("json,J", po::bool_switch(&json), "print {\"lock_path\": ...}");
  add_area_options(options, area_options);
  auto parsed = parse_command_line(help, args, options);
  if (!parsed) return parsed.error();
  if (!repo.empty() && !home.empty()) {
    return usage_error(command_name, "give --repo PATH or --home PATH, not both");
  }

  System& system = real_system();
  auto opened = open_lock_area(system, area_options);
  if (!opened) return command_error(command_name, opened.error().exit_status, opened.error().message);
  const LockArea& area = *opened;
  const bool global = !home.empty();
  const std::string target = global ? home : (repo.empty() ? "." : repo);
  auto lock = locate_lock(system, area.directory,
                          global ? LockKind::global_setup : LockKind::repository, target);
  if (!lock) {
    return usage_error(command_name, fmt::format("{}: {}", target, errno_text(lock.error())));
  }
  if (json) {
    JsonWriter writer(stdout);
    writer.begin_object();
    write_schema(writer, "path");
    writer.key("lock_path").string(lock->path);
    writer.end_object();
    writer.finish();
  } else {
    fmt::print("{}\n", printable(lock->path));
  }
  return exit_ok;
}

}  // namespace apnea_locks::cli
