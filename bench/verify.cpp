// bench/verify.cpp: chain verification (strict rule) on the seq backend, against a peer-style naive
// baseline and against the memory bandwidth measured in the same run. Results: bench/README.md.
//
// What is measured
//   BM_read_bandwidth/MB:{512,8}        one core summing a float buffer (DRAM, L3-resident)
//   BM_verify_strict/B/gamma/V          specdec::verify(exec::seq, strict, ...), fp32 probabilities
//   BM_verify_naive/B/gamma/V           bench/baseline_naive.hpp on the same data and uniforms
//   BM_residual_sample/V/{dram,cache}   specdec::sample_residual over one (p, q) row pair
//   BM_bonus_sample/V/{dram,cache}      the same with q empty (the bonus token, a sample from p)
//
// Data. Rows are softmax(l) with logits l ~ N(0, sd 2) for the draft q, and softmax(l + s z),
// z ~ N(0, 1), for the target p, with s calibrated per V so that the mean acceptance 1 - TV(p, q)
// is 0.70. A pool of 64 such (q, p) pairs per V is generated once; batches are filled by copying
// pool rows chosen at random, and each draft token is sampled from its own q row.
//
// DRAM residency. Every call of a verify benchmark uses the next of K copies of its batch
// (round robin). K is chosen so that the arena (K batches) is >= 256 MB (8x the 32 MB L3) and so that
// the rows *read* between two uses of the same copy are >= 128 MB (4x L3); the arena is capped at 2 GB.
// The counters `copies`, `arena_MB` and `reuse_MB` (bytes read between two uses of one copy) say what
// each shape got. The dram variants of the row-pair benchmarks rotate over >= 128 MB of row pairs;
// the cache variants reuse one pair (L2/L3 resident), to show whether the sampler is compute-bound.
//
// Counters (per benchmark row)
//   bytes_per_call    bytes that must be read: per request, at the stopping position one target row
//                     and one draft row (a rejection), or one target row (the bonus), plus two scalars
//                     (p(x), q(x)) per tested position; computed exactly from each call's outcome.
//                     For the naive baseline the same minimum is reported (what it *needs*), and
//                     `touched_per_call` counts what it actually reads and writes.
//   bytes_per_second  bytes_per_call / time (kIsRate: divided by the CPU time of the benchmark
//                     thread, Google Benchmark's default; the machine is shared, and CPU time leaves
//                     out the time the thread was descheduled; the Time column is wall time)
//   frac_dram_bw      bytes_per_second / the single-core DRAM read bandwidth measured by main()
//                     before any benchmark runs (512 MB sum, median of 5 passes; printed in the
//                     context header as dram_read_GBps and also reported by BM_read_bandwidth/MB:512)
//   mean_accepted     mean accepted drafts per request
//   seq_over_naive    (naive rows) CPU time per call of BM_verify_strict on the same shape divided
//                     by the naive CPU time, both measured in this run (< 1: seq is faster)
//
// Build by hand:  g++ -std=c++20 -O3 -march=native -I include bench/verify.cpp -lbenchmark -lpthread
// Run:            ./a.out   (defaults to --benchmark_min_time=0.2 unless given another)

#include <benchmark/benchmark.h>

#include <algorithm>
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
#include "verify_data.hpp"
#include "baseline_naive.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

namespace {

using specdec::token_id;
using namespace specdec_bench;  // MB, the row pool, verify_data, pair_data (verify_data.hpp)

double g_dram_bw = 0.0;  // bytes/s, set by main() before the benchmarks run

std::vector<specdec::random::request_stream> make_streams(std::size_t B) {
  std::vector<specdec::random::request_stream> s(B);
  for (std::size_t b = 0; b < B; ++b) s[b] = {0x5eedULL, static_cast<std::uint32_t>(b), 0};
  return s;
}

std::map<std::tuple<std::size_t, std::size_t, std::size_t>, double> g_seq_seconds;  // per call

void set_common_counters(benchmark::State& state, double bytes, double accepted_total, std::size_t B) {
  const auto iters = static_cast<double>(state.iterations());
  state.counters["bytes_per_call"] = benchmark::Counter(bytes / iters);
  state.counters["bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate);
  state.counters["frac_dram_bw"] = benchmark::Counter(bytes / g_dram_bw, benchmark::Counter::kIsRate);
  state.counters["mean_accepted"] = benchmark::Counter(accepted_total / (iters * static_cast<double>(B)));
}

// ---- benchmarks ------------------------------------------------------------------------------------

void BM_verify_strict(benchmark::State& state, std::size_t B, std::size_t gamma, std::size_t V) {
  verify_data& d = get_verify_data(B, gamma, V);
  auto streams = make_streams(B);
  std::vector<token_id> tokens(B * (gamma + 1));
  std::vector<std::int32_t> accepted(B);
  std::vector<specdec::verify_status> status(B);
  const specdec::chain_outputs out{tokens, accepted, status};
  double bytes = 0.0, accepted_total = 0.0;
  std::uint8_t status_bits = 0;
  std::uint32_t step = 0;
  const double t0 = specdec_bench::thread_cpu_seconds();
  for (auto _ : state) {
    for (auto& s : streams) s.step = step;
    specdec::verify(specdec::exec::seq, specdec::strict, d.batches[step % d.K], streams, out);
    bytes += min_bytes(accepted, gamma, V);
    for (std::size_t b = 0; b < B; ++b) {
      accepted_total += accepted[b];
      status_bits |= static_cast<std::uint8_t>(status[b]);
    }
    benchmark::ClobberMemory();
    ++step;
  }
  const double t1 = specdec_bench::thread_cpu_seconds();
  if (!specdec::is_valid(static_cast<specdec::verify_status>(status_bits))) state.SkipWithError("a request was flagged invalid");
  g_seq_seconds[{B, gamma, V}] = (t1 - t0) / static_cast<double>(state.iterations());
  set_common_counters(state, bytes, accepted_total, B);
  state.counters["copies"] = static_cast<double>(d.K);
  state.counters["arena_MB"] = static_cast<double>(d.K * d.batch_bytes()) / MB;
  state.counters["reuse_MB"] = static_cast<double>(d.K) * bytes / static_cast<double>(state.iterations()) / MB;
}

void BM_verify_naive(benchmark::State& state, std::size_t B, std::size_t gamma, std::size_t V) {
  verify_data& d = get_verify_data(B, gamma, V);
  if (d.naive_residual.size != B * gamma * V) {
    d.naive_residual = aligned_buffer<float>(B * gamma * V);
    std::fill(d.naive_residual.get(), d.naive_residual.get() + B * gamma * V, 0.0f);  // first touch, untimed
  }
  auto streams = make_streams(B);
  std::vector<token_id> tokens(B * (gamma + 1));
  std::vector<std::int32_t> accepted(B);
  double bytes = 0.0, touched = 0.0, accepted_total = 0.0;
  std::uint32_t step = 0;
  const double t0 = specdec_bench::thread_cpu_seconds();
  for (auto _ : state) {
    for (auto& s : streams) s.step = step;
    const std::size_t k = step % d.K;
    specdec_bench::naive_verify_strict(d.draft_copy(k), d.target_copy(k), d.tokens_copy(k), B, gamma, V, streams, tokens.data(),
                                       accepted.data(), d.naive_residual.get());
    bytes += min_bytes(accepted, gamma, V);
    for (std::size_t b = 0; b < B; ++b) {
      accepted_total += accepted[b];
      // p and q rows read once, residual written + read + read + written, sampled prefix, scalars
      touched += static_cast<double>(tokens[b * (gamma + 1) + static_cast<std::size_t>(accepted[b])] + 1) * sizeof(float) +
                 2.0 * static_cast<double>(accepted[b] + 1) * sizeof(float);
    }
    benchmark::ClobberMemory();
    ++step;
  }
  const double t1 = specdec_bench::thread_cpu_seconds();
  const double iters = static_cast<double>(state.iterations());
  touched += iters * 6.0 * static_cast<double>(B * gamma * V * sizeof(float));
  set_common_counters(state, bytes, accepted_total, B);
  state.counters["touched_per_call"] = benchmark::Counter(touched / iters);
  const auto seq = g_seq_seconds.find({B, gamma, V});
  if (seq != g_seq_seconds.end()) state.counters["seq_over_naive"] = seq->second / ((t1 - t0) / iters);
}

void BM_row_sample(benchmark::State& state, std::size_t V, bool dram, bool bonus) {
  pair_data& d = get_pair_data(V, dram);
  const specdec::random::stream_address addr{0x5eedULL, 0, 0, 0, specdec::random::purpose::user};
  std::uint32_t step = 0;
  std::uint8_t bad = 0;
  for (auto _ : state) {
    const std::size_t n = step % d.N;
    const std::span<const float> p(d.p.get() + n * V, V);
    const std::span<const float> q = bonus ? std::span<const float>{} : std::span<const float>(d.q.get() + n * V, V);
    const specdec::residual_result r = specdec::sample_residual(p, q, specdec::random::uniform_at(addr, step));
    bad |= static_cast<std::uint8_t>(r.sample.status != specdec::row_status::ok);
    benchmark::DoNotOptimize(r);
    ++step;
  }
  if (bad) state.SkipWithError("a sample was not ok");
  const double bytes = static_cast<double>(state.iterations()) * static_cast<double>((bonus ? 1 : 2) * V * sizeof(float));
  state.counters["bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate);
  state.counters["frac_dram_bw"] = benchmark::Counter(bytes / g_dram_bw, benchmark::Counter::kIsRate);
  state.counters["copies"] = static_cast<double>(d.N);
}

void BM_read_bandwidth(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) * MB;
  const aligned_buffer<float>& buf = probe_buffer(bytes);
  const std::size_t n = buf.size;
  for (auto _ : state) {
    float s = specdec_bench::sum_floats(buf.get(), n);
    benchmark::DoNotOptimize(s);
  }
  const double total = static_cast<double>(state.iterations()) * static_cast<double>(bytes);
  state.counters["bytes_per_second"] = benchmark::Counter(total, benchmark::Counter::kIsRate);
  state.counters["frac_dram_bw"] = benchmark::Counter(total / g_dram_bw, benchmark::Counter::kIsRate);
}

// Start-up check that the naive baseline computes the same thing: same uniforms, so the accepted
// counts must match exactly and the tokens nearly always (float vs double CDF rounding aside).
std::string check_naive_agreement() {
  constexpr std::size_t B = 16, gamma = 4, V = 32000, steps = 64;
  auto d = make_verify_data(B, gamma, V, 1);
  std::vector<float> residual(B * gamma * V);
  std::vector<token_id> t_seq(B * (gamma + 1)), t_naive(B * (gamma + 1));
  std::vector<std::int32_t> a_seq(B), a_naive(B);
  std::vector<specdec::verify_status> status(B);
  std::size_t same_accepted = 0, same_tokens = 0;
  auto streams = make_streams(B);
  for (std::uint32_t step = 0; step < steps; ++step) {
    for (auto& s : streams) s.step = step;
    specdec::verify(specdec::exec::seq, specdec::strict, d->batches[0], streams, specdec::chain_outputs{t_seq, a_seq, status});
    specdec_bench::naive_verify_strict(d->draft_copy(0), d->target_copy(0), d->tokens_copy(0), B, gamma, V, streams,
                                       t_naive.data(), a_naive.data(), residual.data());
    for (std::size_t b = 0; b < B; ++b) {
      same_accepted += a_seq[b] == a_naive[b];
      same_tokens += std::equal(t_seq.begin() + static_cast<std::ptrdiff_t>(b * (gamma + 1)),
                                t_seq.begin() + static_cast<std::ptrdiff_t>((b + 1) * (gamma + 1)),
                                t_naive.begin() + static_cast<std::ptrdiff_t>(b * (gamma + 1)));
    }
  }
  return "accepted " + std::to_string(same_accepted) + "/" + std::to_string(B * steps) + ", tokens " +
         std::to_string(same_tokens) + "/" + std::to_string(B * steps) + " (B=16 gamma=4 V=32000, 64 steps)";
}

void register_all() {
  benchmark::RegisterBenchmark("BM_read_bandwidth", BM_read_bandwidth)
      ->ArgName("MB")
      ->Arg(512)
      ->Arg(8)
      ->Unit(benchmark::kMicrosecond);
  for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}})
    for (const std::size_t gamma : {std::size_t{4}, std::size_t{8}})
      for (const std::size_t B : {std::size_t{1}, std::size_t{16}, std::size_t{64}}) {
        const std::string shape = "/B:" + std::to_string(B) + "/gamma:" + std::to_string(gamma) + "/V:" + std::to_string(V);
        benchmark::RegisterBenchmark(("BM_verify_strict" + shape).c_str(), BM_verify_strict, B, gamma, V)
            ->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark(("BM_verify_naive" + shape).c_str(), BM_verify_naive, B, gamma, V)
            ->Unit(benchmark::kMicrosecond);
      }
  for (const bool bonus : {false, true})
    for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}})
      for (const bool dram : {true, false}) {
        const std::string name = std::string(bonus ? "BM_bonus_sample" : "BM_residual_sample") + "/V:" + std::to_string(V) +
                                 (dram ? "/dram" : "/cache");
        benchmark::RegisterBenchmark(name.c_str(), BM_row_sample, V, dram, bonus)->Unit(benchmark::kMicrosecond);
      }
}

}  // namespace

int main(int argc, char** argv) {
  // Google Benchmark with a default of 0.2 s per benchmark (the whole run then takes about a minute).
  if (!specdec_bench::initialize_benchmarks(argc, argv)) return 1;

  g_dram_bw = specdec_bench::probe_read_bandwidth(512 * MB);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", g_dram_bw / 1e9);
  benchmark::AddCustomContext("dram_read_GBps", buf);
  benchmark::AddCustomContext("naive_agreement", check_naive_agreement());
  for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}}) {
    const row_pool& pool = get_pool(V);
    std::snprintf(buf, sizeof buf, "sigma %.3f, mean 1-TV %.3f", pool.sigma, pool.mean_accept);
    benchmark::AddCustomContext("pool_V" + std::to_string(V), buf);
  }
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
