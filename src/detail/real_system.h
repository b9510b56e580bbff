// The kernel's System, one role per file: src/system_files.cc, src/system_processes.cc
// (/proc through detail/procfs.h), src/system_host.cc and src/system_this_process.cc
// (ThisProcess, Accounts, SystemLog). Those and src/procfs.cc are the only files in the
// project that call the operating system. Not part of the library's interface (not
// installed); for src/.
#pragma once

#include <cerrno>
#include <system_error>

#include "apnea_locks/system.h"

namespace apnea_locks::detail {

/// A failed call's result carrying `error`.
inline std::unexpected<std::error_code> fail(int error) {
  return std::unexpected(std::error_code(error, std::generic_category()));
}
/// A failed call's result carrying errno.
inline std::unexpected<std::error_code> fail_errno() { return fail(errno); }

/// The System that talks to the kernel (real_system() holds the one instance). Safe to call
/// from several threads at once.
class RealSystem final : public System {
 public:
  // Files.
  SysResult<FileStat> lstat(const std::string& path) override;
  SysResult<int> open_read(const std::string& path) override;
  SysResult<FileStat> fstat(int fd) override;
  SysResult<std::size_t> pread(int fd, std::span<char> buffer, std::int64_t offset) override;
  void close(int fd) override;
  SysResult<void> mkdir(const std::string& path, std::uint32_t mode) override;
  SysResult<void> chmod(const std::string& path, std::uint32_t mode) override;
  SysResult<void> rename(const std::string& from, const std::string& to) override;
  SysResult<void> rmdir(const std::string& path) override;
  SysResult<void> rename_in(const DirRef& dir, const std::string& from, const std::string& to) override;
  SysResult<void> rmdir_in(const DirRef& dir, const std::string& name) override;
  SysResult<void> remove_tree(const std::string& path) override;
  SysResult<void> write_new_file(const std::string& path, std::string_view data,
                                 std::uint32_t mode) override;
  SysResult<void> replace_file(const std::string& path, std::string_view data) override;
  SysResult<void> fsync_directory(const std::string& path) override;
  SysResult<void> list_directory(const std::string& path,
                                 const std::function<bool(const DirEntry&)>& visit) override;
  SysResult<std::string> realpath(const std::string& path) override;
  SysResult<int> open_directory(const std::string& path) override;
  SysResult<int> open_directory_in(const DirRef& dir, const std::string& name) override;
  SysResult<void> list_directory_at(
      int fd, const std::function<bool(const DirEntry&)>& visit) override;
  SysResult<FileStat> stat_at(int fd, const std::string& name) override;
  SysResult<void> unlink_at(int fd, const std::string& name) override;
  SysResult<FileStat> lstat_in(const DirRef& dir, std::string_view name) override;
  SysResult<int> open_read_in(const DirRef& dir, std::string_view relative) override;
  SysResult<void> lock_exclusive(int fd) override;

  // Processes.
  int signal_probe(std::int64_t pid) override;
  std::optional<ProcessInfo> process_info(std::int64_t pid) override;
  std::int64_t boot_time_ns() override;
  std::vector<ProcessInfo> namespace_view() override;
  std::optional<std::vector<ProcessInfo>> paused_processes() override;
  std::optional<std::vector<RuntimeProcess>> runtime_processes(std::uint32_t uid) override;
  std::optional<std::string> runtime_sign(std::int64_t pid) override;

  // Host.
  std::optional<std::uint64_t> namespace_inode(std::string_view kind) override;
  std::string mount_info() override;
  std::optional<std::uint64_t> filesystem_magic(const std::string& path) override;
  std::optional<std::int64_t> birth_time_ns(const std::string& path) override;
  std::optional<std::string> nfs_exports() override;
  std::optional<std::string> file_server_reaching(const std::string& area) override;

  // ThisProcess.
  std::int64_t now_ns() override;
  void sleep(std::chrono::nanoseconds duration) override;
  std::uint32_t uid() override;
  std::uint32_t euid() override;
  std::int64_t pid() override;
  std::optional<std::string> env(const std::string& name) override;
  void random_bytes(std::span<std::byte> out) override;
  bool is_terminal(int fd) override;
  std::optional<int> terminal_columns(int fd) override;

  // Accounts.
  std::optional<std::string> passwd_home(std::uint32_t uid) override;
  std::optional<Account> lookup_account(const std::string& name) override;
  std::optional<Account> lookup_uid(std::uint32_t uid) override;
  SysResult<void> become(const Account& account) override;

  // SystemLog.
  AuditSink log_audit(const std::string& line) override;
  std::optional<std::uint32_t> login_uid() override;

 private:
  /// Removes the directory `name` (relative to `parent`) and all it holds, never following
  /// a symlink: every step is relative to a directory descriptor opened with O_NOFOLLOW.
  SysResult<void> remove_directory_at(int parent, const char* name);
};

}  // namespace apnea_locks::detail
