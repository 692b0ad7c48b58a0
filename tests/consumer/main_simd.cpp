// Built when the installed specdec has specdec::simd: the xsimd dependency resolves and links.
#include <specdec/specdec.hpp>
#include <specdec/version.hpp>

#include <xsimd/xsimd.hpp>

#include <cstdio>

static_assert(SPECDEC_ENABLE_SIMD == 1, "specdec::simd defines SPECDEC_ENABLE_SIMD=1");

int main() {
  std::printf("specdec %d.%d.%d with xsimd (%s, %d floats per batch)\n", specdec::version.major, specdec::version.minor,
              specdec::version.patch, xsimd::default_arch::name(), static_cast<int>(xsimd::batch<float>::size));
  return 0;
}
