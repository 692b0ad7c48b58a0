//! \file bench/simd_verify_from_logits.cpp
//! \brief `verify_from_logits` with each draft side (acceptance/draft_side.hpp), B = 1, on seq and the
//! simd ISAs, against a peer-style baseline that warps every row of the chain before verifying.
//!
//! Shapes: gamma 4 and 8, V 32000 and 128256, rows from DRAM or from cache; the chains and their
//! warping are bench/logit_chains.hpp's.
//! Draft sides: `draft logits` (the verifier warps each draft row it reads), `q(x) given` (a draft row
//! is warped only at a rejection), `q rows given` (no draft row is warped). Rules: strict with each
//! draft side, block with q(x) given, sample-and-match. The `naive` row warps all
//! gamma + 1 target and gamma draft rows with seq's `warp_logits` then runs seq's `verify`.
//! Bytes per call: the logit and q rows the call reads (target rows 0..a, and the draft rows its draft
//! side reads; block: gamma target rows, and the bonus row or one draft row), from the outputs of each
//! call.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "logit_chains.hpp"
#include "simd_common.hpp"
#include "specdec/specdec.hpp"

namespace {

using namespace specdec_bench;
using namespace specdec_bench::simd;
using specdec::token_id;

enum class side { draft_logits, q_at_drafts, q_rows };
const char* side_name(side s) {
  return s == side::draft_logits ? "draft logits" : s == side::q_at_drafts ? "q(x) given" : "q rows given";
}

template <class Backend, class Rule>
void run(benchmark::State& state, const char* rule_name, const Rule& rule, side s, std::size_t gamma, std::size_t V, bool dram) {
  if (!backend_runs<Backend>()) {
    state.SkipWithError("ISA not runnable here");
    return;
  }
  const chains& c = make_chains(V, gamma, dram);
  const std::vector<specdec::warp_params> params(1, warping);
  std::vector<token_id> tokens(gamma + 1);
  std::int32_t accepted = 0;
  specdec::verify_status status{};
  const specdec::chain_outputs out{tokens, std::span<std::int32_t>(&accepted, 1), std::span<specdec::verify_status>(&status, 1)};
  std::vector<float> warped_target, warped_draft;  // the naive baseline's rows
  const double row_bytes = static_cast<double>(V * sizeof(float));
  double cpu = 0.0, wall = 0.0, bytes = 0.0, accepted_total = 0.0;
  std::size_t k = 0;
  std::uint32_t step = 0;
  for (auto _ : state) {
    const bool q_rows = s == side::q_rows;
    const auto batch = c.batch(k, q_rows);
    const specdec::random::request_stream stream{0xBE7C, 0, step++};
    const auto streams = std::span<const specdec::random::request_stream>(&stream, 1);
    const specdec::draft_side<float> draft{
        .rows = q_rows ? specdec::draft_rows_kind::probabilities : specdec::draft_rows_kind::logits,
        .params = {},
        .q_at_drafts =
            s == side::q_at_drafts ? std::span<const float>(c.q_at_drafts).subspan(k * gamma, gamma) : std::span<const float>{}};
    const loop_timer t;
    if constexpr (std::is_same_v<Backend, naive_backend>) {
      warped_target.resize((gamma + 1) * V);
      warped_draft.resize(gamma * V);
      for (std::size_t i = 0; i <= gamma; ++i)
        specdec::warp_logits(batch.target_row(0, i), std::span<float>(warped_target).subspan(i * V, V), warping);
      for (std::size_t i = 0; i < gamma; ++i)
        specdec::warp_logits(batch.draft_row(0, i), std::span<float>(warped_draft).subspan(i * V, V), warping);
      const specdec::chain_batch<float> probs{batch.layout, V, batch.draft_tokens, warped_draft, warped_target};
      specdec::verify(specdec::exec::seq, rule, probs, streams, out);
    } else if constexpr (std::is_same_v<Backend, seq_backend>) {
      specdec::verify_from_logits(specdec::exec::seq, rule, batch, std::span<const specdec::warp_params>(params), draft, streams,
                                  out);
    } else {
      specdec::verify_from_logits(specdec::exec::simd_policy<typename Backend::arch>{}, rule, batch,
                                  std::span<const specdec::warp_params>(params), draft, streams, out);
    }
    cpu += t.cpu();
    wall += t.wall();
    const auto a = static_cast<double>(accepted);
    const bool rejected = accepted < static_cast<std::int32_t>(gamma);
    accepted_total += a;
    double rows = a + 1;  // target rows 0..a
    if constexpr (std::is_same_v<Rule, specdec::block_rule>) {
      // The forward pass reads target rows 0..gamma-1 (q(x) given), the bonus row gamma when all are
      // accepted, and the draft row where the scan stops otherwise.
      rows = static_cast<double>(gamma) + 1.0;
    } else if constexpr (specdec::reads_draft_distribution<Rule>) {
      if (std::is_same_v<Backend, naive_backend>)
        rows = 2.0 * static_cast<double>(gamma) + 1.0;
      else if (s == side::q_at_drafts)
        rows += rejected ? 1.0 : 0.0;
      else
        rows += rejected ? a + 1 : a;
    } else if (std::is_same_v<Backend, naive_backend>) {
      rows = 2.0 * static_cast<double>(gamma) + 1.0;
    }
    bytes += rows * row_bytes;
    if (!specdec::is_valid(status)) state.SkipWithError("the request was flagged invalid");
    k = (k + 1) % c.copies;
  }
  state.counters["mean_accepted"] = accepted_total / static_cast<double>(state.iterations());
  std::string kernel = "verify_from_logits ", shape = "gamma=";
  kernel += rule_name;
  kernel += ", ";
  kernel += side_name(s);
  shape += std::to_string(gamma);
  shape += " V=" + std::to_string(V);
  shape += dram ? " dram" : " cache";
  record(state, kernel, shape, backend_name<Backend>(), cpu, wall, bytes);
}

void register_all() {
  for (const bool dram : {true, false})
    for (const std::size_t gamma : {std::size_t{4}, std::size_t{8}})
      for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}})
        for_each_backend(
            [&](auto backend) {
              using Backend = decltype(backend);
              std::string tail = "/";
              tail += backend_name<Backend>();
              tail += "/gamma:" + std::to_string(gamma);
              tail += "/V:" + std::to_string(V);
              tail += dram ? "/dram" : "/cache";
              for (const side s : {side::draft_logits, side::q_at_drafts, side::q_rows}) {
                if (std::is_same_v<Backend, naive_backend> && s != side::draft_logits) continue;
                std::string name = "BM_strict/";
                name += side_name(s);
                name += tail;
                benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
                  run<Backend>(st, "strict", specdec::strict, s, gamma, V, dram);
                })->Unit(benchmark::kMicrosecond);
              }
              if (!std::is_same_v<Backend, naive_backend>)
                benchmark::RegisterBenchmark(("BM_block/q(x) given" + tail).c_str(), [=](benchmark::State& st) {
                  run<Backend>(st, "block", specdec::block, side::q_at_drafts, gamma, V, dram);
                })->Unit(benchmark::kMicrosecond);
              benchmark::RegisterBenchmark(("BM_sample_and_match" + tail).c_str(), [=](benchmark::State& st) {
                run<Backend>(st, "sample_and_match", specdec::sample_and_match, side::draft_logits, gamma, V, dram);
              })->Unit(benchmark::kMicrosecond);
            },
            true);
}

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, [] { register_all(); });
}
