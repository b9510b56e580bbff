// apnea-locks: inspect and repair Apnea's operation locks.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/text.h"

namespace apnea_locks::cli {

const std::vector<CommandInfo>& commands() {
  static const std::vector<CommandInfo> table = {
      {"status", status_command, "list every lock of the area and what to do about it"},
      {"inspect", inspect_command, "everything known about one lock"},
      {"explain", explain_command, "read Apnea's message: what it meant, its locks judged, the next step"},
      {"path", path_command, "print the lock path Apnea uses for a repository or home"},
      {"reclaim", reclaim_command, "remove dead locks (and, with --force, debris) safely"},
      {"run", run_command, "hold an Apnea lock while a command runs"},
      {"check", check_command, "monitoring plugin: one Nagios/Icinga status line (or Prometheus)"},
  };
  return table;
}

namespace {

void usage(std::FILE* out) {
  fmt::print(out,
             "Usage:\n"
             " apnea-locks COMMAND [options]\n"
             " apnea-locks help COMMAND\n\n"
             "Inspect, hold, monitor and repair the operation locks of Apnea.\n\n"
             "Commands:\n");
  for (const auto& command : commands()) fmt::print(out, " {:<10} {}\n", command.name, command.summary);
  fmt::print(out,
             "\nOptions:\n"
             " -h, --help     display this help\n"
             " -V, --version  display version\n\n"
             "'apnea-locks COMMAND --help' (or 'apnea-locks help COMMAND') shows a command's\n"
             "options. Exit statuses, JSON fields, states and reasons: apnea-locks(1).\n\n"
             "For more details see apnea-locks(1).\n");
}

const CommandInfo* find_command(std::string_view name) {
  for (const auto& command : commands())
    if (name == command.name) return &command;
  return nullptr;
}

int unknown_command(std::string_view name) {
  return usage_error({}, fmt::format("unknown command '{}'", name));
}

}  // namespace

}  // namespace apnea_locks::cli

int main(int argc, char** argv) {
  using namespace apnea_locks::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error({}, "no command given");
  const std::string_view name = args.front();
  if (name == "-h" || name == "--help") {
    usage(stdout);
    return exit_ok;
  }
  if (name == "help") {
    if (args.size() == 1) {
      usage(stdout);
      return exit_ok;
    }
    // Exactly what COMMAND --help prints.
    if (args.size() > 2) return usage_error({}, "help takes one COMMAND");
    const CommandInfo* command = find_command(args[1]);
    if (command == nullptr) return unknown_command(args[1]);
    return command->run({"--help"});
  }
  if (name == "-V" || name == "--version") {
    print_version(stdout);
    return exit_ok;
  }
  if (const CommandInfo* command = find_command(name))
    return command->run(std::vector<std::string>(args.begin() + 1, args.end()));
  return unknown_command(name);
}
