#include <specdec/specdec.hpp>
#include <specdec/version.hpp>

#include <cstdio>

#if SPECDEC_ENABLE_SIMD
#include <xsimd/xsimd.hpp>
#endif

int main() {
  std::printf("specdec %d.%d.%d\n", specdec::version.major, specdec::version.minor, specdec::version.patch);
#if SPECDEC_ENABLE_SIMD
  std::printf("with xsimd: %d floats per batch\n", static_cast<int>(xsimd::batch<float>::size));
#endif
  return 0;
}
