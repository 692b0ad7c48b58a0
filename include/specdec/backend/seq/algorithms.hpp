//! \file backend/seq/algorithms.hpp
//! \brief The seq backend's registrations (exec/dispatch.hpp): the reference implementation of
//! every dispatched algorithm, which the other backends are tested against.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "specdec/backend/seq/verify.hpp"
#include "specdec/backend/seq/verify_tree.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/estimate/similarity.hpp"
#include "specdec/exec/algorithms.hpp"
#include "specdec/exec/dispatch.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/sample_logits.hpp"
#include "specdec/sampling/top_w.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/sprinter.hpp"
#include "specdec/simulate/sv.hpp"

namespace specdec::backend::seq {

//! S and A row by row (SV Def. D.1-D.2): the reference of `estimate::compute_indicators`.
template <class T, class U>
void compute_indicators(std::span<const T> draft_rows, std::span<const U> companion_rows, std::span<const token_id> tokens,
                        std::size_t vocab_size, std::span<double> s, std::span<double> a) {
  estimate::detail::indicators_row_by_row(draft_rows, companion_rows, tokens, vocab_size, s, a,
                                          [](auto d, auto c) { return estimate::similarity(d, c); });
}

}  // namespace specdec::backend::seq

//! Registers `function` as the seq implementation of `algorithm::name`, called with the public
//! entry's arguments after the policy.
#define SPECDEC_SEQ_IMPLEMENTS(name, function)                                                  \
  template <>                                                                                   \
  struct specdec::exec::implementation<specdec::exec::backend::seq, specdec::algorithm::name> { \
    template <class... Args>                                                                    \
    static decltype(auto) run(const sequenced_policy&, Args&&... args) {                        \
      return function(std::forward<Args>(args)...);                                             \
    }                                                                                           \
  }

SPECDEC_SEQ_IMPLEMENTS(verify, specdec::backend::seq::verify);
SPECDEC_SEQ_IMPLEMENTS(verify_from_logits, specdec::backend::seq::verify_from_logits);
SPECDEC_SEQ_IMPLEMENTS(verify_tree, specdec::backend::seq::verify_tree);
SPECDEC_SEQ_IMPLEMENTS(verify_tree_from_logits, specdec::backend::seq::verify_tree_from_logits);
SPECDEC_SEQ_IMPLEMENTS(compute_indicators, specdec::backend::seq::compute_indicators);
SPECDEC_SEQ_IMPLEMENTS(softmax, specdec::softmax);
SPECDEC_SEQ_IMPLEMENTS(log_softmax, specdec::log_softmax);
SPECDEC_SEQ_IMPLEMENTS(log_sum_exp, specdec::log_sum_exp);
SPECDEC_SEQ_IMPLEMENTS(warp_logits, specdec::warp_logits);
SPECDEC_SEQ_IMPLEMENTS(warp_probs, specdec::warp_probs);
SPECDEC_SEQ_IMPLEMENTS(sample_categorical, specdec::sample_categorical);
SPECDEC_SEQ_IMPLEMENTS(sample_logits, specdec::sample_logits);
SPECDEC_SEQ_IMPLEMENTS(argmax, specdec::argmax);
SPECDEC_SEQ_IMPLEMENTS(top_w_indices, specdec::top_w_indices);
SPECDEC_SEQ_IMPLEMENTS(overlap, specdec::overlap);
SPECDEC_SEQ_IMPLEMENTS(total_variation, specdec::total_variation);
SPECDEC_SEQ_IMPLEMENTS(entropy, specdec::entropy);
SPECDEC_SEQ_IMPLEMENTS(cross_entropy, specdec::cross_entropy);
SPECDEC_SEQ_IMPLEMENTS(kl_divergence, specdec::kl_divergence);
SPECDEC_SEQ_IMPLEMENTS(simulate_sd_chain, specdec::simulate::sd::chain);
SPECDEC_SEQ_IMPLEMENTS(simulate_sd_token_process, specdec::simulate::sd::token_process);
SPECDEC_SEQ_IMPLEMENTS(simulate_sv_accepted, specdec::simulate::sv::accepted);
SPECDEC_SEQ_IMPLEMENTS(simulate_sprinter_chain, specdec::simulate::sprinter::verifier_chain);
SPECDEC_SEQ_IMPLEMENTS(simulate_sprinter_token_process, specdec::simulate::sprinter::token_process);

#undef SPECDEC_SEQ_IMPLEMENTS
