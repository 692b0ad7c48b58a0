//! \file backend/walks/block.hpp
//! \brief Block verification's walk of one chain (acceptance/block.hpp, Sun et al., ICLR 2025),
//! written once for every backend: seq and simd run it through `seq::detail::chain_walk_ops` over their
//! row kernels (backend/seq/verify.hpp), the cuda kernel through `block_request_ops`, one thread block
//! per request (backend/cuda/kernels/verify_block.cuh).
//!
//! The walk: a forward pass for the weights a_i = min(1, a_{i-1} p_i(x_i) / q_i(x_i)) (`block_weight`),
//! checking every position's rows before anything is emitted; tau = n tested on scalars (the bonus);
//! otherwise the scan from i = n - 1 down to the first passing prefix, which emits a token of its
//! residual max(0, p_i - min(p_i, q_i / a_i)) (`block_residual`). Randomness of position i: the test
//! of prefix i + 1 reads (i, accept), the residual or bonus token (i, resample).
//!
//! `Ops` reads request's rows at position i (`Sample`: the backend's sampled-token type, with `token`
//! and `status`). Every operation that reads a row checks it first (unusable: `invalid_row`; with
//! `check_normalisation`, off its sum: `not_normalised`) and returns those flags:
//!   target_at(i, x) -> row_scalar             p_i(x)
//!   draft_at(i, x) -> row_scalar              q_i(x), given by the caller or read from row i
//!   draft_has_mass(i) -> verify_status        row i of q read: `invalid_row` unless some q_i(v) > 0
//!   sample_target(i, u) -> row_draw<Sample>   sample_categorical(p_i, u) (the bonus)
//!   residual_mass(i, 1 / a, u) -> residual_mass   the mass of max(0, p_i - min(p_i, q_i / a)) as the
//!                                             residual sampler sees it, and whether it falls back to p
//!   draw_residual(i, 1 / a, u) -> row_draw<Sample>  that residual's token with u, else p_i's (fallback);
//!                                             called only right after residual_mass with the same arguments
//!   barrier()                                 the weights the leader stored are visible to every caller
#pragma once

#include <cstddef>
#include <cstdint>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/walks/steps.hpp"
#include "specdec/config.hpp"
#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::walks {

//! The outcome of one request's block verification.
struct block_walk_result {
  std::int32_t accepted = 0;                 //!< drafts kept (0 on an error, except at the bonus)
  token_id emitted = no_token;               //!< the residual or bonus token
  verify_status status = verify_status::ok;  //!< the request's status flags
};

//! Block verification of one chain of `n` drafts. `weight` holds n + 1 doubles; `leader` says whether
//! this caller stores them (on the GPU every thread of the block walks, thread 0 stores).
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Ops>
SPECDEC_HOST_DEVICE block_walk_result walk_block(Ops& ops, const token_id* drafts, std::int32_t n, std::size_t vocab,
                                                 const random::request_stream& stream, double* weight, bool leader) {
  using random::purpose;
  block_walk_result r;
  if (!drafts_in_vocabulary(drafts, n, vocab, r.status)) return r;
  // Forward: a_0 = 1, a_{i+1} = min(1, a_i p / q); every row is checked before anything is emitted.
  double a = 1.0, a_last = 1.0, p_last = 0.0, q_last = 0.0;
  if (leader) weight[0] = 1.0;
  for (std::int32_t i = 0; i < n; ++i) {
    double p = 0.0, q = 0.0;
    if (!read_scalars(ops, i, drafts[i], r.status, p, q)) return r;
    if (!specdec::detail::usable_weight(p) || !specdec::detail::usable_weight(q)) {
      r.status |= verify_status::invalid_row;
      return r;
    }
    if (q == 0.0) {
      // q(x) = 0: x was not drawn from q. A q without any mass is unusable, not a residual of p.
      r.status |= verify_status::draft_prob_zero | ops.draft_has_mass(i);
      if (!is_valid(r.status)) return r;
    }
    a_last = a;
    p_last = p;
    q_last = q;
    a = block_weight(a, p, q);
    if (leader) weight[i + 1] = a;
  }
  ops.barrier();
  // tau = n: eta_n < a_n, written as eta q < a_{n-1} p (n = 1 is strict's test to the bit; n = 0: the bonus).
  if (n == 0 || (q_last > 0.0 && first_uniform(stream, n - 1, purpose::accept) * q_last < a_last * p_last)) {
    r.accepted = n;
    const auto bonus = ops.sample_target(n, first_uniform(stream, n, purpose::resample));
    r.status |= bonus.flags;
    if (is_valid(r.status)) emit_sample(bonus.sample, vocab, r.emitted, r.status);
    return r;
  }
  for (std::int32_t i = n; i-- > 0;) {
    const double wi = weight[i];
    // R_i <= a_i (each term of R_i is at most a_i p(v)), so h_i <= a_i: when eta_i >= a_i the prefix
    // fails whatever R_i is, and its rows are not read (a_i = 0 included). Prefix 0 always passes.
    if (i > 0 && !(first_uniform(stream, i - 1, purpose::accept) < wi)) continue;
    const double inverse = 1.0 / wi, u = first_uniform(stream, i, purpose::resample);
    const residual_mass m = ops.residual_mass(i, inverse, u);
    r.status |= m.flags;
    if (!is_valid(r.status)) return r;
    // The sampler's mass is sum max(0, p - q / a_i) = R_i / a_i (0 when it falls back to p).
    const double h = block_stop_probability(m.fallback ? 0.0 : product_rn(wi, m.mass), wi);
    if (i > 0 && !(first_uniform(stream, i - 1, purpose::accept) < h)) continue;
    const auto d = ops.draw_residual(i, inverse, u);
    if (d.fallback) r.status |= verify_status::residual_fallback;
    emit_sample(d.sample, vocab, r.emitted, r.status);
    if (is_valid(r.status)) r.accepted = i;
    return r;
  }
  return r;  // unreachable for usable rows: i = 0 always passes
}

//! Entry j of a request's output row: its kept drafts, then the emitted token, then -1.
SPECDEC_HOST_DEVICE inline token_id block_output_token(const token_id* drafts, const block_walk_result& r, std::size_t j) {
  const auto i = static_cast<std::int32_t>(j);
  return i < r.accepted ? drafts[i] : (i == r.accepted ? r.emitted : no_token);
}

}  // namespace specdec::backend::walks
