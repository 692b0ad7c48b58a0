//! \file exec/algorithms.hpp
//! \brief The tags of the algorithms that go through `exec::dispatch` (exec/dispatch.hpp): one per
//! public entry with more than one backend. `seq_substitutes` says whether a host backend without
//! its own implementation may run seq's (true when seq's results are that backend's contract).
#pragma once

namespace specdec::algorithm {

//! Tag fields: `seq_substitutes`, as in the file comment.
template <bool SeqSubstitutes>
struct tag {
  static constexpr bool seq_substitutes = SeqSubstitutes;  //!< a host backend without it may run seq's
};

// Verification (acceptance/verify.hpp, acceptance/tree.hpp).
struct verify : tag<true> {};                   //!< specdec::verify
struct verify_workspace_bytes : tag<false> {};  //!< specdec::verify_workspace_bytes (device workspaces)
struct verify_in_workspace : tag<false> {};     //!< specdec::verify with a caller-owned device workspace
struct verify_from_logits : tag<true> {};       //!< specdec::verify_from_logits with a draft_side
struct verify_from_logits_fused : tag<false> {
};                                  //!< specdec::verify_from_logits with draft warp_params, where a backend fuses it
struct verify_tree : tag<true> {};  //!< specdec::verify_tree
struct verify_tree_workspace_bytes : tag<false> {};  //!< specdec::verify_tree_workspace_bytes
struct verify_tree_in_workspace : tag<false> {};     //!< specdec::verify_tree with a caller-owned device workspace
struct verify_tree_from_logits : tag<true> {};       //!< specdec::verify_tree_from_logits

// Rows (distributions/with_policy.hpp, sampling/with_policy.hpp).
struct softmax : tag<true> {};             //!< specdec::softmax(policy, ...)
struct log_softmax : tag<true> {};         //!< specdec::log_softmax(policy, ...)
struct log_sum_exp : tag<true> {};         //!< specdec::log_sum_exp(policy, ...)
struct warp_logits : tag<true> {};         //!< specdec::warp_logits(policy, ...)
struct warp_probs : tag<true> {};          //!< specdec::warp_probs(policy, ...)
struct sample_categorical : tag<true> {};  //!< specdec::sample_categorical(policy, ...)
struct sample_logits : tag<true> {};       //!< specdec::sample_logits(policy, ...)
struct argmax : tag<true> {};              //!< specdec::argmax(policy, ...)
struct top_w_indices : tag<true> {};       //!< specdec::top_w_indices(policy, ...)
struct overlap : tag<true> {};             //!< specdec::overlap(policy, ...)
struct total_variation : tag<true> {};     //!< specdec::total_variation(policy, ...)
struct entropy : tag<true> {};             //!< specdec::entropy(policy, ...)
struct cross_entropy : tag<true> {};       //!< specdec::cross_entropy(policy, ...)
struct kl_divergence : tag<true> {};       //!< specdec::kl_divergence(policy, ...)

// Batches of rows, where a backend has a kernel for the whole batch (the entries run the row
// algorithm above on each row otherwise).
struct softmax_rows : tag<false> {};             //!< specdec::softmax(policy, row_batch, ...)
struct log_softmax_rows : tag<false> {};         //!< specdec::log_softmax(policy, row_batch, ...)
struct log_sum_exp_rows : tag<false> {};         //!< specdec::log_sum_exp(policy, row_batch, ...)
struct warp_logits_rows : tag<false> {};         //!< specdec::warp_logits(policy, row_batch, ...)
struct sample_categorical_rows : tag<false> {};  //!< specdec::sample_categorical(policy, row_batch, ...)
struct sample_filtered_rows : tag<false> {};     //!< specdec::sample_filtered(policy, row_batch, ...)

// Speculative Verification's indicators (estimate/indicators.hpp).
struct compute_indicators : tag<true> {};  //!< specdec::estimate::compute_indicators

// Monte-Carlo simulators (simulate/with_policy.hpp); every backend draws from the same Philox
// streams, so seq's counts are every backend's.
struct simulate_sd_chain : tag<true> {};                //!< simulate::sd::chain(policy, ...)
struct simulate_sd_token_process : tag<true> {};        //!< simulate::sd::token_process(policy, ...)
struct simulate_sv_accepted : tag<true> {};             //!< simulate::sv::accepted(policy, ...)
struct simulate_sprinter_chain : tag<true> {};          //!< simulate::sprinter::verifier_chain(policy, ...)
struct simulate_sprinter_token_process : tag<true> {};  //!< simulate::sprinter::token_process(policy, ...)

}  // namespace specdec::algorithm
