//! \file conformance/specdec_verifiers.hpp
//! \brief specdec's own verifiers as verifiers under test: `specdec::verify`,
//! `specdec::verify_from_logits` and `specdec::verify_tree` (host backends) behind the kit's engine-neutral signature. They are what
//! the kit's own tests pass, and a template for wrapping an engine's sampler.
//! A verdict is reported when the request's status is not valid (`specdec::is_valid`); request ids
//! and steps are truncated to the 32 bits of `random::request_stream`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/tree.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/conformance/interface.hpp"
#include "specdec/exec/policy.hpp"

namespace specdec::conformance {

namespace detail {
inline std::vector<random::request_stream> streams_of(const request_identities& ids) {
  std::vector<random::request_stream> streams(ids.seeds.size());
  for (std::size_t b = 0; b < streams.size(); ++b)
    streams[b] = {ids.seeds[b], static_cast<std::uint32_t>(ids.request_ids[b]), static_cast<std::uint32_t>(ids.steps[b])};
  return streams;
}
//! Row b of a [B][width] output padded with -1, and its status.
inline verdict verdict_of(std::span<const token_id> tokens, std::size_t b, std::size_t width, verify_status status) {
  verdict v;
  for (const token_id t : tokens.subspan(b * width, width))
    if (t != no_token) v.tokens.push_back(t);
  v.reported = !is_valid(status);
  return v;
}
}  // namespace detail

namespace detail {
//! Runs `verify_into(batch, streams, outputs)` on a kit chain batch and reads the verdicts back.
template <class VerifyInto>
std::vector<verdict> verify_chains(const chain_inputs& in, VerifyInto verify_into) {
  const chain_batch<float> batch{ragged_layout::packed(in.num_drafts), in.vocab_size, in.draft_tokens, in.draft_rows,
                                 in.target_rows};
  const std::size_t B = in.batch_size(), width = batch.layout.max_drafts() + 1;
  std::vector<token_id> tokens(B * width);
  std::vector<std::int32_t> accepted(B);
  std::vector<verify_status> status(B);
  verify_into(batch, streams_of(in), chain_outputs{tokens, accepted, status});
  std::vector<verdict> out(B);
  for (std::size_t b = 0; b < B; ++b) out[b] = verdict_of(tokens, b, width, status[b]);
  return out;
}
}  // namespace detail

//! `specdec::verify(policy, rule, ...)` on the kit's chain batches.
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule>
chain_verifier specdec_chain_verifier(const Policy& policy, const Rule& rule, const verify_options& options = {}) {
  static_assert(exec::backend_of<Policy> != exec::backend::cuda, "the kit's batches are host memory");
  return [policy, rule, options](const chain_inputs& in) {
    return detail::verify_chains(in, [&](const chain_batch<float>& batch, const auto& streams, const chain_outputs& out) {
      verify(policy, rule, batch, streams, out, options);
    });
  };
}

//! `specdec::verify_from_logits(policy, rule, ...)` on the kit's logits batches.
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule>
chain_logits_verifier specdec_chain_logits_verifier(const Policy& policy, const Rule& rule, const verify_options& options = {}) {
  static_assert(exec::backend_of<Policy> != exec::backend::cuda, "the kit's batches are host memory");
  return [policy, rule, options](const chain_logit_inputs& in) {
    return detail::verify_chains(in, [&](const chain_batch<float>& batch, const auto& streams, const chain_outputs& out) {
      verify_from_logits(policy, rule, batch, in.target_warp, in.draft_warp, streams, out, options);
    });
  };
}

//! `specdec::verify_tree(policy, rule, ...)` on the kit's tree batches.
template <exec::ExecutionPolicy Policy, TreeRule Rule>
tree_verifier specdec_tree_verifier(const Policy& policy, const Rule& rule, const verify_options& options = {}) {
  static_assert(exec::backend_of<Policy> != exec::backend::cuda, "the kit's batches are host memory");
  return [policy, rule, options](const tree_inputs& in) {
    const tree_batch<float> batch{tree_layout::from_parents(in.num_nodes, in.parents), in.vocab_size, in.tokens, in.draft_rows,
                                  in.target_rows};
    const std::size_t B = in.batch_size(), width = batch.layout.max_depth() + 1;
    std::vector<token_id> tokens(B * width);
    std::vector<std::int32_t> path(B * width), accepted(B);
    std::vector<verify_status> status(B);
    const auto streams = detail::streams_of(in);
    verify_tree(policy, rule, batch, streams, tree_outputs{tokens, path, accepted, status}, options);
    std::vector<verdict> out(B);
    for (std::size_t b = 0; b < B; ++b) out[b] = detail::verdict_of(tokens, b, width, status[b]);
    return out;
  };
}

}  // namespace specdec::conformance
