// Real concurrency: several processes contend for one repository lock through the core.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <fstream>
#include <memory>

#include "process_util.h"
#include "staged_system.h"

using namespace apnea_locks::testing;

TEST_CASE("4 processes x 300 cycles: no lost update, no malformed") {
  const std::string stress = test_env("APNEA_LOCKS_STRESS");
  REQUIRE_FALSE(stress.empty());
  TempDir temp;
  const std::string repo = temp / "repo";
  REQUIRE(::mkdir(repo.c_str(), 0700) == 0);
  const std::string counter = temp / "counter";
  std::ofstream(counter) << 0;
  const std::string lock_dir = temp / "apnea-u/operation-locks";

  constexpr int processes = 4;
  constexpr int cycles = 300;
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < processes; ++i)
    children.push_back(std::make_unique<Child>(std::vector<std::string>{
        stress, "stress", lock_dir, repo, counter, std::to_string(cycles)}));

  long contended = 0;
  for (auto& child : children) {
    child->close_stdin();
    const std::string out = child->read_rest();
    CAPTURE(out);
    CHECK(child->wait() == 0);
    auto line = out.substr(0, out.find('\n'));
    auto report = boost::json::parse(line).as_object();
    REQUIRE(report.at("event").as_string() == "stress-done");
    CHECK(report.at("acquired").as_int64() == cycles);
    CHECK(report.at("spurious_malformed").as_int64() == 0);
    contended += report.at("contended").as_int64();
  }
  CHECK(read_number(counter) == processes * cycles);
  MESSAGE("C++ core, " << processes << " processes x " << cycles << " cycles: " << contended
                       << " contended attempts, counter " << read_number(counter));
  // Nothing is left behind: the area is empty once everyone released.
  int left = 0;
  (void)apnea_locks::real_system().list_directory(lock_dir, [&](const apnea_locks::DirEntry&) {
    ++left;
    return true;
  });
  CHECK(left == 0);
}
