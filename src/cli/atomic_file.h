// Replacing an output file so that readers never see part of it (for `--output-file`).
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "apnea_locks/system.h"

namespace apnea_locks::cli {

/// Replaces the file at `path` with `data` through System::replace_file (temporary file in
/// the same directory, fsync, rename, directory fsync). Fails with one line naming the path
/// ("cannot write PATH: ENOENT: no such file or directory").
std::expected<void, std::string> write_file_atomically(System& system, const std::string& path,
                                                       std::string_view data);

}  // namespace apnea_locks::cli
