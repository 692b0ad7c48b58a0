// bench/simd_kernels.cpp: the row kernels of the simd backend (softmax, log-sum-exp, categorical
// sampling, warping, sampling from logits, divergences, SV indicators, top-W selection) against seq,
// a naive baseline where one is meaningful, and the read bandwidth measured in the same run.
// Results: bench/README.md ("simd backend").
//
// Data: rows of V = 128256 (and 32000) fp32 logits l ~ N(0, 3^2), probability rows softmax(l).
// `dram` variants rotate over >= 128 MB of distinct rows (so every call reads its row from DRAM);
// `cache` variants reuse one row (a 513 KB row stays in the 1 MB L2). Bytes per call are the bytes
// the kernel must read (plus those it must write, for kernels that write a row: said in the name).
//
// Baselines
//   seq     the scalar reference of the same function (for "logits -> sample": warp_logits then
//           sample_categorical, which sorts the surviving probabilities for top-p)
//   naive   "logits -> sample" only: the full-vocabulary path of peers (llama.cpp without top-k,
//           transformers' TopK/TopP warpers): softmax, sort every (probability, id) pair, cut at k and
//           at p, renormalise, linear inverse CDF.
//   select  "k-th largest (k = 50)": the threshold filter of backend/simd/select.hpp against a
//           two-level radix select (an 11-bit histogram of the order-preserving bit patterns, then
//           nth_element in the chosen bucket) and std::nth_element on a copy (seq's keep_top_k).
//
// Build by hand:  g++ -std=c++20 -O3 -march=native -DSPECDEC_ENABLE_SIMD=1 -I include bench/simd_kernels.cpp
//                 -lbenchmark -lpthread
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns falsely inside xsimd's AVX-512 kernels (-W[maybe-]uninitialized on _mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bandwidth.hpp"
#include "simd_common.hpp"
#include "specdec/backend/simd/categorical.hpp"
#include "specdec/backend/simd/divergence.hpp"
#include "specdec/backend/simd/indicators.hpp"
#include "specdec/backend/simd/sample_logits.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/top_w.hpp"
#include "specdec/backend/simd/warp.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/estimate/indicators.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/top_w.hpp"

#if !SPECDEC_ENABLE_SIMD
#error "bench/simd_kernels.cpp needs the simd backend: link specdec::simd or define SPECDEC_ENABLE_SIMD=1"
#endif

namespace {

using specdec::token_id;
using specdec_bench::aligned_buffer;
using namespace specdec_bench::simd;
using specdec_bench::l3_bytes;

// ---- data: rows of logits and their softmax ------------------------------------------------------

struct row_bank {
  std::size_t V = 0, N = 0;
  aligned_buffer<float> logits, probs;  // [N][V]
  std::span<const float> logit_row(std::size_t i) const { return {logits.get() + (i % N) * V, V}; }
  std::span<const float> prob_row(std::size_t i) const { return {probs.get() + (i % N) * V, V}; }
};

const row_bank& get_bank(std::size_t V, bool dram) {
  static std::map<std::pair<std::size_t, bool>, std::unique_ptr<row_bank>> banks;
  auto& slot = banks[{V, dram}];
  if (slot) return *slot;
  slot = std::make_unique<row_bank>();
  row_bank& b = *slot;
  b.V = V;
  b.N = dram ? (4 * l3_bytes + V * sizeof(float) - 1) / (V * sizeof(float)) : 1;
  b.logits = aligned_buffer<float>(b.N * V);
  b.probs = aligned_buffer<float>(b.N * V);
  std::mt19937_64 rng(0x10617ULL + V);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::size_t i = 0; i < b.N * V; ++i) b.logits.get()[i] = normal(rng);
  for (std::size_t i = 0; i < b.N; ++i)
    specdec::backend::simd::softmax<xsimd::default_arch>(b.logit_row(i), std::span<float>(b.probs.get() + i * V, V));
  return b;
}

// ---- baselines -------------------------------------------------------------------------------------

// The full-vocabulary path of peers: softmax, sort all (probability, id), top-k, top-p, renormalise,
// linear inverse CDF.
token_id naive_sample_logits(std::span<const float> logits, const specdec::warp_params& w, double u,
                             std::vector<std::pair<float, token_id>>& scratch) {
  const std::size_t V = logits.size();
  const float m = *std::max_element(logits.begin(), logits.end());
  scratch.resize(V);
  double z = 0.0;
  for (std::size_t v = 0; v < V; ++v) {
    const float e = std::exp((logits[v] - m) / static_cast<float>(w.temperature));
    scratch[v] = {e, static_cast<token_id>(v)};
    z += e;
  }
  std::sort(scratch.begin(), scratch.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::size_t keep = w.top_k > 0 ? std::min<std::size_t>(V, static_cast<std::size_t>(w.top_k)) : V;
  double kept = 0.0;
  for (std::size_t i = 0; i < keep; ++i) kept += scratch[i].first / z;
  double c = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    c += scratch[i].first / z / kept;
    if (c >= w.top_p) {
      keep = i + 1;
      break;
    }
  }
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) total += scratch[i].first;
  double run = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    run += scratch[i].first / total;
    if (run > u) return scratch[i].second;
  }
  return scratch[keep - 1].second;
}

// A two-level radix select of the k-th largest float: an 11-bit histogram of the order-preserving bit
// patterns, the bucket holding the k-th, then nth_element inside it.
float radix_kth_largest(std::span<const float> row, std::size_t k, std::vector<float>& bucket) {
  const auto key = [](float x) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  };
  std::array<std::uint32_t, 2048> count{};
  for (const float x : row) ++count[key(x) >> 21];
  std::size_t above = 0, b = 2048;
  while (b-- > 0) {
    if (above + count[b] >= k) break;
    above += count[b];
  }
  bucket.clear();
  for (const float x : row)
    if ((key(x) >> 21) == b) bucket.push_back(x);
  const std::size_t rank = k - above - 1;
  std::nth_element(bucket.begin(), bucket.begin() + static_cast<std::ptrdiff_t>(rank), bucket.end(), std::greater<float>());
  return bucket[rank];
}

// ---- the benchmark driver ----------------------------------------------------------------------------

// Runs `call(i)` (i = iteration) and records the row; `bytes` per call.
template <class Call>
void run_kernel(benchmark::State& state, const std::string& kernel, const std::string& shape, const std::string& backend,
                double bytes, Call&& call) {
  std::size_t i = 0;
  const loop_timer t;
  for (auto _ : state) {
    call(i);
    benchmark::ClobberMemory();
    ++i;
  }
  record(state, kernel, shape, backend, t.cpu(), t.wall(), bytes * static_cast<double>(state.iterations()));
}

std::string shape_of(std::size_t V, bool dram) { return "V=" + std::to_string(V) + (dram ? " dram" : " cache"); }

const specdec::warp_params k50_p09{1.0, 50, 0.9, 0.0};
const specdec::warp_params p09{1.0, 0, 0.9, 0.0};

template <class Backend>
void register_backend(std::size_t V, bool dram) {
  const std::string backend = backend_name<Backend>();
  constexpr bool is_seq = std::is_same_v<Backend, seq_backend>;
  constexpr bool is_naive = std::is_same_v<Backend, naive_backend>;
  const double row = static_cast<double>(V * sizeof(float));
  const auto add = [&](const std::string& kernel, double bytes, auto body, std::string label = {}) {
    if (label.empty()) label = backend;
    const std::string name = "BM_" + kernel + "/" + label + "/" + shape_of(V, dram);
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
      if (!backend_runs<Backend>()) return state.SkipWithError("this CPU cannot run the architecture");
      const row_bank& bank = get_bank(V, dram);
      run_kernel(state, kernel, shape_of(V, dram), label, bytes, [&](std::size_t i) { body(bank, i); });
    })->Unit(benchmark::kMicrosecond);
  };
  if constexpr (is_naive) {
    add("logits -> sample (T 1, top-k 50, top-p 0.9)", row, [](const row_bank& b, std::size_t i) {
      thread_local std::vector<std::pair<float, token_id>> scratch;
      benchmark::DoNotOptimize(naive_sample_logits(b.logit_row(i), k50_p09, 0.37, scratch));
    });
    add("logits -> sample (T 1, top-p 0.9)", row, [](const row_bank& b, std::size_t i) {
      thread_local std::vector<std::pair<float, token_id>> scratch;
      benchmark::DoNotOptimize(naive_sample_logits(b.logit_row(i), p09, 0.37, scratch));
    });
    if (dram)
      add(
          "k-th largest (k 50)", row,
          [](const row_bank& b, std::size_t i) {
            thread_local std::vector<float> bucket;
            benchmark::DoNotOptimize(radix_kth_largest(b.logit_row(i), 50, bucket));
          },
          "radix select");
    return;
  } else {
    using Arch = typename std::conditional_t<is_seq, simd_backend<xsimd::default_arch>, Backend>::arch;
    add("logits -> sample (T 1, top-k 50, top-p 0.9)", row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq) {
        thread_local std::vector<float> probs;
        probs.resize(b.V);
        specdec::warp_logits(b.logit_row(i), std::span<float>(probs), k50_p09);
        benchmark::DoNotOptimize(specdec::sample_categorical(std::span<const float>(probs), 0.37));
      } else {
        benchmark::DoNotOptimize(specdec::backend::simd::sample_logits<Arch>(b.logit_row(i), k50_p09, 0.37));
      }
    });
    add("logits -> sample (T 1, top-p 0.9)", row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq) {
        thread_local std::vector<float> probs;
        probs.resize(b.V);
        specdec::warp_logits(b.logit_row(i), std::span<float>(probs), p09);
        benchmark::DoNotOptimize(specdec::sample_categorical(std::span<const float>(probs), 0.37));
      } else {
        benchmark::DoNotOptimize(specdec::backend::simd::sample_logits<Arch>(b.logit_row(i), p09, 0.37));
      }
    });
    if (!dram) return;  // the remaining kernels from DRAM only
    add("softmax T 0.7 (read + write)", 2 * row, [](const row_bank& b, std::size_t i) {
      thread_local std::vector<float> probs;
      probs.resize(b.V);
      if constexpr (is_seq)
        specdec::softmax(b.logit_row(i), std::span<float>(probs), 0.7);
      else
        specdec::backend::simd::softmax<Arch>(b.logit_row(i), std::span<float>(probs), 0.7);
    });
    add("log-sum-exp T 0.7", row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq)
        benchmark::DoNotOptimize(specdec::log_sum_exp(b.logit_row(i), 0.7));
      else
        benchmark::DoNotOptimize(specdec::backend::simd::log_sum_exp<Arch>(b.logit_row(i), 0.7));
    });
    add("warp_logits top-k 50 top-p 0.9 (read + write)", 2 * row, [](const row_bank& b, std::size_t i) {
      thread_local std::vector<float> probs;
      probs.resize(b.V);
      if constexpr (is_seq)
        specdec::warp_logits(b.logit_row(i), std::span<float>(probs), k50_p09);
      else
        specdec::backend::simd::warp_logits<Arch>(b.logit_row(i), std::span<float>(probs), k50_p09);
    });
    add("warp_logits top-p 0.9 (read + write)", 2 * row, [](const row_bank& b, std::size_t i) {
      thread_local std::vector<float> probs;
      probs.resize(b.V);
      if constexpr (is_seq)
        specdec::warp_logits(b.logit_row(i), std::span<float>(probs), p09);
      else
        specdec::backend::simd::warp_logits<Arch>(b.logit_row(i), std::span<float>(probs), p09);
    });
    add("categorical sample (probabilities)", row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq)
        benchmark::DoNotOptimize(specdec::sample_categorical(b.prob_row(i), 0.37));
      else
        benchmark::DoNotOptimize(specdec::backend::simd::sample_categorical<Arch>(b.prob_row(i), 0.37));
    });
    add("overlap sum min(p, q)", 2 * row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq)
        benchmark::DoNotOptimize(specdec::overlap(b.prob_row(i), b.prob_row(i + 1)));
      else
        benchmark::DoNotOptimize(specdec::backend::simd::overlap<Arch>(b.prob_row(i), b.prob_row(i + 1)));
    });
    add("KL(p || q)", 2 * row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq)
        benchmark::DoNotOptimize(specdec::kl_divergence(b.prob_row(i), b.prob_row(i + 1)));
      else
        benchmark::DoNotOptimize(specdec::backend::simd::kl_divergence<Arch>(b.prob_row(i), b.prob_row(i + 1)));
    });
    add("entropy H(p)", row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq)
        benchmark::DoNotOptimize(specdec::entropy(b.prob_row(i)));
      else
        benchmark::DoNotOptimize(specdec::backend::simd::entropy<Arch>(b.prob_row(i)));
    });
    add("cross-entropy H(p, q)", 2 * row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq)
        benchmark::DoNotOptimize(specdec::cross_entropy(b.prob_row(i), b.prob_row(i + 1)));
      else
        benchmark::DoNotOptimize(specdec::backend::simd::cross_entropy<Arch>(b.prob_row(i), b.prob_row(i + 1)));
    });
    add("SV indicators S, A (one row pair)", 2 * row, [](const row_bank& b, std::size_t i) {
      const token_id t[1] = {static_cast<token_id>(i % b.V)};
      double s[1], a[1];
      const auto d = b.prob_row(i), c = b.prob_row(i + 1);
      if constexpr (is_seq)
        specdec::estimate::compute_indicators(specdec::exec::seq, specdec::row_batch<const float>(d, b.V),
                                              specdec::row_batch<const float>(c, b.V), t, s, a);
      else
        specdec::backend::simd::compute_indicators<Arch>(d, c, std::span<const token_id>(t), b.V, std::span<double>(s),
                                                         std::span<double>(a));
      benchmark::DoNotOptimize(s[0]);
    });
    add("top-W (W 8) of a logit row", row, [](const row_bank& b, std::size_t i) {
      thread_local std::vector<std::size_t> out;
      if constexpr (is_seq)
        specdec::top_w_indices(b.logit_row(i), 8, out);
      else
        specdec::backend::simd::top_w_indices<Arch>(b.logit_row(i), 8, out);
      benchmark::DoNotOptimize(out.data());
    });
    add("k-th largest (k 50)", row, [](const row_bank& b, std::size_t i) {
      if constexpr (is_seq) {
        thread_local std::vector<float> copy;
        const auto r = b.logit_row(i);
        copy.assign(r.begin(), r.end());
        std::nth_element(copy.begin(), copy.begin() + 49, copy.end(), std::greater<float>());
        benchmark::DoNotOptimize(copy[49]);
      } else {
        benchmark::DoNotOptimize(specdec::backend::simd::kth_largest<Arch>(b.logit_row(i), 50));
      }
    });
  }
}

void register_all() {
  for (const std::size_t V : {std::size_t{128256}, std::size_t{32000}})
    for (const bool dram : {true, false}) {
      if (V == 32000 && !dram) continue;
      for_each_backend([&](auto backend) { register_backend<decltype(backend)>(V, dram); }, true);
    }
}

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, [] { register_all(); });
}
