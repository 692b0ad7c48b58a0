// The GPU simulators, top-W selection and SV indicators (backend/cuda/{simulate,top_w,indicators}.cuh)
// against the CPU oracles on the same seeds:
//  - every simulator (SD chains, SV's N, SPRINTER's verifier chain, the SD and SPRINTER token
//    processes): identical histograms (sizes and counts), trials and counters, including values
//    beyond count_tally's histogram (overflow records, with the repeat when the buffer is too small);
//  - top-W, search: the indices of specdec::top_w_indices (ties, -0/+0, -inf, NaN, fewer usable keys
//    than W, float and double); Gumbel-top-k: the selection of the CPU beam drafter's keys (the
//    candidates' sequential Gumbels), through the parallel path and the sequential path;
//  - indicators: A identical, S within indicators_agreement_bound(V) of seq, seq's errors as statuses
//    and as the exception of the checking overload.
// Exits 77 without a GPU (tests/cuda_main.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "simulate/check.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/backend/cuda/indicators.cuh"
#include "specdec/backend/cuda/simulate.cuh"
#include "specdec/backend/cuda/top_w.cuh"
#include "specdec/errors.hpp"
#include "specdec/estimate/indicators.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/top_w.hpp"
#include "specdec/simulate/simulate.hpp"
#include "support/device_array.cuh"

namespace {

namespace sim = specdec::simulate;
namespace cu = specdec::backend::cuda;  // (a plain `cuda` would be ambiguous with libcu++'s ::cuda)
using specdec::token_id;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::stream_address;
using specdec::test::device_array;
using cspan = std::span<const double>;
using specdec_sim_test::random_row_pair;
using specdec_sim_test::row_pair;
using specdec_sim_test::same_tally;

constexpr std::uint64_t seed = 0xC0DA2;
constexpr auto gpu = specdec::exec::cuda;
const double minus_inf = -std::numeric_limits<double>::infinity();

philox_stream data_stream(std::uint32_t id) { return philox_stream(stream_address{seed, id, 0, 0, purpose::user}); }

template <class Result>
void check_chain(const Result& cpu, const Result& dev) {
  CHECK(same_tally(cpu.accepted, dev.accepted));
  CHECK(cpu.draft_tokens == dev.draft_tokens);
}

}  // namespace

TEST_CASE("cuda simulators: the SD, SV and SPRINTER chains give the CPU's counts", "[cuda][simulate]") {
  std::cout << "cuda chain simulators vs CPU: seed " << seed << "\n";
  std::uint32_t stream = 0;
  for (const double alpha : {0.0, 0.3, 0.8, 0.97, 1.0})
    for (const int gamma : {0, 1, 5, 16}) {
      const sim::run_options o{seed, stream++, 1000 * stream, 20000};
      check_chain(sim::sd::chain(alpha, gamma, o), sim::sd::chain(gpu, alpha, gamma, o));
    }
  const std::vector<double> alphas{0.95, 0.9, 0.0, 0.85, 1.0, 0.5, 0.7};
  for (std::size_t g = 0; g <= alphas.size(); ++g) {
    const sim::run_options o{seed, stream++, 0, 30000};
    const cspan a(alphas.data(), g);
    check_chain(sim::sd::chain(a, o), sim::sd::chain(gpu, a, o));
    check_chain(sim::sv::accepted(cspan(alphas), static_cast<int>(g), o),
                sim::sv::accepted(gpu, cspan(alphas), static_cast<int>(g), o));
  }
  // Large first draw indices (the step field of the address) and a draw count that is not a
  // multiple of the block size.
  check_chain(sim::sd::chain(0.9, 8, {seed, 7, (std::uint64_t{3} << 32) - 1000, 12345}),
              sim::sd::chain(gpu, 0.9, 8, {seed, 7, (std::uint64_t{3} << 32) - 1000, 12345}));
  check_chain(sim::sd::chain(0.9, 8, {seed, 7, 0, 0}), sim::sd::chain(gpu, 0.9, 8, {seed, 7, 0, 0}));
  for (const int r : {0, 3, 40})
    for (const double fp : {0.0, 0.5, 0.99}) {
      const sim::run_options o{seed, stream++, 0, 20000};
      check_chain(sim::sprinter::verifier_chain(0.9, fp, r, o), sim::sprinter::verifier_chain(gpu, 0.9, fp, r, o));
    }
  // eta_tp = 1 with a long head: N >= r; the histogram has r + 1 + tail entries.
  check_chain(sim::sprinter::verifier_chain(1.0, 0.9, 3000, {seed, stream, 0, 2000}),
              sim::sprinter::verifier_chain(gpu, 1.0, 0.9, 3000, {seed, stream, 0, 2000}));
}

TEST_CASE("cuda simulators: values beyond count_tally's histogram go through ordered records", "[cuda][simulate]") {
  // alpha = 1 and gamma = 2^20 + 2: every draw has 2^20 + 2 successes, beyond the histogram, so each
  // is a record; a 4-record buffer forces the repeat with room for all 40.
  const auto limit = static_cast<int>(sim::count_tally::histogram_limit + 2);
  const sim::run_options o{seed, 99, 5, 40};
  const auto cpu = sim::sd::chain(1.0, limit, o);
  const auto g = static_cast<std::uint64_t>(limit);
  auto dev = cu::detail::run_chain(nullptr, g, sim::detail::constant_probability{1.0}, o, g + 1, 4);
  CHECK(same_tally(cpu.accepted, dev.successes));
  CHECK(cpu.draft_tokens == dev.trials);
  CHECK(dev.successes.overflow_count() == 40);
  check_chain(cpu, sim::sd::chain(gpu, 1.0, limit, o));
}

TEST_CASE("cuda simulators: the SD and SPRINTER token processes give the CPU's counts", "[cuda][simulate]") {
  std::cout << "cuda token simulators vs CPU: seed " << seed << "\n";
  const auto check_sd = [](const auto& rule, const row_pair& pr, int gamma, const sim::run_options& o) {
    const cspan p(pr.p), q(pr.q);
    const auto cpu = sim::sd::token_process(rule, p, q, gamma, o);
    const auto dev = sim::sd::token_process(gpu, rule, p, q, gamma, o);
    check_chain(cpu.chain, dev.chain);
    CHECK(same_tally(cpu.first_token, dev.first_token));
    CHECK(same_tally(cpu.bonus_token, dev.bonus_token));
    CHECK(cpu.first_accepted == dev.first_accepted);
    CHECK(cpu.fallbacks == dev.fallbacks);
  };
  const row_pair small = random_row_pair(9, seed, 1), large = random_row_pair(4500, seed, 2);
  check_sd(specdec::strict, small, 4, {seed, 1, 0, 50000});
  check_sd(specdec::lenient_rule(1.7), small, 3, {seed, 2, 77, 50000});
  check_sd(specdec::strict, large, 3, {seed, 3, 0, 5000});
  check_sd(specdec::lenient_rule(0.5), row_pair{small.p, small.p}, 2, {seed, 4, 0, 20000});  // residual empty
  for (const row_pair* pr : {&small, &large}) {
    const cspan p(pr->p), q(pr->q);
    const sim::run_options o{seed, 5, 11, 20000};
    const auto cpu = sim::sprinter::token_process(p, q, 0.8, 0.3, o);
    const auto dev = sim::sprinter::token_process(gpu, p, q, 0.8, 0.3, o);
    CHECK(same_tally(cpu.token, dev.token));
    CHECK(cpu.kept == dev.kept);
    CHECK(cpu.verifier_accepted == dev.verifier_accepted);
    CHECK(cpu.fallbacks == dev.fallbacks);
  }
}

TEST_CASE("cuda simulators: the same preconditions as the CPU", "[cuda][simulate]") {
  const std::vector<double> bad{0.5, 0.6};
  CHECK_THROWS_AS(sim::sd::chain(gpu, 1.5, 3, {}), specdec::error);
  CHECK_THROWS_AS(sim::sv::accepted(gpu, cspan(bad), 3, {}), specdec::error);
  CHECK_THROWS_AS(sim::sprinter::verifier_chain(gpu, 1.0, 1.0, 2, {}), specdec::error);
  CHECK_THROWS_AS(sim::sd::token_process(gpu, specdec::strict, cspan(bad), cspan(bad), 2, {}), specdec::error);
}

namespace {

// Beam-step scores: n entries, ~30% -inf (q~ = 0), with ties (values rounded to 1/4), -0 and +0,
// and NaN when `with_nan`.
std::vector<double> make_scores(std::size_t n, std::uint32_t id, bool with_nan) {
  philox_stream s = data_stream(id);
  std::vector<double> x(n);
  for (std::size_t j = 0; j < n; ++j) {
    const double u = s.uniform();
    x[j] = u < 0.3 ? minus_inf : -s.exponential() * 4.0;
    if (u > 0.9) x[j] = std::round(x[j] * 4.0) / 4.0;  // ties
    if (u > 0.995) x[j] = (j % 2 == 0) ? 0.0 : -0.0;
    if (with_nan && u > 0.3 && u < 0.31) x[j] = std::numeric_limits<double>::quiet_NaN();
  }
  return x;
}

// specdec::top_w_indices of one row, padded with -1 to W entries.
std::vector<std::int64_t> cpu_search(std::span<const double> row, std::size_t w) {
  std::vector<std::size_t> idx;
  specdec::top_w_indices(row, w, idx);
  std::vector<std::int64_t> out(w, -1);
  for (std::size_t k = 0; k < idx.size(); ++k) out[k] = static_cast<std::int64_t>(idx[k]);
  return out;
}

// The CPU beam drafter's Gumbel-top-k (draft/beam.hpp, select()): candidates are the usable entries
// in index order, each keyed with its score plus the next Gumbel of the stream.
std::vector<std::int64_t> cpu_gumbel(std::span<const double> row, std::size_t w, const stream_address& a) {
  std::vector<std::size_t> candidate, idx;
  std::vector<double> keys;
  philox_stream g(a);
  for (std::size_t j = 0; j < row.size(); ++j)
    if (row[j] > minus_inf) {
      candidate.push_back(j);
      keys.push_back(row[j] + g.gumbel());
    }
  specdec::top_w_indices(std::span<const double>(keys), w, idx);
  std::vector<std::int64_t> out(w, -1);
  for (std::size_t k = 0; k < idx.size(); ++k) out[k] = static_cast<std::int64_t>(candidate[idx[k]]);
  return out;
}

// Runs the GPU top-W over `rows` rows of `scores`; `sequential` forces the Gumbel keys' sequential path.
template <class T>
std::vector<std::int64_t> gpu_top_w(specdec::beam_mode mode, const std::vector<T>& scores, std::size_t n, std::size_t w,
                                    const std::vector<stream_address>& streams, bool sequential) {
  const std::size_t rows = scores.size() / n;
  const device_array<T> d_scores(scores);
  const device_array<stream_address> d_streams(streams);
  device_array<std::int64_t> d_out(rows * w);
  if (!sequential) {
    cu::top_w(nullptr, mode, d_scores.crows(n), w, d_streams.cspan(), d_out.span());
  } else {
    const auto shape = cu::detail::check_top_w(mode, d_scores.crows(n), w, d_streams.cspan(), d_out.span());
    device_array<double> keys(rows * n);
    cu::detail::launch_top_w(nullptr, shape, d_scores.data(), n, w, d_streams.data(), d_out.data(), keys.data(), true);
    return d_out.download();
  }
  return d_out.download();
}

}  // namespace

TEST_CASE("cuda top-W, search: the indices of top_w_indices", "[cuda][top_w]") {
  std::cout << "cuda top-W (search) vs top_w_indices: seed " << seed << "\n";
  std::uint32_t id = 10;
  struct shape {
    std::size_t rows, n, w;
  };
  for (const shape sh : {shape{3, 5, 8}, shape{4, 1, 1}, shape{5, 8 * 1000, 8}, shape{2, 4 * 32000, 4}, shape{3, 3000, 64},
                         shape{2, 2500, 1024}, shape{1, 700, 1}}) {
    const std::vector<double> scores = make_scores(sh.rows * sh.n, id++, true);
    const auto dev = gpu_top_w(specdec::beam_mode::search, scores, sh.n, sh.w, {}, false);
    std::size_t bad = 0;
    for (std::size_t r = 0; r < sh.rows; ++r) {
      const auto cpu = cpu_search(std::span<const double>(scores).subspan(r * sh.n, sh.n), sh.w);
      for (std::size_t k = 0; k < sh.w; ++k) bad += cpu[k] != dev[r * sh.w + k];
    }
    std::cout << "  rows " << sh.rows << ", n " << sh.n << ", W " << sh.w << ": " << bad << " differing entries\n";
    CHECK(bad == 0);
  }
  // Float scores: the same indices as the CPU on the same floats.
  const std::vector<double> wide = make_scores(3 * 5000, id++, false);
  const std::vector<float> narrow(wide.begin(), wide.end());
  const auto dev = gpu_top_w(specdec::beam_mode::search, narrow, 5000, 16, {}, false);
  for (std::size_t r = 0; r < 3; ++r) {
    std::vector<std::size_t> idx;
    specdec::top_w_indices(std::span<const float>(narrow).subspan(r * 5000, 5000), 16, idx);
    for (std::size_t k = 0; k < 16; ++k) CHECK(static_cast<std::int64_t>(idx[k]) == dev[r * 16 + k]);
  }
  // All keys equal: the lowest indices, in order.
  const std::vector<double> flat(2 * 100, 1.5);
  const auto ties = gpu_top_w(specdec::beam_mode::search, flat, 100, 5, {}, false);
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t k = 0; k < 5; ++k) CHECK(ties[r * 5 + k] == static_cast<std::int64_t>(k));
}

TEST_CASE("cuda top-W, Gumbel-top-k: the CPU beam drafter's selection", "[cuda][top_w]") {
  std::cout << "cuda Gumbel-top-k vs the CPU's sequential Gumbels: seed " << seed << "\n";
  std::uint32_t id = 40;
  struct shape {
    std::size_t rows, n, w;
  };
  for (const bool sequential : {false, true})
    for (const shape sh : {shape{3, 6, 8}, shape{6, 8 * 1000, 8}, shape{2, 4 * 32000, 4}, shape{3, 3000, 64}}) {
      const std::vector<double> scores = make_scores(sh.rows * sh.n, id++, false);
      std::vector<stream_address> streams;
      for (std::size_t r = 0; r < sh.rows; ++r)
        streams.push_back(specdec::random::request_stream{seed, static_cast<std::uint32_t>(r), 3}.at(2, purpose::beam));
      const auto dev = gpu_top_w(specdec::beam_mode::sample_without_replacement, scores, sh.n, sh.w, streams, sequential);
      std::size_t bad = 0;
      for (std::size_t r = 0; r < sh.rows; ++r) {
        const auto cpu = cpu_gumbel(std::span<const double>(scores).subspan(r * sh.n, sh.n), sh.w, streams[r]);
        for (std::size_t k = 0; k < sh.w; ++k) bad += cpu[k] != dev[r * sh.w + k];
      }
      std::cout << "  " << (sequential ? "sequential" : "parallel") << " keys, rows " << sh.rows << ", n " << sh.n << ", W "
                << sh.w << ": " << bad << " differing entries\n";
      CHECK(bad == 0);
    }
}

TEST_CASE("cuda top-W: bad arguments throw", "[cuda][top_w]") {
  const device_array<double> scores(std::vector<double>(10, 0.0));
  device_array<std::int64_t> out(4);
  CHECK_THROWS_AS(cu::top_w(nullptr, specdec::beam_mode::sample, scores.crows(5), 2, {}, out.span()), specdec::error);
  CHECK_THROWS_AS(cu::top_w(nullptr, specdec::beam_mode::search, scores.crows(3), 2, {}, out.span()), specdec::error);
  CHECK_THROWS_AS(cu::top_w(nullptr, specdec::beam_mode::sample_without_replacement, scores.crows(5), 2, {}, out.span()),
                  specdec::error);  // no streams
  CHECK_THROWS_AS(cu::top_w(nullptr, specdec::beam_mode::search, scores.crows(5), 3, {}, out.span()), specdec::error);
}

namespace {

// n positions of V-entry probability rows (normalised Exp weights, some zeros), tokens drawn from
// the draft rows.
template <class T>
struct indicator_batch {
  std::size_t n, v;
  std::vector<T> draft, companion;
  std::vector<token_id> tokens;
};
template <class T>
indicator_batch<T> make_indicator_batch(std::size_t n, std::size_t v, std::uint32_t id) {
  philox_stream s = data_stream(id);
  indicator_batch<T> b{n, v, std::vector<T>(n * v), std::vector<T>(n * v), std::vector<token_id>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    double sd = 0.0, sc = 0.0;
    std::vector<double> d(v), c(v);
    for (std::size_t k = 0; k < v; ++k) {
      d[k] = s.uniform() < 0.1 ? 0.0 : s.exponential();
      c[k] = s.uniform() < 0.1 ? 0.0 : d[k] * (0.5 + s.uniform());
      sd += d[k];
      sc += c[k];
    }
    if (sd == 0.0) d[0] = sd = 1.0;
    if (sc == 0.0) c[0] = sc = 1.0;
    for (std::size_t k = 0; k < v; ++k) {
      b.draft[i * v + k] = static_cast<T>(d[k] / sd);
      b.companion[i * v + k] = static_cast<T>(c[k] / sc);
    }
    b.tokens[i] = specdec::sample_categorical(std::span<const T>(b.draft).subspan(i * v, v), s.uniform()).token;
  }
  return b;
}

// Runs the status overload on the GPU.
template <class T>
void gpu_indicators(const indicator_batch<T>& b, std::vector<double>& s, std::vector<double>& a,
                    std::vector<cu::indicator_status>& status) {
  const device_array<T> d(b.draft), c(b.companion);
  const device_array<token_id> t(b.tokens);
  device_array<double> ds(b.n), da(b.n);
  device_array<cu::indicator_status> st(b.n);
  const device_array<std::byte> work(cu::indicators_workspace_bytes(b.n, b.v));
  cu::compute_indicators(nullptr, d.crows(b.v), c.crows(b.v), t.cspan(), ds.span(), da.span(), st.span(), work.span());
  s = ds.download();
  a = da.download();
  status = st.download();
}

// Seq's outcome for position i: ok (and s, a) or the status its exception stands for.
template <class T>
cu::indicator_status seq_position(const indicator_batch<T>& b, std::size_t i, double& s, double& a) {
  const auto d = std::span<const T>(b.draft).subspan(i * b.v, b.v);
  const auto c = std::span<const T>(b.companion).subspan(i * b.v, b.v);
  try {
    s = specdec::estimate::similarity(d, c);
  } catch (const specdec::error& e) {
    return std::string(e.what()).find("draft row") != std::string::npos ? cu::indicator_status::bad_draft_row
                                                                        : cu::indicator_status::bad_companion_row;
  }
  try {
    a = specdec::estimate::companion_acceptance(d, c, b.tokens[i]);
  } catch (const specdec::error& e) {
    return std::string(e.what()).find("outside") != std::string::npos ? cu::indicator_status::token_out_of_range
                                                                      : cu::indicator_status::draft_probability_zero;
  }
  return cu::indicator_status::ok;
}

template <class T>
void check_indicators_against_seq(const indicator_batch<T>& b) {
  std::vector<double> s, a;
  std::vector<cu::indicator_status> status;
  gpu_indicators(b, s, a, status);
  double worst = 0.0;
  for (std::size_t i = 0; i < b.n; ++i) {
    double ss = 0.0, sa = 0.0;
    const cu::indicator_status expected = seq_position(b, i, ss, sa);
    CHECK(status[i] == expected);
    if (expected != cu::indicator_status::ok) continue;
    CHECK(a[i] == sa);
    worst = std::max(worst, std::abs(s[i] - ss));
  }
  std::cout << "  n " << b.n << ", V " << b.v << (sizeof(T) == 4 ? " (float)" : " (double)")
            << ": max |S_cuda - S_seq| = " << worst << ", bound " << cu::indicators_agreement_bound(b.v) << "\n";
  CHECK(worst <= cu::indicators_agreement_bound(b.v));
}

}  // namespace

TEST_CASE("cuda indicators: A identical to seq, S within the stated bound", "[cuda][indicators]") {
  std::cout << "cuda SV indicators vs seq: seed " << seed << "\n";
  check_indicators_against_seq(make_indicator_batch<double>(7, 1, 60));
  check_indicators_against_seq(make_indicator_batch<double>(20, 100, 61));
  check_indicators_against_seq(make_indicator_batch<float>(20, 8192, 62));
  check_indicators_against_seq(make_indicator_batch<double>(9, 8193, 63));
  check_indicators_against_seq(make_indicator_batch<float>(12, 50000, 64));
  check_indicators_against_seq(make_indicator_batch<double>(3, 128256, 65));
}

TEST_CASE("cuda indicators: seq's errors as statuses, and as the exception of the checking overload", "[cuda][indicators]") {
  auto b = make_indicator_batch<double>(6, 300, 70);
  b.draft[1 * 300 + 17] = std::numeric_limits<double>::quiet_NaN();  // position 1: bad draft row
  b.companion[2 * 300 + 5] = -0.01;                                  // position 2: bad companion row
  b.tokens[3] = 300;                                                 // position 3: token out of range
  b.draft[4 * 300 + 9] += 0.01;                                      // position 4: draft sum off by 0.01
  for (std::size_t k = 0; k < 300; ++k)                              // position 5: P_d(t) = 0
    if (b.draft[5 * 300 + k] == 0.0) b.tokens[5] = static_cast<token_id>(k);
  REQUIRE(b.draft[5 * 300 + static_cast<std::size_t>(b.tokens[5])] == 0.0);
  check_indicators_against_seq(b);
  std::vector<double> s, a;
  std::vector<cu::indicator_status> status;
  gpu_indicators(b, s, a, status);
  CHECK(status[0] == cu::indicator_status::ok);
  CHECK(status[1] == cu::indicator_status::bad_draft_row);
  CHECK(status[2] == cu::indicator_status::bad_companion_row);
  CHECK(status[3] == cu::indicator_status::token_out_of_range);
  CHECK(status[4] == cu::indicator_status::bad_draft_row);
  CHECK(status[5] == cu::indicator_status::draft_probability_zero);
  CHECK(std::isnan(s[1]));
  const device_array<double> d(b.draft), c(b.companion);
  const device_array<token_id> t(b.tokens);
  device_array<double> ds(b.n), da(b.n);
  CHECK_THROWS_WITH(cu::compute_indicators(nullptr, d.crows(b.v), c.crows(b.v), t.cspan(), ds.span(), da.span()),
                    Catch::Contains("position 1") && Catch::Contains("draft row"));
  CHECK_THROWS_AS(cu::compute_indicators(nullptr, d.crows(b.v), c.crows(b.v), t.cspan().first(b.n - 1), ds.span(), da.span()),
                  specdec::error);
}
