// specdec._core.simulate_*: the Monte-Carlo simulators of include/specdec/simulate/ (exec::seq), mapped
// over arrays of parameters.
//
// As theory.cpp: each parameter is a 1-D array of n entries (rows: a C-contiguous [n, K] array),
// already broadcast by the Python layer (specdec/simulate.py). Configuration i runs the draws
// [first, first + draws) of the streams (seed, stream[i]) (simulate/options.hpp), so its result is
// the C++ simulator's with run_options{seed, stream[i], first, draws}, whatever else is simulated.
// Each returns a dict of new NumPy arrays: histogram [n, H] (uint64; H the largest histogram of the
// n runs, zero-padded), mean, variance, std_error [n] (of the tallied value), draft_tokens [n].
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "numpy_out.hpp"
#include "simulate_common.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/sprinter.hpp"

namespace nb = nanobind;
using namespace nb::literals;
namespace sim = specdec::simulate;
using specdec_python::to_numpy;
using namespace specdec_python::simulate_common;

void bind_simulate(nb::module_& m) {
  m.def(
      "simulate_sd_chain",
      [](const vec<double>& alpha, const vec<std::int32_t>& gamma, const vec<std::uint32_t>& stream, std::uint64_t seed,
         std::uint64_t first, std::uint64_t draws) {
        same_count(alpha.shape(0), {gamma.shape(0)});
        return run_all(alpha.shape(0), stream, seed, first, draws, [&](std::size_t i, const sim::run_options& o) {
          auto r = sim::sd::chain(alpha.data()[i], specdec_python::non_negative(gamma.data()[i], "gamma"), o);
          return std::pair{std::move(r.accepted), r.draft_tokens};
        });
      },
      "alpha"_a, "gamma"_a, "stream"_a, "seed"_a, "first"_a, "draws"_a,
      "specdec::simulate::sd::chain(alpha[i], gamma[i]): accepted drafts per iteration.");
  m.def(
      "simulate_sd_chain_rows",
      [](const rows& alphas, const vec<std::uint32_t>& stream, std::uint64_t seed, std::uint64_t first, std::uint64_t draws) {
        const std::size_t K = alphas.shape(1);
        return run_all(alphas.shape(0), stream, seed, first, draws, [&](std::size_t i, const sim::run_options& o) {
          auto r = sim::sd::chain(std::span<const double>(alphas.data() + i * K, K), o);
          return std::pair{std::move(r.accepted), r.draft_tokens};
        });
      },
      "alphas"_a, "stream"_a, "seed"_a, "first"_a, "draws"_a,
      "specdec::simulate::sd::chain(alphas[i]): accepted drafts per iteration, position-dependent acceptance.");
  m.def(
      "simulate_sprinter_chain",
      [](const vec<double>& eta_tp, const vec<double>& eta_fp, const vec<std::int32_t>& r, const vec<std::uint32_t>& stream,
         std::uint64_t seed, std::uint64_t first, std::uint64_t draws) {
        same_count(eta_tp.shape(0), {eta_fp.shape(0), r.shape(0)});
        return run_all(eta_tp.shape(0), stream, seed, first, draws, [&](std::size_t i, const sim::run_options& o) {
          auto t = sim::sprinter::verifier_chain(eta_tp.data()[i], eta_fp.data()[i], r.data()[i], o);
          return std::pair{std::move(t.accepted), t.draft_tokens};
        });
      },
      "eta_tp"_a, "eta_fp"_a, "r"_a, "stream"_a, "seed"_a, "first"_a, "draws"_a,
      "specdec::simulate::sprinter::verifier_chain(eta_tp[i], eta_fp[i], r[i]): N per run.");
  m.def(
      "simulate_sd_token_process",
      [](double lenience, const vec<double>& p, const vec<double>& q, int gamma, std::uint32_t stream, std::uint64_t seed,
         std::uint64_t first, std::uint64_t draws) {
        const std::span<const double> ps(p.data(), p.shape(0)), qs(q.data(), q.shape(0));
        sim::sd::token_process_result r;
        {
          nb::gil_scoped_release release;
          const sim::run_options o{.seed = seed, .stream = stream, .first = first, .draws = draws};
          const std::size_t g = specdec_python::non_negative(gamma, "gamma");
          r = lenience == 1.0 ? sim::sd::token_process(specdec::strict, ps, qs, g, o)
                              : sim::sd::token_process(specdec::lenient_rule{lenience}, ps, qs, g, o);
        }
        nb::dict d = pack({r.chain.accepted}, {r.chain.draft_tokens});
        const auto hist = [](const sim::count_tally& t, std::size_t V) {
          std::unique_ptr<std::uint64_t[]> h(new std::uint64_t[V]());
          for (std::size_t v = 0; v < V; ++v) h[v] = t.count_of(v);
          return to_numpy(std::move(h), {V});
        };
        d["first_token"] = hist(r.first_token, ps.size());
        d["bonus_token"] = hist(r.bonus_token, ps.size());
        d["first_accepted"] = r.first_accepted;
        d["fallbacks"] = r.fallbacks;
        return d;
      },
      "lenience"_a, "p"_a, "q"_a, "gamma"_a, "stream"_a, "seed"_a, "first"_a, "draws"_a,
      "specdec::simulate::sd::token_process(strict (lenience 1) or lenient_rule{lenience}, p, q, gamma).");
}
