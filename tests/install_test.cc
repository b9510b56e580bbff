// What ships besides the binary: the man page renders without warnings and names every
// command and option, the bash completion loads and knows every command and option, and
// `meson install --destdir` installs all of it with the library, headers, docs and a
// pkg-config file a program can be built from; debian/changelog names the same release.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
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

/// The release meson.build names: its version and date.
std::string release_version() { return test_env("APNEA_LOCKS_VERSION"); }
std::string release_date() { return test_env("APNEA_LOCKS_RELEASE_DATE"); }

TEST_CASE("meson install --destdir installs the binary, library, headers, pkg-config, man page, completion, docs") {
  const std::string build = test_env("APNEA_LOCKS_BUILD_DIR");
  const std::string meson = test_env("APNEA_LOCKS_MESON");
  REQUIRE_MESSAGE(!build.empty(), "APNEA_LOCKS_BUILD_DIR is set by tests/meson.build");
  REQUIRE_MESSAGE(!meson.empty(), "APNEA_LOCKS_MESON is set by tests/meson.build");
  REQUIRE_MESSAGE(!release_date().empty(), "APNEA_LOCKS_RELEASE_DATE is set by tests/meson.build");
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
  CHECK(version.out == "apnea-locks " + release_version() + "\n");

  CHECK_MESSAGE(!find("/libapnea_locks.a").empty(), listing);
  for (const auto& header : fs::directory_iterator(source("include/apnea_locks")))
    CHECK_MESSAGE(!find("/include/apnea_locks/" + header.path().filename().string()).empty(),
                  header.path().filename().string(), "\n", listing);

  SUBCASE("the pkg-config file: private dependencies by name, no absolute library path, C++23") {
    const std::string pc = find("/pkgconfig/apnea_locks.pc");
    REQUIRE_MESSAGE(!pc.empty(), listing);
    const std::string text = read_all(pc);
    std::map<std::string, std::string> fields;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (auto colon = line.find(": "); colon != std::string::npos && line.find('=') > colon)
        fields[line.substr(0, colon)] = line.substr(colon + 2);
    CHECK(fields["Libs"] == "-L${libdir} -lapnea_locks");
    CHECK(fields["Requires.private"].find("libcrypto") != std::string::npos);
    CHECK(fields["Libs.private"].find("-lboost_json") != std::string::npos);
    CHECK(fields["Cflags"].find("-std=c++23") != std::string::npos);
    for (const char* field : {"Libs", "Libs.private", "Requires", "Requires.private"}) {
      const std::string& value = fields[field];
      const bool library_file = value.find(".a ") != std::string::npos || value.ends_with(".a") ||
                                value.find(".so") != std::string::npos;
      const bool absolute = value.find(" /") != std::string::npos || value.starts_with("/");
      CHECK_MESSAGE(!library_file, field, ": ", value);
      CHECK_MESSAGE(!absolute, field, ": ", value);
    }

    // A program built and linked from nothing but what pkg-config says about the staged
    // install: the headers, -std=c++23, the static library and its private dependencies.
    TempDir work;
    {
      std::ofstream program(work / "use.cc");
      program << "#include <apnea_locks/names.h>\n#include <apnea_locks/owner.h>\n#include <cstdio>\n"
                 "int main() {\n"
                 "  auto owner = apnea_locks::decode_owner(R\"({\"pid\":42,\"token\":\"t\"})\");\n"
                 "  std::printf(\"%s %s\\n\", apnea_locks::sha256_hex(\"x\").substr(0, 8).c_str(),\n"
                 "              owner ? apnea_locks::pid_text(owner->pid).c_str() : \"bad\");\n"
                 "}\n";
    }
    // PKG_CONFIG_SYSROOT_DIR: the staged tree stands for /, as for a cross or staged build.
    const std::string pc_dir = fs::path(pc).parent_path().string();
    CommandResult flags = run_command(
        {"pkg-config", "--static", "--cflags", "--libs", "apnea_locks"},
        "PKG_CONFIG_PATH=" + shell_quote(pc_dir) + " PKG_CONFIG_SYSROOT_DIR=" + shell_quote(dest.path()) + " ");
    REQUIRE_MESSAGE(flags.status == 0, flags.out);
    std::string line = flags.out;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    // A sanitized build installs a sanitized library: its users link the runtime too.
    if (const std::string sanitize = test_env("APNEA_LOCKS_SANITIZE"); !sanitize.empty() && sanitize != "none")
      line += " -fsanitize=" + sanitize;
    CommandResult built = run_command(
        {"sh", "-c", "c++ \"$1\" -o \"$2\" $3 2>&1", "sh", work / "use.cc", work / "use", line});
    REQUIRE_MESSAGE(built.status == 0, line, "\n", built.out);
    CommandResult ran = run_command({work / "use"});
    CHECK(ran.status == 0);
    CHECK(ran.out == "2d711642 42\n");
  }

  SUBCASE("the man page, dated and versioned from the release") {
    const std::string man = find("/man/man1/apnea-locks.1");
    REQUIRE_MESSAGE(!man.empty(), listing);
    // The source page with its .TH line's date and version fields replaced.
    std::istringstream source_lines(read_all(source("docs/apnea-locks.1")));
    std::string expected;
    bool dated = false;
    for (std::string line; std::getline(source_lines, line);) {
      if (line.starts_with(".TH APNEA-LOCKS 1 ")) {
        const std::size_t quote = line.find('"');
        const std::size_t after = line.find('"', quote + 1);
        REQUIRE(after != std::string::npos);
        line = ".TH APNEA-LOCKS 1 " + release_date() + " \"apnea-locks " + release_version() + "\"" +
               line.substr(after + 1);
        dated = true;
      }
      expected += line + "\n";
    }
    CHECK(dated);
    const std::string installed_page = read_all(man);
    CHECK(installed_page == expected);
  }

  SUBCASE("the bash completion") {
    const std::string completion = find("/bash-completion/completions/apnea-locks");
    REQUIRE_MESSAGE(!completion.empty(), listing);
    CHECK(read_all(completion) == read_all(source("docs/completion/apnea-locks.bash")));
  }

  SUBCASE("the documentation under share/doc/apnea-locks") {
    for (const char* doc : {"README.md", "LICENSE", "runbook.md", "metrics.md", "status.md",
                            "reclaim.md", "run.md", "protocol.md"}) {
      const std::string file = find(std::string("/share/doc/apnea-locks/") + doc);
      CHECK_MESSAGE(!file.empty(), doc, "\n", listing);
    }
  }

  SUBCASE("every path the units, the --help texts, the man page and the docs cite is installed") {
    // The installed doc dir, as the files give it ("/usr/local/share/doc/apnea-locks").
    const std::string runbook = find("/share/doc/apnea-locks/runbook.md");
    REQUIRE_MESSAGE(!runbook.empty(), listing);
    const std::string doc_dir = runbook.substr(dest.path().size(), runbook.size() - dest.path().size() - 11);
    const std::set<std::string> installed(files.begin(), files.end());
    auto cited = [&](const std::string& path, const std::string& where) {
      bool found = installed.count(path) != 0;
      if (!found && path.ends_with('/'))  // a directory: something installed under it
        for (const std::string& file : files) found = found || file.starts_with(path);
      CHECK_MESSAGE(found, where, " cites ", path, ", which is not installed\n", listing);
    };
    int count = 0;
    // The service's Documentation= file: paths and its ExecStart.
    const std::string service = find("/systemd/system/apnea-locks-metrics.service");
    REQUIRE_MESSAGE(!service.empty(), listing);
    const std::string unit = read_all(service);
    const std::regex file_url(R"(file:(/\S+))");
    for (std::sregex_iterator it(unit.begin(), unit.end(), file_url), end; it != end; ++it, ++count)
      cited((*it)[1], "the service's Documentation=");
    const std::regex exec_start(R"(ExecStart=(\S+))");
    std::smatch exec;
    REQUIRE(std::regex_search(unit, exec, exec_start));
    cited(exec[1], "the service's ExecStart=");
    // Paths under the doc dir in every --help text (the installed binary's).
    const std::regex doc_path("(" + doc_dir + R"(/[A-Za-z0-9._/-]*[A-Za-z0-9/]))");
    for (const char* command : {"status", "inspect", "path", "reclaim", "run", "check"}) {
      CommandResult help = run_command({binary, command, "--help"});
      for (std::sregex_iterator it(help.out.begin(), help.out.end(), doc_path), end; it != end; ++it, ++count)
        cited((*it)[1], std::string(command) + " --help");
    }
    // The man page and the docs name the Debian package's doc dir; the same names here.
    const std::regex debian_doc(R"((?:/usr/)?share/doc/apnea-locks/([A-Za-z0-9._/-]*[A-Za-z0-9/]))");
    std::vector<std::pair<std::string, std::string>> texts = {{"the man page", read_all(source("docs/apnea-locks.1"))},
                                                              {"README.md", read_all(source("README.md"))}};
    for (const auto& entry : fs::directory_iterator(source("docs")))
      if (entry.path().extension() == ".md") texts.emplace_back(entry.path().filename(), read_all(entry.path()));
    for (auto& [where, text] : texts) {
      std::string plain;
      for (std::size_t i = 0; i < text.size(); ++i)
        if (!(text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '-')) plain += text[i];  // roff's \-
      for (std::sregex_iterator it(plain.begin(), plain.end(), debian_doc), end; it != end; ++it, ++count)
        cited(doc_dir + "/" + std::string((*it)[1]), where);
    }
    CHECK(count >= 5);
  }
}

TEST_CASE("debian/changelog's newest entry is the release meson.build names") {
  std::istringstream changelog(read_all(source("debian/changelog")));
  std::string first;
  REQUIRE(std::getline(changelog, first));
  // "apnea-locks (0.1.0) unstable; urgency=medium": a native package, or 0.1.0-N
  const std::string head = "apnea-locks (" + release_version();
  CHECK_MESSAGE((first.starts_with(head + ")") || first.starts_with(head + "-")), first);
  std::string line;
  std::string trailer;
  while (std::getline(changelog, line))
    if (line.starts_with(" -- ")) {
      trailer = line;
      break;
    }
  REQUIRE(!trailer.empty());
  // " -- Name <mail>  Thu, 03 Dec 2026 12:00:00 +0000", the date as dpkg-parsechangelog reads it
  CommandResult date = run_command({"date", "-u", "-d", trailer.substr(trailer.find(">  ") + 3), "+%F"});
  REQUIRE(date.status == 0);
  CHECK(date.out == release_date() + "\n");
}
