// The removal gate is structural (PROTOCOL.md section 10, "Taking over is removing"):
// nothing in src/ renames or removes an entry of a lock area except src/removal.cc. This
// test reads the sources and fails when another file calls rename, rmdir, unlink or
// remove_tree, through the System seam or the C library, beyond the few calls listed here
// with their reasons.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

namespace {

/// The calls that rename or remove a file or directory.
const std::regex removing_call(
    R"((\.|->|::)\s*(rename|rename_in|renameat2?|rmdir|rmdir_in|unlink|unlinkat|unlink_at|remove_tree|remove_all|remove)\s*\()");

/// Every file of src/ allowed such calls, with how many and why.
const std::map<std::string, int> allowed = {
    // The gate: the tombstone rename, the removal steps, the guard's rmdir, the release.
    {"removal.cc", -1},
    // The seam's implementations (RealSystem), and --output-file's temp file renamed into place.
    {"system_files.cc", -1},
    // Publishing: our own candidate renamed to the free lock name, or removed when contended.
    {"lock.cc", 2},
};

std::string without_comments(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto comment = line.find("//");
    out += (comment == std::string::npos ? line : line.substr(0, comment)) + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("only src/removal.cc renames or removes entries of a lock area") {
  const char* root = std::getenv("APNEA_LOCKS_SOURCE");
  REQUIRE_MESSAGE(root != nullptr, "APNEA_LOCKS_SOURCE names the source tree (meson test sets it)");
  const std::filesystem::path src = std::filesystem::path(root) / "src";
  REQUIRE(std::filesystem::is_directory(src));
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
    ++files;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string code = without_comments(text.str());
    const auto calls = std::distance(std::sregex_iterator(code.begin(), code.end(), removing_call),
                                     std::sregex_iterator());
    const std::string relative = std::filesystem::relative(entry.path(), src).string();
    CAPTURE(relative);
    const auto found = allowed.find(relative);
    if (found == allowed.end()) {
      CHECK_MESSAGE(calls == 0, "a rename or removal outside the removal gate");
    } else if (found->second >= 0) {
      CHECK_MESSAGE(calls == found->second, "more renames or removals than the listed ones");
    }
  }
  CHECK(files > 50);  // the tree was read
}
