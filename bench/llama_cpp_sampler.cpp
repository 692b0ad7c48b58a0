//! \file bench/llama_cpp_sampler.cpp
//! \brief specdec's sampling and chain verification from logits against llama.cpp's sampler, on the
//! same logit rows, in one run, on one core. Built when the llama.cpp integration is
//! (SPECDEC_ENABLE_LLAMA_CPP; `specdec::llama_cpp` links libllama).
//!
//! The llama.cpp side calls its public sampler API (llama.h) the way its `common_sampler` does: each
//! row is copied into a `llama_token_data` array of V entries, a sampler chain is applied, and the
//! token is the one the chain selected. Verification is `common_sampler_sample_and_accept_n`'s loop:
//! sample at positions 0..gamma and stop at the first sample that differs from the draft (the
//! correction), or after the bonus.
//!
//! Kernels (V 32000 and 128256, rows from DRAM or from cache, bench/logit_chains.hpp's rows):
//! - `sample`: one token from a logit row, for four warpings. llama.cpp applies top-k, top-p and min-p
//!   before the temperature (its default sampler order), specdec after (warp(softmax(l / T)),
//!   distributions/warp.hpp); the two agree when T = 1 and differ in which tokens min-p keeps at
//!   T 0.7. Each library runs its own definition; the rows and the work per row are the same.
//! - `verify sample_and_match`: B = 1, gamma 4 and 8, top-k 50 -> top-p 0.9 -> T 1 on both sides.
//!   Both accept with the same law, so their mean accepted counts agree up to noise (printed).
//! - `verify strict, q(x) given`: specdec's strict rule with the draft's q(x) (draft_side.hpp); it
//!   accepts more, so it reads more target rows per call than llama.cpp's loop (mean_accepted).
//! The table at the end gives time per call and the ratio llama.cpp / specdec per call and per target
//! row read (rows = accepted + 1).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <llama.h>

#include "logit_chains.hpp"
#include "simd_common.hpp"
#include "specdec/backend/simd/sample_logits.hpp"
#include "specdec/specdec.hpp"

namespace {

using namespace specdec_bench;
using namespace specdec_bench::simd;
using specdec::token_id;

struct llama_backend {
  static constexpr const char* name = "llama.cpp";
};

//! The widest simd architecture these flags compile (the benchmarks are built with -march=native).
#if XSIMD_WITH_AVX512BW
using widest_arch = xsimd::avx512bw;
#elif XSIMD_WITH_AVX2
using widest_arch = xsimd::avx2;
#else
using widest_arch = xsimd::sse2;
#endif

struct sampling_case {
  const char* name;
  specdec::warp_params params;
};
const sampling_case sampling_cases[] = {
    {"top-k 50, top-p 0.9", {.temperature = 1.0, .top_k = 50, .top_p = 0.9}},
    {"top-p 0.9", {.temperature = 1.0, .top_p = 0.9}},
    {"T 0.7, min-p 0.05", {.temperature = 0.7, .min_p = 0.05}},
    {"greedy", {.temperature = 0.0}},
};

//! A llama.cpp sampler chain for `w` in llama.cpp's default order (top-k, top-p, min-p, temperature,
//! then dist), or greedy.
struct llama_chain {
  llama_sampler* chain = nullptr;
  explicit llama_chain(const specdec::warp_params& w) {
    chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (w.temperature == 0.0) {
      llama_sampler_chain_add(chain, llama_sampler_init_greedy());
      return;
    }
    if (w.top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(w.top_k));
    if (w.top_p < 1.0) llama_sampler_chain_add(chain, llama_sampler_init_top_p(static_cast<float>(w.top_p), 1));
    if (w.min_p > 0.0) llama_sampler_chain_add(chain, llama_sampler_init_min_p(static_cast<float>(w.min_p), 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(static_cast<float>(w.temperature)));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(1234));
  }
  llama_chain(const llama_chain&) = delete;
  llama_chain& operator=(const llama_chain&) = delete;
  ~llama_chain() { llama_sampler_free(chain); }

  //! What common_sampler does per position: the row into V candidates, the chain, the selected id.
  token_id sample(std::span<const float> row, std::vector<llama_token_data>& candidates) const {
    candidates.resize(row.size());
    for (std::size_t v = 0; v < row.size(); ++v) candidates[v] = {static_cast<llama_token>(v), row[v], 0.0f};
    llama_token_data_array cur{candidates.data(), candidates.size(), -1, false};
    llama_sampler_apply(chain, &cur);
    return cur.data[cur.selected].id;
  }
};

//! Built with += throughout: GCC 12 reports a false -Wrestrict on some `"literal" + std::string` at -O3.
std::string joined(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (const std::string_view p : parts) s += p;
  return s;
}

std::string shape_name(std::size_t V, bool dram, std::size_t gamma = 0) {
  return joined(
      {gamma ? "gamma=" : "", gamma ? std::to_string(gamma) + " " : "", "V=", std::to_string(V), dram ? " dram" : " cache"});
}

// ---- one token from a logit row -----------------------------------------------------------------
template <class Backend>
void bench_sample(benchmark::State& state, const sampling_case& sc, std::size_t V, bool dram) {
  const chains& c = make_chains(V, 4, dram);
  const std::size_t rows = c.target_logits.size() / V;
  std::vector<llama_token_data> candidates;
  std::vector<float> probs(V);
  const llama_chain llama(sc.params);
  std::size_t r = 0;
  double u = 0.37;
  const loop_timer t;
  for (auto _ : state) {
    const std::span<const float> row = std::span<const float>(c.target_logits).subspan(r * V, V);
    token_id x;
    if constexpr (std::is_same_v<Backend, llama_backend>)
      x = llama.sample(row, candidates);
    else if constexpr (std::is_same_v<Backend, seq_backend>) {  // seq's contract: warp, then sample
      specdec::warp_logits(specdec::exec::seq, row, std::span<float>(probs), sc.params);
      x = specdec::sample_categorical(specdec::exec::seq, std::span<const float>(probs), u).token;
    } else
      x = specdec::backend::simd::sample_logits<typename Backend::arch>(row, sc.params, u).token;
    benchmark::DoNotOptimize(x);
    r = (r + 1) % rows;
    u = u < 0.9 ? u + 0.0613 : u - 0.85;
  }
  const double bytes = static_cast<double>(state.iterations()) * static_cast<double>(V * sizeof(float));
  record(state, joined({"sample, ", sc.name}), shape_name(V, dram), backend_name<Backend>(), t.cpu(), t.wall(), bytes);
}

// ---- verification of a chain from logits ----------------------------------------------------------
//! llama.cpp's sample-and-accept over one chain: returns the number of drafts accepted.
std::int32_t llama_sample_and_accept(const llama_chain& llama, const specdec::chain_batch<float>& batch,
                                     std::vector<llama_token_data>& candidates, std::vector<token_id>& out) {
  const std::size_t gamma = batch.draft_tokens.size();
  out.clear();
  for (std::size_t i = 0; i <= gamma; ++i) {
    const token_id x = llama.sample(batch.target_row(0, i), candidates);
    out.push_back(x);
    if (i == gamma || x != batch.draft_tokens[i]) return static_cast<std::int32_t>(i);
  }
  return static_cast<std::int32_t>(gamma);
}

template <class Backend, class Rule>
void bench_verify(benchmark::State& state, const char* kernel, const Rule& rule, std::size_t gamma, std::size_t V, bool dram) {
  const chains& c = make_chains(V, gamma, dram);
  const std::vector<specdec::warp_params> params(1, warping);
  const llama_chain llama(warping);
  std::vector<llama_token_data> candidates;
  std::vector<token_id> tokens(gamma + 1);
  std::int32_t accepted = 0;
  specdec::verify_status status{};
  const specdec::chain_outputs out{tokens, std::span<std::int32_t>(&accepted, 1), std::span<specdec::verify_status>(&status, 1)};
  double rows = 0.0;
  std::size_t k = 0;
  std::uint32_t step = 0;
  const loop_timer t;
  for (auto _ : state) {
    const auto batch = c.batch(k, false);
    if constexpr (std::is_same_v<Backend, llama_backend>) {
      accepted = llama_sample_and_accept(llama, batch, candidates, tokens);
    } else {
      const specdec::random::request_stream stream{0xBE7C, 0, step++};
      const specdec::draft_side<float> draft{.rows = specdec::draft_rows_kind::logits,
                                             .params = {},
                                             .q_at_drafts = std::span<const float>(c.q_at_drafts).subspan(k * gamma, gamma)};
      const auto streams = std::span<const specdec::random::request_stream>(&stream, 1);
      if constexpr (std::is_same_v<Backend, seq_backend>)
        specdec::verify_from_logits(specdec::exec::seq, rule, batch, std::span<const specdec::warp_params>(params), draft,
                                    streams, out);
      else
        specdec::verify_from_logits(specdec::exec::simd_policy<typename Backend::arch>{}, rule, batch,
                                    std::span<const specdec::warp_params>(params), draft, streams, out);
      if (!specdec::is_valid(status)) state.SkipWithError("the request was flagged invalid");
    }
    rows += static_cast<double>(accepted) + 1.0;
    k = (k + 1) % c.copies;
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["mean_accepted"] = rows / calls - 1.0;
  state.counters["rows_per_call"] = rows / calls;
  record(state, kernel, shape_name(V, dram, gamma), backend_name<Backend>(), t.cpu(), t.wall(),
         rows * static_cast<double>(V * sizeof(float)));
}

template <class Fn>
void for_each_compared(Fn&& fn) {
  fn(llama_backend{});
  fn(seq_backend{});
  fn(simd_backend<widest_arch>{});
}

void register_all() {
  for (const bool dram : {true, false})
    for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}}) {
      for (const sampling_case& sc : sampling_cases)
        for_each_compared([&](auto backend) {
          using Backend = decltype(backend);
          const std::string name = joined({"BM_sample/", sc.name, "/", backend_name<Backend>(), "/", shape_name(V, dram)});
          benchmark::RegisterBenchmark(name.c_str(), [=, &sc](benchmark::State& st) {
            bench_sample<Backend>(st, sc, V, dram);
          })->Unit(benchmark::kMicrosecond);
        });
      for (const std::size_t gamma : {std::size_t{4}, std::size_t{8}})
        for_each_compared([&](auto backend) {
          using Backend = decltype(backend);
          const std::string tail = joined({"/", backend_name<Backend>(), "/", shape_name(V, dram, gamma)});
          benchmark::RegisterBenchmark(joined({"BM_verify_sample_and_match", tail}).c_str(), [=](benchmark::State& st) {
            bench_verify<Backend>(st, "verify sample_and_match", specdec::sample_and_match, gamma, V, dram);
          })->Unit(benchmark::kMicrosecond);
          if constexpr (!std::is_same_v<Backend, llama_backend>)
            benchmark::RegisterBenchmark(joined({"BM_verify_strict", tail}).c_str(), [=](benchmark::State& st) {
              bench_verify<Backend>(st, "verify strict, q(x) given", specdec::strict, gamma, V, dram);
            })->Unit(benchmark::kMicrosecond);
        });
    }
}

//! llama.cpp / specdec per call and per target row read, for each kernel and shape. The strict rows
//! are set against llama.cpp's sample-and-accept row of the same shape.
void print_ratios() {
  std::printf("\n| kernel | shape | llama.cpp / call | specdec seq / call | specdec %s / call | %s vs llama.cpp (per call) | "
              "seq vs llama.cpp (per call) | %s vs llama.cpp (per target row) |\n|---|---|---|---|---|---|---|---|\n",
              backend_name<simd_backend<widest_arch>>().c_str(), backend_name<simd_backend<widest_arch>>().c_str(),
              backend_name<simd_backend<widest_arch>>().c_str());
  const auto find = [](const std::string& kernel, const std::string& shape, const std::string& backend) -> const result* {
    for (const auto& r : g_results)
      if (r.kernel == kernel && r.shape == shape && r.backend == backend) return &r;
    return nullptr;
  };
  const std::string wide = backend_name<simd_backend<widest_arch>>();
  for (const auto& r : g_results) {
    if (r.backend != wide) continue;
    const bool strict = r.kernel.rfind("verify strict", 0) == 0;
    const result* llama = find(strict ? "verify sample_and_match" : r.kernel, r.shape, "llama.cpp");
    const result* seq = find(r.kernel, r.shape, "seq");
    if (!llama || !seq) continue;
    const double per_row = r.kernel.rfind("verify", 0) == 0
                               ? (llama->cpu_per_call / llama->bytes_per_call) / (r.cpu_per_call / r.bytes_per_call)
                               : llama->cpu_per_call / r.cpu_per_call;
    std::printf("| %s | %s | %s | %s | %s | %.2fx | %.2fx | %.2fx |\n", r.kernel.c_str(), r.shape.c_str(),
                format_time(llama->cpu_per_call).c_str(), format_time(seq->cpu_per_call).c_str(),
                format_time(r.cpu_per_call).c_str(), llama->cpu_per_call / r.cpu_per_call,
                llama->cpu_per_call / seq->cpu_per_call, per_row);
  }
}

}  // namespace

int main(int argc, char** argv) {
  llama_backend_init();
  const int rc = run_main(argc, argv, [] { register_all(); });
  if (rc == 0) print_ratios();
  llama_backend_free();
  return rc;
}
