// GPU softmax, log-sum-exp, warp and sampling kernels (backend/cuda/{softmax,filter,sample}.cuh),
// fp32 rows of V = 128256 in device memory (HBM). Time: CUDA events around the whole call (the
// parameter upload and the kernels), Google Benchmark manual time; by default 15 repetitions and
// only their aggregates (the median is the figure to report):
//   bench_cuda_sampling [--benchmark_repetitions=N] [--benchmark_filter=...]
// Benchmarks (names parsed by bench/torch_flashinfer_baselines.py, which times PyTorch and
// FlashInfer on the same shapes and inputs):
//   bm_softmax/<B>, bm_log_sum_exp/<B>, bm_warp_logits/<B>, bm_sample_categorical/<B>: B = 1, 32, 64
//   bm_sample_probs/<filter>/<B>   sample_filtered from probabilities, B = 1, 32
//   bm_sample_logits/<filter>/<B>  from logits at T = 1, B = 1, 32: there is no fused "sample from
//                                  logits" entry point, so this is warp_logits (softmax, filter,
//                                  renormalisation into a probability buffer) then sample_categorical
//   <filter>: top_k (k = 50), top_p (p = 0.95), min_p (min_p = 0.1)
// Counters: `required_bytes` per call, the bytes the operation cannot avoid moving, `bytes_per_second`
// of those bytes and `fraction_of_bw` against the read-bandwidth probe of the same run
// (bench/cuda_common.cuh):
//   softmax            3 B V 4 (the logits read for the statistics and again to normalise, the
//                      probabilities written: a softmax that does not keep the row on chip)
//   log_sum_exp        B V 4 (one read)
//   warp_logits        2 B V 4 (logits read, probabilities written; the filters re-read the output)
//   sample_categorical B V 4 (one read of the probabilities)
//   sample_probs       B V 4 (one read; the threshold passes re-read the rows, mostly from L2)
//   sample_logits      B V 4 (one read of the logits; ours also writes and re-reads probabilities)
// Data: logits ~ N(0, 3^2) (Philox), probabilities = their softmax. Several copies of the inputs are
// cycled so that no call finds its rows in L2 (50 MiB on an H100).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "cuda_common.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/sample.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/random/stream.hpp"

namespace {

namespace cu = specdec::backend::cuda;
using specdec::row_status;
using specdec::token_id;
using specdec::test::device_array;

constexpr std::size_t vocab = 128256;
double g_bandwidth = 0.0;  // bytes/s, measured once at start-up

//! B rows of logits ~ N(0, 3^2).
std::vector<float> gaussian_logits(std::size_t B) {
  specdec::random::philox_stream s(
      specdec::random::stream_address{0xBE4D, static_cast<std::uint32_t>(B), 0, 0, specdec::random::purpose::user});
  std::vector<float> x(B * vocab);
  for (float& v : x) {
    double u = s.uniform();
    while (u == 0.0) u = s.uniform();
    v = static_cast<float>(3.0 * std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * s.uniform()));
  }
  return x;
}

//! Device copies of a batch of B rows: logits and their softmax, enough copies that one call's rows
//! have left L2 by their next use.
struct device_rows {
  std::size_t B;
  std::vector<std::unique_ptr<device_array<float>>> logits, probs;  // (copies)
  explicit device_rows(std::size_t batch) : B(batch) {
    const auto host = gaussian_logits(B);
    const std::size_t copies = std::max<std::size_t>(2, (std::size_t{192} << 20) / (B * vocab * sizeof(float)) + 1);
    device_array<row_status> status(B);
    for (std::size_t c = 0; c < copies; ++c) {
      logits.push_back(std::make_unique<device_array<float>>(host));
      probs.push_back(std::make_unique<device_array<float>>(B * vocab));
      cu::softmax(nullptr, logits.back()->crows(vocab), probs.back()->rows(vocab), status.span());
    }
    specdec_bench::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
};

const device_rows& rows_of(std::size_t B) {
  static std::vector<std::unique_ptr<device_rows>> cache;
  for (const auto& r : cache)
    if (r->B == B) return *r;
  cache.push_back(std::make_unique<device_rows>(B));
  return *cache.back();
}

std::vector<specdec::random::request_stream> streams_for(std::size_t B) {
  std::vector<specdec::random::request_stream> s(B);
  for (std::size_t b = 0; b < B; ++b) s[b] = {20261122, static_cast<std::uint32_t>(b), 0};
  return s;
}

using row_copies = std::vector<std::unique_ptr<device_array<float>>>;

//! Times `call(input, workspace)` on the copies of `inputs` in turn (as rows of `vocab`), with a device workspace of
//! `workspace_bytes`, and sets the counters for `passes` * B * V floats of required traffic.
template <class Call>
void time_rows(benchmark::State& state, const row_copies& inputs, std::size_t workspace_bytes, double passes, Call&& call) {
  device_array<std::byte> workspace(workspace_bytes);
  std::size_t next = 0;
  specdec_bench::time_with_events(state, nullptr, [&] { call(inputs[next++ % inputs.size()]->crows(vocab), workspace.span()); });
  const double bytes = passes * static_cast<double>(inputs[0]->size() * sizeof(float));
  state.counters["required_bytes"] = bytes;
  state.counters["bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fraction_of_bw"] = benchmark::Counter(bytes / g_bandwidth, benchmark::Counter::kIsIterationInvariantRate);
}

//! Flags a run whose tokens left the vocabulary (the tokens are seq's: tests/backend/cuda_sampling.cu).
void check_tokens(benchmark::State& state, const device_array<token_id>& tokens) {
  for (const token_id t : tokens.download())
    if (!specdec::in_vocabulary(t, vocab)) state.SkipWithError("token out of range");
}

void bm_softmax(benchmark::State& state) {
  const auto B = static_cast<std::size_t>(state.range(0));
  device_array<float> out(B * vocab);
  device_array<row_status> status(B);
  time_rows(state, rows_of(B).logits, cu::softmax_workspace_bytes<float>(B, vocab), 3.0,
            [&](auto in, auto ws) { cu::softmax(nullptr, in, out.rows(vocab), status.span(), {}, ws); });
}

void bm_log_sum_exp(benchmark::State& state) {
  const auto B = static_cast<std::size_t>(state.range(0));
  device_array<double> lse(B);
  device_array<row_status> status(B);
  time_rows(state, rows_of(B).logits, cu::softmax_workspace_bytes<float>(B, vocab), 1.0,
            [&](auto in, auto ws) { cu::log_sum_exp(nullptr, in, lse.span(), status.span(), {}, ws); });
}

//! Temperature 0.8, top-k 50, top-p 0.9 on every row.
void bm_warp_logits(benchmark::State& state) {
  const auto B = static_cast<std::size_t>(state.range(0));
  device_array<float> out(B * vocab);
  device_array<row_status> status(B);
  const std::vector<specdec::warp_params> params(B, specdec::warp_params{0.8, 50, 0.9, 0.0});
  time_rows(state, rows_of(B).logits, cu::warp_logits_workspace_bytes<float>(B, vocab), 2.0, [&](auto in, auto ws) {
    cu::warp_logits(nullptr, in, out.rows(vocab), std::span<const specdec::warp_params>(params), status.span(), ws);
  });
}

void bm_sample_categorical(benchmark::State& state) {
  const auto B = static_cast<std::size_t>(state.range(0));
  device_array<token_id> tokens(B);
  device_array<row_status> status(B);
  const auto streams = streams_for(B);
  time_rows(state, rows_of(B).probs, cu::sample_categorical_workspace_bytes(B, vocab), 1.0, [&](auto in, auto ws) {
    cu::sample_categorical(nullptr, in, std::span<const specdec::random::request_stream>(streams), tokens.span(), status.span(),
                           ws);
  });
  check_tokens(state, tokens);
}

//! The filters of the sampling benchmarks (temperature 1): top-k 50, top-p 0.95, min-p 0.1.
constexpr specdec::warp_params top_k_50{1.0, 50, 1.0, 0.0}, top_p_95{1.0, 0, 0.95, 0.0}, min_p_10{1.0, 0, 1.0, 0.1};

//! Sampling from probabilities after `filter` on every row (`sample_filtered`).
void bm_sample_probs(benchmark::State& state, specdec::warp_params filter) {
  const auto B = static_cast<std::size_t>(state.range(0));
  device_array<token_id> tokens(B);
  device_array<row_status> status(B);
  const auto streams = streams_for(B);
  const std::vector<specdec::warp_params> params(B, filter);
  time_rows(state, rows_of(B).probs, cu::sample_filtered_workspace_bytes(B, vocab), 1.0, [&](auto in, auto ws) {
    cu::sample_filtered(nullptr, in, std::span<const specdec::warp_params>(params),
                        std::span<const specdec::random::request_stream>(streams), tokens.span(), status.span(), ws);
  });
  check_tokens(state, tokens);
}

//! Sampling from logits after `filter` on every row: `warp_logits` into a probability buffer, then
//! `sample_categorical` on it (each with its own workspace).
void bm_sample_logits(benchmark::State& state, specdec::warp_params filter) {
  const auto B = static_cast<std::size_t>(state.range(0));
  device_array<float> probs(B * vocab);
  device_array<token_id> tokens(B);
  device_array<row_status> warp_status(B), status(B);
  device_array<std::byte> sample_ws(cu::sample_categorical_workspace_bytes(B, vocab));
  const auto streams = streams_for(B);
  const std::vector<specdec::warp_params> params(B, filter);
  time_rows(state, rows_of(B).logits, cu::warp_logits_workspace_bytes<float>(B, vocab), 1.0, [&](auto in, auto ws) {
    cu::warp_logits(nullptr, in, probs.rows(vocab), std::span<const specdec::warp_params>(params), warp_status.span(), ws);
    cu::sample_categorical(nullptr, probs.crows(vocab), std::span<const specdec::random::request_stream>(streams), tokens.span(),
                           status.span(), sample_ws.span());
  });
  check_tokens(state, tokens);
}

void batches(benchmark::internal::Benchmark* b) { b->Arg(1)->Arg(32)->Arg(64)->UseManualTime()->Unit(benchmark::kMicrosecond); }
//! The batches of the filtered sampling benchmarks.
void filter_batches(benchmark::internal::Benchmark* b) { b->Arg(1)->Arg(32)->UseManualTime()->Unit(benchmark::kMicrosecond); }
BENCHMARK(bm_softmax)->Apply(batches);
BENCHMARK(bm_log_sum_exp)->Apply(batches);
BENCHMARK(bm_warp_logits)->Apply(batches);
BENCHMARK(bm_sample_categorical)->Apply(batches);
BENCHMARK_CAPTURE(bm_sample_probs, top_k, top_k_50)->Apply(filter_batches);
BENCHMARK_CAPTURE(bm_sample_probs, top_p, top_p_95)->Apply(filter_batches);
BENCHMARK_CAPTURE(bm_sample_probs, min_p, min_p_10)->Apply(filter_batches);
BENCHMARK_CAPTURE(bm_sample_logits, top_k, top_k_50)->Apply(filter_batches);
BENCHMARK_CAPTURE(bm_sample_logits, top_p, top_p_95)->Apply(filter_batches);
BENCHMARK_CAPTURE(bm_sample_logits, min_p, min_p_10)->Apply(filter_batches);

}  // namespace

int main(int argc, char** argv) { return specdec_bench::gpu_benchmark_main(argc, argv, "bench_cuda_sampling", g_bandwidth); }
