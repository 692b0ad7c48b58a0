// COMPILE_FAIL_EXPECTS: missing_implementation<specdec::algorithm::verify_workspace_bytes, specdec::exec::sequenced_policy>
// COMPILE_FAIL_DEFINES: SPECDEC_ENABLE_SIMD=0
// An algorithm the policy's backend does not implement, where seq may not stand in (a device
// workspace size on a host policy), fails at compile time in exec::missing_implementation, whose
// arguments name the algorithm and the policy.
#include <cstddef>

#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"

std::size_t call(const specdec::chain_batch<float>& batch) {
#ifdef SPECDEC_COMPILE_FAIL_CONTROL
  return batch.vocab_size;
#else
  return specdec::verify_workspace_bytes(specdec::exec::seq, specdec::strict, batch);
#endif
}

int main() {}
