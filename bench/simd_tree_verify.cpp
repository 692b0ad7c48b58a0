// bench/simd_tree_verify.cpp: tree verification (specdec::verify_tree) and block verification
// (specdec::verify with specdec::block) on the seq and simd backends, against the memory bandwidth
// measured in the same run and, for blocks, against token-wise strict verification of the same
// chains. Results: bench/README.md ("trees and blocks").
//
// What is measured (fp32 probabilities, one thread)
//   BM_read_bandwidth/MB:{512,8}                 one core summing a float buffer (DRAM, L3-resident)
//   BM_tree/<rule>/<backend>/B:64/V              64 trees of 60 nodes (EAGLE-2's default budget):
//                                                branching 4, 2, 2, 1, 1 by depth (depth 5); each node
//                                                has its own (q, p) row pair, 64 x 60 pairs in DRAM
//   BM_chain/<rule>/<backend>/B:64/gamma/V       strict and block verification of the same chains
//                                                (bench/verify_data.hpp: K copies in rotation)
// Tree rules: target_only (EAGLE/SGLang: siblings = top-k of q, lossless for any choice), strict
// (SpecInfer's multi-step sampling: siblings drawn i.i.d. from q), greedy.
// Rows: the calibrated pool of bench/verify_data.hpp (mean 1 - TV(p, q) = 0.70), pair j of a node
// chosen at random. Between two calls a 64 MB buffer is streamed, untimed, so that no row read by one
// call is in the caches at the next (the timed region is the verify call alone, in thread CPU time).
// Bytes a tree verifier must read: target_only one p row (the emitted token's) per request, plus
// 4 bytes per sibling test; strict two rows (p, q) where it rejects and samples, one at a leaf;
// greedy one p row per visited node (argmax). Chains: as bench/simd_verify.cpp (`min_bytes`).
//
// After the benchmarks, main() prints the markdown table of bench/simd_common.hpp.
// Build: cmake --build build --target bench_simd_tree_verify (built with -march=native).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC 12 on std::string concatenation
#endif

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "bandwidth.hpp"
#include "simd_chain_verify.hpp"
#include "simd_common.hpp"
#include "verify_data.hpp"
#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/exec/simd.hpp"

#if !SPECDEC_ENABLE_SIMD
#error "bench/simd_tree_verify.cpp needs the simd backend"
#endif

namespace {

using specdec::token_id;
using namespace specdec_bench;
using namespace specdec_bench::simd;

constexpr std::size_t tree_nodes = 60;
constexpr std::size_t branching[] = {4, 2, 2, 1, 1};

// The parents of one 60-node tree: breadth first, `branching[d]` children per node of depth d.
std::vector<std::int32_t> tree_parents() {
  std::vector<std::int32_t> parents{specdec::no_node};
  std::vector<std::size_t> depth{0};
  for (std::size_t i = 0; parents.size() < tree_nodes && i < parents.size(); ++i)
    for (std::size_t c = 0; c < branching[std::min(depth[i], std::size(branching) - 1)] && parents.size() < tree_nodes; ++c) {
      parents.push_back(static_cast<std::int32_t>(i));
      depth.push_back(depth[i] + 1);
    }
  return parents;
}

enum class siblings { top_k, iid };

// B trees over 64 x 60 node row pairs, and the node tokens for each way of choosing siblings.
struct tree_data {
  std::size_t B = 0, V = 0;
  aligned_buffer<float> q, p;  // [B * 60][V]
  std::vector<std::int32_t> num_nodes, parents;
  std::map<siblings, std::vector<token_id>> tokens;
  specdec::tree_layout layout;
};

tree_data& get_tree_data(std::size_t B, std::size_t V) {
  static std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<tree_data>> cache;
  auto& slot = cache[{B, V}];
  if (slot) return *slot;
  slot = std::make_unique<tree_data>();
  tree_data& d = *slot;
  d.B = B, d.V = V;
  const row_pool& pool = get_pool(V);
  const auto one = tree_parents();
  d.num_nodes.assign(B, static_cast<std::int32_t>(one.size()));
  for (std::size_t b = 0; b < B; ++b) d.parents.insert(d.parents.end(), one.begin(), one.end());
  d.layout = specdec::tree_layout::from_parents(d.num_nodes, d.parents);
  const std::size_t rows = d.layout.num_rows();
  d.q = aligned_buffer<float>(rows * V);
  d.p = aligned_buffer<float>(rows * V);
  std::mt19937_64 rng(0x7ee5ULL ^ V);
  std::uniform_int_distribution<std::size_t> pick(0, pool_pairs - 1);
  std::vector<std::size_t> pair_of(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    pair_of[r] = pick(rng);
    std::copy_n(pool.q_row(pair_of[r]).data(), V, d.q.get() + r * V);
    std::copy_n(pool.p_row(pair_of[r]).data(), V, d.p.get() + r * V);
  }
  // Siblings: the top-k of the parent's q row (distinct), or i.i.d. draws from it.
  std::map<std::size_t, std::vector<token_id>> ranked;  // pool pair -> ids by decreasing q
  for (const siblings how : {siblings::top_k, siblings::iid}) {
    std::vector<token_id>& tok = d.tokens[how];
    tok.assign(rows, specdec::no_node);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t n = 0; n < one.size(); ++n) {
        const std::size_t row = d.layout.node_row(b, n);
        std::size_t rank = 0;
        for (std::int32_t c = d.layout.first_child(b, n); c != specdec::no_node;
             c = d.layout.next_sibling(b, static_cast<std::size_t>(c))) {
          const std::size_t child = d.layout.node_row(b, static_cast<std::size_t>(c));
          const auto q = pool.q_row(pair_of[row]);
          if (how == siblings::top_k) {
            auto& ids = ranked[pair_of[row]];
            if (ids.empty()) {
              ids.resize(V);
              std::iota(ids.begin(), ids.end(), 0);
              std::partial_sort(ids.begin(), ids.begin() + 8, ids.end(), [&](token_id a, token_id b2) {
                return q[static_cast<std::size_t>(a)] > q[static_cast<std::size_t>(b2)];
              });
            }
            tok[child] = ids[rank++];
          } else {
            const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
            tok[child] = specdec::sample_categorical(q, u).token;
          }
        }
      }
  }
  return d;
}

// The peer-style baseline of target-only tree verification (the shape of SGLang's kernel and EAGLE's
// reference, written here for the CPU): per node one coin against the running sum of p over the
// siblings (u < sum_{j<=i} p(c_j): inverse-CDF sampling of p over the sibling list, the same law as
// target_only); after the last sibling the residual is materialised (p with the rejected siblings
// zeroed, relu(p - d)), normalised by its sum, and sampled by a linear scan: three passes and one
// row written, where specdec reads the row once.
std::int32_t naive_target_only(const specdec::tree_batch<float>& batch, std::size_t b,
                               const specdec::random::request_stream& stream, std::vector<float>& residual) {
  const auto& tree = batch.layout;
  const std::size_t V = batch.vocab_size;
  std::size_t node = 0;
  std::int32_t depth = 0;
  for (;;) {
    const auto p = batch.target_row(b, node);
    const double u = stream.open(static_cast<std::uint32_t>(node), specdec::random::purpose::accept).uniform();
    double cumulative = 0.0;
    std::int32_t accepted = specdec::no_node;
    for (std::int32_t c = tree.first_child(b, node); c != specdec::no_node;
         c = tree.next_sibling(b, static_cast<std::size_t>(c))) {
      cumulative += p[static_cast<std::size_t>(batch.token(b, static_cast<std::size_t>(c)))];
      if (u < cumulative) {
        accepted = c;
        break;
      }
    }
    if (accepted == specdec::no_node) {
      residual.assign(p.begin(), p.end());
      for (std::int32_t c = tree.first_child(b, node); c != specdec::no_node;
           c = tree.next_sibling(b, static_cast<std::size_t>(c)))
        residual[static_cast<std::size_t>(batch.token(b, static_cast<std::size_t>(c)))] = 0.0f;
      double sum = 0.0;
      for (const float x : residual) sum += x;
      for (float& x : residual) x = static_cast<float>(x / sum);
      const double r = stream.open(static_cast<std::uint32_t>(node), specdec::random::purpose::resample).uniform();
      double acc = 0.0;
      std::size_t v = 0;
      for (; v + 1 < V; ++v)
        if ((acc += residual[v]) > r) break;
      benchmark::DoNotOptimize(v);
      return depth;
    }
    node = static_cast<std::size_t>(accepted);
    ++depth;
  }
}

// Streams a 64 MB buffer so that the next call finds no row in the caches.
void evict_caches() {
  static aligned_buffer<float> buf = [] {
    aligned_buffer<float> b(64 * MB / sizeof(float));
    std::fill(b.get(), b.get() + b.size, 1.0f);
    return b;
  }();
  float s = sum_floats(buf.get(), buf.size);
  benchmark::DoNotOptimize(s);
}

template <class Backend, class Rule>
void run_tree(benchmark::State& state, const char* rule_name, const Rule& rule, siblings how, std::size_t B, std::size_t V) {
  if (!backend_runs<Backend>()) return state.SkipWithError("this CPU cannot run the architecture");
  tree_data& d = get_tree_data(B, V);
  const specdec::tree_batch<float> batch{d.layout, V, d.tokens[how], std::span<const float>(d.q.get(), d.q.size),
                                         std::span<const float>(d.p.get(), d.p.size)};
  const std::size_t width = d.layout.max_depth() + 1;
  std::vector<specdec::random::request_stream> streams(B);
  for (std::size_t b = 0; b < B; ++b) streams[b] = {0x5eedULL, static_cast<std::uint32_t>(b), 0};
  std::vector<token_id> tokens(B * width);
  std::vector<std::int32_t> path(B * width), accepted(B);
  std::vector<specdec::verify_status> status(B);
  const specdec::tree_outputs out{tokens, path, accepted, status};
  double cpu = 0.0, wall = 0.0, bytes = 0.0, accepted_total = 0.0;
  std::uint8_t status_bits = 0;
  std::uint32_t step = 0;
  const double row_bytes = static_cast<double>(V * sizeof(float));
  for (auto _ : state) {
    for (auto& s : streams) s.step = step;
    evict_caches();
    const loop_timer t;
    if constexpr (std::is_same_v<Backend, seq_backend>) {
      specdec::verify_tree(specdec::exec::seq, rule, batch, streams, out);
    } else if constexpr (std::is_same_v<Backend, naive_backend>) {
      static std::vector<float> residual;
      for (std::size_t b = 0; b < B; ++b) {
        accepted[b] = naive_target_only(batch, b, streams[b], residual);
        path[b * width + static_cast<std::size_t>(accepted[b])] = 0;  // only the last node's kind is read below
      }
    } else {
      specdec::verify_tree(specdec::exec::simd_policy<typename Backend::arch>{}, rule, batch, streams, out);
    }
    cpu += t.cpu();
    wall += t.wall();
    for (std::size_t b = 0; b < B; ++b) {
      accepted_total += accepted[b];
      status_bits |= static_cast<std::uint8_t>(status[b]);
      const auto last = static_cast<std::size_t>(path[b * width + static_cast<std::size_t>(accepted[b])]);
      const bool leaf = d.layout.first_child(b, last) == specdec::no_node;  // (naive: only the byte count of target_only)
      if constexpr (std::is_same_v<Rule, specdec::greedy_rule>)
        bytes += row_bytes * static_cast<double>(accepted[b] + 1);
      else if constexpr (std::is_same_v<Rule, specdec::strict_rule>)
        bytes += row_bytes * (leaf ? 1.0 : 2.0);
      else
        bytes += row_bytes;
    }
    ++step;
  }
  if (!specdec::is_valid(static_cast<specdec::verify_status>(status_bits))) state.SkipWithError("a request was flagged invalid");
  state.counters["mean_accepted"] = accepted_total / (static_cast<double>(state.iterations()) * static_cast<double>(B));
  record(state, std::string("verify_tree (") + rule_name + ")", "B=" + std::to_string(B) + " nodes=60 V=" + std::to_string(V),
         backend_name<Backend>(), cpu, wall, bytes);
}

void register_all() {
  for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}})
    for_each_backend(
        [&](auto backend) {
          using Backend = decltype(backend);
          const std::string tail = "/" + backend_name<Backend>() + "/B:64/V:" + std::to_string(V);
          benchmark::RegisterBenchmark(("BM_tree/target_only" + tail).c_str(), [V](benchmark::State& s) {
            run_tree<Backend>(s, "target_only", specdec::target_only, siblings::top_k, 64, V);
          })->Unit(benchmark::kMicrosecond);
          if constexpr (!std::is_same_v<Backend, naive_backend>) {  // the baseline is target-only's
            benchmark::RegisterBenchmark(("BM_tree/strict" + tail).c_str(), [V](benchmark::State& s) {
              run_tree<Backend>(s, "strict, i.i.d. siblings", specdec::strict, siblings::iid, 64, V);
            })->Unit(benchmark::kMicrosecond);
            benchmark::RegisterBenchmark(("BM_tree/greedy" + tail).c_str(), [V](benchmark::State& s) {
              run_tree<Backend>(s, "greedy", specdec::greedy, siblings::top_k, 64, V);
            })->Unit(benchmark::kMicrosecond);
          }
        },
        true);
  for (const std::size_t gamma : {std::size_t{4}, std::size_t{8}})
    for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}})
      for_each_backend(
          [&](auto backend) {
            using Backend = decltype(backend);
            if constexpr (!std::is_same_v<Backend, naive_backend>) {  // token-wise strict is the baseline
              const std::string tail =
                  "/" + backend_name<Backend>() + "/B:64/gamma:" + std::to_string(gamma) + "/V:" + std::to_string(V);
              benchmark::RegisterBenchmark(("BM_chain/strict" + tail).c_str(), [gamma, V](benchmark::State& s) {
                run_chain_verify<Backend>(s, "strict", specdec::strict, 64, gamma, V);
              })->Unit(benchmark::kMicrosecond);
              benchmark::RegisterBenchmark(("BM_chain/block" + tail).c_str(), [gamma, V](benchmark::State& s) {
                run_chain_verify<Backend>(s, "block", specdec::block, 64, gamma, V);
              })->Unit(benchmark::kMicrosecond);
            }
          },
          false);
}

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, [] { register_all(); });
}
