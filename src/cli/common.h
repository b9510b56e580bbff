// What a subcommand reads: its command line (options.h) and the lock area with its labels
// and timing (area.h). Kept as one include for the subcommand files.
#pragma once

#include "cli/area.h"
#include "cli/options.h"
#include "cli/terminal.h"

#include <string>
#include <string_view>

namespace apnea_locks::cli {

/// The last component of `path`, trailing `/` dropped (inspect's and explain's one rule).
inline std::string base_name(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace apnea_locks::cli
