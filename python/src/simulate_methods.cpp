// specdec._core.simulate_{mtad,tree_walk,block_verification,sprinter_token_process}: the Monte-Carlo
// simulators of MTAD (simulate/mtad.hpp), token trees (simulate/tree.hpp), block verification
// (simulate/block.hpp, the context-free overload) and SPRINTER's token process (simulate/sprinter.hpp),
// mapped over arrays of parameters with the conventions of simulate.cpp (simulate_common.hpp):
// configuration i runs the draws [first, first + draws) of the streams (seed, stream[i]); rows (p, q,
// alphas) are C-contiguous [n, K] arrays already broadcast by specdec/simulate.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "numpy_out.hpp"
#include "simulate_common.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/errors.hpp"
#include "specdec/simulate/block.hpp"
#include "specdec/simulate/mtad.hpp"
#include "specdec/simulate/sprinter.hpp"
#include "specdec/simulate/tree.hpp"

namespace nb = nanobind;
using namespace nb::literals;
namespace sim = specdec::simulate;
using specdec_python::to_numpy;
using namespace specdec_python::simulate_common;

namespace {

// The draft-length type of the C++ simulators bound here (mtad::run, block::verification), and the
// one place a Python gamma (int32) is converted to it.
using draft_length = std::size_t;
draft_length to_draft_length(std::int32_t gamma) {
  if (gamma < 0) throw specdec::error("gamma must be >= 0");
  return static_cast<draft_length>(gamma);
}

// One value per result as a new [n] NumPy array.
template <class T, class R, class F>
nb::object column(const std::vector<R>& results, F&& f) {
  const std::size_t n = results.size();
  std::unique_ptr<T[]> out(new T[n]);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(f(results[i]));
  return nb::cast(to_numpy(std::move(out), {n}));
}

// The counts of the values 0..K-1 of a tally per result as a new [n, K] NumPy array.
template <class R, class F>
nb::object counts(const std::vector<R>& results, std::size_t K, F&& tally_of) {
  const std::size_t n = results.size();
  std::unique_ptr<std::uint64_t[]> out(new std::uint64_t[n * K]);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t v = 0; v < K; ++v) out[i * K + v] = tally_of(results[i]).count_of(v);
  return nb::cast(to_numpy(std::move(out), {n, K}));
}

// An estimate per result (mean, variance, std_error) under d[name + "_mean"], ...
template <class R, class F>
void put_estimates(nb::dict& d, const char* name, const std::vector<R>& results, F&& estimate_of) {
  const std::string s(name);
  d[(s + "_mean").c_str()] = column<double>(results, [&](const R& r) { return estimate_of(r).mean; });
  d[(s + "_variance").c_str()] = column<double>(results, [&](const R& r) { return estimate_of(r).variance; });
  d[(s + "_std_error").c_str()] = column<double>(results, [&](const R& r) { return estimate_of(r).std_error; });
}

// A tally per result, with the draft tokens of each, packed as simulate.cpp's results.
template <class R, class T, class D>
nb::dict pack_tallies(const std::vector<R>& results, T&& tally_of, D&& drafts_of) {
  std::vector<sim::count_tally> tallies;
  std::vector<std::uint64_t> drafts;
  for (const R& r : results) {
    tallies.push_back(tally_of(r));
    drafts.push_back(drafts_of(r));
  }
  return pack(tallies, drafts);
}

}  // namespace

void bind_simulate_methods(nb::module_& m) {
  m.def(
      "simulate_mtad",
      [](bool argmax, const rows& p, const rows& q, const vec<double>& tau, const vec<std::int32_t>& gamma,
         const vec<std::uint32_t>& stream, std::uint64_t seed, std::uint64_t first, std::uint64_t draws) {
        const std::size_t n = p.shape(0);
        same_count(n, {q.shape(0), tau.shape(0), gamma.shape(0)});
        const auto how = argmax ? sim::mtad::drafting::argmax : sim::mtad::drafting::sampled;
        std::vector<sim::mtad::run_result> rs(n);
        for_each_config(n, stream, seed, first, draws, [&](std::size_t i, const sim::run_options& o) {
          rs[i] = sim::mtad::run(row(p, i), row(q, i), tau.data()[i], to_draft_length(gamma.data()[i]), how, o);
        });
        using R = sim::mtad::run_result;
        nb::dict d = pack_tallies(
            rs, [](const R& r) { return r.tokens; }, [](const R& r) { return r.draft_tokens; });
        d["emitted_tokens"] = column<std::uint64_t>(rs, [](const R& r) { return r.emitted_tokens; });
        d["min_tokens"] = column<std::uint64_t>(rs, [](const R& r) { return r.min_tokens; });
        d["sum_log_p"] = column<double>(rs, [](const R& r) { return r.sum_log_p; });
        d["sum_log_q"] = column<double>(rs, [](const R& r) { return r.sum_log_q; });
        d["perplexity_p"] = column<double>(rs, [](const R& r) { return r.perplexity_p(); });
        d["perplexity_q"] = column<double>(rs, [](const R& r) { return r.perplexity_q(); });
        return d;
      },
      "argmax"_a, "p"_a, "q"_a, "tau"_a, "gamma"_a, "stream"_a, "seed"_a, "first"_a, "draws"_a,
      "specdec::simulate::mtad::run(p[i], q[i], tau[i], gamma[i], argmax ? drafting::argmax : drafting::sampled): "
      "tokens per iteration gamma_i and the output's log-likelihoods.");
  m.def(
      "simulate_tree_walk",
      [](const vec<std::int32_t>& parents, const rows& alphas, const vec<std::uint32_t>& stream, std::uint64_t seed,
         std::uint64_t first, std::uint64_t draws) {
        const auto N = static_cast<std::int32_t>(parents.shape(0));
        const auto layout = specdec::tree_layout::from_parents(std::span<const std::int32_t>(&N, 1),
                                                               std::span<const std::int32_t>(parents.data(), parents.shape(0)));
        const std::size_t n = alphas.shape(0);
        std::vector<sim::tree::walk_result> rs(n);
        for_each_config(n, stream, seed, first, draws,
                        [&](std::size_t i, const sim::run_options& o) { rs[i] = sim::tree::walk(layout, 0, row(alphas, i), o); });
        using R = sim::tree::walk_result;
        const auto drafts = static_cast<std::uint64_t>(N - 1) * draws;  // the tree's N - 1 drafts per walk
        nb::dict d = pack_tallies(
            rs, [](const R& r) { return r.accepted; }, [&](const R&) { return drafts; });
        d["last_node"] =
            counts(rs, static_cast<std::size_t>(N), [](const R& r) -> const sim::count_tally& { return r.last_node; });
        d["coins"] = column<std::uint64_t>(rs, [](const R& r) { return r.coins; });
        return d;
      },
      "parents"_a, "alphas"_a, "stream"_a, "seed"_a, "first"_a, "draws"_a,
      "specdec::simulate::tree::walk(tree_layout::from_parents(parents), 0, alphas[i]): accepted drafts per walk, "
      "the node each walk ended at, the coins drawn.");
  m.def(
      "simulate_block_verification",
      [](const rows& p, const rows& q, const vec<std::int32_t>& gamma, const vec<std::uint32_t>& stream, std::uint64_t seed,
         std::uint64_t first, std::uint64_t draws) {
        const std::size_t n = p.shape(0);
        same_count(n, {q.shape(0), gamma.shape(0)});
        std::vector<sim::block::verification_result> rs(n);
        for_each_config(n, stream, seed, first, draws, [&](std::size_t i, const sim::run_options& o) {
          rs[i] = sim::block::verification(row(p, i), row(q, i), to_draft_length(gamma.data()[i]), o);
        });
        using R = sim::block::verification_result;
        const auto drafts = [&](const R& r) { return static_cast<std::uint64_t>(r.gamma) * draws; };
        nb::dict d;
        d["block"] = pack_tallies(
            rs, [](const R& r) { return r.block; }, drafts);
        d["token_wise"] = pack_tallies(
            rs, [](const R& r) { return r.token_wise; }, drafts);
        put_estimates(d, "gain", rs, [](const R& r) { return r.block_gain(); });
        return d;
      },
      "p"_a, "q"_a, "gamma"_a, "stream"_a, "seed"_a, "first"_a, "draws"_a,
      "specdec::simulate::block::verification(p[i], q[i], gamma[i]): drafts accepted by block and by token-wise "
      "verification of the same blocks, and their paired difference.");
  m.def(
      "simulate_sprinter_token_process",
      [](const rows& p, const rows& q, const vec<double>& eta_tp, const vec<double>& eta_fp, const vec<std::uint32_t>& stream,
         std::uint64_t seed, std::uint64_t first, std::uint64_t draws) {
        const std::size_t n = p.shape(0);
        same_count(n, {q.shape(0), eta_tp.shape(0), eta_fp.shape(0)});
        std::vector<sim::sprinter::token_process_result> rs(n);
        for_each_config(n, stream, seed, first, draws, [&](std::size_t i, const sim::run_options& o) {
          rs[i] = sim::sprinter::token_process(row(p, i), row(q, i), eta_tp.data()[i], eta_fp.data()[i], o);
        });
        using R = sim::sprinter::token_process_result;
        nb::dict d;
        d["token"] = counts(rs, p.shape(1), [](const R& r) -> const sim::count_tally& { return r.token; });
        d["kept"] = column<std::uint64_t>(rs, [](const R& r) { return r.kept; });
        d["verifier_accepted"] = column<std::uint64_t>(rs, [](const R& r) { return r.verifier_accepted; });
        d["fallbacks"] = column<std::uint64_t>(rs, [](const R& r) { return r.fallbacks; });
        put_estimates(d, "acceptance", rs, [](const R& r) { return r.acceptance(); });
        put_estimates(d, "verifier_acceptance", rs, [](const R& r) { return r.verifier_acceptance(); });
        return d;
      },
      "p"_a, "q"_a, "eta_tp"_a, "eta_fp"_a, "stream"_a, "seed"_a, "first"_a, "draws"_a,
      "specdec::simulate::sprinter::token_process(p[i], q[i], eta_tp[i], eta_fp[i]): one SPRINTER position per draw "
      "on actual tokens.");
}
