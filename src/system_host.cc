// The kernel's Host (system.h): the namespaces, mounts, filesystems and clock a proof rests on.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>

#include "detail/real_system.h"

namespace apnea_locks::detail {
namespace {

/// Reads a file whole; nothing on any error or when it holds more than `limit` bytes (a
/// truncated text would be taken for the whole).
std::optional<std::string> read_whole_file(const char* path, std::size_t limit) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buffer[16384];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || out.size() + static_cast<std::size_t>(n) > limit) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

std::optional<std::uint64_t> RealSystem::namespace_inode(std::string_view kind) {
  const std::string path = "/proc/self/ns/" + std::string(kind);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.st_ino);
}

std::string RealSystem::mount_info() {
  // A host with many mounts has a large mountinfo; one that does not fit is unknown.
  return read_whole_file("/proc/self/mountinfo", std::size_t{64} << 20).value_or(std::string());
}

std::optional<std::uint64_t> RealSystem::filesystem_magic(const std::string& path) {
  struct statfs st {};
  if (::statfs(path.c_str(), &st) != 0) return std::nullopt;
  // Magic numbers are 32 bits; f_type is a signed word that may sign-extend them.
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(st.f_type));
}

std::optional<std::int64_t> RealSystem::birth_time_ns(const std::string& path) {
  struct statx st {};
  if (::statx(AT_FDCWD, path.c_str(), AT_STATX_SYNC_AS_STAT, STATX_BTIME, &st) != 0)
    return std::nullopt;
  if ((st.stx_mask & STATX_BTIME) == 0) return std::nullopt;
  return std::int64_t{st.stx_btime.tv_sec} * 1'000'000'000 + st.stx_btime.tv_nsec;
}

std::optional<std::string> RealSystem::nfs_exports() {
  // Absent unless nfsd runs; a table too large to read whole counts as exporting everything.
  if (::access("/proc/fs/nfsd/exports", F_OK) != 0) return std::nullopt;
  return read_whole_file("/proc/fs/nfsd/exports", std::size_t{16} << 20).value_or("/\n");
}

}  // namespace apnea_locks::detail
