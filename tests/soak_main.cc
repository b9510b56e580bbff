// main() for soak-only test programs: they run under `scripts/dev soak` (APNEA_SOAK=1, with
// APNEA_REFERENCE) and report "skipped" to meson (exit 77) otherwise, instead of passing
// without having tested anything.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

int main(int argc, char** argv) {
  const char* soak = std::getenv("APNEA_SOAK");
  const char* reference = std::getenv("APNEA_REFERENCE");
  if (soak == nullptr || std::string_view(soak) != "1" || reference == nullptr || *reference == '\0') {
    std::fprintf(stderr, "soak test: skipped (runs under scripts/dev soak, with APNEA_REFERENCE)\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
