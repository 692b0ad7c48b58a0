// COMPILE_FAIL_EXPECTS: specdec::verify_from_logits with a draft_side runs on exec::seq and exec::simd
// COMPILE_FAIL_DEFINES: SPECDEC_ENABLE_SIMD=0
// A draft_side (acceptance/draft_side.hpp) is a host-backend feature: with exec::cuda the call fails at
// compile time and says what the cuda backend takes instead.
#include <span>

#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"

void call(const specdec::chain_batch<float>& batch, std::span<const specdec::warp_params> params,
          std::span<const specdec::random::request_stream> streams, const specdec::chain_outputs& out) {
#ifdef SPECDEC_COMPILE_FAIL_CONTROL
  specdec::verify_from_logits(specdec::exec::seq, specdec::strict, batch, params,
                              specdec::draft_side<float>{.rows = specdec::draft_rows_kind::probabilities}, streams, out);
#else
  specdec::verify_from_logits(specdec::exec::cuda, specdec::strict, batch, params,
                              specdec::draft_side<float>{.rows = specdec::draft_rows_kind::probabilities}, streams, out);
#endif
}

int main() {}
