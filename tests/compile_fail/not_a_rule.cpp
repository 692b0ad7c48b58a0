// COMPILE_FAIL_EXPECTS: satisf[a-z]* .*AcceptanceRule
// A type without a rule family is not a specdec::AcceptanceRule: verify refuses it, naming the concept.
#include <span>

#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"

struct not_a_rule {
  bool accepts(double, double, double) const { return true; }  // no `family`
};

void call(const specdec::chain_batch<float>& batch, std::span<const specdec::random::request_stream> streams,
          const specdec::chain_outputs& out) {
#ifdef SPECDEC_COMPILE_FAIL_CONTROL
  specdec::verify(specdec::exec::seq, specdec::strict, batch, streams, out);
#else
  specdec::verify(specdec::exec::seq, not_a_rule{}, batch, streams, out);
#endif
}

int main() {}
