//! \file tests/backend/simd_cases.hpp
//! \brief Test cases of the simd backend, shared by tests/backend/simd_<isa>.cpp: each of those files
//! is compiled with the flags of one ISA, declares the type list `specdec_simd_archs` (a std::tuple
//! of the xsimd architectures its flags enable) and includes this header. Every case compares a simd
//! kernel with its seq oracle on the same inputs and uniforms.
//!
//! Rows: several V (1 up to 50000, including V that are not multiples of any vector width or of the
//! 32 lanes, and V around the 2048-entry tile), float and double, with exact zeros, ties, tiny
//! (subnormal) and huge entries, and rows that are not usable (NaN, inf, negative entries placed in
//! the vector part and in the scalar tail).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "specdec/acceptance/verify.hpp"
#include "specdec/backend/simd/categorical.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/backend/simd/residual.hpp"
#include "specdec/backend/simd/verify.hpp"
#include "specdec/exec/simd.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"
#include "support/batch_builder.hpp"
#include "support/random_requests.hpp"
#include "support/same_outputs.hpp"
#include "support/skip.hpp"

namespace specdec_simd_test {

using specdec::token_id;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::stream_address;

inline constexpr double u_max = 0x1.fffffffffffffp-1;  // the largest uniform
inline const std::size_t sizes[] = {1, 3, 7, 31, 32, 33, 100, 2047, 2048, 2049, 4097, 6150};

//! Skips (support/skip.hpp) on a CPU that cannot run `Arch`; true when the case may run.
template <class Arch>
bool runnable() {
  if (specdec::exec::arch_runnable<Arch>()) return true;
  SPECDEC_SKIP("this CPU cannot run xsimd architecture " << Arch::name());
  return false;
}

using specdec_test::all_kinds;
using specdec_test::make_row;
using specdec_test::row_kind;
using specdec_test::spoil;

//! Uniforms that probe the ends of [0, 1) and random ones.
inline std::vector<double> uniforms(philox_stream& s, int n) {
  std::vector<double> u{0.0, u_max, 0.5};
  for (int i = 0; i < n; ++i) u.push_back(s.uniform());
  return u;
}

inline bool same(const specdec::sample_result& a, const specdec::sample_result& b) {
  return a.token == b.token && a.status == b.status && (a.mass == b.mass || (std::isnan(a.mass) && std::isnan(b.mass)));
}

//! A rejection rule whose accepted mass takes doubles only (no `HasVectorResidual`): the simd residual must fall back to seq.
struct halfway_rule {
  static constexpr specdec::rule_family family = specdec::rule_family::rejection;
  bool accepts(double p, double q, double u) const noexcept { return u * q < 0.5 * (p + std::min(p, q)); }
  double accepted_mass(double p, double q) const noexcept { return 0.5 * (std::min(p, q) + std::min(q, 0.5 * (p + q))); }
};

// The shipped rejection rules' accepted mass is one template that the registers evaluate; a rule with a
// double-only accepted mass is not taken for one.
static_assert(specdec::backend::simd::HasVectorResidual<specdec::strict_rule> &&
              specdec::backend::simd::HasVectorResidual<specdec::lenient_rule> &&
              specdec::backend::simd::HasVectorResidual<specdec::block_residual> &&
              specdec::backend::simd::HasVectorResidual<specdec::scaled_draft_residual>);
static_assert(!specdec::backend::simd::HasVectorResidual<halfway_rule>);
// Only a rule that says so has its residual formed in float (strict's min is exact there; lenient's
// scaled q is not).
static_assert(specdec::backend::simd::exact_mass_in_float<specdec::strict_rule> &&
              !specdec::backend::simd::exact_mass_in_float<specdec::lenient_rule> &&
              !specdec::backend::simd::exact_mass_in_float<specdec::block_residual> &&
              !specdec::backend::simd::exact_mass_in_float<halfway_rule>);


}  // namespace specdec_simd_test

// ---- sampling: categorical, residual, bonus ---------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("simd sample_categorical gives seq's token, status and mass", "[simd][sampling]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 1, 0, 0, purpose::user});
  std::size_t checked = 0;
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : sizes)
      for (const row_kind kind : all_kinds) {
        const auto row = make_row<T>(s, V, kind);
        for (const double u : uniforms(s, 6)) {
          const auto a = specdec::sample_categorical(std::span<const T>(row), u);
          const auto b = specdec::backend::simd::sample_categorical<Arch>(std::span<const T>(row), u);
          CAPTURE(V, static_cast<int>(kind), u, a.token, b.token);
          REQUIRE(same(a, b));
          ++checked;
        }
      }
  };
  run(float{});
  run(double{});
  INFO(Arch::name() << ": " << checked << " draws identical");
  CHECK(checked > 0);
}

TEMPLATE_LIST_TEST_CASE("simd sample_categorical reports unusable rows like seq", "[simd][sampling]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 2, 0, 0, purpose::user});
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : sizes)
      for (int what = 0; what < 4; ++what)
        for (const std::size_t at : {std::size_t{0}, V / 2, V - 1}) {
          auto row = make_row<T>(s, V, row_kind::dense);
          spoil(row, at, what);
          const auto a = specdec::sample_categorical(std::span<const T>(row), 0.3);
          const auto b = specdec::backend::simd::sample_categorical<Arch>(std::span<const T>(row), 0.3);
          CAPTURE(V, what, at);
          REQUIRE(a.status == specdec::row_status::not_finite);
          REQUIRE(same(a, b));
        }
    const std::vector<T> zeros(100, T(0)), negative_zeros(70, T(-0.0));
    for (const auto& row : {zeros, negative_zeros, std::vector<T>{}}) {
      const auto b = specdec::backend::simd::sample_categorical<Arch>(std::span<const T>(row), 0.3);
      CHECK(b.status == specdec::row_status::no_mass);
      CHECK(b.token == specdec::no_token);
    }
  };
  run(float{});
  run(double{});
}

TEMPLATE_LIST_TEST_CASE("simd sample_residual and the bonus give seq's tokens for every rule", "[simd][sampling]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 3, 0, 0, purpose::user});
  std::size_t checked = 0, fallbacks = 0;
  const auto run = [&](auto tag, const auto& rule) {
    using T = decltype(tag);
    for (const std::size_t V : sizes)
      for (const row_kind kind : all_kinds) {
        const auto p = make_row<T>(s, V, kind);
        // q: another row of the same kind, or p itself (no residual mass: the fallback), or p with
        // a little mass moved (a nearly empty residual).
        const int variant = static_cast<int>(s.uniform() * 3.0);
        auto q = variant == 0 ? make_row<T>(s, V, kind) : p;
        if (variant == 2) q[0] = static_cast<T>(static_cast<double>(q[0]) * 0.5);
        const auto mass = [&rule](double pv, double qv) { return rule.accepted_mass(pv, qv); };
        for (const double u : uniforms(s, 4)) {
          const auto a = specdec::sample_residual(std::span<const T>(p), std::span<const T>(q), mass, u);
          const auto b = specdec::backend::simd::sample_residual<Arch>(std::span<const T>(p), std::span<const T>(q), rule, u);
          CAPTURE(V, static_cast<int>(kind), variant, u);
          REQUIRE(same(a.sample, b.sample));
          REQUIRE(a.used_fallback == b.used_fallback);
          fallbacks += b.used_fallback;
          const auto c = specdec::sample_residual(std::span<const T>(p), std::span<const T>{}, mass, u);
          const auto d = specdec::backend::simd::sample_residual<Arch>(std::span<const T>(p), std::span<const T>{}, rule, u);
          REQUIRE(same(c.sample, d.sample));
          checked += 2;
        }
      }
  };
  for (const auto tag : {0.0f}) {
    run(tag, specdec::strict);
    run(tag, specdec::lenient_rule{0.5});
    run(tag, specdec::lenient_rule{2.0});
    run(tag, specdec::block_residual{1.0 / 0.6});
    run(tag, specdec::scaled_draft_residual{1.7});
    run(tag, halfway_rule{});  // accepted mass on doubles only: falls back to seq
  }
  run(double{}, specdec::strict);
  run(double{}, specdec::lenient_rule{0.7});
  INFO(Arch::name() << ": " << checked << " residual/bonus draws identical, " << fallbacks << " zero-mass fallbacks");
  CHECK(fallbacks > 0);
}

TEMPLATE_LIST_TEST_CASE("simd sample_residual reports unusable pairs like seq", "[simd][sampling]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 4, 0, 0, purpose::user});
  for (const std::size_t V : sizes)
    for (int what = 0; what < 4; ++what)
      for (const bool in_q : {false, true}) {
        auto p = make_row<float>(s, V, row_kind::dense), q = make_row<float>(s, V, row_kind::dense);
        const std::size_t at = static_cast<std::size_t>(s.uniform() * static_cast<double>(V));
        spoil(in_q ? q : p, at, what);
        const auto a = specdec::sample_residual(std::span<const float>(p), std::span<const float>(q), 0.6);
        const auto b = specdec::backend::simd::sample_residual<Arch>(std::span<const float>(p), std::span<const float>(q), 0.6);
        CAPTURE(V, what, in_q, at);
        REQUIRE(a.sample.status == specdec::row_status::not_finite);
        REQUIRE(same(a.sample, b.sample));
      }
  const std::vector<float> p(10, 0.1f), q(11, 0.1f);
  CHECK_THROWS_AS(specdec::backend::simd::sample_residual<Arch>(std::span<const float>(p), std::span<const float>(q), 0.5),
                  specdec::error);
}

// ---- whole-row reductions ---------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("simd argmax, row checks and sums agree with seq", "[simd][reduce]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 5, 0, 0, purpose::user});
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
    for (const std::size_t V : sizes)
      for (const row_kind kind : all_kinds) {
        auto row = make_row<T>(s, V, kind);
        const int variant = static_cast<int>(s.uniform() * 5.0);
        if (variant == 1) row[static_cast<std::size_t>(s.uniform() * static_cast<double>(V))] = nan;
        if (variant == 2) std::fill(row.begin(), row.end(), -inf);
        if (variant == 3) std::fill(row.begin(), row.end(), nan);
        if (variant == 4) row[V - 1] = -inf;
        const std::span<const T> r(row);
        CAPTURE(V, static_cast<int>(kind), variant);
        REQUIRE(specdec::backend::simd::argmax<Arch>(r) == specdec::argmax(r));
        const auto summary = specdec::backend::simd::summarise<Arch>(r);
        bool all_usable = true;
        for (const T x : row) all_usable = all_usable && specdec::detail::usable_weight(static_cast<double>(x));
        REQUIRE(summary.usable == all_usable);
        REQUIRE((!summary.usable || !summary.has_mass) == !specdec::backend::seq::seq_kernels::greedy_usable(r));
        // seq's one-pass greedy scan is greedy_usable, then argmax where usable.
        const specdec::backend::walks::greedy_row g = specdec::backend::seq::seq_kernels::greedy_row(r);
        REQUIRE(g.usable == specdec::backend::seq::seq_kernels::greedy_usable(r));
        if (g.usable) REQUIRE(g.token == specdec::argmax(r));
        REQUIRE(specdec::backend::simd::has_mass<Arch>(r) == specdec::backend::seq::seq_kernels::has_mass(r));
        if (variant == 0) {
          double seq_sum = 0.0;
          for (const T x : row) seq_sum += static_cast<double>(x);
          REQUIRE(std::abs(specdec::backend::simd::sum<Arch>(r) - seq_sum) <= 1e-13 * seq_sum);
        }
      }
    CHECK(specdec::backend::simd::argmax<Arch>(std::span<const T>{}) == -1);
  };
  run(float{});
  run(double{});
}

// ---- chain verification -------------------------------------------------------------------------------

namespace specdec_simd_test {

using specdec_test::make_requests;

}  // namespace specdec_simd_test

TEMPLATE_LIST_TEST_CASE("simd verify gives seq's tokens, counts and flags for every rule", "[simd][verify]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 6, 0, 0, purpose::user});
  std::size_t requests = 0, flagged = 0, rejected = 0;
  const auto run = [&](auto tag, std::size_t V, bool packed, bool check_norm) {
    using T = decltype(tag);
    const std::size_t max_n = 4;
    const auto reqs = make_requests<T>(s, 12, max_n, V, 0.3, static_cast<std::uint32_t>(requests));
    const auto batch = specdec_test::build_batch(reqs, V, packed, max_n);
    const specdec::verify_options options{check_norm, 1e-3};
    specdec_test::for_each_rule([&](const auto& rule, const char* name) {
      specdec_test::owned_outputs a(batch), b(batch);
      specdec::backend::seq::verify(rule, batch.view(), batch.stream_span(), a.view(), options);
      specdec::backend::simd::verify<Arch>(rule, batch.view(), batch.stream_span(), b.view(), options);
      CAPTURE(name, V, packed, check_norm);
      REQUIRE(a.tokens == b.tokens);
      REQUIRE(a.num_accepted == b.num_accepted);
      REQUIRE(a.status == b.status);
      for (std::size_t r = 0; r < reqs.size(); ++r) {
        flagged += a.status[r] != specdec::verify_status::ok;
        rejected += static_cast<std::size_t>(a.num_accepted[r]) < reqs[r].drafts.size();
      }
      requests += reqs.size();
    });
  };
  for (const std::size_t V : {std::size_t{5}, std::size_t{37}, std::size_t{1000}, std::size_t{2049}})
    for (const bool packed : {true, false}) {
      run(float{}, V, packed, false);
      run(double{}, V, packed, V == 37);
    }
  INFO(Arch::name() << ": " << requests << " requests identical (" << rejected << " with a rejection, " << flagged
                    << " flagged)");
  CHECK(flagged > 0);
  CHECK(rejected > 0);
}

TEMPLATE_LIST_TEST_CASE("simd verify gives seq's tokens at the GPU benchmarks' shapes", "[simd][verify][shapes]",
                        specdec_simd_archs) {
  // B 1/16/64, gamma 4/8, V 32000/128256: with tests/backend/cuda_verify.cu's case of the same name
  // (the same inputs: same generator and seed), seq, simd and cuda give the same tokens.
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  std::size_t requests = 0, rejected = 0;
  specdec_test::for_each_bench_shape_batch([&](const specdec_test::bench_shape& sh, const auto& batch) {
    specdec_test::for_each_rule([&](const auto& rule, const char* name) {
      specdec_test::owned_outputs a(batch), b(batch);
      specdec::backend::seq::verify(rule, batch.view(), batch.stream_span(), a.view(), {});
      specdec::backend::simd::verify<Arch>(rule, batch.view(), batch.stream_span(), b.view(), {});
      CAPTURE(name, sh.B, sh.gamma, sh.V);
      specdec_test::require_same_outputs(a, b);
      for (const auto n : a.num_accepted) rejected += static_cast<std::size_t>(n) < sh.gamma;
      requests += sh.B;
    });
  });
  INFO(Arch::name() << ": " << requests << " requests identical, " << rejected << " with a rejection");
  CHECK(rejected > 0);
}

TEMPLATE_LIST_TEST_CASE("specdec::verify with a simd policy runs the simd backend and matches exec::seq", "[simd][verify]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 7, 0, 0, purpose::user});
  const std::size_t V = 3001;
  const auto reqs = make_requests<float>(s, 8, 6, V, 0.0, 0);
  const auto batch = specdec_test::build_batch(reqs, V, true);
  specdec_test::owned_outputs a(batch), b(batch);
  specdec::verify(specdec::exec::seq, specdec::strict, batch.view(), batch.stream_span(), a.view());
  specdec::verify(specdec::exec::simd_policy<Arch>{}, specdec::strict, batch.view(), batch.stream_span(), b.view());
  CHECK(a.tokens == b.tokens);
  CHECK(a.num_accepted == b.num_accepted);
  // verify_chain goes through the same entry point.
  const auto& r = reqs[0];
  std::vector<float> q, p;
  for (const auto& row : r.draft_rows) q.insert(q.end(), row.begin(), row.end());
  for (const auto& row : r.target_rows) p.insert(p.end(), row.begin(), row.end());
  const auto c = specdec::verify_chain(specdec::exec::seq, specdec::strict, r.drafts, q, p, V, r.stream);
  const auto d = specdec::verify_chain(specdec::exec::simd_policy<Arch>{}, specdec::strict, r.drafts, q, p, V, r.stream);
  CHECK(c.tokens == d.tokens);
  CHECK(c.num_accepted == d.num_accepted);
}

// ---- softmax, log-sum-exp, log-softmax ------------------------------------------------------------

#include "specdec/backend/simd/divergence.hpp"
#include "specdec/backend/simd/indicators.hpp"
#include "specdec/backend/simd/sample_logits.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/top_w.hpp"
#include "specdec/backend/simd/warp.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/estimate/indicators.hpp"
#include "specdec/sampling/top_w.hpp"
#include "support/logits_reference.hpp"

namespace specdec_simd_test {

//! Logits of several shapes: normal (sd 3), wide (sd 30), tiny (1e-30 scale), ties (integers), with
//! -inf entries; `variant` 4-6 make rows that are not usable (all -inf, a NaN, a +inf).
template <class T>
std::vector<T> make_logits(philox_stream& s, std::size_t V, int variant) {
  std::vector<T> l(V);
  for (auto& x : l) {
    const double g = std::sqrt(-2.0 * std::log(1.0 - s.uniform())) * std::cos(6.283185307179586 * s.uniform());
    switch (variant % 4) {
      case 0: x = static_cast<T>(3.0 * g); break;
      case 1: x = static_cast<T>(30.0 * g); break;
      case 2: x = static_cast<T>(1e-30 * g); break;
      default: x = static_cast<T>(std::floor(2.0 * g)); break;
    }
  }
  const auto at = [&] { return static_cast<std::size_t>(s.uniform() * static_cast<double>(V)); };
  if (V > 4 && variant < 4) l[at()] = -std::numeric_limits<T>::infinity();
  if (variant == 4) std::fill(l.begin(), l.end(), -std::numeric_limits<T>::infinity());
  if (variant == 5) l[at()] = std::numeric_limits<T>::quiet_NaN();
  if (variant == 6) l[at()] = std::numeric_limits<T>::infinity();
  return l;
}

inline const std::size_t logit_sizes[] = {1, 7, 33, 100, 2049, 6150, 40000};

}  // namespace specdec_simd_test

TEMPLATE_LIST_TEST_CASE("simd softmax and log-sum-exp agree with seq within the stated bound", "[simd][softmax]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 10, 0, 0, purpose::user});
  double worst_float = 0.0, worst_double = 0.0, worst_lse = 0.0;
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : logit_sizes)
      for (int variant = 0; variant < 7; ++variant)
        for (const double temperature : {1.0, 0.7, 2.5, 0.05}) {
          const auto l = make_logits<T>(s, V, variant);
          std::vector<T> a(V), b(V), la(V), lb(V);
          const std::span<const T> row(l);
          const auto sa = specdec::softmax(row, std::span<T>(a), temperature);
          const auto sb = specdec::backend::simd::softmax<Arch>(row, std::span<T>(b), temperature);
          CAPTURE(V, variant, temperature);
          REQUIRE(sa == sb);
          double ma = 0.0, mb = 0.0;
          REQUIRE(specdec::detail::logit_row_max(row, ma) == specdec::backend::simd::logit_row_max<Arch>(row, mb));
          REQUIRE((ma == mb || (std::isnan(ma) && std::isnan(mb))));
          const double x = specdec::log_sum_exp(row, temperature),
                       y = specdec::backend::simd::log_sum_exp<Arch>(row, temperature);
          REQUIRE((std::isnan(x) == std::isnan(y)));
          if (std::isfinite(x)) {
            worst_lse = std::max(worst_lse, std::abs(x - y) / std::max(1.0, std::abs(x)));
            REQUIRE(std::abs(x - y) <= 1e-5 * std::max(1.0, std::abs(x)));
          } else {
            REQUIRE((x == y || std::isnan(x)));
          }
          REQUIRE(specdec::log_softmax(row, std::span<T>(la), temperature) ==
                  specdec::backend::simd::log_softmax<Arch>(row, std::span<T>(lb), temperature));
          if (sa != specdec::row_status::ok) {
            REQUIRE(std::all_of(b.begin(), b.end(), [](T p) { return p == T(0); }));
            continue;
          }
          for (std::size_t v = 0; v < V; ++v) {
            if (l[v] == -std::numeric_limits<T>::infinity()) REQUIRE(b[v] == T(0));  // exactly 0, as in seq
            if (!(a[v] > T(1e-30))) continue;                                        // below, float underflow may differ
            const double t = std::abs((static_cast<double>(l[v]) - ma) / temperature);
            const double rel = std::abs(static_cast<double>(a[v]) - static_cast<double>(b[v])) / static_cast<double>(a[v]);
            if constexpr (std::is_same_v<T, float>) {
              worst_float = std::max(worst_float, rel / ((2.0 * t + 4.0) * 0x1p-23));
              REQUIRE(rel <= (2.0 * t + 4.0) * 0x1p-23);
            } else {  // exp within 1 ulp; the sum's order moves 1 / sum by at most 2 (V - 1) roundings
              const double bound = (2.0 * static_cast<double>(V) + 8.0) * 0x1p-53;
              worst_double = std::max(worst_double, rel / bound);
              REQUIRE(rel <= bound);
            }
            if (std::isfinite(la[v]))
              REQUIRE(std::abs(static_cast<double>(la[v]) - static_cast<double>(lb[v])) <=
                      1e-5 * std::max(1.0, std::abs(static_cast<double>(la[v]))));
          }
        }
  };
  run(float{});
  run(double{});
  INFO(Arch::name() << ": float probabilities within " << worst_float << " of the bound (2 |t| + 4) 2^-23; double within "
                    << worst_double << " of the bound (2 V + 8) 2^-53; log-sum-exp within " << worst_lse);
  CHECK(worst_float <= 1.0);
}

TEMPLATE_LIST_TEST_CASE("simd softmax: tiny temperatures on float rows, -inf and huge negative logits",
                        "[simd][softmax][bad_input]", specdec_simd_archs) {
  // Found while writing the fuzz harnesses (tests/fuzz/warp_and_sample.cpp, verify_from_logits.cpp):
  //  - float rows scale by float(1 / T), which was +inf for T < 1 / FLT_MAX: inf * 0 at the maximum
  //    gave NaN probabilities with status ok; such rows now take seq's path;
  //  - a -inf logit (or the -inf padding of a partial batch) reached xsimd's exp, whose conversion of
  //    round(x / log 2) to a 64-bit integer is a scalar cast of -inf on SSE2/AVX2: undefined behaviour
  //    (UBSan); arguments are now raised to a floor where exp is 0 already (NaN too: see 1e300 below).
  using Arch = TestType;
  if (!specdec_simd_test::runnable<Arch>()) return;
  const auto check = [](auto tag, std::initializer_list<double> values, double temperature) {
    using T = decltype(tag);
    std::vector<T> logits;
    for (const double x : values) logits.push_back(static_cast<T>(x));
    std::vector<T> a(logits.size()), b(logits.size());
    const std::span<const T> row(logits);
    CAPTURE(temperature, logits);
    REQUIRE(specdec::softmax(row, std::span<T>(a), temperature) == specdec::row_status::ok);
    REQUIRE(specdec::backend::simd::softmax<Arch>(row, std::span<T>(b), temperature) == specdec::row_status::ok);
    for (std::size_t v = 0; v < logits.size(); ++v) {
      CHECK(std::isfinite(static_cast<double>(b[v])));
      if (a[v] == T(0) || a[v] == T(1) || temperature < 1e-30) CHECK(b[v] == a[v]);  // exact there
    }
    const double x = specdec::log_sum_exp(row, temperature), y = specdec::backend::simd::log_sum_exp<Arch>(row, temperature);
    CHECK(std::isfinite(y));
    CHECK(std::abs(x - y) <= 1e-6 * std::max(1.0, std::abs(x)));
  };
  constexpr double inf = std::numeric_limits<double>::infinity();
  // 1e300: float(1 / T) is 0, so a -inf logit's argument is -inf * 0 = NaN, which must weigh 0.
  for (const double temperature : {1e-300, 1e-39, 1.0, 1e300}) {
    check(float{}, {1.0, 2.0, 2.0, 0.5, 1.0}, temperature);
    check(float{}, {-inf, 3.0, -inf, 3.0, -inf, -inf, -inf, -inf, 1.0}, temperature);
  }
  for (const double temperature : {1.0, 1e-300, 0.5}) {
    check(double{}, {-inf, 0.0, -inf}, temperature);  // odd V: a partial batch
    check(double{}, {-1.7e308, 2.0, -1e300, -inf, 1.0, -1e30, 0.25}, temperature);
  }
}

TEMPLATE_LIST_TEST_CASE("simd top-p on large rows of the largest finite or of subnormal values gives seq's mask",
                        "[simd][warp][bad_input]", specdec_simd_archs) {
  // Rows at the ends of the type's range: the largest finite values (whose fixed-point masses need a
  // negative scale exponent) and subnormal values (a scale beyond double's range, taken in two
  // factors). The fuzz harness tests/fuzz/warp_and_sample.cpp found both ends to break an earlier
  // search of the cut.
  using Arch = TestType;
  if (!specdec_simd_test::runnable<Arch>()) return;
  const auto check = [](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : {std::size_t{2772}, std::size_t{5000}}) {
      for (const double top_p : {1e-300, 0.5, 0.999}) {
        std::vector<T> row(V, T(1));
        row[V / 3] = std::numeric_limits<T>::max();
        row[V / 2] = std::numeric_limits<T>::max() / 2;
        // and rows of subnormal entries whose goal top_p * mass underflows to 0: the largest only
        std::vector<T> tiny(V, std::numeric_limits<T>::denorm_min());
        tiny[V / 4] = std::numeric_limits<T>::denorm_min() * 3;
        std::vector<T> c(tiny), d(tiny);
        specdec::keep_top_p(std::span<T>(c), 1e-300);
        specdec::backend::simd::keep_top_p<Arch>(std::span<T>(d), 1e-300);
        CHECK(c == d);
        CHECK(std::count_if(d.begin(), d.end(), [](T x) { return x > T(0); }) == 1);
        std::vector<T> a(row), b(row);
        specdec::keep_top_p(std::span<T>(a), top_p);
        specdec::backend::simd::keep_top_p<Arch>(std::span<T>(b), top_p);
        CAPTURE(V, top_p);
        CHECK(a == b);
        CHECK(std::count_if(b.begin(), b.end(), [](T x) { return x > T(0); }) < static_cast<std::ptrdiff_t>(V));
      }
    }
  };
  check(float{});
  check(double{});
}

TEMPLATE_LIST_TEST_CASE("simd keep_min_p on a row of NaN only leaves it as seq does", "[simd][warp][bad_input]",
                        specdec_simd_archs) {
  // Found by the fuzz harness tests/fuzz/warp_and_sample.cpp: the row's argmax is -1, which was used
  // as an index (a read before the row).
  using Arch = TestType;
  if (!specdec_simd_test::runnable<Arch>()) return;
  for (const std::size_t V : {std::size_t{1}, std::size_t{37}}) {
    std::vector<float> nan_row(V, std::numeric_limits<float>::quiet_NaN());
    specdec::backend::simd::keep_min_p<Arch>(std::span<float>(nan_row), 0.5);
    CHECK(std::all_of(nan_row.begin(), nan_row.end(), [](float x) { return std::isnan(x); }));
  }
}

TEMPLATE_LIST_TEST_CASE("simd sample_masked ignores what the row holds at masked entries", "[simd][sampling][bad_input]",
                        specdec_simd_archs) {
  // Found by the fuzz harness tests/fuzz/warp_and_sample.cpp: a row with a -0 (which makes the fast
  // usability check look again) and a NaN at a masked entry was reported not_finite; seq samples it
  // as the copy with the masked entries set to 0.
  using Arch = TestType;
  if (!specdec_simd_test::runnable<Arch>()) return;
  const auto check = [](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : {std::size_t{40}, std::size_t{3882}}) {
      std::vector<T> row(V, T(1));
      row[0] = std::numeric_limits<T>::quiet_NaN();
      row[V - 5] = -std::numeric_limits<T>::infinity();
      row[V / 2] = T(-0.0);
      const std::vector<specdec::token_id> masked{0, static_cast<specdec::token_id>(V - 5)};
      for (const double u : {0.0, 0.3, 0x1.fffffffffffffp-1}) {
        const auto a = specdec::sample_masked(std::span<const T>(row), std::span<const specdec::token_id>(masked), u);
        const auto b =
            specdec::backend::simd::sample_masked<Arch>(std::span<const T>(row), std::span<const specdec::token_id>(masked), u);
        CAPTURE(V, u);
        CHECK(a.status == specdec::row_status::ok);
        CHECK(b.status == a.status);
        CHECK(b.token == a.token);
        CHECK(b.mass == a.mass);
      }
    }
  };
  check(float{});
  check(double{});
}

// ---- warping: top-k, top-p, min-p -----------------------------------------------------------------

namespace specdec_simd_test {
inline const specdec::warp_params warp_cases[] =
    {{1.0, 50, 0.9, 0.0}, {0.7, 0, 0.9, 0.0},     {1.0, 0, 0.5, 0.05}, {2.0, 10, 1.0, 0.0},
     {1.0, 0, 0.99, 0.0}, {1.0, 1, 1.0, 0.0},     {1.0, 3, 0.3, 0.5},  {0.0, 0, 1.0, 0.0},
     {1.0, 0, 1.0, 0.2},  {1.3, 100, 0.95, 0.02}, {0.7, 0, 1.0, 0.05}};  // the last: the min-p path of sample_logits (no top-k, no top-p)

//! Calls f(logits, w, V, variant) for float and then double rows of every `logit_sizes` V, every
//! `make_logits` variant and every `warp_cases` w, a fresh row from `s` for each.
template <class F>
void for_each_warp_case(philox_stream& s, F&& f) {
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : logit_sizes)
      for (int variant = 0; variant < 7; ++variant)
        for (const auto& w : warp_cases) {
          const std::vector<T> l = make_logits<T>(s, V, variant);
          f(std::span<const T>(l), w, V, variant);
        }
  };
  run(float{});
  run(double{});
}
}  // namespace specdec_simd_test

TEMPLATE_LIST_TEST_CASE("simd filters on probability rows give seq's rows", "[simd][warp]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 11, 0, 0, purpose::user});
  std::size_t rows = 0;
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : sizes)
      for (const row_kind kind : all_kinds) {
        const auto base = make_row<T>(s, V, kind);
        for (const int k : {0, 1, 5, 50, 3000}) {
          auto a = base, b = base;
          specdec::keep_top_k(std::span<T>(a), k);
          specdec::backend::simd::keep_top_k<Arch>(std::span<T>(b), k);
          CAPTURE(V, static_cast<int>(kind), k);
          REQUIRE(a == b);
        }
        for (const double p : {1.0, 0.99, 0.9, 0.5, 0.1, 1e-9}) {
          auto a = base, b = base;
          specdec::keep_top_p(std::span<T>(a), p);
          specdec::backend::simd::keep_top_p<Arch>(std::span<T>(b), p);
          CAPTURE(V, static_cast<int>(kind), p);
          REQUIRE(a == b);
        }
        for (const double m : {0.0, 0.01, 0.3, 1.0}) {
          auto a = base, b = base;
          specdec::keep_min_p(std::span<T>(a), m);
          specdec::backend::simd::keep_min_p<Arch>(std::span<T>(b), m);
          CAPTURE(V, static_cast<int>(kind), m);
          REQUIRE(a == b);
        }
        for (const auto& w : warp_cases) {
          auto a = base, b = base;
          CAPTURE(V, static_cast<int>(kind), w.temperature, w.top_k, w.top_p, w.min_p);
          REQUIRE(specdec::warp_probs(std::span<T>(a), w) == specdec::backend::simd::warp_probs<Arch>(std::span<T>(b), w));
          for (std::size_t v = 0; v < V; ++v) {
            REQUIRE((a[v] > T(0)) == (b[v] > T(0)));  // the same mask
            REQUIRE(std::abs(static_cast<double>(a[v]) - static_cast<double>(b[v])) <= 3e-7 * static_cast<double>(a[v]));
          }
          ++rows;
        }
      }
  };
  run(float{});
  run(double{});
  // Unusable rows: the same status and a zero-filled row.
  for (int what = 0; what < 4; ++what) {
    auto a = make_row<float>(s, 100, row_kind::dense), b = a;
    spoil(a, 17, what);
    b = a;
    CHECK(specdec::warp_probs(std::span<float>(a), warp_cases[0]) ==
          specdec::backend::simd::warp_probs<Arch>(std::span<float>(b), warp_cases[0]));
    CHECK(a == b);
  }
  INFO(Arch::name() << ": " << rows << " warped probability rows with seq's masks");
}

TEMPLATE_LIST_TEST_CASE("simd top-p without a top-k on large rows (band search) gives seq's mask", "[simd][warp]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 12, 0, 0, purpose::user});
  for (const std::size_t V : {std::size_t{5000}, std::size_t{40000}})
    for (int variant = 0; variant < 4; ++variant) {
      const auto l = make_logits<float>(s, V, variant);
      std::vector<float> base(V);
      specdec::softmax(std::span<const float>(l), std::span<float>(base));
      for (const double p : {0.999, 0.9, 0.5, 0.01}) {
        auto a = base, b = base;
        specdec::keep_top_p(std::span<float>(a), p);
        specdec::backend::simd::keep_top_p<Arch>(std::span<float>(b), p);
        CAPTURE(V, variant, p);
        REQUIRE(a == b);
      }
    }
}

TEMPLATE_LIST_TEST_CASE("simd warp_logits gives seq's row bit for bit", "[simd][warp]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 13, 0, 0, purpose::user});
  std::size_t rows = 0;
  for_each_warp_case(s, [&]<class T>(std::span<const T> l, const specdec::warp_params& w, std::size_t V, int variant) {
    std::vector<T> a(V), b(V);
    const auto sa = specdec::warp_logits(l, std::span<T>(a), w);
    const auto sb = specdec::backend::simd::warp_logits<Arch>(l, std::span<T>(b), w);
    CAPTURE(V, variant, w.temperature, w.top_k, w.top_p, w.min_p);
    REQUIRE(sa == sb);
    REQUIRE(std::memcmp(a.data(), b.data(), V * sizeof(T)) == 0);
    ++rows;
  });
  INFO(Arch::name() << ": " << rows << " rows equal to seq's");
}

TEMPLATE_LIST_TEST_CASE("simd sample_logits gives seq's token bit for bit, inside seq's mask", "[simd][warp][sampling]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 14, 0, 0, purpose::user});
  std::size_t draws = 0;
  for_each_warp_case(s, [&]<class T>(std::span<const T> l, const specdec::warp_params& w, std::size_t V, int variant) {
    std::vector<T> probs(V);
    const auto st = specdec::warp_logits(l, std::span<T>(probs), w);
    const specdec_test::logits_reference<T> reference(l, w);
    for (const double u : uniforms(s, 10)) {
      const auto a = reference(u);
      const auto b = specdec::backend::simd::sample_logits<Arch>(l, w, u);
      CAPTURE(V, variant, w.temperature, w.top_k, w.top_p, w.min_p, u);
      REQUIRE(b.status == a.status);
      REQUIRE(b.status == st);
      REQUIRE(b.token == a.token);
      REQUIRE(b.mass == a.mass);
      if (b.status != specdec::row_status::ok) continue;
      REQUIRE(specdec::in_vocabulary(b.token, V));
      REQUIRE(probs[static_cast<std::size_t>(b.token)] > T(0));  // a token the warp keeps
      if (w.temperature == 0.0) REQUIRE(b.token == specdec::argmax(l));
      ++draws;
    }
  });
  INFO(Arch::name() << ": " << draws << " tokens equal to seq's");
}

TEMPLATE_LIST_TEST_CASE("sample_sparse gives the dense row's token", "[simd][sampling]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 15, 0, 0, purpose::user});
  for (const std::size_t V : sizes)
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<double> dense(V, 0.0);
      std::vector<token_id> tokens;
      std::vector<double> weights;
      for (std::size_t v = 0; v < V; ++v)
        if (s.uniform() < 0.05 || v == V - 1) {
          dense[v] = trial == 0 ? 0.0 : s.exponential();
          tokens.push_back(static_cast<token_id>(v));
          weights.push_back(dense[v]);
        }
      for (const double u : uniforms(s, 8)) {
        const auto a = specdec::sample_categorical(std::span<const double>(dense), u);
        const auto b = specdec::sample_sparse(V, tokens, weights, u);
        const auto c = specdec::backend::simd::sample_categorical<Arch>(std::span<const double>(dense), u);
        CAPTURE(V, trial, u);
        REQUIRE(same(a, b));
        REQUIRE(same(a, c));
      }
    }
  const std::vector<token_id> bad{3, 2};
  const std::vector<double> w{1.0, 1.0};
  CHECK_THROWS_AS(specdec::sample_sparse(10, bad, w, 0.5), specdec::error);
}

// ---- divergences and SV's indicators --------------------------------------------------------------

namespace specdec_simd_test {

//! The agreement bound of the float log (backend/simd/log.hpp): a relative 2^-21 per log.
inline constexpr double float_log_bound = 0x1p-21;

//! |a - b| <= bound (and both NaN, or equal infinities, count as agreeing).
inline bool agree(double a, double b, double bound) {
  return a == b || (std::isnan(a) && std::isnan(b)) || std::abs(a - b) <= bound + 1e-300;
}

//! sum_{p_v > 0} p_v |log x_v| with x_v = p_v (entropy), q_v (cross-entropy) or p_v / q_v (KL): the
//! scale of the float-row bound.
template <class T>
double plogx(const std::vector<T>& p, const std::vector<T>& q, int which) {
  double s = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    const double pv = static_cast<double>(p[v]);
    if (!(pv > 0.0)) continue;
    const double x = which == 0 ? pv : which == 1 ? static_cast<double>(q[v]) : pv / static_cast<double>(q[v]);
    s += pv * std::abs(std::log(x));
  }
  return s;
}

//! Float rows whose log-based divergences run the float path (all entries +0 or positive normal).
template <class T>
bool normal_row(const std::vector<T>& row) {
  return std::all_of(row.begin(), row.end(), [](T x) {
    return (x == T(0) && !std::signbit(x)) || (x >= std::numeric_limits<float>::min() && x <= std::numeric_limits<float>::max());
  });
}

}  // namespace specdec_simd_test

TEMPLATE_LIST_TEST_CASE("simd divergences agree with seq within the stated bounds", "[simd][divergence]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 16, 0, 0, purpose::user});
  const auto run = [&](auto tag, int rounds) {
    using T = decltype(tag);
    for (int round = 0; round < rounds; ++round)
      for (const std::size_t V : sizes)
        for (const row_kind kind : all_kinds) {
          auto p = make_row<T>(s, V, kind), q = make_row<T>(s, V, kind);
          if (round == 1) q = p;  // KL(p || p) = 0, cross-entropy = entropy
          if (s.uniform() < 0.5)  // q covers p's support: finite cross-entropy and KL
            for (std::size_t v = 0; v < V; ++v)
              if (p[v] > T(0) && q[v] <= T(0)) q[v] = T(1e-3);
          if (round == 2) {  // q close to p: KL small against its terms
            for (std::size_t v = 0; v < V; ++v)
              q[v] = static_cast<T>(static_cast<double>(p[v]) * (1.0 + 1e-3 * (s.uniform() - 0.5)));
          }
          const std::span<const T> P(p), Q(q);
          double mass = 0.0, plogp = 0.0;
          for (std::size_t v = 0; v < V; ++v) {
            mass += static_cast<double>(p[v]) + static_cast<double>(q[v]);
            if (p[v] > T(0)) plogp += std::abs(static_cast<double>(p[v]) * std::log(static_cast<double>(p[v])));
          }
          CAPTURE(V, static_cast<int>(kind), round);
          REQUIRE(agree(specdec::overlap(P, Q), specdec::backend::simd::overlap<Arch>(P, Q), 1e-12 * mass));
          REQUIRE(agree(specdec::total_variation(P, Q), specdec::backend::simd::total_variation<Arch>(P, Q), 1e-12 * mass));
          const double h = specdec::entropy(P), ce = specdec::cross_entropy(P, Q), kl = specdec::kl_divergence(P, Q);
          const double sh = specdec::backend::simd::entropy<Arch>(P), sce = specdec::backend::simd::cross_entropy<Arch>(P, Q),
                       skl = specdec::backend::simd::kl_divergence<Arch>(P, Q);
          if constexpr (std::is_same_v<T, float>) {
            // the float path: a relative 2^-21 per log; rows it does not take are seq's exactly
            const bool fast_p = normal_row(p), fast_pq = fast_p && normal_row(q) && std::isfinite(ce);
            const double order = 1 + 1e-12;  // the reordered double sum
            REQUIRE(agree(h, sh, fast_p ? float_log_bound * order * plogx(p, q, 0) : 0.0));
            REQUIRE(agree(ce, sce, fast_pq ? float_log_bound * order * plogx(p, q, 1) : 0.0));
            REQUIRE(agree(kl, skl, fast_pq ? float_log_bound * order * plogx(p, q, 2) : 0.0));
            if (round == 1 && fast_pq) REQUIRE(skl == 0.0);
          } else {
            double scale = 0.0;
            for (std::size_t v = 0; v < V; ++v)
              if (p[v] > T(0) && q[v] > T(0))
                scale += static_cast<double>(p[v]) *
                         (std::abs(std::log(static_cast<double>(p[v]))) + std::abs(std::log(static_cast<double>(q[v]))));
            REQUIRE(agree(h, sh, 1e-12 * plogp));
            REQUIRE(agree(ce, sce, 1e-12 * scale));
            REQUIRE(agree(kl, skl, 1e-12 * scale));
          }
        }
  };
  run(float{}, 3);
  run(double{}, 1);
}

TEMPLATE_LIST_TEST_CASE("simd divergences of float rows: probability rows, and rows that go to seq", "[simd][divergence]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 18, 0, 0, purpose::user});
  namespace sb = specdec::backend::simd;
  for (const std::size_t V : {std::size_t{5}, std::size_t{33}, std::size_t{1000}, std::size_t{32001}}) {
    const auto p = specdec_test::random_probability_row<float>(s, V, 0.2),
               q = specdec_test::random_probability_row<float>(s, V, 0.0);
    const std::span<const float> P(p), Q(q);
    CAPTURE(V);
    CHECK(agree(specdec::entropy(P), sb::entropy<Arch>(P), float_log_bound * plogx(p, q, 0)));
    CHECK(agree(specdec::cross_entropy(P, Q), sb::cross_entropy<Arch>(P, Q), float_log_bound * plogx(p, q, 1)));
    CHECK(agree(specdec::kl_divergence(P, Q), sb::kl_divergence<Arch>(P, Q), float_log_bound * plogx(p, q, 2)));
    CHECK(sb::kl_divergence<Arch>(P, P) == 0.0);
    {  // these rows take the float path (the checks above would also pass if everything went to seq)
      namespace sd = specdec::backend::simd::detail;
      double out = 0.0;
      CHECK(sd::float_log_sum<Arch, sd::log_term::entropy>(p.data(), nullptr, V, out));
      CHECK(sd::float_log_sum<Arch, sd::log_term::cross_entropy>(p.data(), q.data(), V, out));
      CHECK(sd::float_log_sum<Arch, sd::log_term::kl>(p.data(), q.data(), V, out));
    }
    // entries the float log does not take (-0, subnormal, +inf, NaN, negative), in the vector part and
    // the tail, and a support gap: seq's result exactly
    const float odd[] = {-0.0f, 1e-40f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -1e-3f};
    for (const float x : odd)
      for (const std::size_t at : {std::size_t{0}, V - 1}) {
        auto a = p, b = q;
        a[at] = x;
        b[(at + 1) % V] = x;
        const std::span<const float> A(a), B(b);
        CAPTURE(x, at);
        CHECK(agree(specdec::entropy(A), sb::entropy<Arch>(A), 0.0));
        CHECK(agree(specdec::cross_entropy(A, B), sb::cross_entropy<Arch>(A, B), 0.0));
        CHECK(agree(specdec::kl_divergence(A, B), sb::kl_divergence<Arch>(A, B), 0.0));
        double out = 0.0;
        CHECK_FALSE(specdec::backend::simd::detail::float_log_sum<Arch, specdec::backend::simd::detail::log_term::kl>(
            a.data(), b.data(), V, out));
      }
    auto gap = q;
    const std::size_t at = static_cast<std::size_t>(std::max_element(p.begin(), p.end()) - p.begin());
    gap[at] = 0.0f;
    CHECK(sb::kl_divergence<Arch>(P, std::span<const float>(gap)) == std::numeric_limits<double>::infinity());
    CHECK(sb::cross_entropy<Arch>(P, std::span<const float>(gap)) == std::numeric_limits<double>::infinity());
  }
  const std::vector<float> a(3), b(4);
  CHECK_THROWS_AS(sb::kl_divergence<Arch>(std::span<const float>(a), std::span<const float>(b)), specdec::error);
  CHECK_THROWS_AS(sb::cross_entropy<Arch>(std::span<const float>(a), std::span<const float>(b)), specdec::error);
}

TEMPLATE_LIST_TEST_CASE("the float log of the simd divergences is within 2^-21 relative", "[simd][divergence]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  using F = specdec::backend::simd::fbatch<Arch>;
  namespace sd = specdec::backend::simd::detail;
  constexpr std::size_t n = F::size;
  double worst = 0.0;
  const auto check = [&](const std::array<float, n>& xs, const std::array<float, n>& ys, bool ratio) {
    const F x = F::load_unaligned(xs.data()), y = F::load_unaligned(ys.data());
    std::array<float, n> got;
    sd::log_from_split<Arch>(ratio ? sd::reduce_ratio<Arch>(x, y) : sd::split_log_float<Arch>(x)).store_unaligned(got.data());
    for (std::size_t j = 0; j < n; ++j) {
      const double exact = std::log(ratio ? static_cast<double>(xs[j]) / static_cast<double>(ys[j]) : static_cast<double>(xs[j]));
      const double err = std::abs(static_cast<double>(got[j]) - exact);
      if (exact == 0.0) {
        REQUIRE(got[j] == 0.0f);
        continue;
      }
      worst = std::max(worst, err / std::abs(exact));
      if (err > float_log_bound * std::abs(exact))
        FAIL_CHECK("log of " << xs[j] << (ratio ? " / " : "") << (ratio ? ys[j] : 0.0f) << ": " << got[j] << " against "
                             << exact);
    }
  };
  // every float of [sqrt(1/2), sqrt(2)) (the reduced range, where log x = log(1 + f)), a stride 7 of it
  std::array<float, n> xs{}, ones{};
  ones.fill(1.0f);
  std::size_t fill = 0;
  for (std::uint32_t b = 0x3f3504f3u; b < 0x3fb504f3u; b += 7) {
    xs[fill++] = std::bit_cast<float>(b);
    if (fill == n) check(xs, ones, false), fill = 0;
  }
  // random normal floats of every exponent, and ratios of them, including ratios within 1e-6 of 1
  philox_stream s(stream_address{0x51D, 19, 0, 0, purpose::user});
  std::array<float, n> ys{};
  for (int i = 0; i < 20000; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const auto draw = [&] {
        return std::bit_cast<float>(0x00800000u + static_cast<std::uint32_t>(s.uniform() * (0x7f7fffffu - 0x00800000u)));
      };
      xs[j] = draw();
      ys[j] = i % 2 ? draw() : static_cast<float>(static_cast<double>(xs[j]) * (1.0 + 1e-6 * (s.uniform() - 0.5)));
      if (!(ys[j] >= std::numeric_limits<float>::min() && ys[j] <= std::numeric_limits<float>::max())) ys[j] = 1.0f;
    }
    check(xs, ys, false);
    check(xs, ys, true);
  }
  INFO("largest relative error: " << worst << " = 2^" << std::log2(worst));
  CHECK(worst <= float_log_bound);
  WARN("float log of the simd divergences (" << Arch::name() << "): largest relative error 2^" << std::log2(worst));
}

TEMPLATE_LIST_TEST_CASE("simd SV indicators: S within 1e-12 of seq's, A identical, the same errors", "[simd][indicators]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 17, 0, 0, purpose::user});
  for (const std::size_t V : {std::size_t{3}, std::size_t{33}, std::size_t{2049}, std::size_t{6150}}) {
    const std::size_t n = 6;
    std::vector<float> d, c;
    std::vector<token_id> tokens;
    for (std::size_t i = 0; i < n; ++i) {
      const auto dr = specdec_test::random_probability_row<float>(s, V, 0.3),
                 cr = specdec_test::random_probability_row<float>(s, V, 0.3);
      tokens.push_back(specdec::sample_categorical(std::span<const float>(dr), s.uniform()).token);
      d.insert(d.end(), dr.begin(), dr.end());
      c.insert(c.end(), cr.begin(), cr.end());
    }
    std::vector<double> sa(n), aa(n), sb(n), ab(n);
    specdec::estimate::compute_indicators(specdec::exec::seq, specdec::row_batch<const float>(d, V),
                                          specdec::row_batch<const float>(c, V), tokens, sa, aa);
    specdec::backend::simd::compute_indicators<Arch>(std::span<const float>(d), std::span<const float>(c), tokens, V, sb, ab);
    CAPTURE(V);
    CHECK(aa == ab);
    for (std::size_t i = 0; i < n; ++i) CHECK(std::abs(sa[i] - sb[i]) <= 1e-12);
    auto bad = d;
    bad[V + 1] = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_AS(specdec::backend::simd::compute_indicators<Arch>(std::span<const float>(bad), std::span<const float>(c),
                                                                     tokens, V, sb, ab),
                    specdec::error);
    auto unnormalised = c;
    for (std::size_t v = 0; v < V; ++v) unnormalised[v] *= 1.01f;
    CHECK_THROWS_AS(specdec::backend::simd::similarity<Arch>(std::span<const float>(d).first(V),
                                                             std::span<const float>(unnormalised).first(V)),
                    specdec::error);
  }
}

// ---- top-W selection (beam drafts) ----------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("simd top_w_indices gives seq's indices in seq's order", "[simd][select]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 18, 0, 0, purpose::user});
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : logit_sizes)
      for (int variant = 0; variant < 7; ++variant) {
        auto keys = make_logits<T>(s, V, variant);
        if (variant == 5 || variant == 6) keys[V / 2] = -std::numeric_limits<T>::infinity();
        for (const std::size_t w : {std::size_t{0}, std::size_t{1}, std::size_t{4}, std::size_t{64}, V, V + 3}) {
          std::vector<std::size_t> a, b;
          specdec::top_w_indices(std::span<const T>(keys), w, a);
          specdec::backend::simd::top_w_indices<Arch>(std::span<const T>(keys), w, b);
          CAPTURE(V, variant, w);
          REQUIRE(a == b);
        }
      }
  };
  run(float{});
  run(double{});
}

TEMPLATE_LIST_TEST_CASE("simd kth_largest is the k-th largest, even on ascending rows and heavy ties", "[simd][select]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  for (const std::size_t V : {std::size_t{10}, std::size_t{3000}, std::size_t{20000}}) {
    std::vector<float> ascending(V), ties(V, 1.0f);
    for (std::size_t v = 0; v < V; ++v) ascending[v] = static_cast<float>(v);
    ties[V / 3] = 2.0f;
    for (const std::size_t k : {std::size_t{1}, std::size_t{7}, V / 2, V}) {
      CAPTURE(V, k);
      CHECK(*specdec::backend::simd::kth_largest<Arch>(std::span<const float>(ascending), k) == static_cast<float>(V - k));
      CHECK(*specdec::backend::simd::kth_largest<Arch>(std::span<const float>(ties), k) == (k == 1 ? 2.0f : 1.0f));
    }
    CHECK_FALSE(specdec::backend::simd::kth_largest<Arch>(std::span<const float>(ties), V + 1).has_value());
  }
}

TEMPLATE_LIST_TEST_CASE("simd kth_largest from its interleaved-maxima bound: exact with NaN, infinities, ties and low id ranges",
                        "[simd][select]", specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 31, 0, 0, purpose::user});
  constexpr float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto exact = [](const std::vector<float>& row, std::size_t k) -> std::optional<float> {
    std::vector<float> kept;
    for (const float x : row)
      if (x > -inf) kept.push_back(x);  // (NaN fails the comparison)
    if (kept.size() < k) return std::nullopt;
    std::nth_element(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(k - 1), kept.end(), std::greater<float>());
    return kept[k - 1];
  };
  for (const std::size_t V : {std::size_t{4096}, std::size_t{32000}})
    for (int variant = 0; variant < 6; ++variant) {
      std::vector<float> row(V);
      for (float& x : row) x = static_cast<float>(4.0 * (s.uniform() - 0.5));
      if (variant == 1)  // a low range of ids: the groups' maxima come from the rest
        for (std::size_t v = 0; v < V / 2; ++v) row[v] = -50.0f;
      if (variant == 2)  // NaN and -inf scattered, +inf a few times
        for (std::size_t v = 0; v < V; v += 7) row[v] = v % 3 == 0 ? nan : v % 3 == 1 ? -inf : row[v];
      if (variant == 3)
        for (std::size_t v = 5; v < V; v += V / 9) row[v] = inf;
      if (variant == 4) std::fill(row.begin(), row.end(), 1.0f);  // all tied
      if (variant == 5)                                           // all -inf but a few
        for (std::size_t v = 0; v < V; ++v) row[v] = v % 1000 == 0 ? 1.0f : -inf;
      for (const std::size_t k : {std::size_t{1}, std::size_t{7}, std::size_t{50}, std::size_t{64}, std::size_t{100},
                                  std::size_t{128}, std::size_t{129}}) {
        CAPTURE(V, variant, k);
        bool saw_nan = false;
        const std::optional<float> got = specdec::backend::simd::kth_largest<Arch>(std::span<const float>(row), k, &saw_nan);
        const std::optional<float> want = exact(row, k);
        REQUIRE(got.has_value() == want.has_value());
        if (got) CHECK(*got == *want);
        CHECK(saw_nan == (variant == 2));
      }
    }
}

// ---- chain verification from logits -----------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("simd verify_from_logits agrees with seq (rows warped by the simd warper)", "[simd][verify][warp]",
                        specdec_simd_archs) {
  using namespace specdec_simd_test;
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x51D, 19, 0, 0, purpose::user});
  std::size_t requests = 0, same_requests = 0;
  for (const std::size_t V : {std::size_t{37}, std::size_t{2049}})
    for (int round = 0; round < 6; ++round) {
      const std::size_t B = 10, max_n = 4;
      std::vector<specdec_test::request_data<float>> reqs(B);
      std::vector<specdec::warp_params> target_params, draft_params;
      for (std::size_t b = 0; b < B; ++b) {
        auto& r = reqs[b];
        r.stream = specdec::random::request_stream{0xFEED, static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(round)};
        const auto& wt = warp_cases[static_cast<std::size_t>(s.uniform() * 10.0) % 10];
        const auto& wd = warp_cases[static_cast<std::size_t>(s.uniform() * 10.0) % 10];
        target_params.push_back(wt);
        draft_params.push_back(wd);
        const auto n = static_cast<std::size_t>(s.uniform() * static_cast<double>(max_n + 1));
        for (std::size_t i = 0; i < n; ++i) {
          auto q = make_logits<float>(s, V, static_cast<int>(s.uniform() * 4.0));
          auto p = q;
          for (auto& x : p) x += static_cast<float>(s.uniform() - 0.5);
          std::vector<float> warped(V);
          specdec::warp_logits(std::span<const float>(q), std::span<float>(warped), wd);
          r.drafts.push_back(specdec::sample_categorical(std::span<const float>(warped), s.uniform()).token);
          r.draft_rows.push_back(std::move(q));
          r.target_rows.push_back(std::move(p));
        }
        r.target_rows.push_back(make_logits<float>(s, V, 0));
      }
      const auto batch = specdec_test::build_batch(reqs, V, true);
      specdec_test::for_each_rule([&](const auto& rule, const char* name) {
        specdec_test::owned_outputs a(batch), b(batch);
        specdec::verify_from_logits(specdec::exec::seq, rule, batch.view(), target_params, draft_params, batch.stream_span(),
                                    a.view());
        specdec::verify_from_logits(specdec::exec::simd_policy<Arch>{}, rule, batch.view(), target_params, draft_params,
                                    batch.stream_span(), b.view());
        CAPTURE(name, V, round);
        for (std::size_t r = 0; r < B; ++r) {
          REQUIRE(b.status[r] == a.status[r]);
          for (const token_id t : b.emitted(r)) REQUIRE(specdec::in_vocabulary(t, V));
          same_requests += a.row(r) == b.row(r) && a.num_accepted[r] == b.num_accepted[r];
          ++requests;
        }
      });
    }
  INFO(Arch::name() << ": " << same_requests << " of " << requests << " requests with seq's tokens");
  CHECK(same_requests * 100 >= requests * 99);
}
