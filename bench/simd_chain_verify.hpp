//! \file bench/simd_chain_verify.hpp
//! \brief The chain-verification benchmark loop shared by bench/simd_verify.cpp (strict, with the naive
//! baseline) and bench/simd_tree_verify.cpp (block against strict): `specdec::verify` with `rule` on
//! the K rotating copies of `get_verify_data(B, gamma, V)`, charged the bytes strict must read
//! (`min_bytes`), recorded for the table of simd_common.hpp as kernel "verify (<rule name>)".
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "baseline_naive.hpp"
#include "simd_common.hpp"
#include "verify_data.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/exec/simd.hpp"

namespace specdec_bench::simd {

inline std::string shape_name(std::size_t B, std::size_t gamma, std::size_t V) {
  return "B=" + std::to_string(B) + " gamma=" + std::to_string(gamma) + " V=" + std::to_string(V);
}

//! One chain-verification benchmark: `Backend` is seq, a simd architecture or (strict only) the naive baseline.
template <class Backend, class Rule>
void run_chain_verify(benchmark::State& state, const char* rule_name, const Rule& rule, std::size_t B, std::size_t gamma,
                      std::size_t V) {
  if (!backend_runs<Backend>()) return state.SkipWithError("this CPU cannot run the architecture");
  verify_data& d = get_verify_data(B, gamma, V);
  if constexpr (std::is_same_v<Backend, naive_backend>)
    if (d.naive_residual.size != B * gamma * V) {
      d.naive_residual = aligned_buffer<float>(B * gamma * V);
      std::fill(d.naive_residual.get(), d.naive_residual.get() + B * gamma * V, 0.0f);
    }
  std::vector<specdec::random::request_stream> streams(B);
  for (std::size_t b = 0; b < B; ++b) streams[b] = {0x5eedULL, static_cast<std::uint32_t>(b), 0};
  std::vector<specdec::token_id> tokens(B * (gamma + 1));
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
    if constexpr (std::is_same_v<Backend, seq_backend>) {
      specdec::verify(specdec::exec::seq, rule, d.batches[k], streams, out);
    } else if constexpr (std::is_same_v<Backend, naive_backend>) {
      static_assert(std::is_same_v<Rule, specdec::strict_rule>, "the naive baseline verifies with the strict rule");
      specdec_bench::naive_verify_strict(d.draft.get() + k * d.draft_floats(), d.target.get() + k * d.target_floats(),
                                         d.tokens.data() + k * B * gamma, B, gamma, V, streams, tokens.data(), accepted.data(),
                                         d.naive_residual.get());
    } else {
      specdec::verify(specdec::exec::simd_policy<typename Backend::arch>{}, rule, d.batches[k], streams, out);
    }
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
  record(state, std::string("verify (") + rule_name + ")", shape_name(B, gamma, V), backend_name<Backend>(), cpu, wall, bytes);
}

}  // namespace specdec_bench::simd
