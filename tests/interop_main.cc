// main() for test programs that need the reference implementation: without
// APNEA_REFERENCE they report "skipped" to meson (exit 77) instead of passing vacuously.
#define DOCTEST_CONFIG_IMPLEMENT
#include "doctest_run.h"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const char* reference = std::getenv("APNEA_REFERENCE");
  if (reference == nullptr || *reference == '\0') {
    std::fprintf(stderr,
                 "\n*** INTEROP SUITE SKIPPED: APNEA_REFERENCE is not set "
                 "(point it at shared/peer/apnea-peer) ***\n\n");
    return 77;
  }
  return run_filtered_tests(argc, argv);
}
