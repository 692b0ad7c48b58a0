// Throughput of the Monte-Carlo simulators (include/specdec/simulate/): simulated draft tokens per
// second on one core. The Bernoulli-chain simulators (SD with constant or position-dependent
// acceptance, SV's N, SPRINTER's i.i.d. verifier) must sustain >= 10^7 draft tokens per second;
// the token-level processes (drafting from q, the rule's test, the residual) are reported too.
// Results and the command line: bench/README.md, section "bench_simulate".
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/strict.hpp"
#include "specdec/simulate/simulate.hpp"

namespace {

namespace sim = specdec::simulate;

constexpr std::uint64_t draws_per_call = 100000;  // simulated iterations per benchmark iteration

// Runs `simulate(options)` once per benchmark iteration on a fresh stream (the stream number
// advances) with `draws` draws, and reports simulated draft tokens and iterations per second of CPU
// time. `simulate` returns the number of draft tokens it simulated.
template <class Simulate>
void run(benchmark::State& state, std::uint64_t draws, Simulate&& simulate) {
  std::uint32_t stream = 0;
  std::uint64_t tokens = 0, iterations = 0;
  for (auto _ : state) {
    tokens += simulate(sim::run_options{2024, stream++, 0, draws});
    iterations += draws;
  }
  state.counters["draft_tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["iterations_per_s"] = benchmark::Counter(static_cast<double>(iterations), benchmark::Counter::kIsRate);
  state.counters["draft_tokens_per_iteration"] =
      static_cast<double>(tokens) / static_cast<double>(iterations > 0 ? iterations : 1);
}

// A context-free pair of rows over V tokens.
struct row_pair {
  std::vector<double> p, q;
  std::span<const double> ps() const { return p; }
  std::span<const double> qs() const { return q; }
};
row_pair make_rows(std::size_t v) {
  row_pair r{std::vector<double>(v), std::vector<double>(v)};
  double sp = 0, sq = 0;
  for (std::size_t i = 0; i < v; ++i) {
    r.p[i] = 1.0 / (1.0 + static_cast<double>(i));
    r.q[i] = 1.0 / (1.0 + static_cast<double>((i * 7 + 3) % v));
    sp += r.p[i];
    sq += r.q[i];
  }
  for (std::size_t i = 0; i < v; ++i) {
    r.p[i] /= sp;
    r.q[i] /= sq;
  }
  return r;
}

// alpha_i = 0.95 - 0.03 i, i < n.
std::vector<double> decreasing_profile(std::size_t n) {
  std::vector<double> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = 0.95 - 0.03 * static_cast<double>(i);
  return a;
}

// sd::chain(alpha, gamma): args alpha in percent, gamma.
void BM_sd_chain(benchmark::State& state) {
  const double alpha = static_cast<double>(state.range(0)) / 100.0;
  const auto gamma = static_cast<std::size_t>(state.range(1));
  run(state, draws_per_call, [&](const sim::run_options& o) {
    const auto r = sim::sd::chain(alpha, gamma, o);
    benchmark::DoNotOptimize(r.accepted.histogram().data());
    return r.draft_tokens;
  });
}
BENCHMARK(BM_sd_chain)->ArgsProduct({{60, 80, 95}, {4, 8, 16}});

// sd::chain(alphas): a decreasing acceptance profile of length gamma.
void BM_sd_chain_positions(benchmark::State& state) {
  const std::vector<double> alphas = decreasing_profile(static_cast<std::size_t>(state.range(0)));
  run(state, draws_per_call, [&](const sim::run_options& o) {
    const auto r = sim::sd::chain(std::span<const double>(alphas), o);
    benchmark::DoNotOptimize(r.accepted.histogram().data());
    return r.draft_tokens;
  });
}
BENCHMARK(BM_sd_chain_positions)->Arg(8)->Arg(16);

// sv::accepted(a, gamma) for the same profile (the same kernel, named in SV's terms).
void BM_sv_accepted(benchmark::State& state) {
  const std::vector<double> a = decreasing_profile(16);
  const auto gamma = static_cast<std::size_t>(state.range(0));
  run(state, draws_per_call, [&](const sim::run_options& o) {
    const auto r = sim::sv::accepted(std::span<const double>(a), gamma, o);
    benchmark::DoNotOptimize(r.accepted.histogram().data());
    return r.draft_tokens;
  });
}
BENCHMARK(BM_sv_accepted)->Arg(8);

// sprinter::verifier_chain(eta_tp, eta_fp, r = 5): args eta_tp and eta_fp in percent.
void BM_sprinter_verifier(benchmark::State& state) {
  const double tp = static_cast<double>(state.range(0)) / 100.0, fp = static_cast<double>(state.range(1)) / 100.0;
  run(state, draws_per_call, [&](const sim::run_options& o) {
    const auto r = sim::sprinter::verifier_chain(tp, fp, 5, o);
    benchmark::DoNotOptimize(r.accepted.histogram().data());
    return r.draft_tokens;
  });
}
BENCHMARK(BM_sprinter_verifier)->Args({90, 10})->Args({90, 50})->Args({99, 50});

// sd::token_process(strict, p, q, gamma = 4) over V tokens.
void BM_sd_token_process(benchmark::State& state) {
  const row_pair rows = make_rows(static_cast<std::size_t>(state.range(0)));
  run(state, draws_per_call / 10, [&](const sim::run_options& o) {
    const auto r = sim::sd::token_process(specdec::strict, rows.ps(), rows.qs(), 4, o);
    benchmark::DoNotOptimize(r.first_token.histogram().data());
    return r.chain.draft_tokens;
  });
}
BENCHMARK(BM_sd_token_process)->Arg(16)->Arg(256);

// sprinter::token_process(p, q, 0.9, 0.3): one position per draw.
void BM_sprinter_token_process(benchmark::State& state) {
  const row_pair rows = make_rows(static_cast<std::size_t>(state.range(0)));
  run(state, draws_per_call / 10, [&](const sim::run_options& o) {
    const auto r = sim::sprinter::token_process(rows.ps(), rows.qs(), 0.9, 0.3, o);
    benchmark::DoNotOptimize(r.token.histogram().data());
    return o.draws;
  });
}
BENCHMARK(BM_sprinter_token_process)->Arg(16)->Arg(256);

// mtad::run(p, q, tau = 0.3, gamma = 4, sampled drafts).
void BM_mtad(benchmark::State& state) {
  const row_pair rows = make_rows(static_cast<std::size_t>(state.range(0)));
  run(state, draws_per_call / 10, [&](const sim::run_options& o) {
    const auto r = sim::mtad::run(rows.ps(), rows.qs(), 0.3, 4, sim::mtad::drafting::sampled, o);
    benchmark::DoNotOptimize(r.tokens.histogram().data());
    return r.draft_tokens;
  });
}
BENCHMARK(BM_mtad)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
