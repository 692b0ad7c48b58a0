// bench/simd_verify.cpp: chain verification (strict rule) and the residual / bonus samplers on the simd
// backend (SSE4.2, AVX2, AVX-512), against the seq backend, the naive baseline and the memory
// bandwidth measured in the same run. Results: bench/README.md ("simd backend").
//
// What is measured (fp32 probabilities, one thread)
//   BM_read_bandwidth/MB:{512,8}                   one core summing a float buffer (DRAM, L3-resident)
//   BM_verify/<backend>/B/gamma/V                  specdec::verify(policy, strict, ...), rows in DRAM
//   BM_residual/<backend>/V/{dram,cache}           sample_residual over one (p, q) row pair
//   BM_bonus/<backend>/V/{dram,cache}              the bonus token: a sample from one target row
// <backend> is seq, sse4_2, avx2, avx512 (xsimd::avx512bw; skipped on CPUs without it) or naive
// (bench/baseline_naive.hpp, verification only).
//
// Data, DRAM residency and bytes are as in bench/verify.cpp: draft rows q = softmax(l), l ~ N(0, 2^2),
// target rows p = softmax(l + s z), s calibrated so that the mean 1 - TV(p, q) is 0.70; K copies of
// each batch used round robin so that the rows read between two uses of a copy are >= 128 MB (4x L3);
// `bytes_per_call` counts what a verifier must read (one row pair at a rejection, one row at a bonus,
// two scalars per tested position). Rates use the thread's CPU time (the machine is shared).
//
// After the benchmarks, main() prints a markdown table: kernel, shape, backend, CPU time per call,
// GB/s, fraction of the DRAM probe, speedup vs seq and vs the naive baseline.
//
// Build by hand:  g++ -std=c++20 -O3 -march=native -DSPECDEC_ENABLE_SIMD=1 -I include bench/simd_verify.cpp
//                 -lbenchmark -lpthread
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns falsely inside xsimd's AVX-512 kernels (-W[maybe-]uninitialized on _mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "bandwidth.hpp"
#include "baseline_naive.hpp"
#include "simd_common.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/backend/simd/residual.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/exec/simd.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

#if !SPECDEC_ENABLE_SIMD
#error "bench/simd_verify.cpp needs the simd backend: link specdec::simd or define SPECDEC_ENABLE_SIMD=1"
#endif

namespace {

using specdec::token_id;
using specdec_bench::aligned_buffer;
using namespace specdec_bench::simd;

constexpr double target_acceptance = 0.70;
constexpr std::size_t pool_pairs = 64;

// ---- row pool: q = softmax(l), p = softmax(l + sigma z) with mean 1 - TV(p, q) = 0.70 --------------

struct row_pool {
  std::size_t V = 0;
  double sigma = 0.0, mean_accept = 0.0;
  std::vector<float> q, p;  // [pool_pairs][V]
  std::span<const float> q_row(std::size_t j) const { return {q.data() + j * V, V}; }
  std::span<const float> p_row(std::size_t j) const { return {p.data() + j * V, V}; }
};

void perturbed_pair(const std::vector<double>& l, const std::vector<double>& z, double sigma, float* q, float* p) {
  std::vector<double> lp(l.size());
  for (std::size_t v = 0; v < l.size(); ++v) lp[v] = l[v] + sigma * z[v];
  specdec::softmax(std::span<const double>(l), std::span<float>(q, l.size()));
  specdec::softmax(std::span<const double>(lp), std::span<float>(p, l.size()));
}

std::unique_ptr<row_pool> make_pool(std::size_t V) {
  auto pool = std::make_unique<row_pool>();
  pool->V = V;
  std::mt19937_64 rng(0x5eedULL + V);
  std::normal_distribution<double> logit(0.0, 2.0), noise(0.0, 1.0);
  const auto draw = [&](std::vector<double>& l, std::vector<double>& z) {
    l.resize(V), z.resize(V);
    for (std::size_t v = 0; v < V; ++v) l[v] = logit(rng), z[v] = noise(rng);
  };
  constexpr std::size_t cal_rows = 4;
  std::vector<std::vector<double>> cl(cal_rows), cz(cal_rows);
  for (std::size_t r = 0; r < cal_rows; ++r) draw(cl[r], cz[r]);
  std::vector<float> qa(V), pa(V);
  const auto mean_accept = [&](double s) {
    double a = 0.0;
    for (std::size_t r = 0; r < cal_rows; ++r) {
      perturbed_pair(cl[r], cz[r], s, qa.data(), pa.data());
      a += specdec::overlap(std::span<const float>(pa), std::span<const float>(qa));
    }
    return a / cal_rows;
  };
  double lo = 0.0, hi = 4.0;
  for (int it = 0; it < 20; ++it) {
    const double mid = 0.5 * (lo + hi);
    (mean_accept(mid) > target_acceptance ? lo : hi) = mid;
  }
  pool->sigma = 0.5 * (lo + hi);
  pool->q.resize(pool_pairs * V);
  pool->p.resize(pool_pairs * V);
  std::vector<double> l, z;
  double acc = 0.0;
  for (std::size_t j = 0; j < pool_pairs; ++j) {
    draw(l, z);
    perturbed_pair(l, z, pool->sigma, pool->q.data() + j * V, pool->p.data() + j * V);
    acc += specdec::overlap(pool->p_row(j), pool->q_row(j));
  }
  pool->mean_accept = acc / pool_pairs;
  return pool;
}

const row_pool& get_pool(std::size_t V) {
  static std::map<std::size_t, std::unique_ptr<row_pool>> pools;
  auto& slot = pools[V];
  if (!slot) slot = make_pool(V);
  return *slot;
}

// ---- verify data: K copies of a padded [B][gamma][V] / [B][gamma + 1][V] batch --------------------

struct verify_data {
  std::size_t B = 0, gamma = 0, V = 0, K = 0;
  aligned_buffer<float> draft, target;
  std::vector<token_id> tokens;  // [K][B][gamma]
  std::vector<std::int32_t> num_drafts;
  std::vector<specdec::chain_batch<float>> batches;
  aligned_buffer<float> naive_residual;

  std::size_t draft_floats() const { return B * gamma * V; }
  std::size_t target_floats() const { return B * (gamma + 1) * V; }
  std::size_t batch_bytes() const { return (draft_floats() + target_floats()) * sizeof(float); }
};

std::size_t choose_copies(std::size_t B, std::size_t gamma, std::size_t V) {
  const double row = static_cast<double>(V * sizeof(float));
  const double batch = static_cast<double>((2 * gamma + 1) * B) * row;
  const double tail = std::pow(target_acceptance, static_cast<double>(gamma));
  const double read_per_call = static_cast<double>(B) * row * (2.0 * (1.0 - tail) + tail);
  double k = std::max(std::ceil(256.0 * MB / batch), std::ceil(4.0 * l3_bytes / read_per_call));
  k = std::min(k, std::floor(2048.0 * MB / batch));
  return static_cast<std::size_t>(std::max(1.0, k));
}

verify_data& get_verify_data(std::size_t B, std::size_t gamma, std::size_t V) {
  static std::unique_ptr<verify_data> slot;  // one shape at a time: the backends of a shape run back to back
  if (slot && slot->B == B && slot->gamma == gamma && slot->V == V) return *slot;
  slot.reset();
  const row_pool& pool = get_pool(V);
  auto d = std::make_unique<verify_data>();
  const std::size_t K = choose_copies(B, gamma, V);
  d->B = B, d->gamma = gamma, d->V = V, d->K = K;
  d->draft = aligned_buffer<float>(K * d->draft_floats());
  d->target = aligned_buffer<float>(K * d->target_floats());
  d->tokens.resize(K * B * gamma);
  d->num_drafts.assign(B, static_cast<std::int32_t>(gamma));
  std::mt19937_64 rng(0xb0a7ULL ^ (B << 32) ^ (gamma << 24) ^ V);
  std::uniform_int_distribution<std::size_t> pick(0, pool_pairs - 1);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  const std::size_t row_bytes = V * sizeof(float);
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t i = 0; i < gamma; ++i) {
        const std::size_t j = pick(rng);
        std::memcpy(d->draft.get() + k * d->draft_floats() + (b * gamma + i) * V, pool.q_row(j).data(), row_bytes);
        std::memcpy(d->target.get() + k * d->target_floats() + (b * (gamma + 1) + i) * V, pool.p_row(j).data(), row_bytes);
        d->tokens[(k * B + b) * gamma + i] = specdec::backend::simd::sample_categorical<xsimd::default_arch>(pool.q_row(j), unif(rng)).token;
      }
      std::memcpy(d->target.get() + k * d->target_floats() + (b * (gamma + 1) + gamma) * V, pool.p_row(pick(rng)).data(), row_bytes);
    }
  const auto layout = specdec::ragged_layout::padded(d->num_drafts, gamma);
  for (std::size_t k = 0; k < K; ++k)
    d->batches.push_back(specdec::chain_batch<float>{
        layout, V, std::span<const token_id>(d->tokens.data() + k * B * gamma, B * gamma),
        std::span<const float>(d->draft.get() + k * d->draft_floats(), d->draft_floats()),
        std::span<const float>(d->target.get() + k * d->target_floats(), d->target_floats())});
  slot = std::move(d);
  return *slot;
}

double min_bytes(std::span<const std::int32_t> accepted, std::size_t gamma, std::size_t V) {
  const double row = static_cast<double>(V * sizeof(float));
  double bytes = 0.0;
  for (const std::int32_t a : accepted) {
    const bool rejected = static_cast<std::size_t>(a) < gamma;
    bytes += (rejected ? 2.0 * row : row) + static_cast<double>(rejected ? a + 1 : a) * 2.0 * sizeof(float);
  }
  return bytes;
}

std::string shape_name(std::size_t B, std::size_t gamma, std::size_t V) {
  return "B=" + std::to_string(B) + " gamma=" + std::to_string(gamma) + " V=" + std::to_string(V);
}

// ---- benchmarks ----------------------------------------------------------------------------------

template <class Backend>
void BM_verify(benchmark::State& state, std::size_t B, std::size_t gamma, std::size_t V) {
  if (!backend_runs<Backend>()) return state.SkipWithError("this CPU cannot run the architecture");
  verify_data& d = get_verify_data(B, gamma, V);
  if constexpr (std::is_same_v<Backend, naive_backend>)
    if (d.naive_residual.size != B * gamma * V) {
      d.naive_residual = aligned_buffer<float>(B * gamma * V);
      std::fill(d.naive_residual.get(), d.naive_residual.get() + B * gamma * V, 0.0f);
    }
  std::vector<specdec::random::request_stream> streams(B);
  for (std::size_t b = 0; b < B; ++b) streams[b] = {0x5eedULL, static_cast<std::uint32_t>(b), 0};
  std::vector<token_id> tokens(B * (gamma + 1));
  std::vector<std::int32_t> accepted(B);
  std::vector<specdec::verify_status> status(B);
  const specdec::chain_outputs out{tokens, accepted, status};
  double bytes = 0.0, accepted_total = 0.0;
  std::uint8_t status_bits = 0;
  std::uint32_t step = 0;
  const loop_timer timer;
  for (auto _ : state) {
    for (auto& s : streams) s.step = step;
    const std::size_t k = step % d.K;
    if constexpr (std::is_same_v<Backend, seq_backend>)
      specdec::verify(specdec::exec::seq, specdec::strict, d.batches[k], streams, out);
    else if constexpr (std::is_same_v<Backend, naive_backend>)
      specdec_bench::naive_verify_strict(d.draft.get() + k * d.draft_floats(), d.target.get() + k * d.target_floats(),
                                         d.tokens.data() + k * B * gamma, B, gamma, V, streams, tokens.data(),
                                         accepted.data(), d.naive_residual.get());
    else
      specdec::verify(specdec::exec::simd_policy<typename Backend::arch>{}, specdec::strict, d.batches[k], streams, out);
    bytes += min_bytes(accepted, gamma, V);
    for (std::size_t b = 0; b < B; ++b) {
      accepted_total += accepted[b];
      status_bits |= static_cast<std::uint8_t>(status[b]);
    }
    benchmark::ClobberMemory();
    ++step;
  }
  const double cpu = timer.cpu(), wall = timer.wall();
  if (!specdec::is_valid(static_cast<specdec::verify_status>(status_bits))) state.SkipWithError("a request was flagged invalid");
  const double iters = static_cast<double>(state.iterations());
  state.counters["mean_accepted"] = accepted_total / (iters * static_cast<double>(B));
  state.counters["copies"] = static_cast<double>(d.K);
  state.counters["arena_MB"] = static_cast<double>(d.K * d.batch_bytes()) / MB;
  record(state, "verify (strict)", shape_name(B, gamma, V), backend_name<Backend>(), cpu, wall, bytes);
}

// Row pairs for the sampler benchmarks: N copies of pool pairs, N = 1 (cache) or >= 128 MB (dram).
struct pair_data {
  std::size_t V = 0, N = 0;
  aligned_buffer<float> q, p;
};

pair_data& get_pair_data(std::size_t V, bool dram) {
  static std::unique_ptr<pair_data> slot;
  const std::size_t N = dram ? (4 * l3_bytes + 2 * V * sizeof(float) - 1) / (2 * V * sizeof(float)) : 1;
  if (!slot || slot->V != V || slot->N != N) {
    slot.reset();
    const row_pool& pool = get_pool(V);
    slot = std::make_unique<pair_data>();
    slot->V = V, slot->N = N;
    slot->q = aligned_buffer<float>(N * V);
    slot->p = aligned_buffer<float>(N * V);
    for (std::size_t n = 0; n < N; ++n) {
      std::memcpy(slot->q.get() + n * V, pool.q_row(n % pool_pairs).data(), V * sizeof(float));
      std::memcpy(slot->p.get() + n * V, pool.p_row(n % pool_pairs).data(), V * sizeof(float));
    }
  }
  return *slot;
}

template <class Backend>
void BM_row_sample(benchmark::State& state, std::size_t V, bool dram, bool bonus) {
  if (!backend_runs<Backend>()) return state.SkipWithError("this CPU cannot run the architecture");
  pair_data& d = get_pair_data(V, dram);
  const specdec::random::stream_address addr{0x5eedULL, 0, 0, 0, specdec::random::purpose::user};
  std::uint32_t step = 0;
  std::uint8_t bad = 0;
  const loop_timer timer;
  for (auto _ : state) {
    const std::size_t n = step % d.N;
    const std::span<const float> p(d.p.get() + n * V, V);
    const std::span<const float> q = bonus ? std::span<const float>{} : std::span<const float>(d.q.get() + n * V, V);
    const double u = specdec::random::uniform_at(addr, step);
    specdec::residual_result r;
    if constexpr (std::is_same_v<Backend, seq_backend>)
      r = specdec::sample_residual(p, q, u);
    else if constexpr (requires { typename Backend::arch; })
      r = specdec::backend::simd::sample_residual<typename Backend::arch>(p, q, u);
    bad |= static_cast<std::uint8_t>(r.sample.status != specdec::row_status::ok);
    benchmark::DoNotOptimize(r);
    ++step;
  }
  const double cpu = timer.cpu(), wall = timer.wall();
  if (bad) state.SkipWithError("a sample was not ok");
  const double bytes = static_cast<double>(state.iterations()) * static_cast<double>((bonus ? 1 : 2) * V * sizeof(float));
  state.counters["copies"] = static_cast<double>(d.N);
  record(state, bonus ? "bonus sample" : "residual sample", "V=" + std::to_string(V) + (dram ? " dram" : " cache"),
         backend_name<Backend>(), cpu, wall, bytes);
}

// ---- registration ------------------------------------------------------------------------------------

void register_all() {
  const std::tuple<std::size_t, std::size_t, std::size_t> shapes[] = {
      {1, 4, 128256}, {16, 4, 128256}, {64, 4, 128256}, {64, 8, 128256}, {64, 4, 32000}};
  for (const auto& [B, gamma, V] : shapes)
    for_each_backend(
        [&](auto backend) {
          using Backend = decltype(backend);
          const std::string name = "BM_verify/" + backend_name<Backend>() + "/B:" + std::to_string(B) + "/gamma:" +
                                   std::to_string(gamma) + "/V:" + std::to_string(V);
          benchmark::RegisterBenchmark(name.c_str(), BM_verify<Backend>, B, gamma, V)->Unit(benchmark::kMicrosecond);
        },
        true);
  for (const bool bonus : {false, true})
    for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}})
      for (const bool dram : {true, false})
        for_each_backend(
            [&](auto backend) {
              using Backend = decltype(backend);
              const std::string name = std::string(bonus ? "BM_bonus/" : "BM_residual/") + backend_name<Backend>() + "/V:" +
                                       std::to_string(V) + (dram ? "/dram" : "/cache");
              benchmark::RegisterBenchmark(name.c_str(), BM_row_sample<Backend>, V, dram, bonus)->Unit(benchmark::kMicrosecond);
            },
            false);
}

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, [] {
    char buf[96];
    for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}}) {
      const row_pool& pool = get_pool(V);
      std::snprintf(buf, sizeof buf, "sigma %.3f, mean 1-TV %.3f", pool.sigma, pool.mean_accept);
      benchmark::AddCustomContext("pool_V" + std::to_string(V), buf);
    }
    register_all();
  });
}
