//! \file tests/support/random_requests.hpp
//! \brief Test support: random rows of several kinds and random ragged batches with spoiled requests,
//! for the cases that compare a backend with the seq oracle (simd, cuda).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "support/batch_builder.hpp"

namespace specdec_test {

//! Kinds of rows the cases draw.
enum class row_kind { dense, sparse, ties, tiny, huge, one_hot };
inline const row_kind all_kinds[] = {row_kind::dense, row_kind::sparse, row_kind::ties,
                                     row_kind::tiny,  row_kind::huge,   row_kind::one_hot};

//! A non-negative row of length V of the given kind (not normalised unless it says so).
template <class T>
std::vector<T> make_row(specdec::random::philox_stream& s, std::size_t V, row_kind kind) {
  std::vector<T> row(V);
  for (auto& x : row) {
    const double e = s.exponential();
    switch (kind) {
      case row_kind::dense: x = static_cast<T>(e / static_cast<double>(V)); break;
      case row_kind::sparse: x = s.uniform() < 0.9 ? T(0) : static_cast<T>(e); break;
      case row_kind::ties: x = static_cast<T>(std::floor(e * 2.0) / 4.0); break;
      case row_kind::tiny: x = static_cast<T>(e * 1e-42); break;  // float subnormals
      case row_kind::huge: x = static_cast<T>(e * 1e30); break;
      case row_kind::one_hot: x = T(0); break;
    }
  }
  if (kind == row_kind::one_hot || kind == row_kind::sparse)
    row[static_cast<std::size_t>(s.uniform() * static_cast<double>(V))] = T(1);
  return row;
}

//! Puts a bad value (NaN, +inf, a negative, -inf by `what` % 4) at position `at` % V of the row.
template <class T>
void spoil(std::vector<T>& row, std::size_t at, int what) {
  const T bad[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(), T(-1e-30),
                   -std::numeric_limits<T>::infinity()};
  row[at % row.size()] = bad[what % 4];
}

//! A random batch: ragged n_b in [0, max_n], drafts sampled from q, targets sometimes equal to q
//! (certain acceptance, zero residual); with probability `spoil_rate` a request gets a NaN target
//! entry, a q(x) = 0 draft, an out-of-range draft id or an all-zero q row.
template <class T>
std::vector<request_data<T>> make_requests(specdec::random::philox_stream& s, std::size_t B, std::size_t max_n, std::size_t V,
                                           double spoil_rate, std::uint32_t step) {
  std::vector<request_data<T>> reqs(B);
  for (std::size_t b = 0; b < B; ++b) {
    auto& r = reqs[b];
    r.stream = specdec::random::request_stream{0xC0FFEE, static_cast<std::uint32_t>(b), step};
    const auto n = static_cast<std::size_t>(s.uniform() * static_cast<double>(max_n + 1));
    const row_kind kind = all_kinds[static_cast<std::size_t>(s.uniform() * 6.0) % 6];
    for (std::size_t i = 0; i < n; ++i) {
      auto q = random_probability_row<T>(s, V, kind == row_kind::sparse ? 0.8 : 0.1);
      auto p = s.uniform() < 0.2 ? q : random_probability_row<T>(s, V, 0.1);
      r.drafts.push_back(specdec::sample_categorical(std::span<const T>(q), s.uniform()).token);
      r.draft_rows.push_back(std::move(q));
      r.target_rows.push_back(std::move(p));
    }
    r.target_rows.push_back(random_probability_row<T>(s, V, 0.1));
    if (s.uniform() < spoil_rate) {
      const int what = static_cast<int>(s.uniform() * 4.0);
      const std::size_t i = static_cast<std::size_t>(s.uniform() * static_cast<double>(n + 1));
      if (what == 0) spoil(r.target_rows[i], static_cast<std::size_t>(s.uniform() * static_cast<double>(V)), 0);
      if (what == 1 && i < n) r.draft_rows[i][static_cast<std::size_t>(r.drafts[i])] = T(0);
      if (what == 2 && i < n) r.drafts[i] = static_cast<specdec::token_id>(V + 3);
      if (what == 3 && i < n) std::fill(r.draft_rows[i].begin(), r.draft_rows[i].end(), T(0));
    }
  }
  return reqs;
}

//! The benchmarks' shapes (bench/cuda_verify.cu): B requests with exactly `gamma` drafts each at
//! vocabulary V. Rows are drawn from a pool of `pool` random probability rows (a fifth of the targets
//! equal to their q: certain acceptance and a zero residual), so that large shapes stay cheap to make;
//! drafts are sampled from q. No spoiled requests.
template <class T>
std::vector<request_data<T>> make_shape_requests(specdec::random::philox_stream& s, std::size_t B, std::size_t gamma,
                                                 std::size_t V, std::size_t pool = 24) {
  std::vector<std::vector<T>> rows;
  for (std::size_t i = 0; i < pool; ++i) rows.push_back(random_probability_row<T>(s, V, 0.1));
  const auto pick = [&] { return rows[static_cast<std::size_t>(s.uniform() * static_cast<double>(pool)) % pool]; };
  std::vector<request_data<T>> reqs(B);
  for (std::size_t b = 0; b < B; ++b) {
    auto& r = reqs[b];
    r.stream = specdec::random::request_stream{0x5A9E5, static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(gamma)};
    for (std::size_t i = 0; i < gamma; ++i) {
      auto q = pick();
      auto p = s.uniform() < 0.2 ? q : pick();
      r.drafts.push_back(specdec::sample_categorical(std::span<const T>(q), s.uniform()).token);
      r.draft_rows.push_back(std::move(q));
      r.target_rows.push_back(std::move(p));
    }
    r.target_rows.push_back(pick());
  }
  return reqs;
}

//! The shapes of the GPU benchmarks and of the cross-backend check (B, gamma, V).
struct bench_shape {
  std::size_t B, gamma, V;
};
inline std::vector<bench_shape> bench_shapes() {
  std::vector<bench_shape> shapes;
  for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}})
    for (const std::size_t gamma : {std::size_t{4}, std::size_t{8}})
      for (const std::size_t B : {std::size_t{1}, std::size_t{16}, std::size_t{64}}) shapes.push_back({B, gamma, V});
  return shapes;
}

//! Calls `check(shape, batch)` with a packed float batch of `make_shape_requests` for each of
//! `bench_shapes()`, each drawn from its own stream, so that every backend's test sees the same inputs.
template <class Check>
void for_each_bench_shape_batch(Check&& check) {
  for (const auto& sh : bench_shapes()) {
    specdec::random::philox_stream s(specdec::random::stream_address{
        0x5A9E, static_cast<std::uint32_t>(sh.V), static_cast<std::uint32_t>(sh.gamma), 0, specdec::random::purpose::user});
    const auto batch = build_batch(make_shape_requests<float>(s, sh.B, sh.gamma, sh.V), sh.V, true);
    check(sh, batch);
  }
}

}  // namespace specdec_test
