// main() for the test programs (tests/meson.build): doctest, failing a filter that matches
// no test case (doctest_run.h).
#define DOCTEST_CONFIG_IMPLEMENT
#include "doctest_run.h"

int main(int argc, char** argv) { return run_filtered_tests(argc, argv); }
