// Runs doctest for a program that holds many test files (tests/meson.build): each meson
// test runs one file's cases with `--source-file=*/NAME_test.cc`, and a filter that
// matches no test case fails instead of passing vacuously (a renamed file, a typo). A case
// marked doctest::skip does not count as matched: a file must keep one case that runs.
// Include it in exactly one file of a program, which defines DOCTEST_CONFIG_IMPLEMENT.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace {

unsigned cases_matched = 0;  ///< test cases that passed the filters (test_run_end)
std::set<std::string> files_run;            ///< the files of the cases that ran
std::vector<std::string> files_of_skipped;  ///< the file of each case marked doctest::skip

/// Records how many test cases the filters let through; reports nothing else.
struct MatchCounter : doctest::IReporter {
  explicit MatchCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    cases_matched = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData& tc) override { files_run.insert(tc.m_file.c_str()); }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData& tc) override {
    if (tc.m_skip) files_of_skipped.emplace_back(tc.m_file.c_str());
  }
};

REGISTER_LISTENER("match-counter", 1, MatchCounter);


/// doctest's run of `argc`/`argv`, failing when no test case passed the filters.
int run_filtered_tests(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;  // --help, --list-test-cases, ...
  // doctest's "skipped" counts every other file's cases too; tests/summarize.py reads this.
  unsigned skipped_here = 0;
  for (const std::string& file : files_of_skipped) skipped_here += files_run.count(file);
  std::printf("[doctest] skipped in the files run: %u\n", skipped_here);
  if (result == 0 && cases_matched == 0) {
    std::fprintf(stderr, "no test case matches the filters given\n");
    return 1;
  }
  return result;
}

}  // namespace
