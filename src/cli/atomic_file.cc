#include "cli/atomic_file.h"

#include <fmt/format.h>

namespace apnea_locks::cli {

std::expected<void, std::string> write_file_atomically(System& system, const std::string& path,
                                                       std::string_view data) {
  auto replaced = system.replace_file(path, data);
  if (!replaced)
    return std::unexpected(fmt::format("cannot write {}: {}", path, errno_text(replaced.error())));
  return {};
}

}  // namespace apnea_locks::cli
