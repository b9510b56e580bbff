// The seam's shared pieces: the one RealSystem, DirRef, and the helpers every caller uses.
#include "apnea_locks/system.h"

#include <cctype>
#include <cstring>

#include "detail/real_system.h"

namespace apnea_locks {

System& real_system() {
  static detail::RealSystem system;
  return system;
}

std::string DirRef::join(std::string_view name) const {
  if (path.empty()) return std::string(name);
  std::string joined;
  joined.reserve(path.size() + 1 + name.size());
  joined.append(path);
  if (joined.back() != '/') joined += '/';
  joined.append(name);
  return joined;
}

std::string_view file_type_name(FileType type) {
  switch (type) {
    case FileType::regular: return "file";
    case FileType::directory: return "directory";
    case FileType::symlink: return "symlink";
    case FileType::fifo: return "fifo";
    case FileType::socket: return "socket";
    case FileType::block: return "block-device";
    case FileType::character: return "char-device";
    case FileType::unknown: break;
  }
  return "unknown";
}

std::string_view pause_name(Pause pause) {
  switch (pause) {
    case Pause::none: break;
    case Pause::stopped: return "stopped";
    case Pause::traced: return "traced";
    case Pause::disk_sleep: return "in uninterruptible sleep";
    case Pause::frozen: return "frozen";
    case Pause::inspector: return "under an inspector";
    case Pause::unreadable: return "unreadable";
  }
  return "running";
}

SysResult<std::string> read_at_most(Files& files, int fd, std::size_t limit) {
  std::string bytes(limit, '\0');
  std::size_t offset = 0;
  while (offset < limit) {
    auto n = files.pread(fd, std::span<char>(bytes.data() + offset, limit - offset),
                         static_cast<std::int64_t>(offset));
    if (!n) return std::unexpected(n.error());
    if (*n == 0) break;
    offset += *n;
  }
  bytes.resize(offset);
  return bytes;
}

std::string errno_text(const std::error_code& error) {
  const char* name = ::strerrorname_np(error.value());
  std::string message = error.message();
  if (!message.empty()) message[0] = static_cast<char>(std::tolower(message[0]));
  return std::string(name != nullptr ? name : "E?") + ": " + message;
}

}  // namespace apnea_locks
