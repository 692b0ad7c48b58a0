// COMPILE_FAIL_EXPECTS: specdec::verify_from_logits: the cuda backend is not enabled
// COMPILE_FAIL_DEFINES: SPECDEC_ENABLE_SIMD=0
// exec::cuda in a host translation unit (no nvcc, no specdec::cuda) fails at compile time, naming the
// algorithm and the backend.
#include <span>

#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"

void call(const specdec::chain_batch<float>& batch, std::span<const specdec::warp_params> params,
          std::span<const specdec::random::request_stream> streams, const specdec::chain_outputs& out) {
#ifdef SPECDEC_COMPILE_FAIL_CONTROL
  specdec::verify_from_logits(specdec::exec::seq, specdec::strict, batch, params, params, streams, out);
#else
  specdec::verify_from_logits(specdec::exec::cuda, specdec::strict, batch, params, params, streams, out);
#endif
}

int main() {}
