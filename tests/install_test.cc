// What ships besides the binary: the man page renders without warnings and names every
// command and option, the bash completion loads and knows every command and option, and
// `meson install --destdir` installs all of it with the library, headers and pkg-config file.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks::testing;
namespace fs = std::filesystem;

namespace {

std::string source(const std::string& relative) { return test_env("APNEA_LOCKS_SOURCE") + "/" + relative; }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The commands `apnea-locks --help` lists.
std::vector<std::string> commands() {
  CommandResult help = run_command({test_env("APNEA_LOCKS_BIN"), "--help"});
  REQUIRE(help.status == 0);
  std::vector<std::string> out;
  std::istringstream lines(help.out);
  std::string line;
  bool in_list = false;
  while (std::getline(lines, line)) {
    if (line == "Commands:") {
      in_list = true;
      continue;
    }
    if (in_list && line.starts_with(" ") && line.size() > 1 && line[1] != ' ') {
      out.push_back(line.substr(1, line.find(' ', 1) - 1));
    } else if (in_list && line.empty()) {
      in_list = false;
    }
  }
  REQUIRE(out.size() >= 5);
  return out;
}

/// The long options (`--name`) a command's --help shows.
std::set<std::string> long_options(const std::string& command) {
  CommandResult help = run_command({test_env("APNEA_LOCKS_BIN"), command, "--help"});
  REQUIRE_MESSAGE(help.status == 0, command);
  std::set<std::string> out;
  const std::string& text = help.out;
  for (std::size_t at = text.find("--"); at != std::string::npos; at = text.find("--", at + 2)) {
    if (at > 0 && text[at - 1] != ' ' && text[at - 1] != '[' && text[at - 1] != '(' && text[at - 1] != '\n') continue;
    std::size_t end = at + 2;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-')) ++end;
    if (end > at + 2) out.insert(text.substr(at, end - at));
  }
  REQUIRE_MESSAGE(out.count("--help") == 1, command);
  return out;
}

}  // namespace

TEST_CASE("the man page renders with man --warnings and no warnings at 80 columns") {
  const std::string page = source("docs/apnea-locks.1");
  REQUIRE(fs::exists(page));
  TempDir dir;
  CommandResult result = run_command({"man", "--warnings", "-l", page},
                                     "exec 2>" + shell_quote(dir / "stderr") + "; MANWIDTH=80 LC_ALL=C.UTF-8 ");
  CHECK(result.status == 0);
  const std::string warnings = read_all(dir / "stderr");
  CHECK_MESSAGE(warnings.empty(), warnings);
  CHECK(result.out.find("APNEA-LOCKS(1)") != std::string::npos);
  std::istringstream lines(result.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::size_t columns = 0;
    for (unsigned char c : line) columns += (c & 0xC0) != 0x80;
    CHECK_MESSAGE(columns <= 80, line);
  }
}

TEST_CASE("the man page documents every command and every option") {
  CommandResult rendered = run_command({"man", "-l", source("docs/apnea-locks.1")}, "MANWIDTH=80 LC_ALL=C.UTF-8 ");
  REQUIRE(rendered.status == 0);
  const std::string& text = rendered.out;
  for (const std::string& command : commands()) {
    CHECK_MESSAGE(text.find("   " + command + " ") != std::string::npos, "section for ", command);
    for (const std::string& option : long_options(command))
      CHECK_MESSAGE(text.find(option) != std::string::npos, command, " ", option);
  }
  for (const char* section : {"EXIT STATUS", "JSON OUTPUT", "STATES AND REASONS", "EXAMPLES",
                              "PROMETHEUS METRICS", "ENVIRONMENT"})
    CHECK_MESSAGE(text.find(std::string("\n") + section + "\n") != std::string::npos, section);
}

TEST_CASE("the bash completion loads and completes every command and option") {
  const std::string file = source("docs/completion/apnea-locks.bash");
  TempDir dir;
  CommandResult loaded = run_command({"bash", "-c", "source \"$0\"; complete -p apnea-locks", file},
                                     "exec 2>" + shell_quote(dir / "stderr") + "; ");
  CHECK(loaded.status == 0);
  CHECK(loaded.out == "complete -F _apnea_locks apnea-locks\n");
  CHECK_MESSAGE(read_all(dir / "stderr").empty(), read_all(dir / "stderr"));

  // Runs the completion function for the words typed so far ("" = a new word).
  auto complete = [&](const std::string& words) {
    const std::string script =
        "source \"$0\"; read -ra COMP_WORDS <<< \"$1\"; [[ $1 == *' ' ]] && COMP_WORDS+=('');"
        " COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _apnea_locks; printf '%s\\n' \"${COMPREPLY[@]}\"";
    CommandResult result = run_command({"bash", "-c", script, file, words});
    REQUIRE(result.status == 0);
    std::set<std::string> out;
    std::istringstream lines(result.out);
    std::string line;
    while (std::getline(lines, line))
      if (!line.empty()) out.insert(line);
    return out;
  };
  const std::set<std::string> top = complete("apnea-locks ");
  for (const std::string& command : commands()) {
    CHECK_MESSAGE(top.count(command) == 1, command);
    const std::set<std::string> options = complete("apnea-locks " + command + " --");
    for (const std::string& option : long_options(command))
      CHECK_MESSAGE(options.count(option) == 1, command, " ", option);
  }
  CHECK(complete("apnea-locks status --format p") == std::set<std::string>{"prometheus"});
  CHECK(complete("apnea-locks status -o +sta") == std::set<std::string>{"+state", "+started"});
  CHECK(complete("apnea-locks status --state live,st") == std::set<std::string>{"live,stale"});
  CHECK(complete("apnea-locks chec") == std::set<std::string>{"check"});
}

TEST_CASE("meson install --destdir installs the binary, library, headers, pkg-config, man page, completion") {
  const std::string build = test_env("APNEA_LOCKS_BUILD_DIR");
  const std::string meson = test_env("APNEA_LOCKS_MESON");
  REQUIRE_MESSAGE(!build.empty(), "APNEA_LOCKS_BUILD_DIR is set by tests/meson.build");
  REQUIRE_MESSAGE(!meson.empty(), "APNEA_LOCKS_MESON is set by tests/meson.build");
  TempDir dest;
  CommandResult installed = run_command({meson, "install", "-C", build, "--destdir", dest.path(),
                                         "--no-rebuild", "--quiet"}, "exec 2>&1; ");
  REQUIRE_MESSAGE(installed.status == 0, installed.out);

  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dest.path()))
    if (!entry.is_directory()) files.push_back(entry.path().string().substr(dest.path().size()));
  auto find = [&](const std::string& suffix) -> std::string {
    for (const std::string& file : files)
      if (file.ends_with(suffix)) return dest.path() + file;
    return {};
  };
  std::string listing;
  for (const std::string& file : files) listing += file + "\n";

  const std::string binary = find("/bin/apnea-locks");
  REQUIRE_MESSAGE(!binary.empty(), listing);
  CommandResult version = run_command({binary, "--version"});
  CHECK(version.status == 0);
  CHECK(version.out.starts_with("apnea-locks "));

  CHECK_MESSAGE(!find("/libapnea_locks.a").empty(), listing);
  const std::string pc = find("/pkgconfig/apnea_locks.pc");
  REQUIRE_MESSAGE(!pc.empty(), listing);
  CHECK(read_all(pc).find("Libs: -L${libdir} -lapnea_locks") != std::string::npos);
  for (const auto& header : fs::directory_iterator(source("include/apnea_locks")))
    CHECK_MESSAGE(!find("/include/apnea_locks/" + header.path().filename().string()).empty(),
                  header.path().filename().string(), "\n", listing);

  const std::string man = find("/man/man1/apnea-locks.1");
  REQUIRE_MESSAGE(!man.empty(), listing);
  CHECK(read_all(man) == read_all(source("docs/apnea-locks.1")));
  const std::string completion = find("/bash-completion/completions/apnea-locks");
  REQUIRE_MESSAGE(!completion.empty(), listing);
  CHECK(read_all(completion) == read_all(source("docs/completion/apnea-locks.bash")));
}
