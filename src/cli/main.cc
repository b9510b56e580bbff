// apnea-locks: inspect and repair Apnea's operation locks.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/render.h"

#ifndef APNEA_LOCKS_VERSION
#define APNEA_LOCKS_VERSION "unknown"
#endif

namespace apnea_locks::cli {

const std::vector<CommandInfo>& commands() {
  static const std::vector<CommandInfo> table = {
      {"status", status_command, "list every lock of the area and what to do about it"},
      {"inspect", inspect_command, "everything known about one lock"},
      {"path", path_command, "print the lock path Apnea uses for a repository or home"},
      {"reclaim", reclaim_command, "remove dead locks (and, with --force, debris) safely"},
      {"run", run_command, "hold an Apnea lock while a command runs"},
      {"check", check_command, "monitoring plugin: one Nagios/Icinga status line (or Prometheus)"},
  };
  return table;
}

namespace {
void usage(std::FILE* out) {
  fmt::print(out, "Usage: apnea-locks COMMAND [OPTIONS]\n\n"
                  "Inspect and repair the operation locks of Apnea.\n\nCommands:\n");
  for (const auto& command : commands()) fmt::print(out, "  {:<10} {}\n", command.name, command.summary);
  fmt::print(out, "\nOptions:\n  -h, --help     show this help\n  -V, --version  print the version\n");
  fmt::print(out, "\nRun 'apnea-locks COMMAND --help' for a command's options.\n");
  fmt::print(out, "Exit statuses, JSON fields, states and reasons: man apnea-locks.\n");
}
}  // namespace

}  // namespace apnea_locks::cli

int main(int argc, char** argv) {
  using namespace apnea_locks::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    usage(stderr);
    return exit_usage;
  }
  const std::string_view name = args.front();
  if (name == "-h" || name == "--help" || name == "help") {
    usage(stdout);
    return exit_ok;
  }
  if (name == "-V" || name == "--version") {
    fmt::print("apnea-locks {}\n", APNEA_LOCKS_VERSION);
    return exit_ok;
  }
  for (const auto& command : commands()) {
    if (name == command.name) return command.run(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  fmt::print(stderr, "apnea-locks: unknown command '{}' (see 'apnea-locks --help')\n", printable(name));
  return exit_usage;
}
