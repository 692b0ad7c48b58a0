// GPU chain verification (backend/cuda/verify.cuh) from probabilities, fp32, rows in device memory
// (HBM): every rule at B = 1, 16, 64, gamma = 4, 8, V = 32000, 128256 (the shapes of
// bench/torch_flashinfer_baselines.py). Names: bm_verify/<rule>/<B>/<gamma>/<V>. Time: CUDA events
// around the whole call (descriptor upload + kernels), Google Benchmark manual time; report the
// median of repetitions:
//   bench_cuda_verify            (15 repetitions, aggregates only, by default)
// Counters: `required_bytes` per call (rejection rules: one residual row pair per request, or the
// bonus row; greedy and sample-and-match: every target row up to n_b, which the GPU reads at once),
// `bytes_per_second` of those bytes, and `fraction_of_bw` against the read-bandwidth probe of the
// same run. Several copies of the batch are cycled so that no call finds its rows in L2.
// Data: rows of normalised Exp(1) weights, drafts sampled from the draft rows. The batch of a shape
// (host rows and device copies) is made once and kept for the other rules; the oldest shapes are
// dropped when the cache would pass `cache_budget` bytes on the host or on the device.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "cuda_common.cuh"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace {

using specdec::token_id;
using specdec::test::device_array;

double g_bandwidth = 0.0;  // bytes/s, measured once at start-up

//! A benchmark shape: B requests with gamma drafts each over a vocabulary of V.
struct shape {
  std::size_t B, gamma, V;
  bool operator==(const shape&) const = default;
  //! Bytes of the draft and target rows of one batch (fp32).
  std::size_t row_bytes() const { return B * (2 * gamma + 1) * V * sizeof(float); }
};

//! A probability row of V Exp(1) weights, normalised.
std::vector<float> random_row(specdec::random::philox_stream& s, std::size_t V) {
  std::vector<double> w(V);
  double z = 0.0;
  for (double& x : w) z += (x = s.exponential());
  std::vector<float> row(V);
  for (std::size_t v = 0; v < V; ++v) row[v] = static_cast<float>(w[v] / z);
  return row;
}

//! One batch of B requests with gamma drafts each, on the host.
struct host_batch {
  shape dims;
  std::vector<std::int32_t> num_drafts;
  std::vector<token_id> drafts;
  std::vector<float> draft_rows, target_rows;
  std::vector<specdec::random::request_stream> streams;
  specdec::chain_batch<float> view() const {
    return {specdec::ragged_layout::packed(num_drafts), dims.V, drafts, draft_rows, target_rows};
  }
};

host_batch make_host_batch(shape d) {
  host_batch h{d, {}, {}, {}, {}, {}};
  h.draft_rows.reserve(d.B * d.gamma * d.V);
  h.target_rows.reserve(d.B * (d.gamma + 1) * d.V);
  for (std::size_t b = 0; b < d.B; ++b) {
    // One Philox stream per request: (2 gamma + 1) V uniforms stay well inside a stream's 2^25.
    specdec::random::philox_stream s(specdec::random::stream_address{
        (std::uint64_t{0xBE4C} << 32) | d.B, static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(d.gamma),
        static_cast<std::uint32_t>(d.V), specdec::random::purpose::user});
    h.num_drafts.push_back(static_cast<std::int32_t>(d.gamma));
    h.streams.push_back({20261122, static_cast<std::uint32_t>(b), 0});
    for (std::size_t i = 0; i < d.gamma; ++i) {
      const auto q = random_row(s, d.V);
      h.drafts.push_back(specdec::sample_categorical(std::span<const float>(q), s.uniform()).token);
      h.draft_rows.insert(h.draft_rows.end(), q.begin(), q.end());
    }
    for (std::size_t i = 0; i <= d.gamma; ++i) {
      const auto p = random_row(s, d.V);
      h.target_rows.insert(h.target_rows.end(), p.begin(), p.end());
    }
  }
  return h;
}

//! Enough device copies of a batch of `bytes` that the rows of one call are out of L2 (50 MiB on an
//! H100) by their next use.
std::size_t copies_for(std::size_t bytes) { return std::max<std::size_t>(2, (std::size_t{192} << 20) / bytes + 1); }

//! A shape's host batch, its device copies, the outputs.
struct device_case {
  using copy = specdec::test::device_chain_batch<float>;
  host_batch host;  // the copies' layouts point into host.num_drafts: declared first, destroyed last
  std::vector<std::unique_ptr<copy>> copies;
  device_array<token_id> tokens;
  device_array<std::int32_t> accepted;
  device_array<specdec::verify_status> status;

  explicit device_case(shape d) : host(make_host_batch(d)), tokens(d.B * (d.gamma + 1)), accepted(d.B), status(d.B) {
    for (std::size_t c = 0, n = copies_for(d.row_bytes()); c < n; ++c) copies.push_back(std::make_unique<copy>(host.view()));
  }
  specdec::chain_outputs outputs() const { return {tokens.span(), accepted.span(), status.span()}; }
};

//! Host and device bytes the cache may hold each (an H100 has 80 GB; the 12 shapes need about
//! 1.4 GB of host rows and 4 GB of device copies, so nothing is dropped there).
constexpr std::size_t cache_budget = std::size_t{16} << 30;

//! The case of shape `d`, made on first use; drops the oldest cases first when keeping them all
//! would pass `cache_budget` on the host or the device.
const device_case& case_of(shape d) {
  static std::vector<std::unique_ptr<device_case>> cache;  // oldest first
  for (const auto& c : cache)
    if (c->host.dims == d) return *c;
  const auto host_bytes = [](shape s) { return s.row_bytes(); };
  const auto device_bytes = [](shape s) { return s.row_bytes() * copies_for(s.row_bytes()); };
  const auto over = [&] {
    std::size_t h = host_bytes(d), g = device_bytes(d);
    for (const auto& c : cache) h += host_bytes(c->host.dims), g += device_bytes(c->host.dims);
    return h > cache_budget || g > cache_budget;
  };
  while (!cache.empty() && over()) cache.erase(cache.begin());
  cache.push_back(std::make_unique<device_case>(d));
  return *cache.back();
}

//! The bytes a verification must read: rows read whole by this rule's algorithm (the scalars of the
//! accept tests are negligible).
template <class Rule>
double required_bytes(const Rule& rule, const host_batch& h) {
  const shape d = h.dims;
  if constexpr (Rule::family != specdec::rule_family::rejection) {
    return static_cast<double>(d.B * (d.gamma + 1) * d.V * sizeof(float));
  } else {
    std::vector<token_id> tokens(d.B * (d.gamma + 1));
    std::vector<std::int32_t> accepted(d.B);
    std::vector<specdec::verify_status> status(d.B);
    specdec::verify(specdec::exec::seq, rule, h.view(), h.streams, {tokens, accepted, status});
    double rows = 0.0;
    for (const auto a : accepted) rows += static_cast<std::size_t>(a) == d.gamma ? 1.0 : 2.0;
    return rows * static_cast<double>(d.V * sizeof(float));
  }
}

//! Arguments: B, gamma, V.
template <class Rule>
void bm_verify(benchmark::State& state, Rule rule) {
  const shape dims{static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)),
                   static_cast<std::size_t>(state.range(2))};
  const device_case& d = case_of(dims);
  const host_batch& h = d.host;
  cudaStream_t stream = nullptr;
  const auto policy = specdec::exec::cuda.on(stream);
  device_array<std::byte> workspace(specdec::verify_workspace_bytes(policy, rule, d.copies[0]->view));
  std::size_t next = 0;
  specdec_bench::time_with_events(state, stream, [&] {
    const auto& c = *d.copies[next++ % d.copies.size()];
    specdec::verify(policy, rule, c.view, h.streams, d.outputs(), workspace.span());
  });
  const double bytes = required_bytes(rule, h);
  state.counters["required_bytes"] = bytes;
  state.counters["bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fraction_of_bw"] = benchmark::Counter(bytes / g_bandwidth, benchmark::Counter::kIsIterationInvariantRate);
  // The GPU's tokens are seq's (tests/backend/cuda_verify.cu); here only a cheap sanity check.
  const auto accepted = d.accepted.download();
  for (const auto a : accepted)
    if (a < 0 || static_cast<std::size_t>(a) > dims.gamma) state.SkipWithError("accepted count out of range");
}

//! B x gamma x V, the shapes of the PyTorch / FlashInfer baselines.
void sizes(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{1, 16, 64}, {4, 8}, {32000, 128256}})->UseManualTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK_CAPTURE(bm_verify, strict, specdec::strict)->Apply(sizes);
BENCHMARK_CAPTURE(bm_verify, lenient_0_5, specdec::lenient_rule{0.5})->Apply(sizes);
BENCHMARK_CAPTURE(bm_verify, greedy, specdec::greedy)->Apply(sizes);
BENCHMARK_CAPTURE(bm_verify, sample_and_match, specdec::sample_and_match)->Apply(sizes);

}  // namespace

int main(int argc, char** argv) { return specdec_bench::gpu_benchmark_main(argc, argv, "bench_cuda_verify", g_bandwidth); }
