//! \file backend/simd/residual.hpp
//! \brief The residual sampler norm(max(0, p - a)) and the bonus sampler on the simd backend: one
//! pass over the row pair, the same tokens as `specdec::sample_residual` (bit-identical).
//!
//! The accepted mass a(p, q) is the rule's own `accepted_mass`, evaluated on registers when it is a
//! template over the scalar type (`HasVectorResidual`: strict, lenient, block verification's and the
//! tree rules' residuals), with the same double operations as the scalar rule, so the weights are the
//! same doubles. Strict on float rows takes its min(p, q) in float (exact: the same doubles, one
//! conversion fewer per pair: 15-30 % faster on SSE4.2).
//! **Fallback:** a rejection rule whose `accepted_mass` takes doubles only is sampled by the seq code
//! (`specdec::sample_residual`), with the same result and seq's speed.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/categorical.hpp"
#include "specdec/contracts.hpp"
#include "specdec/sampling/residual.hpp"

namespace specdec::backend::simd {

//! Whether `Rule`'s accepted mass a(p, q) is evaluated on double registers: its `accepted_mass` is a
//! template over the scalar type (acceptance/lane_ops.hpp), as strict, lenient, block verification's
//! and the tree rules' residuals are. The weight is then the scalar rule's, lane by lane.
template <class Rule>
concept HasVectorResidual = requires(const Rule& r, const dbatch<xsimd::default_arch>& b) {
  { r.template accepted_mass<dbatch<xsimd::default_arch>>(b, b) } -> std::convertible_to<dbatch<xsimd::default_arch>>;
};

//! The residual weight max(0, p - a(p, q)) per lane, from the rule's own accepted mass: the same double
//! operations as seq's `residual_weight`.
template <class Rule, class B>
B residual_weight_lanes(const Rule& rule, const B& p, const B& q) noexcept {
  return positive_part<typename B::arch_type>(p - rule.template accepted_mass<B>(p, q));
}

//! Whether `Rule` says its accepted mass is exact when taken on float values (`exact_mass_in_float`,
//! strict's min): the residual of float rows is then formed in float before widening.
template <class Rule>
inline constexpr bool exact_mass_in_float = requires {
  requires Rule::exact_mass_in_float;
};

namespace detail {

//! The step of a residual row pair: w_v = max(0, p_v - a(p_v, q_v)).
template <class Arch, class T, class Rule>
struct residual_step {
  const T* p;
  const T* q;
  std::size_t size;
  const Rule* rule;
  fast_usable_tracker<Arch, T> ok{};

  void operator()(std::size_t base, lane_accumulators<Arch>& acc) {
    if constexpr (std::is_same_v<T, float> && exact_mass_in_float<Rule>) {
      // Float rows and a mass exact in float (strict's min(p, q)): max(0, p - a) = p - a with a taken in
      // float, the same double as seq's (+0 where p <= q): one conversion and no max per pair.
      using F = fbatch<Arch>;
      constexpr std::size_t n = dbatch<Arch>::size;
      for (std::size_t k = 0; k < sampling_lanes / F::size; ++k) {
        const float* pk = p + base + k * F::size;
        const F pv = F::load_unaligned(pk), qv = F::load_unaligned(q + base + k * F::size);
        ok.add(pv);
        ok.add(qv);
        const F m = rule->template accepted_mass<F>(pv, qv);  // exact in float
        acc[2 * k] += widen_lo<Arch>(pv) - widen_lo<Arch>(m);
        acc[2 * k + 1] += load_widen<Arch>(pk + n) - widen_hi<Arch>(m);
      }
    } else {
      std::array<dbatch<Arch>, sampling_lanes / dbatch<Arch>::size> pd;
      for_each_double_batch<Arch>(p, base, ok, [&pd](std::size_t r, const dbatch<Arch>& v) { pd[r] = v; });
      for_each_double_batch<Arch>(
          q, base, ok, [&](std::size_t r, const dbatch<Arch>& qv) { acc[r] += residual_weight_lanes(*rule, pd[r], qv); });
    }
  }
  bool usable() const { return ok.all() || (row_usable(p, size) && row_usable(q, size)); }
  double scalar(std::size_t v) const {
    return specdec::detail::residual_weight(static_cast<double>(p[v]), static_cast<double>(q[v]),
                                            [this](double pv, double qv) { return rule->accepted_mass(pv, qv); });
  }
};

}  // namespace detail

//! `specdec::sample_residual(p, q, accepted_mass, u)` for a rule: samples norm(max(0, p - a)) in one
//! pass over the pair; q empty means the bonus token (a sample from p); no residual mass falls back to
//! p (`used_fallback`). Same token, status and flags as seq.
//! \pre q is empty or q.size() == p.size()  \throws specdec::error otherwise
template <class Arch, class T, RejectionRule Rule>
residual_result sample_residual(std::span<const T> p, std::span<const T> q, const Rule& rule, double u) {
  SPECDEC_EXPECTS(q.empty() || q.size() == p.size(), "draft and target rows differ in length");
  if (q.empty()) return {sample_categorical<Arch>(p, u), false};
  residual_result r;
  if constexpr (HasVectorResidual<Rule>) {
    detail::residual_step<Arch, T, Rule> step{p.data(), q.data(), p.size(), &rule};
    r.sample = detail::sample_with_step<Arch>(p.size(), step, u);
    // seq's scalar weight is NaN for an unusable entry, so its Z is NaN; the registers clamp instead.
    if (!step.usable()) r.sample.mass = std::numeric_limits<double>::quiet_NaN();
  } else {
    return specdec::sample_residual(
        p, q, [&rule](double pv, double qv) { return rule.accepted_mass(pv, qv); }, u);
  }
  if (r.sample.status == row_status::no_mass) {
    r.sample = sample_categorical<Arch>(p, u);
    r.used_fallback = true;
  }
  return r;
}

//! The strict residual norm(max(0, p - q)).
template <class Arch, class T>
residual_result sample_residual(std::span<const T> p, std::span<const T> q, double u) {
  return sample_residual<Arch>(p, q, strict, u);
}

}  // namespace specdec::backend::simd
