//! \file backend/simd/verify.hpp
//! \brief Chain verification on the simd backend: the seq verifier's walk (backend/seq/verify.hpp)
//! with every whole-row step done by a SIMD kernel. Same tokens, counts and status flags as seq for
//! the same streams, for every rule: it is seq's walk itself, run with `verify_kernels<Arch>`.
//!
//! Per request: the drafted ids are checked, each drafted position costs two scalar reads and one
//! Philox draw, and the stopping position reads its row pair once: `sample_residual` (rejection
//! rules, one pass), `sample_categorical` (bonus tokens, sample-and-match), `argmax` with the row
//! checks fused (greedy). Kernels and their agreement with seq:
//!  - residual / bonus / categorical sampling: bit-identical (sampling/categorical.hpp contract);
//!    rejection rules whose `accepted_mass` takes doubles only fall back to seq's residual sampler;
//!  - greedy: exact (comparisons only);
//!  - the `check_normalisation` option sums rows in lane order: the flag can differ from seq's only
//!    for a row whose sum is within ~1e-12 of 1 +- tolerance;
//!  - from logits: rows are warped by `backend::simd::warp_logits` and target samples drawn by
//!    `backend::simd::sample_logits`, both seq's bit for bit (docs/reference/sampling-contract.md),
//!    then verified as above.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/backend/simd/categorical.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/backend/simd/residual.hpp"
#include "specdec/backend/simd/sample_logits.hpp"
#include "specdec/backend/simd/warp.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/exec/simd.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::backend::simd {

//! The whole-row steps of a verification as simd kernels of architecture `Arch`: the same static
//! members as `seq::seq_kernels`, so seq's verifier (`seq::detail::verify_one`, the walks of backend/walks/) runs them.
template <class Arch>
struct verify_kernels {
  //! sum_v double(row_v), in lane-strided order (`simd::sum`).
  template <class T>
  static double row_sum(std::span<const T> row) {
    return sum<Arch>(row);
  }
  //! Some entry > 0.
  template <class T>
  static bool has_mass(std::span<const T> row) {
    return simd::has_mass<Arch>(row);
  }
  //! A row greedy can take the argmax of: no NaN, infinite or negative entry, and some entry > 0.
  template <class T>
  static bool greedy_usable(std::span<const T> row) {
    const row_summary s = summarise<Arch>(row);
    return s.usable && s.has_mass;
  }
  //! The index of the largest entry (lowest on ties; -1 for an empty or all-NaN row), as `specdec::argmax`.
  template <class T>
  static std::ptrdiff_t argmax(std::span<const T> row) {
    return simd::argmax<Arch>(row);
  }
  //! A sample of the row with the uniform u in [0, 1), the same token as `specdec::sample_categorical`.
  template <class T>
  static sample_result sample_categorical(std::span<const T> row, double u) {
    return simd::sample_categorical<Arch>(row, u);
  }
  //! A sample of the row with the entries `masked` (sorted, distinct) left out, as `specdec::sample_masked`.
  template <class T>
  static sample_result sample_masked(std::span<const T> row, std::span<const token_id> masked, double u) {
    return simd::sample_masked<Arch>(row, masked, u);
  }
  //! A sample of the rule's residual norm(max(0, p - accepted_mass(p, q))) with the uniform u; falls back to p when it has no
  //! mass.
  template <class Rule, class T>
  static residual_result sample_residual(std::span<const T> p, std::span<const T> q, const Rule& rule, double u) {
    return simd::sample_residual<Arch>(p, q, rule, u);
  }
  //! probs = warp(softmax(logits / T)) with the parameters w; the status says whether the row was usable.
  template <class T, class U>
  static row_status warp_logits(std::span<const T> logits, std::span<U> probs, const warp_params& w) {
    return simd::warp_logits<Arch>(logits, probs, w);
  }
  //! No NaN, infinite or negative entry.
  template <class T>
  static bool weights_usable(std::span<const T> row) {
    return summarise<Arch>(row).usable;
  }
  //! One token from the logits with the parameters w and the uniform u: `backend::simd::sample_logits`, which
  //! keeps its own scratch rows (`scratch` is not used).
  template <class T>
  static sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u,
                                     seq::logit_row_scratch<T>& /*scratch*/) {
    return simd::sample_logits<Arch>(logits, w, u);
  }
  //! The probabilities of `backend::simd::warp_logits`' row: where its sparse filter applies
  //! (backend/simd/sparse_filter.hpp), the kept tokens and their probabilities only, with no row
  //! written; otherwise the row, in `scratch`.
  template <class T>
  static seq::target_probabilities<T> probabilities(std::span<const T> logits, const warp_params& w,
                                                    seq::logit_row_scratch<T>& scratch) {
    if (detail::sparse_filter_applies<T>(w)) {
      const row_status s = detail::sparse_probabilities<Arch>(logits, w, scratch.kept, scratch.weights, scratch.probabilities);
      return {{std::span<const T>(scratch.probabilities), s == row_status::ok}, std::span<const token_id>(scratch.kept), true};
    }
    scratch.row.resize(logits.size());
    const row_status s = warp_logits(logits, std::span<T>(scratch.row), w);
    return {{std::span<const T>(scratch.row), s == row_status::ok}};
  }
};

//! Chain verification from probabilities with the simd kernels of architecture `Arch`
//! (`specdec::verify(exec::simd_policy<Arch>{}, ...)` lands here). Same outputs as seq.
//! \throws specdec::error on the same shape errors as seq.
template <class Arch, AcceptanceRule Rule, class T>
void verify(const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
            const chain_outputs& out, const verify_options& options) {
  SPECDEC_REQUIRE_SIMD_ARCH(Arch, "specdec::verify");
  seq::detail::verify_with<verify_kernels<Arch>>(rule, batch, streams, out, options);
}

//! Chain verification from logits with the simd kernels: each target row that is read is warped by
//! `backend::simd::warp_logits` with its request's parameters; the draft side as `draft` says
//! (acceptance/draft_side.hpp).
//! \throws specdec::error on the same shape and parameter errors as seq.
template <class Arch, AcceptanceRule Rule, class T>
void verify_from_logits(const Rule& rule, const chain_batch<T>& batch, std::span<const warp_params> target_params,
                        const draft_side<T>& draft, std::span<const random::request_stream> streams, const chain_outputs& out,
                        const verify_options& options) {
  SPECDEC_REQUIRE_SIMD_ARCH(Arch, "specdec::verify_from_logits");
  seq::detail::verify_from_logits_with<verify_kernels<Arch>>(rule, batch, target_params, draft, streams, out, options);
}

}  // namespace specdec::backend::simd
