// COMPILE_FAIL_EXPECTS: specdec::verify: the simd backend is not enabled
// COMPILE_FAIL_DEFINES: SPECDEC_ENABLE_SIMD=0
// exec::simd in a translation unit built without the simd backend fails at compile time, naming the
// algorithm and the backend.
#include <span>

#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"

void call(const specdec::chain_batch<float>& batch, std::span<const specdec::random::request_stream> streams,
          const specdec::chain_outputs& out) {
#ifdef SPECDEC_COMPILE_FAIL_CONTROL
  specdec::verify(specdec::exec::seq, specdec::strict, batch, streams, out);
#else
  specdec::verify(specdec::exec::simd, specdec::strict, batch, streams, out);
#endif
}

int main() {}
