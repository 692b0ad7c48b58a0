// GPU benchmarks of the CUDA simulators, top-W and SV indicators
// (backend/cuda/{simulate,top_w,indicators}.cuh), each against the seq backend on the same inputs,
// measured in the same run:
//  - BM_cuda_sd_chain/alpha%/gamma, BM_cuda_sd_chain_positions/gamma, BM_cuda_sprinter_chain/fp%/r:
//    the Monte-Carlo chains, 2^25 draws per call; `draft_tokens_per_s` (target: >= 1e9 on an H100)
//    and `speedup_over_seq` (against one core running the CPU simulator on the same stream);
//  - BM_cuda_sd_token_process/V: SD on tokens with sampling tables (host table build included);
//  - BM_cuda_top_w/mode/rows/n/W: the selection step of beam drafts over rows of n = W x V scores;
//  - BM_cuda_indicators/n/V: SV's S and A over n float row pairs.
// Time: CUDA events around each whole call (uploads, kernels, downloads, host work on the results),
// Google Benchmark manual time, which the rate counters divide by. Bandwidth counters
// (`bytes_per_second`, `fraction_of_bw`) count the bytes a kernel must read once, against the
// read-bandwidth probe of bench/cuda_common.cuh. Once per benchmark (not at every repetition), the
// output is checked against seq on a small case (SkipWithError on a mismatch) and seq is timed.
//   bench_cuda_simulate_top_w_indicators            (15 repetitions, aggregates only: quote the median)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cuda_common.cuh"
#include "specdec/acceptance/strict.hpp"
#include "specdec/backend/cuda/indicators.cuh"
#include "specdec/backend/cuda/simulate.cuh"
#include "specdec/backend/cuda/top_w.cuh"
#include "specdec/estimate/indicators.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/top_w.hpp"
#include "specdec/simulate/simulate.hpp"

namespace {

namespace sim = specdec::simulate;
namespace cuda = specdec::backend::cuda;
using specdec::test::device_array;
using benchmark::Counter;
using specdec_bench::time_with_events;

double g_bandwidth = 0.0;                                    // bytes/s, measured once at start-up
constexpr std::uint64_t gpu_draws = std::uint64_t{1} << 25;  // draws per GPU call
constexpr std::uint64_t cpu_draws = std::uint64_t{1} << 19;  // draws of the seq reference

//! Wall seconds of one call of `f` on the host.
template <class F>
double host_seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

//! What a benchmark computes once, not at each of Google Benchmark's calls (it calls a benchmark
//! function to size the iteration count and once per repetition): whether the GPU agreed with seq
//! on the check case, and seq's throughput (units per second) on the reference case.
struct seq_reference {
  bool agrees = false;
  double seq_rate = 0.0;
};
//! `family` and the first `args` arguments of the benchmark name the case.
template <class F>
const seq_reference& once(const char* family, const benchmark::State& state, int args, F&& compute) {
  static std::map<std::string, seq_reference> cache;
  std::string key = family;
  for (int k = 0; k < args; ++k) {
    key += '/';
    key += std::to_string(state.range(k));
  }
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, compute()).first;
  return it->second;
}

//! Whether two chain results are identical (histogram and trials).
bool same(const sim::count_tally& a, const sim::count_tally& b) {
  if (a.histogram().size() != b.histogram().size() || a.count() != b.count()) return false;
  for (std::size_t v = 0; v < a.histogram().size(); ++v)
    if (a.histogram()[v] != b.histogram()[v]) return false;
  return true;
}

//! The common part of the simulator benchmarks: `run(policy_is_gpu, options)` returns an
//! sd::iteration_tally-like result (histogram `accepted`, `draft_tokens`); a GPU call simulates
//! `gpu_call_draws` draws, the seq reference `seq_draws`, the check case `check_draws`.
template <class Run>
void bm_simulator(benchmark::State& state, const char* family, int args, std::uint64_t gpu_call_draws, std::uint64_t seq_draws,
                  std::uint64_t check_draws, Run&& run) {
  const seq_reference& ref = once(family, state, args, [&] {
    const sim::run_options small{2024, 1, 0, check_draws};
    const auto cpu_small = run(false, small), gpu_small = run(true, small);
    std::uint64_t cpu_tokens = 0;
    const double cpu_s = host_seconds([&] { cpu_tokens = run(false, {2024, 7, 0, seq_draws}).draft_tokens; });
    return seq_reference{same(cpu_small.accepted, gpu_small.accepted) && cpu_small.draft_tokens == gpu_small.draft_tokens,
                         static_cast<double>(cpu_tokens) / cpu_s};
  });
  if (!ref.agrees) {
    state.SkipWithError("the GPU's counts differ from the CPU's");
    return;
  }
  std::uint32_t stream = 100;
  double tokens = 0.0;
  time_with_events(state, nullptr, [&] {
    tokens += static_cast<double>(run(true, {2024, stream++, 0, gpu_call_draws}).draft_tokens);
  });
  state.counters["draft_tokens_per_s"] = Counter(tokens, Counter::kIsRate);
  state.counters["seq_draft_tokens_per_s"] = ref.seq_rate;
  state.counters["speedup_over_seq"] = Counter(tokens / ref.seq_rate, Counter::kIsRate);
  state.counters["draws_per_call"] = static_cast<double>(gpu_call_draws);
}

void BM_cuda_sd_chain(benchmark::State& state) {
  const double alpha = static_cast<double>(state.range(0)) / 100.0;
  const auto gamma = static_cast<std::size_t>(state.range(1));
  bm_simulator(state, "sd_chain", 2, gpu_draws, cpu_draws, 100000, [&](bool gpu, const sim::run_options& o) {
    return gpu ? sim::sd::chain(specdec::exec::cuda, alpha, gamma, o) : sim::sd::chain(alpha, gamma, o);
  });
}
BENCHMARK(BM_cuda_sd_chain)->ArgsProduct({{60, 80, 95}, {4, 8, 16}})->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_cuda_sd_chain_positions(benchmark::State& state) {
  std::vector<double> a(static_cast<std::size_t>(state.range(0)));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.95 - 0.03 * static_cast<double>(i);
  bm_simulator(state, "sd_chain_positions", 1, gpu_draws, cpu_draws, 100000, [&](bool gpu, const sim::run_options& o) {
    return gpu ? sim::sd::chain(specdec::exec::cuda, std::span<const double>(a), o)
               : sim::sd::chain(std::span<const double>(a), o);
  });
}
BENCHMARK(BM_cuda_sd_chain_positions)->Arg(8)->Arg(16)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_cuda_sprinter_chain(benchmark::State& state) {
  const double fp = static_cast<double>(state.range(0)) / 100.0;
  const int r = static_cast<int>(state.range(1));
  bm_simulator(state, "sprinter_chain", 2, gpu_draws, cpu_draws, 100000, [&](bool gpu, const sim::run_options& o) {
    return gpu ? sim::sprinter::verifier_chain(specdec::exec::cuda, 0.9, fp, r, o) : sim::sprinter::verifier_chain(0.9, fp, r, o);
  });
}
BENCHMARK(BM_cuda_sprinter_chain)->ArgsProduct({{10, 50}, {5, 20}})->UseManualTime()->Unit(benchmark::kMillisecond);

//! A context-free pair of V-token rows (Exp(1) weights, normalised).
struct row_pair {
  std::vector<double> p, q;
};
row_pair make_rows(std::size_t v) {
  specdec::random::philox_stream s({77, static_cast<std::uint32_t>(v), 0, 0, specdec::random::purpose::user});
  row_pair r{std::vector<double>(v), std::vector<double>(v)};
  double sp = 0.0, sq = 0.0;
  for (std::size_t i = 0; i < v; ++i) {
    sp += (r.p[i] = s.exponential());
    sq += (r.q[i] = r.p[i] * (0.5 + s.uniform()));
  }
  for (std::size_t i = 0; i < v; ++i) {
    r.p[i] /= sp;
    r.q[i] /= sq;
  }
  return r;
}

void BM_cuda_sd_token_process(benchmark::State& state) {
  const row_pair rows = make_rows(static_cast<std::size_t>(state.range(0)));
  const std::span<const double> p(rows.p), q(rows.q);
  bm_simulator(state, "sd_token_process", 1, gpu_draws / 8, cpu_draws / 256, 2000, [&](bool gpu, const sim::run_options& o) {
    return gpu ? sim::sd::token_process(specdec::exec::cuda, specdec::strict, p, q, 4, o).chain
               : sim::sd::token_process(specdec::strict, p, q, 4, o).chain;
  });
}
BENCHMARK(BM_cuda_sd_token_process)->Arg(64)->Arg(32000)->UseManualTime()->Unit(benchmark::kMillisecond);

//! Beam-step scores: log of Exp weights, 30% -inf (generated once per size).
const std::vector<double>& beam_scores(std::size_t count) {
  static std::map<std::size_t, std::vector<double>> cache;
  auto it = cache.find(count);
  if (it != cache.end()) return it->second;
  specdec::random::philox_stream s({78, static_cast<std::uint32_t>(count), 0, 0, specdec::random::purpose::user});
  std::vector<double> x(count);
  for (double& v : x) v = s.uniform() < 0.3 ? -std::numeric_limits<double>::infinity() : std::log(s.exponential());
  return cache.emplace(count, std::move(x)).first->second;
}

void BM_cuda_top_w(benchmark::State& state) {
  const auto mode = state.range(0) == 0 ? specdec::beam_mode::search : specdec::beam_mode::sample_without_replacement;
  const auto rows = static_cast<std::size_t>(state.range(1)), n = static_cast<std::size_t>(state.range(2));
  const auto w = static_cast<std::size_t>(state.range(3));
  const std::vector<double>& host = beam_scores(rows * n);
  std::vector<specdec::random::stream_address> addresses;
  for (std::size_t r = 0; r < rows; ++r) {
    const specdec::random::request_stream request{5, static_cast<std::uint32_t>(r), 0};
    addresses.push_back(request.at(0, specdec::random::purpose::beam));
  }
  const device_array<double> scores(host);
  const device_array<specdec::random::stream_address> streams(addresses);
  device_array<std::int64_t> out(rows * w);
  const device_array<std::byte> workspace(cuda::top_w_workspace_bytes(mode, rows, n));
  const auto call = [&] { cuda::top_w(nullptr, mode, scores.crows(n), w, streams.cspan(), out.span(), workspace.span()); };
  const seq_reference& ref = once("top_w", state, 4, [&] {
    std::vector<std::size_t> expected;
    const std::span<const double> row0 = std::span<const double>(host).first(n);
    const double cpu_s = host_seconds([&] { specdec::top_w_indices(row0, w, expected); });
    bool agrees = true;
    if (mode ==
        specdec::beam_mode::search) {  // row 0 against seq (the Gumbel keys: tests/backend/cuda_simulate_top_w_indicators.cu)
      call();
      const auto got = out.download();
      for (std::size_t k = 0; k < expected.size(); ++k) agrees = agrees && got[k] == static_cast<std::int64_t>(expected[k]);
    }
    return seq_reference{agrees, 1.0 / cpu_s};  // rows per second
  });
  if (!ref.agrees) {
    state.SkipWithError("the GPU's selection differs from top_w_indices");
    return;
  }
  time_with_events(state, nullptr, call);
  const double bytes = static_cast<double>(rows * n * sizeof(double));
  state.counters["bytes_per_second"] = Counter(bytes, Counter::kIsIterationInvariantRate);
  state.counters["fraction_of_bw"] = Counter(bytes / g_bandwidth, Counter::kIsIterationInvariantRate);
  const double seq_seconds = static_cast<double>(rows) / ref.seq_rate;  // seq's time for the same rows
  state.counters["speedup_over_seq"] = Counter(seq_seconds, Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_cuda_top_w)
    ->ArgsProduct({{0, 1}, {1, 64}, {8 * 32000, 8 * 128256}, {8}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

//! n float row pairs of V entries (normalised Exp weights; the companion a perturbed copy) and a
//! token drawn from each draft row (generated once per shape).
struct indicator_rows {
  std::vector<float> draft, companion;
  std::vector<specdec::token_id> tokens;
};
const indicator_rows& indicator_data(std::size_t n, std::size_t v) {
  static std::map<std::pair<std::size_t, std::size_t>, indicator_rows> cache;
  auto it = cache.find({n, v});
  if (it != cache.end()) return it->second;
  specdec::random::philox_stream s({79, static_cast<std::uint32_t>(n), 0, 0, specdec::random::purpose::user});
  indicator_rows r{std::vector<float>(n * v), std::vector<float>(n * v), std::vector<specdec::token_id>(n)};
  std::vector<double> x(v), y(v);
  for (std::size_t i = 0; i < n; ++i) {
    double sd = 0.0, sc = 0.0;
    for (std::size_t k = 0; k < v; ++k) {
      sd += (x[k] = s.exponential());
      sc += (y[k] = x[k] * (0.5 + s.uniform()));
    }
    for (std::size_t k = 0; k < v; ++k) {
      r.draft[i * v + k] = static_cast<float>(x[k] / sd);
      r.companion[i * v + k] = static_cast<float>(y[k] / sc);
    }
    r.tokens[i] = specdec::sample_categorical(std::span<const float>(r.draft).subspan(i * v, v), s.uniform()).token;
  }
  return cache.emplace(std::make_pair(n, v), std::move(r)).first->second;
}

void BM_cuda_indicators(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), v = static_cast<std::size_t>(state.range(1));
  const indicator_rows& h = indicator_data(n, v);
  const device_array<float> dd(h.draft), dc(h.companion);
  const device_array<specdec::token_id> dt(h.tokens);
  device_array<double> ds(n), da(n);
  device_array<cuda::indicator_status> st(n);
  const device_array<std::byte> workspace(cuda::indicators_workspace_bytes(n, v));
  const auto call = [&] {
    cuda::compute_indicators(nullptr, dd.crows(v), dc.crows(v), dt.cspan(), ds.span(), da.span(), st.span(), workspace.span());
  };
  const seq_reference& ref = once("indicators", state, 2, [&] {
    std::vector<double> hs(n), ha(n);
    const double cpu_s = host_seconds([&] {
      specdec::estimate::compute_indicators(
          specdec::exec::seq, specdec::row_batch<const float>(h.draft, v), specdec::row_batch<const float>(h.companion, v),
          std::span<const specdec::token_id>(h.tokens), std::span<double>(hs), std::span<double>(ha));
    });
    call();
    const auto gs = ds.download(), ga = da.download();
    bool agrees = true;
    for (std::size_t i = 0; i < n; ++i)
      agrees = agrees && ga[i] == ha[i] && std::abs(gs[i] - hs[i]) <= cuda::indicators_agreement_bound(v);
    return seq_reference{agrees, 1.0 / cpu_s};  // calls per second
  });
  if (!ref.agrees) {
    state.SkipWithError("the GPU's indicators differ from seq's");
    return;
  }
  time_with_events(state, nullptr, call);
  const double bytes = static_cast<double>(2 * n * v * sizeof(float));
  state.counters["bytes_per_second"] = Counter(bytes, Counter::kIsIterationInvariantRate);
  state.counters["fraction_of_bw"] = Counter(bytes / g_bandwidth, Counter::kIsIterationInvariantRate);
  state.counters["speedup_over_seq"] = Counter(1.0 / ref.seq_rate, Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_cuda_indicators)->ArgsProduct({{8, 64, 512}, {32000, 128256}})->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  return specdec_bench::gpu_benchmark_main(argc, argv, "bench_cuda_simulate_top_w_indicators", g_bandwidth);
}
