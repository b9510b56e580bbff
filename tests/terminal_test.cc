// The built apnea-locks on a real terminal: run under a pseudo-terminal (forkpty) of 80
// and 200 columns, no line of `status` is wider than the terminal, the footer is there,
// colour appears only on a terminal (or with --color=always) and never with NO_COLOR,
// TERM=dumb or --color=never, and COLUMNS stands in for a terminal that reports no width.
#include <fcntl.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "apnea_locks/names.h"
#include "area_builder.h"
#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks;
using namespace apnea_locks::testing;

namespace {

std::string bin() { return test_env("APNEA_LOCKS_BIN"); }

/// What a command wrote to its terminal, and how it exited.
struct TerminalRun {
  int status = -1;
  std::string screen;  ///< the output, "\r\n" turned back into "\n"
};

/// Runs `args` (after the binary) on a new pseudo-terminal `columns` wide (0: one that
/// reports no width), in `directory`, with `env` set on top of this environment (an empty
/// value unsets the variable).
TerminalRun on_terminal(const std::vector<std::string>& args, unsigned columns,
                        const std::map<std::string, std::string>& env = {},
                        const std::string& directory = ".") {
  struct winsize size {};
  size.ws_row = 50;
  size.ws_col = static_cast<unsigned short>(columns);
  int master = -1;
  const pid_t child = ::forkpty(&master, nullptr, nullptr, &size);
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::chdir(directory.c_str()) != 0) ::_exit(126);
    for (const auto& [name, value] : env) {
      if (value.empty()) ::unsetenv(name.c_str());
      else ::setenv(name.c_str(), value.c_str(), 1);
    }
    std::vector<std::string> words{bin()};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  TerminalRun run;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n > 0) {
      run.screen.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EIO: the child's side is closed
  }
  ::close(master);
  int status = 0;
  ::waitpid(child, &status, 0);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::string screen;
  for (std::size_t i = 0; i < run.screen.size(); ++i)
    if (!(run.screen[i] == '\r' && i + 1 < run.screen.size() && run.screen[i + 1] == '\n')) screen += run.screen[i];
  run.screen = screen;
  return run;
}

/// Display columns of a line, colour escapes not counted (UTF-8 code points; the output
/// holds no wide characters).
std::size_t columns_of(const std::string& line) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b') {
      while (i < line.size() && line[i] != 'm') ++i;
      continue;
    }
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has_colour(const std::string& text) { return text.find("\x1b[") != std::string::npos; }

/// A lock area with one entry in each state, its repositories labelled by --scan, the
/// global setup lock of HOME dead: what an operator sees at its worst.
struct Incident {
  TempDir root;
  std::string area = root / "locks";
  std::string home = root / "home";
  std::string code = root / "home/code";
  Sleeper live;

  std::string repo(const std::string& name) {
    const std::string path = code + "/" + name;
    std::filesystem::create_directories(path + "/.apnea");
    return *real_system().realpath(path);
  }
  std::string lock_of(LockKind kind, const std::string& path) { return lock_name(kind, lock_key(kind, path)); }

  Incident() {
    make_dir(area);
    make_dir(home);
    const std::string canonical_home = *real_system().realpath(home);
    std::filesystem::create_directories(code);
    make_entry(area, lock_of(LockKind::repository, repo("app")), owner_json(live.pid()));
    make_entry(area, lock_of(LockKind::repository, repo("api-with-a-rather-long-name")), owner_json(dead_pid()));
    make_entry(area, lock_of(LockKind::global_setup, canonical_home), owner_json(dead_pid()));
    make_entry(area, lock_of(LockKind::repository, repo("web")), owner_json(dead_pid()), 0700, 0644);
    make_entry(area, lock_of(LockKind::repository, repo("docs")), owner_json(live.pid()), 0700, 0644);
    const std::string tools = lock_of(LockKind::repository, repo("tools"));
    const std::string debris = make_entry(area, tools + ".candidate.9b1de3a0-1111-4222-8333-444455556666",
                                          owner_json(dead_pid()));
    age_path(debris, 900);
    const std::string guard = area + "/" + lock_of(LockKind::repository, repo("gone")) + ".reclaim";
    make_dir(guard);
    age_path(guard, 3600);
    make_entry(area, lock_of(LockKind::repository, repo("tools")) + ".candidate.live", owner_json(live.pid()));
    make_dir(area + "/notes.txt");
  }

  std::map<std::string, std::string> env(const std::string& term = "xterm") const {
    return {{"HOME", home}, {"TERM", term}, {"NO_COLOR", ""}, {"COLUMNS", ""}, {"LANG", "C.UTF-8"}, {"LC_ALL", ""}};
  }
  std::vector<std::string> status(std::vector<std::string> more = {}) const {
    std::vector<std::string> args{"status", "--lock-dir", area, "--scan", code};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
};

}  // namespace

// issue 32 item 4: a footer whose next step is prose naming a lock path (the live-malformed
// one's chmod, over 100 columns) fits too: the path is split with a trailing backslash.
TEST_CASE("status on an 80-column terminal: a next step naming a long path is split, no line wider") {
  Incident incident;
  REQUIRE(incident.live.ok());
  const TerminalRun run = on_terminal(incident.status({"--state", "live-malformed"}), 80, incident.env());
  CAPTURE(run.screen);
  CHECK(run.screen.find("next step: if pid ") != std::string::npos);
  CHECK(run.screen.find("chmod 600 --") != std::string::npos);
  for (const std::string& line : lines_of(run.screen)) CHECK_MESSAGE(columns_of(line) <= 80, line);
}

TEST_CASE("status on an 80- and a 200-column terminal: no line wider, the footer there") {
  Incident incident;
  REQUIRE(incident.live.ok());
  for (unsigned width : {80u, 200u}) {
    CAPTURE(width);
    const TerminalRun run = on_terminal(incident.status(), width, incident.env());
    CAPTURE(run.screen);
    if (std::getenv("APNEA_LOCKS_SHOW_SCREEN") != nullptr) MESSAGE(run.screen);  // for a note or a review
    CHECK(run.status == 1);
    const auto lines = lines_of(run.screen);
    for (const std::string& line : lines) CHECK_MESSAGE(columns_of(line) <= width, line);
    // Every state shows; the dead global setup lock is named first, with its fix.
    for (const char* state : {"live", "stale", "malformed", "live-malformed", "in-flight", "debris",
                              "leftover", "unknown"})
      CHECK(run.screen.find(std::string(" ") + state) != std::string::npos);
    REQUIRE(!lines.empty());
    CHECK(lines[0].find("The global setup lock of") != std::string::npos);
    CHECK(run.screen.find("  fix: apnea-locks reclaim") != std::string::npos);
    // The footer: totals by state, then the next step.
    CHECK(run.screen.find("1 malformed, 1 live-malformed, 2 stale, 1 leftover, 1 debris, 1 live") !=
          std::string::npos);
    CHECK(run.screen.find("need attention") != std::string::npos);
    CHECK(run.screen.find("Next: the global setup lock of") != std::string::npos);
    CHECK(has_colour(run.screen));  // a terminal, TERM=xterm, no NO_COLOR
  }
  // 80 columns cannot hold every default column: the footer says which are hidden; the
  // fix of a row is shortened with an ellipsis, and the key to its 12 digits.
  const TerminalRun narrow = on_terminal(incident.status(), 80, incident.env());
  CHECK(narrow.screen.find("Hidden to fit 80 columns:") != std::string::npos);
  bool shortened_fix = false;
  for (const std::string& line : lines_of(narrow.screen))
    shortened_fix = shortened_fix || (line.find(" apnea-locks re") != std::string::npos &&
                                      line.find("\xe2\x80\xa6") != std::string::npos);
  CHECK(shortened_fix);
  const TerminalRun wide = on_terminal(incident.status({"-o", "+key"}), 200, incident.env());
  CHECK(wide.screen.find("Hidden") == std::string::npos);
  // LANG=C: the ellipsis is three dots.
  auto c_locale = incident.env();
  c_locale["LANG"] = "C";
  const TerminalRun ascii = on_terminal(incident.status(), 80, c_locale);
  CHECK(ascii.screen.find("\xe2\x80\xa6") == std::string::npos);
  CHECK(ascii.screen.find("...") != std::string::npos);
}

TEST_CASE("--notruncate (-u, as lslocks') and output that is not a terminal keep everything") {
  Incident incident;
  for (const char* flag : {"--notruncate", "-u"}) {
    CAPTURE(flag);
    const TerminalRun full = on_terminal(incident.status({flag}), 80, incident.env());
    CHECK(full.screen.find("Hidden") == std::string::npos);
    CHECK(full.screen.find("\xe2\x80\xa6") == std::string::npos);
    CHECK(full.screen.find("KEY") != std::string::npos);
    bool wider = false;
    for (const std::string& line : lines_of(full.screen)) wider = wider || columns_of(line) > 80;
    CHECK(wider);  // the user asked for every column, wrapping or not
  }
  const CommandResult piped = run_command({bin(), "status", "--lock-dir", incident.area, "--scan", incident.code},
                                          "COLUMNS=80 HOME=" + shell_quote(incident.home) + " ");
  CHECK(piped.out.find("Hidden") == std::string::npos);
  CHECK(piped.out.find("...") == std::string::npos);
  CHECK(piped.out.find("STARTED") != std::string::npos);
}

TEST_CASE("colour only on a terminal or with --color=always; NO_COLOR, TERM=dumb, never") {
  Incident incident;
  CHECK(has_colour(on_terminal(incident.status(), 200, incident.env()).screen));
  auto no_colour = incident.env();
  no_colour["NO_COLOR"] = "1";
  CHECK_FALSE(has_colour(on_terminal(incident.status(), 200, no_colour).screen));
  CHECK(has_colour(on_terminal(incident.status({"--color=always"}), 200, no_colour).screen));
  CHECK_FALSE(has_colour(on_terminal(incident.status(), 200, incident.env("dumb")).screen));
  CHECK_FALSE(has_colour(on_terminal(incident.status({"--color=never"}), 200, incident.env()).screen));
  CHECK(has_colour(on_terminal(incident.status({"--color"}), 200, incident.env()).screen));  // = auto
  // Not a terminal: plain, unless asked for.
  CHECK_FALSE(has_colour(run_command({bin(), "status", "--lock-dir", incident.area}, "TERM=xterm ").out));
  CHECK(has_colour(run_command({bin(), "status", "--lock-dir", incident.area, "--color=always"}).out));
  // inspect colours its state line the same way.
  const std::string lock = incident.area + "/" + incident.lock_of(LockKind::repository, incident.repo("web"));
  CHECK(has_colour(on_terminal({"inspect", lock}, 200, incident.env()).screen));
  CHECK_FALSE(has_colour(on_terminal({"inspect", lock, "--color=never"}, 200, incident.env()).screen));
  CHECK_FALSE(has_colour(run_command({bin(), "inspect", lock}).out));
  // A bad WHEN is a usage error.
  const CommandResult bad = run_command({bin(), "status", "--lock-dir", incident.area, "--color=sometimes"});
  CHECK(bad.status == 2);
}

TEST_CASE("a terminal that reports no width: COLUMNS, else 80") {
  Incident incident;
  auto env = incident.env();
  env["COLUMNS"] = "100";
  const TerminalRun run = on_terminal(incident.status(), 0, env);
  for (const std::string& line : lines_of(run.screen)) CHECK_MESSAGE(columns_of(line) <= 100, line);
  CHECK(run.screen.find("Hidden to fit 100 columns") != std::string::npos);
  env["COLUMNS"] = "";
  const TerminalRun fallback = on_terminal(incident.status(), 0, env);
  for (const std::string& line : lines_of(fallback.screen)) CHECK_MESSAGE(columns_of(line) <= 80, line);
  CHECK(fallback.screen.find("Hidden to fit 80 columns") != std::string::npos);
  // The terminal's own width wins over COLUMNS (util-linux).
  env["COLUMNS"] = "300";
  const TerminalRun own = on_terminal(incident.status(), 90, env);
  for (const std::string& line : lines_of(own.screen)) CHECK_MESSAGE(columns_of(line) <= 90, line);
}

TEST_CASE("help and -o help fit 80 columns on a terminal") {
  for (const char* command : {"status", "inspect", "explain", "path", "reclaim", "run", "check"}) {
    CAPTURE(command);
    const TerminalRun run = on_terminal({command, "--help"}, 80, {{"TERM", "xterm"}});
    CHECK(run.status == 0);
    for (const std::string& line : lines_of(run.screen)) CHECK_MESSAGE(columns_of(line) <= 80, line);
  }
  const TerminalRun columns = on_terminal({"status", "-o", "help"}, 80, {{"TERM", "xterm"}});
  for (const std::string& line : lines_of(columns.screen)) CHECK_MESSAGE(columns_of(line) <= 80, line);
}

TEST_CASE("a lock path longer than the terminal: the footer's fix is cut into lines that paste as one command") {
  // Nothing is labelled (no --scan), so the fix names the whole lock path: a lock name is 80
  // columns alone. The area's path holds a space and a quote, so pieces are quoted too.
  TempDir temp;
  const std::string area = temp / "it's a deep folder/with/some/nesting/operation-locks";
  std::filesystem::create_directories(area);
  REQUIRE(::chmod(area.c_str(), 0700) == 0);
  const std::string name = lock_name(LockKind::repository, std::string(64, 'c'));
  make_entry(area, name, owner_json(dead_pid()));
  const std::map<std::string, std::string> env{{"TERM", "xterm"}, {"NO_COLOR", "1"}, {"COLUMNS", ""},
                                               {"LANG", "C.UTF-8"}, {"LC_ALL", ""}};
  const TerminalRun run = on_terminal({"status", "--lock-dir", area}, 80, env);
  CAPTURE(run.screen);
  CHECK(run.status == 1);
  const auto lines = lines_of(run.screen);
  for (const std::string& line : lines) CHECK_MESSAGE(columns_of(line) <= 80, line);
  // The prose names the lock by kind, 12 digits and suffix.
  const auto next = std::find_if(lines.begin(), lines.end(), [](const std::string& line) { return line.starts_with("Next: "); });
  REQUIRE(next != lines.end());
  CHECK(next->find("repository-cccccccccccc\xe2\x80\xa6.lock is stale") != std::string::npos);
  // The command lines after it, given to the shell, are exactly the JSON's fix_argv.
  std::string command;
  for (auto line = next + 1; line != lines.end() && !line->starts_with("Hidden"); ++line) command += *line + "\n";
  REQUIRE(command.find("\\\n") != std::string::npos);  // it did need cutting
  const CommandResult words = run_command({"sh", "-c", "set -- " + command + "\nprintf '%s\\n' \"$@\""});
  REQUIRE(words.status == 0);
  const CommandResult json = run_command({bin(), "status", "-J", "--lock-dir", area});
  const auto document = boost::json::parse(json.out);
  std::string expected;
  for (const auto& word : document.at("entries").at(0).at("fix_argv").as_array())
    expected += std::string(word.as_string()) + "\n";
  CHECK(expected.find(area + "/" + name + "\n") != std::string::npos);
  CHECK(words.out == expected);
}
