//! \file backend/simd/verify.hpp
//! \brief Chain verification on the simd backend: the seq verifier's walk (backend/seq/verify.hpp)
//! with every whole-row step done by a SIMD kernel. Same tokens, counts and status flags as seq for
//! the same streams, for every rule.
//!
//! Per request: the drafted ids are checked, each drafted position costs two scalar reads and one
//! Philox draw, and the stopping position reads its row pair once: `sample_residual` (rejection
//! rules, one pass), `sample_categorical` (bonus tokens, sample-and-match), `argmax` with the row
//! checks fused (greedy). Kernels and their agreement with seq:
//!  - residual / bonus / categorical sampling: bit-identical (sampling/categorical.hpp contract);
//!    rejection rules without a `vector_residual` fall back to seq's residual sampler;
//!  - greedy: exact (comparisons only);
//!  - the `check_normalisation` option sums rows in lane order: the flag can differ from seq's only
//!    for a row whose sum is within ~1e-12 of 1 +- tolerance;
//!  - from logits: rows are warped by `backend::simd::warp_logits` (see backend/simd/warp.hpp for
//!    its agreement bound with seq), then verified as above.
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
#include "specdec/backend/simd/warp.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/exec/simd.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::backend::simd {

//! Rows warped from logits on demand by the simd warper (only the rows that are read), into
//! per-request scratch; the simd counterpart of `seq::warped_logit_rows`.
template <class Arch, class T>
struct warped_logit_rows {
  const chain_batch<T>& batch;
  std::size_t b;
  warp_params target_params, draft_params;
  std::vector<T> target_scratch, draft_scratch;
  seq::row_ref<T> target(std::size_t i) { return warp(batch.target_row(b, i), target_params, target_scratch); }
  seq::row_ref<T> draft(std::size_t i) { return warp(batch.draft_row(b, i), draft_params, draft_scratch); }

 private:
  static seq::row_ref<T> warp(std::span<const T> logits, const warp_params& w, std::vector<T>& scratch) {
    scratch.resize(logits.size());
    const row_status s = warp_logits<Arch>(logits, std::span<T>(scratch), w);
    return {std::span<const T>(scratch), s == row_status::ok};
  }
};

namespace detail {

//! seq's `verify_one` (backend/seq/verify.hpp) with the simd row kernels; keep the two in step.
template <class Arch, AcceptanceRule Rule, class T, class Rows>
std::int32_t verify_one(const Rule& rule, Rows& rows, std::span<const token_id> drafts, std::size_t vocab_size,
                        const random::request_stream& stream, std::span<token_id> tokens, verify_status& status,
                        const verify_options& options) {
  using random::purpose;
  const std::size_t n = drafts.size();
  for (token_id& t : tokens) t = no_token;
  const auto check = [&](const seq::row_ref<T>& r) {
    if (!r.usable) status |= verify_status::invalid_row;
    if (options.check_normalisation && r.usable &&
        !(std::abs(sum<Arch>(r.values) - 1.0) <= options.normalisation_tolerance))
      status |= verify_status::not_normalised;
    return is_valid(status);
  };
  const auto emit_sample = [&](const sample_result& s, std::size_t at) {
    if (s.status != row_status::ok || !in_vocabulary(s.token, vocab_size)) {
      status |= verify_status::invalid_row;
      return;
    }
    tokens[at] = s.token;
  };
  for (const token_id x : drafts)
    if (!in_vocabulary(x, vocab_size)) {
      status |= verify_status::bad_draft_token;
      return 0;
    }
  for (std::size_t i = 0; i <= n; ++i) {
    const bool bonus = i == n;
    const token_id x = bonus ? no_token : drafts[i];
    const seq::row_ref<T> p = rows.target(i);
    if (!check(p)) return static_cast<std::int32_t>(i);
    const auto pos = static_cast<std::uint32_t>(i);

    if constexpr (Rule::family == rule_family::rejection) {
      if (bonus) {
        emit_sample(sample_categorical<Arch>(p.values, stream.open(pos, purpose::resample).uniform()), i);
        return static_cast<std::int32_t>(i);
      }
      const seq::row_ref<T> q = rows.draft(i);
      if (!check(q)) return static_cast<std::int32_t>(i);
      const double px = static_cast<double>(p.values[static_cast<std::size_t>(x)]);
      const double qx = static_cast<double>(q.values[static_cast<std::size_t>(x)]);
      if (!seq::detail::usable_scalar(px) || !seq::detail::usable_scalar(qx)) {
        status |= verify_status::invalid_row;
        return static_cast<std::int32_t>(i);
      }
      bool accepted = false;
      if (qx == 0.0) {
        status |= verify_status::draft_prob_zero;
        if (!has_mass<Arch>(q.values)) {
          status |= verify_status::invalid_row;
          return static_cast<std::int32_t>(i);
        }
      } else
        accepted = rule.accepts(px, qx, stream.open(pos, purpose::accept).uniform());
      if (accepted) {
        tokens[i] = x;
        continue;
      }
      const residual_result r = sample_residual<Arch>(p.values, q.values, rule, stream.open(pos, purpose::resample).uniform());
      if (r.used_fallback) status |= verify_status::residual_fallback;
      emit_sample(r.sample, i);
      return static_cast<std::int32_t>(i);
    } else if constexpr (Rule::family == rule_family::greedy) {
      const row_summary s = summarise<Arch>(p.values);
      if (!s.usable || !s.has_mass) {
        status |= verify_status::invalid_row;
        return static_cast<std::int32_t>(i);
      }
      const auto best = static_cast<token_id>(argmax<Arch>(p.values));
      if (!bonus && best == x) {
        tokens[i] = x;
        continue;
      }
      tokens[i] = best;
      return static_cast<std::int32_t>(i);
    } else {  // sample_and_match
      const sample_result y = sample_categorical<Arch>(p.values, stream.open(pos, purpose::target_sample).uniform());
      if (!bonus && y.status == row_status::ok && y.token == x) {
        tokens[i] = x;
        continue;
      }
      emit_sample(y, i);
      return static_cast<std::int32_t>(i);
    }
  }
  return static_cast<std::int32_t>(n);  // unreachable: the loop returns at the bonus
}

template <class Arch, AcceptanceRule Rule, class T, class MakeRows>
void verify_each(const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
                 const chain_outputs& out, const verify_options& options, MakeRows&& make_rows) {
  const std::size_t stride = batch.layout.max_drafts() + 1;
  for (std::size_t b = 0; b < batch.layout.batch_size(); ++b) {
    auto rows = make_rows(b);
    const auto drafts = batch.draft_tokens.subspan(batch.layout.draft_row(b, 0), batch.layout.num_drafts(b));
    out.status[b] = verify_status::ok;
    out.num_accepted[b] = verify_one<Arch, Rule, T>(rule, rows, drafts, batch.vocab_size, streams[b],
                                                    out.tokens.subspan(b * stride, stride), out.status[b], options);
  }
}

}  // namespace detail

//! Chain verification from probabilities with the simd kernels of architecture `Arch`
//! (`specdec::verify(exec::simd_policy<Arch>{}, ...)` lands here). Same outputs as seq.
//! \throws specdec::error on the same shape errors as seq.
template <class Arch, AcceptanceRule Rule, class T>
void verify(const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
            const chain_outputs& out, const verify_options& options) {
  SPECDEC_REQUIRE_SIMD_ARCH(Arch, "specdec::verify");
  seq::detail::check_shapes(batch, reads_draft_distribution<Rule>, streams, out);
  detail::verify_each<Arch>(rule, batch, streams, out, options,
                            [&](std::size_t b) { return seq::probability_rows<T>{batch, b}; });
}

//! Chain verification from logits with the simd kernels: each row that is read is warped by
//! `backend::simd::warp_logits` with its request's parameters.
//! \throws specdec::error on the same shape and parameter errors as seq.
template <class Arch, AcceptanceRule Rule, class T>
void verify_from_logits(const Rule& rule, const chain_batch<T>& batch, std::span<const warp_params> target_params,
                        std::span<const warp_params> draft_params, std::span<const random::request_stream> streams,
                        const chain_outputs& out, const verify_options& options) {
  SPECDEC_REQUIRE_SIMD_ARCH(Arch, "specdec::verify_from_logits");
  seq::detail::check_shapes(batch, reads_draft_distribution<Rule>, streams, out);
  const std::size_t B = batch.layout.batch_size();
  SPECDEC_EXPECTS(target_params.size() == B, "one warp_params per request is required");
  SPECDEC_EXPECTS(draft_params.empty() || draft_params.size() == B, "draft_params must be empty (same as target) or one per request");
  for (const auto& w : target_params) validate(w);
  for (const auto& w : draft_params) validate(w);
  detail::verify_each<Arch>(rule, batch, streams, out, options, [&](std::size_t b) {
    return warped_logit_rows<Arch, T>{batch, b, target_params[b], draft_params.empty() ? target_params[b] : draft_params[b], {}, {}};
  });
}

}  // namespace specdec::backend::simd
