// GPU chain verification (backend/cuda/verify.cuh) from probabilities, fp32, rows in device memory
// (HBM): B = 1, 8, 64, gamma = 4, V = 128256, every rule. Time: CUDA events around the whole call
// (descriptor upload + kernels), Google Benchmark manual time; report the median of repetitions:
//   bench_cuda_verify            (15 repetitions, aggregates only, by default)
// Counters: `required_bytes` per call (rejection rules: one residual row pair per request, or the
// bonus row; greedy and sample-and-match: every target row up to n_b, which the GPU reads at once),
// `bytes_per_second` of those bytes, and `fraction_of_bw` against the read-bandwidth probe of the
// same run. Several copies of the batch are cycled so that no call finds its rows in L2.
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

constexpr std::size_t vocab = 128256, gamma_len = 4;
double g_bandwidth = 0.0;  // bytes/s, measured once at start-up

//! A probability row of Exp(1) weights, normalised.
std::vector<float> random_row(specdec::random::philox_stream& s) {
  std::vector<double> w(vocab);
  double z = 0.0;
  for (double& x : w) z += (x = s.exponential());
  std::vector<float> row(vocab);
  for (std::size_t v = 0; v < vocab; ++v) row[v] = static_cast<float>(w[v] / z);
  return row;
}

//! One batch of B requests with gamma drafts each, on the host.
struct host_batch {
  std::vector<std::int32_t> num_drafts;
  std::vector<token_id> drafts;
  std::vector<float> draft_rows, target_rows;
  std::vector<specdec::random::request_stream> streams;
  specdec::chain_batch<float> view() const {
    return {specdec::ragged_layout::packed(num_drafts), vocab, drafts, draft_rows, target_rows};
  }
};

host_batch make_host_batch(std::size_t B) {
  host_batch h;
  specdec::random::philox_stream s(specdec::random::stream_address{0xBE4C, static_cast<std::uint32_t>(B), 0, 0, specdec::random::purpose::user});
  for (std::size_t b = 0; b < B; ++b) {
    h.num_drafts.push_back(static_cast<std::int32_t>(gamma_len));
    h.streams.push_back({20261122, static_cast<std::uint32_t>(b), 0});
    for (std::size_t i = 0; i < gamma_len; ++i) {
      const auto q = random_row(s);
      h.drafts.push_back(specdec::sample_categorical(std::span<const float>(q), s.uniform()).token);
      h.draft_rows.insert(h.draft_rows.end(), q.begin(), q.end());
    }
    for (std::size_t i = 0; i <= gamma_len; ++i) {
      const auto p = random_row(s);
      h.target_rows.insert(h.target_rows.end(), p.begin(), p.end());
    }
  }
  return h;
}

//! Device copies of a batch, the outputs and a workspace.
struct device_case {
  using copy = specdec::test::device_chain_batch<float>;
  const host_batch& host;
  std::vector<std::unique_ptr<copy>> copies;
  device_array<token_id> tokens;
  device_array<std::int32_t> accepted;
  device_array<specdec::verify_status> status;

  device_case(const host_batch& h, std::size_t n_copies)
      : host(h), tokens(h.num_drafts.size() * (gamma_len + 1)), accepted(h.num_drafts.size()), status(h.num_drafts.size()) {
    for (std::size_t c = 0; c < n_copies; ++c) copies.push_back(std::make_unique<copy>(h.view()));
  }
  specdec::chain_outputs outputs() const { return {tokens.span(), accepted.span(), status.span()}; }
};

//! The bytes a verification must read: rows read whole by this rule's algorithm (the scalars of the
//! accept tests are negligible).
template <class Rule>
double required_bytes(const Rule& rule, const host_batch& h) {
  const std::size_t B = h.num_drafts.size();
  if constexpr (Rule::family != specdec::rule_family::rejection) {
    return static_cast<double>(B * (gamma_len + 1) * vocab * sizeof(float));
  } else {
    std::vector<token_id> tokens(B * (gamma_len + 1));
    std::vector<std::int32_t> accepted(B);
    std::vector<specdec::verify_status> status(B);
    specdec::verify(specdec::exec::seq, rule, h.view(), h.streams, {tokens, accepted, status});
    double rows = 0.0;
    for (const auto a : accepted) rows += static_cast<std::size_t>(a) == gamma_len ? 1.0 : 2.0;
    return rows * static_cast<double>(vocab * sizeof(float));
  }
}

const host_batch& batch_of(std::size_t B) {
  static std::vector<std::unique_ptr<host_batch>> cache;
  for (const auto& h : cache)
    if (h->num_drafts.size() == B) return *h;
  cache.push_back(std::make_unique<host_batch>(make_host_batch(B)));
  return *cache.back();
}

template <class Rule>
void bm_verify(benchmark::State& state, Rule rule) {
  const auto B = static_cast<std::size_t>(state.range(0));
  const host_batch& h = batch_of(B);
  // Enough copies that the rows of one call are out of L2 (50 MiB on an H100) by the next use.
  const std::size_t batch_bytes = (h.draft_rows.size() + h.target_rows.size()) * sizeof(float);
  device_case d(h, std::max<std::size_t>(2, (std::size_t{192} << 20) / batch_bytes + 1));
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
    if (a < 0 || static_cast<std::size_t>(a) > gamma_len) state.SkipWithError("accepted count out of range");
}

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(8)->Arg(64)->UseManualTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK_CAPTURE(bm_verify, strict, specdec::strict)->Apply(sizes);
BENCHMARK_CAPTURE(bm_verify, lenient_0_5, specdec::lenient_rule{0.5})->Apply(sizes);
BENCHMARK_CAPTURE(bm_verify, greedy, specdec::greedy)->Apply(sizes);
BENCHMARK_CAPTURE(bm_verify, sample_and_match, specdec::sample_and_match)->Apply(sizes);

}  // namespace

int main(int argc, char** argv) { return specdec_bench::gpu_benchmark_main(argc, argv, "bench_cuda_verify", g_bandwidth); }
