// The subcommands of apnea-locks. Each lives in its own file under src/cli/ and returns the
// process exit status. `args` excludes the program and subcommand names.
#pragma once

#include <string>
#include <vector>

namespace apnea_locks {
class System;
}

namespace apnea_locks::cli {

/// Exit statuses shared by every subcommand.
inline constexpr int exit_ok = 0;
inline constexpr int exit_attention = 1;  ///< something needs attention / was refused
inline constexpr int exit_usage = 2;
inline constexpr int exit_unsafe = 3;     ///< the lock area is unsafe or unreadable
/// A path the user typed (--lock-dir, --repo, --home, --scan) does not exist or is not a
/// directory: the same status as an unreadable area, distinct from a usage error.
inline constexpr int exit_bad_path = exit_unsafe;

/// A subcommand's entry point.
using Command = int (*)(const std::vector<std::string>& args);

/// One row of the subcommand table: name, entry point, one-line summary.
struct CommandInfo {
  const char* name;
  Command run;
  const char* summary;
};

/// `status`: every entry of the lock area, judged (src/cli/status.cc).
int status_command(const std::vector<std::string>& args);
/// `inspect`: everything known about one lock (src/cli/inspect.cc).
int inspect_command(const std::vector<std::string>& args);
/// `explain`: Apnea's message read, each entry it names judged, the next step
/// (src/cli/explain.cc).
int explain_command(const std::vector<std::string>& args);
/// `path`: the lock path Apnea uses for a repository or home (src/cli/path.cc).
int path_command(const std::vector<std::string>& args);
/// `check`: a Nagios/Icinga monitoring plugin over the lock area (src/cli/check.cc).
int check_command(const std::vector<std::string>& args);
/// `check` on `system` (check_command passes real_system(); tests stage a hang through it).
int check_main(System& system, const std::vector<std::string>& args);

/// `reclaim`: removes dead locks with Apnea's guarded protocol (src/cli/reclaim.cc).
int reclaim_command(const std::vector<std::string>& args);
/// `run`: holds an Apnea lock while a command runs (src/cli/run.cc).
int run_command(const std::vector<std::string>& args);

/// Every subcommand, in the order `--help` lists them.
const std::vector<CommandInfo>& commands();

}  // namespace apnea_locks::cli
