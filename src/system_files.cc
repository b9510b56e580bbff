// The kernel's Files (system.h): paths, descriptors and entries relative to an open directory.
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "detail/real_system.h"

namespace apnea_locks::detail {
namespace {

FileType type_of(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return FileType::regular;
    case S_IFDIR: return FileType::directory;
    case S_IFLNK: return FileType::symlink;
    case S_IFIFO: return FileType::fifo;
    case S_IFSOCK: return FileType::socket;
    case S_IFBLK: return FileType::block;
    case S_IFCHR: return FileType::character;
    default: return FileType::unknown;
  }
}

FileType type_of_dirent(unsigned char d_type) {
  switch (d_type) {
    case DT_REG: return FileType::regular;
    case DT_DIR: return FileType::directory;
    case DT_LNK: return FileType::symlink;
    case DT_FIFO: return FileType::fifo;
    case DT_SOCK: return FileType::socket;
    case DT_BLK: return FileType::block;
    case DT_CHR: return FileType::character;
    default: return FileType::unknown;
  }
}

FileStat from_stat(const struct stat& st) {
  FileStat out;
  out.type = type_of(st.st_mode);
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.mode = st.st_mode & 07777;
  out.uid = st.st_uid;
  out.nlink = st.st_nlink;
  out.size = st.st_size;
  out.mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  out.ctime_ns = std::int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  return out;
}

/// One statx (with the birth time and mount id where the filesystem gives them), or, where
/// the kernel or a seccomp filter has no statx, the stat it falls back to.
SysResult<FileStat> statx_of(int dirfd, const char* path, int flags) {
  struct statx sx {};
  if (::statx(dirfd, path, flags, STATX_BASIC_STATS | STATX_BTIME | STATX_MNT_ID, &sx) != 0) {
    if (errno != ENOSYS) return fail_errno();
    struct stat st {};
    if (::fstatat(dirfd, path, &st, flags) != 0) return fail_errno();
    return from_stat(st);
  }
  struct stat st {};
  st.st_mode = sx.stx_mode;
  st.st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  st.st_ino = sx.stx_ino;
  st.st_uid = sx.stx_uid;
  st.st_nlink = sx.stx_nlink;
  st.st_size = static_cast<off_t>(sx.stx_size);
  st.st_mtim = {sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec};
  st.st_ctim = {sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec};
  FileStat out = from_stat(st);
  if ((sx.stx_mask & STATX_BTIME) != 0)
    out.birth_ns = std::int64_t{sx.stx_btime.tv_sec} * 1'000'000'000 + sx.stx_btime.tv_nsec;
  if ((sx.stx_mask & STATX_MNT_ID) != 0) out.mount_id = sx.stx_mnt_id;
  return out;
}

}  // namespace

SysResult<FileStat> RealSystem::lstat(const std::string& path) {
  return statx_of(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW);
}

SysResult<int> RealSystem::open_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail_errno();
  return fd;
}

SysResult<FileStat> RealSystem::fstat(int fd) { return statx_of(fd, "", AT_EMPTY_PATH); }

SysResult<std::size_t> RealSystem::pread(int fd, std::span<char> buffer, std::int64_t offset) {
  for (;;) {
    ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) return fail_errno();
  }
}

void RealSystem::close(int fd) { ::close(fd); }

SysResult<void> RealSystem::mkdir(const std::string& path, std::uint32_t mode) {
  if (::mkdir(path.c_str(), mode) != 0) return fail_errno();
  return {};
}

SysResult<void> RealSystem::chmod(const std::string& path, std::uint32_t mode) {
  if (::chmod(path.c_str(), mode) != 0) return fail_errno();
  return {};
}

SysResult<void> RealSystem::rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return fail_errno();
  return {};
}

SysResult<void> RealSystem::rmdir(const std::string& path) {
  if (::rmdir(path.c_str()) != 0) return fail_errno();
  return {};
}

SysResult<void> RealSystem::remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return fail_errno();
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return fail_errno();
    return {};
  }
  return remove_directory_at(AT_FDCWD, path.c_str());
}

SysResult<void> RealSystem::write_new_file(const std::string& path, std::string_view data,
                                           std::uint32_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return fail_errno();
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int error = errno;
      ::close(fd);
      return fail(error);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int error = errno;
    ::close(fd);
    return fail(error);
  }
  if (::close(fd) != 0) return fail_errno();
  return {};
}

SysResult<void> RealSystem::replace_file(const std::string& path, std::string_view data) {
  if (path.empty() || path.back() == '/') return fail(EISDIR);
  const auto slash = path.rfind('/');
  const std::string directory =
      slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  int fd = -1;
  std::string temp;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    std::array<std::byte, 6> noise{};
    random_bytes(noise);
    temp = directory + "/." + base + ".";
    for (std::byte b : noise) {
      static constexpr char hex[] = "0123456789abcdef";
      temp += hex[std::to_integer<unsigned>(b) >> 4];
      temp += hex[std::to_integer<unsigned>(b) & 15];
    }
    temp += ".tmp";
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return fail_errno();
  }
  if (fd < 0) return fail(EEXIST);
  auto abandon = [&](int error) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    return fail(error);
  };
  // A regular file (not through a symlink) keeps its read/write/execute bits, never
  // setuid, setgid or sticky; anything else (a symlink, nothing) gets 0644 less the umask.
  struct stat old {};
  if (::lstat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) &&
      ::fchmod(fd, old.st_mode & 0777) != 0)
    return abandon(errno);
  for (std::string_view rest = data; !rest.empty();) {
    const ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return abandon(errno);
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd) != 0) return abandon(errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return abandon(errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) return abandon(errno);
  // The file is in place; a filesystem that cannot sync directories is not an error.
  return fsync_directory(directory);
}

SysResult<void> RealSystem::fsync_directory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail_errno();
  int result = ::fsync(fd);
  int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL && error != ENOTSUP && error != EOPNOTSUPP)
    return fail(error);
  return {};
}

SysResult<void> RealSystem::list_directory(const std::string& path,
                                           const std::function<bool(const DirEntry&)>& visit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail_errno();
  auto listed = list_directory_at(fd, visit);
  ::close(fd);
  return listed;
}

SysResult<std::string> RealSystem::realpath(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return fail_errno();
  std::string out(resolved);
  std::free(resolved);
  return out;
}

SysResult<int> RealSystem::open_directory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail_errno();
  return fd;
}

SysResult<int> RealSystem::open_directory_in(const DirRef& dir, const std::string& name) {
  if (dir.fd < 0) return open_directory(dir.join(name));
  int fd = ::openat(dir.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail_errno();
  return fd;
}

SysResult<void> RealSystem::list_directory_at(
    int fd, const std::function<bool(const DirEntry&)>& visit) {
  // getdents64 on the descriptor itself, from its start: no second descriptor and no
  // DIR stream (which would cost an openat, an fstat and two fcntl calls; a release lists
  // its tombstone this way every time, a survey its area), and the entries listed are
  // those of the very directory the per-entry calls are relative to.
  if (::lseek(fd, 0, SEEK_SET) < 0) return fail_errno();
  alignas(struct dirent64) char buffer[32768];
  DirEntry entry;
  for (;;) {
    const ssize_t got = ::getdents64(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      return fail_errno();
    }
    if (got == 0) return {};
    for (ssize_t at = 0; at < got;) {
      const auto* item = reinterpret_cast<const struct dirent64*>(buffer + at);
      at += item->d_reclen;
      if (std::strcmp(item->d_name, ".") == 0 || std::strcmp(item->d_name, "..") == 0) continue;
      entry.name.assign(item->d_name);
      entry.type = type_of_dirent(item->d_type);
      if (!visit(entry)) return {};
    }
  }
}

SysResult<FileStat> RealSystem::stat_at(int fd, const std::string& name) {
  return statx_of(fd, name.c_str(), AT_SYMLINK_NOFOLLOW);
}

SysResult<void> RealSystem::rename_in(const DirRef& dir, const std::string& from,
                                      const std::string& to) {
  if (dir.fd < 0) return rename(dir.join(from), dir.join(to));
  if (::renameat(dir.fd, from.c_str(), dir.fd, to.c_str()) != 0) return fail_errno();
  return {};
}

SysResult<void> RealSystem::rmdir_in(const DirRef& dir, const std::string& name) {
  if (dir.fd < 0) return rmdir(dir.join(name));
  if (::unlinkat(dir.fd, name.c_str(), AT_REMOVEDIR) != 0) return fail_errno();
  return {};
}

SysResult<void> RealSystem::unlink_at(int fd, const std::string& name) {
  if (::unlinkat(fd, name.c_str(), 0) != 0) return fail_errno();
  return {};
}

SysResult<FileStat> RealSystem::lstat_in(const DirRef& dir, std::string_view name) {
  if (dir.fd < 0) return lstat(dir.join(name));
  const std::string relative(name);
  return statx_of(dir.fd, relative.c_str(), AT_SYMLINK_NOFOLLOW);
}

SysResult<int> RealSystem::open_read_in(const DirRef& dir, std::string_view relative) {
  if (dir.fd < 0) return open_read(dir.join(relative));
  const std::string name(relative);
  struct open_how how {};
  how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  // openat2 (Linux 5.6): no component may be a symlink. Without it, openat refuses only a
  // final one, as open_read does.
  static std::atomic<bool> no_openat2{false};
  if (!no_openat2.load(std::memory_order_relaxed)) {
    for (int tries = 1;; ++tries) {
      const long fd = ::syscall(SYS_openat2, dir.fd, name.c_str(), &how, sizeof how);
      if (fd >= 0) return static_cast<int>(fd);
      // EAGAIN: a rename elsewhere raced the walk (RESOLVE_BENEATH); try a few times.
      if ((errno == EAGAIN && tries < 8) || errno == EINTR) continue;
      if (errno != ENOSYS && errno != EPERM) return fail_errno();  // EPERM: a seccomp filter
      no_openat2.store(true, std::memory_order_relaxed);
      break;
    }
  }
  const int fd = ::openat(dir.fd, name.c_str(), static_cast<int>(how.flags));
  if (fd < 0) return fail_errno();
  return fd;
}

SysResult<void> RealSystem::lock_exclusive(int fd) {
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return fail_errno();
  return {};
}

SysResult<void> RealSystem::remove_directory_at(int parent, const char* name) {
  int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    return fail_errno();
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int error = errno;
    ::close(fd);
    return fail(error);
  }
  std::vector<std::pair<std::string, bool>> children;
  while (struct dirent* item = ::readdir(dir)) {
    if (std::strcmp(item->d_name, ".") == 0 || std::strcmp(item->d_name, "..") == 0) continue;
    bool is_dir = item->d_type == DT_DIR;
    if (item->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = ::fstatat(fd, item->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    children.emplace_back(item->d_name, is_dir);
  }
  SysResult<void> result;
  for (const auto& [child, is_dir] : children) {
    if (is_dir) {
      auto removed = remove_directory_at(fd, child.c_str());
      if (!removed && result) result = removed;
    } else if (::unlinkat(fd, child.c_str(), 0) != 0 && errno != ENOENT && result) {
      result = fail_errno();
    }
  }
  ::closedir(dir);
  if (::unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT && result)
    result = fail_errno();
  return result;
}

}  // namespace apnea_locks::detail
