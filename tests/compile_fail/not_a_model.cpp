// COMPILE_FAIL_EXPECTS: satisf[a-z]* .*Model
// A type without next_logits is not a specdec::Model: decode_target_only refuses it, naming the concept.
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/decode/decode.hpp"

struct not_a_model {
  std::size_t vocab_size() const { return 4; }  // no next_logits(context, logits)
#ifdef SPECDEC_COMPILE_FAIL_CONTROL
  void next_logits(std::span<const specdec::token_id>, std::span<float> logits) const {
    for (float& l : logits) l = 0.0f;
  }
#endif
};

int main() {
  const std::vector<specdec::token_id> prompt{1};
  (void)specdec::decode_target_only(not_a_model{}, prompt, specdec::decode_options{});
}
