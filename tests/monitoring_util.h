// Shared by the tests that run real monitoring stacks (prometheus_stack_test.cc,
// nagios_stack_test.cc): finding their programs, a free loopback port, an HTTP GET, and a
// main() that reports "skipped" to meson (exit 77) with the reason when a program is absent.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace apnea_locks::testing {

/// The full path of `program` (an absolute path, or searched in PATH, then in /usr/sbin and
/// /sbin, where Debian puts nagios4); "" when it is not installed.
inline std::string find_program(const std::string& program) {
  if (program.starts_with("/")) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin";
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string candidate = path.substr(start, end - start) + "/" + program;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice for port 0).
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) std::abort();
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0)
    std::abort();
  ::close(fd);
  return ntohs(address.sin_port);
}

/// The body of `GET path` from 127.0.0.1:port (HTTP/1.0, so the server closes the
/// connection), or nothing when the connection or the response failed.
inline std::optional<std::string> http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return std::nullopt;
  }
  std::string response;
  char chunk[65536];
  ssize_t n;
  while ((n = ::read(fd, chunk, sizeof chunk)) > 0) response.append(chunk, static_cast<std::size_t>(n));
  ::close(fd);
  if (!response.starts_with("HTTP/1.") || response.find(" 200 ") == std::string::npos) return std::nullopt;
  const std::size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) return std::nullopt;
  return response.substr(body + 4);
}

/// main() of a monitoring-stack test: exit 77 (meson: SKIP) naming the missing programs and
/// the Debian packages that have them, else the doctest run.
inline int run_unless_missing(int argc, char** argv,
                              const std::vector<std::pair<std::string, std::string>>& needs,
                              int (*run)(int, char**)) {
  std::string missing;
  for (const auto& [program, package] : needs)
    if (find_program(program).empty()) missing += " " + program + " (Debian package " + package + ")";
  if (!missing.empty()) {
    std::fprintf(stderr, "\n*** SKIPPED: not installed:%s; `scripts/dev deps` installs them ***\n\n",
                 missing.c_str());
    return 77;
  }
  return run(argc, argv);
}

}  // namespace apnea_locks::testing
