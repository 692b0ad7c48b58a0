// Supplement to bench/simd_verify.cpp for the chain-walk comparison (not part of the repository):
// the same loop (bench/simd_chain_verify.hpp: run_chain_verify, rows from DRAM, K rotating copies)
// with the greedy and sample_and_match rules, on seq and each simd architecture, at the shapes of
// bench_simd_verify. Compiled unchanged against each worktree's include/ and bench/.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>

#include "simd_chain_verify.hpp"
#include "simd_common.hpp"
#include "verify_data.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/exec/simd.hpp"

namespace {
using namespace specdec_bench;
using namespace specdec_bench::simd;

template <class Backend, class Rule>
void BM_rule(benchmark::State& state, const char* rule_name, const Rule* rule, std::size_t B, std::size_t gamma, std::size_t V) {
  run_chain_verify<Backend>(state, rule_name, *rule, B, gamma, V);
}

template <class Rule>
void register_rule(const char* rule_name, const Rule& rule) {
  const std::tuple<std::size_t, std::size_t, std::size_t> shapes[] = {
      {1, 4, 128256}, {16, 4, 128256}, {64, 4, 128256}, {64, 8, 128256}, {64, 4, 32000}};
  for (const auto& shape : shapes) {
    const std::size_t B = std::get<0>(shape), gamma = std::get<1>(shape), V = std::get<2>(shape);
    for_each_backend(
        [&](auto backend) {
          using Backend = decltype(backend);
          if constexpr (!std::is_same_v<Backend, naive_backend>) {
            const std::string name = std::string("BM_verify_") + rule_name + "/" + backend_name<Backend>() +
                                     "/B:" + std::to_string(B) + "/gamma:" + std::to_string(gamma) + "/V:" + std::to_string(V);
            benchmark::RegisterBenchmark(name.c_str(), BM_rule<Backend, Rule>, rule_name, &rule, B, gamma, V)
                ->Unit(benchmark::kMicrosecond);
          }
        },
        false);
  }
}
}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, [] {
    register_rule("greedy", specdec::greedy);
    register_rule("sample_and_match", specdec::sample_and_match);
  });
}
