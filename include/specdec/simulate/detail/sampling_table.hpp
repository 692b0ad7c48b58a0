//! \file simulate/detail/sampling_table.hpp
//! \brief The inverse CDF of sampling/categorical.hpp for one fixed row, precomputed as tables, so
//! that a simulator that samples the same row millions of times (a context-free (p, q) pair) can
//! look each token up in O(log V) on the host or on a GPU, with the token `sample_by_weights` gives.
//!
//! Why a table reproduces the contract exactly: for a fixed row, every comparison the determinism
//! contract makes has the form `X > goal` with goal = u * Z and X a double that does not depend on
//! u: the tile test of rule 4 (X = prefix_t + mass_t), the strip test of rule 5 (X = r_k + m_k) and
//! the entry test inside a strip (X = r_k + s_v), each X being the same floating-point sum the
//! contract computes. Within a level these X are non-decreasing (the weights are >= 0 and rounding
//! is monotone), so "the first index whose X exceeds goal" is a binary search; the two fallbacks
//! (rule 5: the last positive entry of the tile; rule 6: of the row) are stored too. The tile
//! masses and Z come from `sample_by_weights` itself (rules 1-3), and the row status with them.
//! tests/simulate/sampling_table.cpp checks the lookup against `sample_by_weights` at every token
//! boundary of rows with one and several tiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/config.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"
#include "specdec/simulate/detail/position.hpp"

namespace specdec::simulate::detail {

//! Strips per tile of the contract's rule 5.
inline constexpr std::size_t strips_per_tile = sampling_tile / sampling_strip;

//! The first i in [lo, hi) with a[i] > goal, for a non-decreasing a; hi when there is none.
SPECDEC_HOST_DEVICE constexpr std::size_t first_above(const double* a, std::size_t lo, std::size_t hi, double goal) noexcept {
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (a[mid] > goal)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

//! What the lookup of one row reads: scalars, and pointers to the tables (host or device memory).
struct sampling_table_view {
  std::size_t size = 0;                     //!< V
  std::size_t tiles = 0;                    //!< tiles of rule 1
  std::size_t strips = 0;                   //!< strips of rule 5 (strip k holds entries [64 k, 64 k + 64))
  double total = 0.0;                       //!< Z, the row's total weight
  row_status status = row_status::no_mass;  //!< the status sample_by_weights reports for the row
  token_id row_last = no_token;             //!< rule 6: the last entry of the row with positive weight
  const double* tile_end = nullptr;         //!< [tiles]: prefix_t + mass_t
  const double* strip_end = nullptr;        //!< [strips]: r_k + m_k
  const double* entry_end = nullptr;        //!< [size]: r_k + s_v, s_v the running sum inside v's strip
  const token_id* tile_last = nullptr;      //!< [tiles]: rule 5's fallback, the last positive entry of tile t

  //! The token `sample_by_weights` returns for this row and the uniform u; no_token unless the row's
  //! status is ok. Host and device.
  SPECDEC_HOST_DEVICE constexpr token_id sample(double u) const noexcept {
    if (status != row_status::ok) return no_token;
    const double goal = u * total;
    const std::size_t t = first_above(tile_end, 0, tiles, goal);  // rule 4
    if (t == tiles) return row_last;                              // rule 6
    const std::size_t k0 = t * strips_per_tile;
    const std::size_t k1 = k0 + strips_per_tile < strips ? k0 + strips_per_tile : strips;
    const std::size_t k = first_above(strip_end, k0, k1, goal);  // rule 5: the strip
    if (k == k1) return tile_last[t];                            // rule 5's fallback
    const std::size_t v0 = k * sampling_strip;
    const std::size_t v1 = v0 + sampling_strip < size ? v0 + sampling_strip : size;
    // The entry: it exists, since entry_end[v1 - 1] == strip_end[k] (the same sum in the same order).
    const std::size_t v = first_above(entry_end, v0, v1, goal);
    return v < v1 ? static_cast<token_id>(v) : tile_last[t];
  }
};

//! The tables of one row, in host memory. `view()` reads them; `view_with(...)` pairs the scalars
//! with copies of the arrays elsewhere (the cuda backend uploads them).
class sampling_table {
 public:
  sampling_table() = default;

  //! Tables of the row `weight(v)`, v in [0, size) (`weight` returns a double, as for
  //! sample_by_weights). Cost: O(size * tiles) weight evaluations (one sample_by_weights call per
  //! tile gives that tile's mass exactly) plus O(size).
  template <class WeightFn>
  sampling_table(std::size_t size, WeightFn&& weight) {
    std::vector<double> w(size);
    for (std::size_t v = 0; v < size; ++v) w[v] = weight(v);
    const auto row = [&w](std::size_t v) { return w[v]; };
    const sample_result whole = sample_by_weights(size, row, 0.0);
    scalars_.size = size;
    scalars_.tiles = specdec::detail::tile_count(size);
    scalars_.strips = (size + sampling_strip - 1) / sampling_strip;
    scalars_.total = whole.mass;
    scalars_.status = whole.status;
    tile_end_.resize(scalars_.tiles);
    strip_end_.resize(scalars_.strips);
    entry_end_.resize(size);
    tile_last_.resize(scalars_.tiles, no_token);
    double prefix = 0.0;  // rule 4's running prefix
    for (std::size_t t = 0; t < scalars_.tiles; ++t) {
      const std::size_t begin = t * sampling_tile, end = begin + sampling_tile < size ? begin + sampling_tile : size;
      // Rules 1-3: tile t's mass is the total of the row restricted to tile t (+0 elsewhere is exact).
      const double mass = sample_by_weights(
                              size, [&](std::size_t v) { return v >= begin && v < end ? w[v] : 0.0; }, 0.0)
                              .mass;
      double r = prefix;  // rule 5's running prefix inside the tile
      for (std::size_t s0 = begin; s0 < end; s0 += sampling_strip) {
        const std::size_t s1 = s0 + sampling_strip < end ? s0 + sampling_strip : end;
        double s = 0.0;
        for (std::size_t v = s0; v < s1; ++v) {
          s += w[v];
          entry_end_[v] = r + s;
          if (w[v] > 0.0) tile_last_[t] = static_cast<token_id>(v);
        }
        strip_end_[s0 / sampling_strip] = r + s;  // s is now the strip's mass m, summed in the same order
        r = r + s;
      }
      tile_end_[t] = prefix + mass;
      prefix = prefix + mass;
      if (tile_last_[t] != no_token) scalars_.row_last = tile_last_[t];
    }
  }

  //! The lookup over the host tables.
  sampling_table_view view() const noexcept {
    return view_with(tile_end_.data(), strip_end_.data(), entry_end_.data(), tile_last_.data());
  }
  //! The lookup over copies of the tables at other addresses (e.g. device memory).
  sampling_table_view view_with(const double* tile_end, const double* strip_end, const double* entry_end,
                                const token_id* tile_last) const noexcept {
    sampling_table_view v = scalars_;
    v.tile_end = tile_end;
    v.strip_end = strip_end;
    v.entry_end = entry_end;
    v.tile_last = tile_last;
    return v;
  }

  std::span<const double> tile_end() const noexcept { return tile_end_; }
  std::span<const double> strip_end() const noexcept { return strip_end_; }
  std::span<const double> entry_end() const noexcept { return entry_end_; }
  std::span<const token_id> tile_last() const noexcept { return tile_last_; }

 private:
  sampling_table_view scalars_;
  std::vector<double> tile_end_, strip_end_, entry_end_;
  std::vector<token_id> tile_last_;
};

//! The three rows a token simulator samples for a context-free pair (p, q) and a rejection rule:
//! q (drafts), p (bonus tokens and the zero-residual fallback) and the rule's residual
//! max(0, p - a), a(v) = rule.accepted_mass(p(v), q(v)), with the weights `sample_residual` uses.
struct pair_tables {
  sampling_table p, q, residual;
};

//! Builds the `pair_tables` of (rule, p, q). \pre p.size() == q.size().
template <RejectionRule Rule>
pair_tables make_pair_tables(const Rule& rule, std::span<const double> p, std::span<const double> q) {
  const auto mass = [&rule](double pv, double qv) { return static_cast<double>(rule.accepted_mass(pv, qv)); };
  return {sampling_table(p.size(), [&](std::size_t v) { return p[v]; }),
          sampling_table(q.size(), [&](std::size_t v) { return q[v]; }),
          sampling_table(p.size(), [&](std::size_t v) { return specdec::detail::residual_weight(p[v], q[v], mass); })};
}

//! The rows of a context-free pair read through tables (host or device memory): the same p(x), q(x)
//! and the same tokens as `host_rows` for every uniform. Trivially copyable: a kernel argument.
template <RejectionRule Rule>
struct table_rows {
  Rule rule;
  const double* p;
  const double* q;
  sampling_table_view p_table, q_table, residual_table;

  SPECDEC_HOST_DEVICE double p_at(std::size_t x) const { return p[x]; }
  SPECDEC_HOST_DEVICE double q_at(std::size_t x) const { return q[x]; }
  SPECDEC_HOST_DEVICE std::size_t sample_p(double u) const { return static_cast<std::size_t>(p_table.sample(u)); }
  SPECDEC_HOST_DEVICE std::size_t sample_q(double u) const { return static_cast<std::size_t>(q_table.sample(u)); }
  //! sample_residual's rule: the residual, or p when the residual has no mass.
  SPECDEC_HOST_DEVICE residual_draw sample_residual(double u) const {
    if (residual_table.status == row_status::no_mass) return {static_cast<std::size_t>(p_table.sample(u)), true};
    return {static_cast<std::size_t>(residual_table.sample(u)), false};
  }
};

//! `table_rows` over the host tables of `t` (tests; the CPU counterpart of the cuda backend's rows).
template <RejectionRule Rule>
table_rows<Rule> host_table_rows(const Rule& rule, std::span<const double> p, std::span<const double> q, const pair_tables& t) {
  return {rule, p.data(), q.data(), t.p.view(), t.q.view(), t.residual.view()};
}

}  // namespace specdec::simulate::detail
