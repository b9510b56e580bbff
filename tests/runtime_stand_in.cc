// Linked into every test program (tests/meson.build).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {

// Every test process stands in for an Apnea, which runs in Node: it maps a file named `node`
// (deleted at once), so /proc/<pid>/maps shows a recognised runtime (PROTOCOL.md section 10)
// for it and for every child it forks, and a live test process or forked child named in a
// record is not `pid-not-runtime`. A test that wants a live process that runs no runtime
// execs one (`sleep`). Set before main: no test runs without it.
[[maybe_unused]] const bool looks_like_node = [] {
  char folder[] = "/tmp/apnea-locks-test-runtime-XXXXXX";
  if (::mkdtemp(folder) == nullptr) std::abort();
  const std::string path = std::string(folder) + "/node";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, "n", 1) != 1) std::abort();
  void* mapped = ::mmap(nullptr, 1, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ::unlink(path.c_str());
  ::rmdir(folder);
  if (mapped == MAP_FAILED) std::abort();
  return true;
}();

}  // namespace
