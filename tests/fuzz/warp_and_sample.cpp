// Fuzz harness: the row kernels that take caller data — softmax, log-sum-exp, log-softmax
// (distributions/softmax.hpp), the warpers (distributions/warp.hpp: warp_logits, warp_probs,
// keep_top_k/top_p/min_p), the samplers (sampling/categorical.hpp, residual.hpp, top_w.hpp) — on seq
// and their simd versions (backend/simd/), with arbitrary rows (NaN, infinities, negative, zero,
// subnormal and huge entries), parameters (invalid ones included) and uniforms.
//
// Invariants: no crash or sanitizer report; invalid parameters throw specdec::error and nothing else
// throws; a row reported usable is a distribution; a sampled token is in [0, V) exactly when the
// status is ok and has positive weight; the agreements with seq stated in backend/simd/all.hpp
// (identical tokens, statuses, masses; identical filter masks; from logits, identical warped rows and
// samples; softmax within its stated bound);
// sampling is monotone in u; sample_masked and sample_sparse give the dense row's token.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"
#include "specdec/sampling/sample_logits.hpp"
#include "specdec/sampling/top_w.hpp"
#if SPECDEC_ENABLE_SIMD
#include "specdec/backend/simd/all.hpp"
#endif

#include "fuzz_input.hpp"

namespace {

using namespace specdec_fuzz;
using specdec::row_status;
using specdec::sample_result;
using specdec::token_id;

#if SPECDEC_ENABLE_SIMD
using Arch = xsimd::default_arch;
#endif

// A uniform in [0, 1): from a table of edges, or 53 bits of the input.
double uniform(byte_reader& in) {
  static constexpr std::array<double, 4> edges{0.0, 0x1.fffffffffffffp-1, 0.5, 0x1p-53};
  const std::uint8_t b = in.byte();
  return b < 0x40 ? edges[b % edges.size()] : static_cast<double>(in.bits<std::uint64_t>() >> 11) * 0x1p-53;
}

bool same_double(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same_sample(const sample_result& a, const sample_result& b) {
  return a.token == b.token && a.status == b.status && same_double(a.mass, b.mass);
}

// A sample of a row of weights: a token in [0, V) with positive weight exactly when ok.
template <class WeightOf>
void check_sample(const sample_result& s, std::size_t V, WeightOf&& weight) {
  FUZZ_CHECK((s.status == row_status::ok) == (s.token != specdec::no_token));
  if (s.status == row_status::ok) {
    FUZZ_CHECK(specdec::in_vocabulary(s.token, V));
    FUZZ_CHECK(weight(static_cast<std::size_t>(s.token)) > 0.0);
  }
}

// Whether two rows are equal entry for entry (NaN equal to NaN).
template <class T>
bool same_rows(std::span<const T> a, std::span<const T> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](T x, T y) { return same_double(static_cast<double>(x), static_cast<double>(y)); });
}

// ---- softmax, log-sum-exp, log-softmax --------------------------------------------------------------
template <class T>
void fuzz_softmax(byte_reader& in, std::span<const T> logits) {
  static constexpr std::array<double, 8> temperatures{1.0, 0.5, 2.0, 1e-300, 1e-39, 1e300, 0.05, 1e-3};
  const double t = in.flag() ? in.any_double() : in.pick(temperatures);
  const bool t_ok = t > 0.0 && std::isfinite(t);
  const std::size_t V = logits.size();
  std::vector<T> a(V), la(V);
  row_status s{};
  try {
    s = specdec::softmax(logits, std::span<T>(a), t);
    FUZZ_CHECK(t_ok);
  } catch (const specdec::error&) {
    FUZZ_CHECK(!t_ok);
    return;
  }
  FUZZ_CHECK(s == row_status::ok ? is_distribution(std::span<const T>(a))
                                 : std::all_of(a.begin(), a.end(), [](T x) { return x == T(0); }));
  const double lse = specdec::log_sum_exp(logits, t);
  // NaN exactly for not_finite rows, -inf for rows of -inf (and when max / T overflows below -DBL_MAX).
  FUZZ_CHECK(s == row_status::ok ? !std::isnan(lse) : (s == row_status::not_finite ? std::isnan(lse) : lse == -INFINITY));
  FUZZ_CHECK(specdec::log_softmax(logits, std::span<T>(la), t) == s);
  for (std::size_t v = 0; v < V && s == row_status::ok; ++v) {
    FUZZ_CHECK(!(la[v] > T(0)) || la[v] <= T(1e-6));  // log p <= 0 (up to rounding)
    FUZZ_CHECK(std::isnan(static_cast<double>(la[v])) == false);
  }
#if SPECDEC_ENABLE_SIMD
  std::vector<T> b(V), lb(V);
  FUZZ_CHECK(specdec::backend::simd::softmax<Arch>(logits, std::span<T>(b), t) == s);
  double ma = 0.0, mb = 0.0;
  FUZZ_CHECK(specdec::detail::logit_row_max(logits, ma) == specdec::backend::simd::logit_row_max<Arch>(logits, mb));
  FUZZ_CHECK(same_double(ma, mb));
  if (s != row_status::ok) {
    FUZZ_CHECK(std::all_of(b.begin(), b.end(), [](T x) { return x == T(0); }));
  } else {
    FUZZ_CHECK(is_distribution(std::span<const T>(b)));
    // The stated bound (backend/simd/softmax.hpp) where seq's entry is far from underflow.
    for (std::size_t v = 0; v < V; ++v) {
      if (logits[v] == -std::numeric_limits<T>::infinity()) FUZZ_CHECK(b[v] == T(0));
      if (!(static_cast<double>(a[v]) > 1e-30)) continue;
      const double gap = std::abs((static_cast<double>(logits[v]) - ma) / t);
      const double rel = std::abs(static_cast<double>(a[v]) - static_cast<double>(b[v])) / static_cast<double>(a[v]);
      const double bound =
          std::is_same_v<T, float> ? (2.0 * gap + 4.0) * 0x1p-23 : (2.0 * static_cast<double>(V) + 8.0) * 0x1p-53;
      FUZZ_CHECK(rel <= bound);
    }
  }
  const double lse_simd = specdec::backend::simd::log_sum_exp<Arch>(logits, t);
  FUZZ_CHECK(std::isnan(lse) == std::isnan(lse_simd));
  if (std::isfinite(lse))
    FUZZ_CHECK(std::abs(lse - lse_simd) <= 1e-5 * std::max(1.0, std::abs(lse)));
  else
    FUZZ_CHECK(same_double(lse, lse_simd));
  FUZZ_CHECK(specdec::backend::simd::log_softmax<Arch>(logits, std::span<T>(lb), t) == s);
#endif
}

// ---- warping ------------------------------------------------------------------------------------------
// What a warped row satisfies: a distribution whose support is the top of `before` (upward closed, the
// row's maximum kept), within the top-k and min-p cuts.
template <class T>
void check_warped(std::span<const T> before, std::span<const T> after, const specdec::warp_params& w) {
  FUZZ_CHECK(is_distribution(after));
  const std::size_t V = before.size();
  T lowest_kept = std::numeric_limits<T>::infinity();
  std::size_t kept = 0;
  for (std::size_t v = 0; v < V; ++v)
    if (after[v] > T(0)) {
      lowest_kept = std::min(lowest_kept, before[v]);
      ++kept;
    }
  const std::size_t top = first_argmax(before);
  FUZZ_CHECK(after[top] > T(0));
  for (std::size_t v = 0; v < V; ++v)
    if (before[v] > lowest_kept) FUZZ_CHECK(after[v] > T(0));
  if (w.top_k > 0) {
    std::size_t above = 0;  // entries strictly above the lowest kept one
    for (const T x : before) above += x > lowest_kept ? 1u : 0u;
    FUZZ_CHECK(above < static_cast<std::size_t>(w.top_k));
  }
  // (min-p compares with the maximum logit's weight, which may lie an ulp below the largest weight)
  if (w.min_p > 0.0) FUZZ_CHECK(static_cast<double>(lowest_kept) >= w.min_p * static_cast<double>(before[top]) * (1.0 - 1e-6));
  (void)kept;
}

template <class T>
void fuzz_warp_logits(byte_reader& in, std::span<const T> logits) {
  const std::size_t V = logits.size();
  const specdec::warp_params w = warp_params(in, V);
  std::vector<T> a(V);
  row_status s{};
  try {
    s = specdec::warp_logits(logits, std::span<T>(a), w);
    FUZZ_CHECK(valid_params(w));
  } catch (const specdec::error&) {
    FUZZ_CHECK(!valid_params(w));
    return;
  }
  if (s == row_status::ok) {
    if (w.temperature == 0.0) {
      FUZZ_CHECK(a[first_argmax(logits)] == T(1) && is_distribution(std::span<const T>(a)));
    } else if (specdec::detail::weighs_logits<T>(w.temperature)) {  // the filters act on the weights
      std::vector<T> e(V);
      const specdec::warp_params unfiltered{w.temperature};
      FUZZ_CHECK(specdec::detail::keep_logit_weights(logits, unfiltered, std::span<T>(e)).status == row_status::ok);
      check_warped(std::span<const T>(e), std::span<const T>(a), w);
    } else {
      std::vector<T> soft(V);
      FUZZ_CHECK(specdec::softmax(logits, std::span<T>(soft), w.temperature) == row_status::ok);
      check_warped(std::span<const T>(soft), std::span<const T>(a), w);
    }
  } else {
    FUZZ_CHECK(std::all_of(a.begin(), a.end(), [](T x) { return x == T(0); }));
  }
  // sample_logits: a token of the warped row, or the warp's status.
  const double u = uniform(in);
  const sample_result r = specdec::sample_logits(logits, w, u);
  FUZZ_CHECK(r.status == s);
  check_sample(r, V, [&](std::size_t v) { return static_cast<double>(a[v]); });
#if SPECDEC_ENABLE_SIMD
  std::vector<T> b(V);
  FUZZ_CHECK(specdec::backend::simd::warp_logits<Arch>(logits, std::span<T>(b), w) == s);  // statuses identical
  FUZZ_CHECK(same_rows(std::span<const T>(a), std::span<const T>(b)));                     // rows identical
  FUZZ_CHECK(same_sample(specdec::backend::simd::sample_logits<Arch>(logits, w, u), r));   // samples identical
#endif
}

template <class T>
void fuzz_warp_probs(byte_reader& in, std::span<const T> row) {
  const std::size_t V = row.size();
  const specdec::warp_params w = warp_params(in, V);
  std::vector<T> a(row.begin(), row.end());
  row_status s{};
  try {
    s = specdec::warp_probs(std::span<T>(a), w);
    FUZZ_CHECK(valid_params(w));
  } catch (const specdec::error&) {
    FUZZ_CHECK(!valid_params(w));
    return;
  }
  // ok: a distribution; otherwise zero-filled (distributions/warp.hpp).
  FUZZ_CHECK(s == row_status::ok ? is_distribution(std::span<const T>(a))
                                 : std::all_of(a.begin(), a.end(), [](T x) { return x == T(0); }));
  if (s == row_status::ok && (w.temperature == 1.0 || w.temperature == 0.0)) check_warped(row, std::span<const T>(a), w);
  if (s == row_status::ok && w.temperature == 0.0) FUZZ_CHECK(a[first_argmax(row)] == T(1));
#if SPECDEC_ENABLE_SIMD
  std::vector<T> b(row.begin(), row.end());
  FUZZ_CHECK(specdec::backend::simd::warp_probs<Arch>(std::span<T>(b), w) == s);
  if (s != row_status::ok) return;
  if (w.temperature != 0.0 && w.temperature != 1.0) {
    FUZZ_CHECK(a == b);  // seq's own code
    return;
  }
  // Same masks; probabilities within 1 ulp for float rows, (2 V + 8) 2^-53 relative for double rows
  // (backend/simd/warp.hpp).
  const double double_bound = (2.0 * static_cast<double>(V) + 8.0) * 0x1p-53;
  for (std::size_t v = 0; v < V; ++v) {
    FUZZ_CHECK((a[v] > T(0)) == (b[v] > T(0)));
    if constexpr (std::is_same_v<T, float>)
      FUZZ_CHECK(b[v] == a[v] || b[v] == std::nextafter(a[v], T(2)) || b[v] == std::nextafter(a[v], T(-1)));
    else
      FUZZ_CHECK(std::abs(a[v] - b[v]) <= double_bound * a[v]);
  }
#endif
}

// keep_top_k / keep_top_p / keep_min_p directly, on rows as warp produces them (non-negative; top-p
// requires that) and, for top-k and min-p, on any row.
template <class T>
void fuzz_filters(byte_reader& in, std::span<const T> row) {
  const std::size_t V = row.size();
  const specdec::warp_params w = warp_params(in, V);
  std::vector<T> clean(row.begin(), row.end());
  const bool any_row = in.flag();
  if (!any_row)
    for (T& x : clean) x = std::isfinite(static_cast<double>(x)) ? std::abs(x) : T(0);
  // With a NaN the k-th largest and the maximum are not defined: only memory safety is checked.
  [[maybe_unused]] const bool comparable =
      std::none_of(clean.begin(), clean.end(), [](T x) { return std::isnan(static_cast<double>(x)); });
  // The seq filter on a copy: specdec::error exactly for an invalid parameter; entries kept or zeroed.
  // The simd filter (when built) gives the same row.
  const auto run = [&](auto&& filter, [[maybe_unused]] auto&& simd_filter, bool valid) {
    std::vector<T> a = clean;
    try {
      filter(std::span<T>(a));
      FUZZ_CHECK(valid);
    } catch (const specdec::error&) {
      FUZZ_CHECK(!valid);
      return;
    }
    for (std::size_t v = 0; v < V; ++v)
      FUZZ_CHECK(a[v] == T(0) || same_double(static_cast<double>(a[v]), static_cast<double>(clean[v])));
#if SPECDEC_ENABLE_SIMD
    std::vector<T> b = clean;
    simd_filter(std::span<T>(b));
    if (comparable) FUZZ_CHECK(same_rows(std::span<const T>(a), std::span<const T>(b)));
#endif
  };
#if SPECDEC_ENABLE_SIMD
  const auto simd_top_k = [&](std::span<T> r) { specdec::backend::simd::keep_top_k<Arch>(r, w.top_k); };
  const auto simd_top_p = [&](std::span<T> r) { specdec::backend::simd::keep_top_p<Arch>(r, w.top_p); };
  const auto simd_min_p = [&](std::span<T> r) { specdec::backend::simd::keep_min_p<Arch>(r, w.min_p); };
#else
  const auto simd_top_k = [](std::span<T>) {}, simd_top_p = simd_top_k, simd_min_p = simd_top_k;
#endif
  run([&](std::span<T> r) { specdec::keep_top_k(r, w.top_k); }, simd_top_k, w.top_k >= 0);
  if (!any_row) run([&](std::span<T> r) { specdec::keep_top_p(r, w.top_p); }, simd_top_p, w.top_p > 0.0 && w.top_p <= 1.0);
  run([&](std::span<T> r) { specdec::keep_min_p(r, w.min_p); }, simd_min_p, w.min_p >= 0.0 && w.min_p <= 1.0);
}

// ---- sampling -------------------------------------------------------------------------------------------
template <class T>
void fuzz_categorical(byte_reader& in, std::span<const T> row) {
  const std::size_t V = row.size();
  const double u = uniform(in), u2 = uniform(in);
  const auto weight = [&](std::size_t v) { return static_cast<double>(row[v]); };
  const sample_result a = specdec::sample_categorical(row, u);
  check_sample(a, V, weight);
  const sample_result a2 = specdec::sample_categorical(row, u2);
  if (a.status == row_status::ok) FUZZ_CHECK((u <= u2) == (a.token <= a2.token) || a.token == a2.token);  // monotone in u
  // sample_masked equals sampling a copy with the masked entries zeroed.
  std::vector<token_id> masked;
  for (int k = in.byte() % 8; k > 0; --k) masked.push_back(in.in_range<token_id>(0, static_cast<token_id>(V - 1)));
  std::sort(masked.begin(), masked.end());
  masked.erase(std::unique(masked.begin(), masked.end()), masked.end());
  std::vector<T> zeroed(row.begin(), row.end());
  for (const token_id t : masked) zeroed[static_cast<std::size_t>(t)] = T(0);
  const sample_result m = specdec::sample_masked(row, std::span<const token_id>(masked), u);
  FUZZ_CHECK(same_sample(m, specdec::sample_categorical(std::span<const T>(zeroed), u)));
  // sample_sparse on the nonzero entries equals the dense row (and refuses unsorted or outside ids).
  std::vector<token_id> ids;
  std::vector<double> weights;
  for (std::size_t v = 0; v < V; ++v)
    if (row[v] != T(0)) ids.push_back(static_cast<token_id>(v)), weights.push_back(static_cast<double>(row[v]));
  FUZZ_CHECK(same_sample(specdec::sample_sparse(V, ids, weights, u), a));
  if (!ids.empty() && in.flag()) {
    std::vector<token_id> bad = ids;
    bad[in.in_range<std::size_t>(0, bad.size() - 1)] = token(in, V);
    const bool ok = std::is_sorted(bad.begin(), bad.end()) && std::adjacent_find(bad.begin(), bad.end()) == bad.end() &&
                    std::all_of(bad.begin(), bad.end(), [V](token_id t) { return specdec::in_vocabulary(t, V); });
    try {
      check_sample(specdec::sample_sparse(V, bad, weights, u), V, [](std::size_t) { return 1.0; });
      FUZZ_CHECK(ok);
    } catch (const specdec::error&) {
      FUZZ_CHECK(!ok);
    }
  }
#if SPECDEC_ENABLE_SIMD
  FUZZ_CHECK(same_sample(specdec::backend::simd::sample_categorical<Arch>(row, u), a));
  FUZZ_CHECK(same_sample(specdec::backend::simd::sample_masked<Arch>(row, std::span<const token_id>(masked), u), m));
#endif
}

template <class Rule, class T>
void residual_case(const Rule& rule, std::span<const T> p, std::span<const T> q, double u) {
  const auto a = specdec::sample_residual(
      p, q, [&rule](double pv, double qv) { return rule.accepted_mass(pv, qv); }, u);
  const auto residual_weight = [&](std::size_t v) {
    const double pv = static_cast<double>(p[v]);
    return q.empty() || a.used_fallback ? pv : pv - rule.accepted_mass(pv, static_cast<double>(q[v]));
  };
  check_sample(a.sample, p.size(), residual_weight);
  if (a.used_fallback) FUZZ_CHECK(!q.empty());
#if SPECDEC_ENABLE_SIMD
  const auto b = specdec::backend::simd::sample_residual<Arch>(p, q, rule, u);
  FUZZ_CHECK(same_sample(a.sample, b.sample) && a.used_fallback == b.used_fallback);
#endif
}

template <class T>
void fuzz_residual(byte_reader& in, std::span<const T> p) {
  const std::size_t V = p.size();
  std::vector<T> q(V);
  fill_row<T>(in, q, row_style::probabilities, p);
  const bool bonus = in.byte() >= 0xF0;
  const std::span<const T> q_span = bonus ? std::span<const T>() : std::span<const T>(q);
  const double u = uniform(in);
  const double a = in.flag() ? in.any_double() : 0.5 + static_cast<double>(in.byte()) / 64.0;
  switch (in.byte() % 4) {
    case 0: residual_case(specdec::strict, p, q_span, u); break;
    case 1:
      if (std::isfinite(a) && a > 0.0) residual_case(specdec::lenient_rule(a), p, q_span, u);
      break;
    case 2:
      if (std::isfinite(a) && a >= 1.0) residual_case(specdec::block_residual{a}, p, q_span, u);
      break;
    default:
      if (std::isfinite(a) && a >= 0.0) residual_case(specdec::scaled_draft_residual{a}, p, q_span, u);
      break;
  }
  if (!bonus) {  // rows of different lengths are refused
    bool threw = false;
    try {
      (void)specdec::sample_residual(p, std::span<const T>(q).first(V - 1), u);
    } catch (const specdec::error&) {
      threw = true;
    }
    FUZZ_CHECK(threw == (V > 1));
  }
}

template <class T>
void fuzz_select(byte_reader& in, std::span<const T> keys) {
  const std::size_t V = keys.size();
  const std::size_t w = in.in_range<std::size_t>(0, V + 2);
  std::vector<std::size_t> a;
  specdec::top_w_indices(keys, w, a);
  std::size_t usable = 0;
  for (const T x : keys) usable += x > -std::numeric_limits<T>::infinity() ? 1u : 0u;
  FUZZ_CHECK(a.size() == std::min(w, usable));
  for (std::size_t i = 0; i < a.size(); ++i) {
    FUZZ_CHECK(a[i] < V && keys[a[i]] > -std::numeric_limits<T>::infinity());
    if (i > 0) FUZZ_CHECK(keys[a[i - 1]] > keys[a[i]] || (keys[a[i - 1]] == keys[a[i]] && a[i - 1] < a[i]));
  }
  const std::ptrdiff_t best = specdec::argmax(keys);
#if SPECDEC_ENABLE_SIMD
  std::vector<std::size_t> b;
  specdec::backend::simd::top_w_indices<Arch>(keys, w, b);
  FUZZ_CHECK(a == b);
  FUZZ_CHECK(specdec::backend::simd::argmax<Arch>(keys) == best);
  const auto kth = specdec::backend::simd::kth_largest<Arch>(keys, w);
  FUZZ_CHECK(kth.has_value() == (w >= 1 && w <= usable));
  if (kth) FUZZ_CHECK(*kth == keys[a.back()]);
  const auto summary = specdec::backend::simd::summarise<Arch>(keys);
  FUZZ_CHECK((summary.usable && summary.has_mass) == usable_row(keys));
  FUZZ_CHECK(specdec::backend::simd::has_mass<Arch>(keys) == std::any_of(keys.begin(), keys.end(), [](T x) { return x > T(0); }));
#else
  (void)best;
#endif
}

template <class T>
void fuzz_row(byte_reader& in, std::uint8_t op, bool large_vocab) {
  const std::size_t V = vocab_size(in, large_vocab);
  const bool logits = op == 0 || op == 1 || op == 6;
  std::vector<T> row(V);
  fill_row<T>(in, row, logits ? row_style::logits : row_style::probabilities);
  const std::span<const T> r(row);
  switch (op) {
    case 0: fuzz_softmax(in, r); break;
    case 1: fuzz_warp_logits(in, r); break;
    case 2: fuzz_warp_probs(in, r); break;
    case 3: fuzz_filters(in, r); break;
    case 4: fuzz_categorical(in, r); break;
    case 5: fuzz_residual(in, r); break;
    default: fuzz_select(in, r); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  byte_reader in(data, size);
  const std::uint8_t head = in.byte();
  const auto op = static_cast<std::uint8_t>(head % 7);
  const bool large_vocab = (head >> 4) == 0xF;
  if (head & 0x08u)
    fuzz_row<float>(in, op, large_vocab);
  else
    fuzz_row<double>(in, op, large_vocab);
  return 0;
}
