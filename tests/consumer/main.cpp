// Uses an installed specdec through find_package(specdec) and specdec::specdec.
#include <specdec/specdec.hpp>
#include <specdec/version.hpp>

#include <cstdio>

static_assert(SPECDEC_VERSION_MAJOR == specdec::version.major);

int main() {
  std::printf("specdec %d.%d.%d\n", specdec::version.major, specdec::version.minor, specdec::version.patch);
  return 0;
}
