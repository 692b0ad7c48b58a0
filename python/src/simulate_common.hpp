// What the simulate_* bindings share (simulate.cpp, simulate_methods.cpp): the array types, the
// running of n configurations with the GIL released, and the packing of tallies into NumPy arrays.
//
// Configuration i runs the draws [first, first + draws) of the streams (seed, stream[i])
// (simulate/options.hpp), so its result is the C++ simulator's with run_options{seed, stream[i],
// first, draws}, whatever else is simulated.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "numpy_out.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"

namespace specdec_python::simulate_common {

namespace nb = nanobind;
namespace sim = specdec::simulate;

template <class T>
using vec = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using rows = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// Row i of a C-contiguous [n, K] array.
inline std::span<const double> row(const rows& r, std::size_t i) {
  return std::span<const double>(r.data() + i * r.shape(1), r.shape(1));
}

// The n tallies as NumPy arrays (the histogram padded to the longest one).
inline nb::dict pack(const std::vector<sim::count_tally>& tallies, const std::vector<std::uint64_t>& draft_tokens) {
  const std::size_t n = tallies.size();
  std::size_t H = 1;
  for (const auto& t : tallies) H = std::max(H, t.histogram().size());
  std::unique_ptr<std::uint64_t[]> hist(new std::uint64_t[n * H]());
  std::unique_ptr<double[]> mean(new double[n]), var(new double[n]), se(new double[n]);
  std::unique_ptr<std::uint64_t[]> drafts(new std::uint64_t[n]), overflow(new std::uint64_t[n]);
  for (std::size_t i = 0; i < n; ++i) {
    const auto h = tallies[i].histogram();
    std::copy(h.begin(), h.end(), hist.get() + i * H);
    const sim::estimate e = tallies[i].summary();
    mean[i] = e.mean;
    var[i] = e.variance;
    se[i] = e.std_error;
    drafts[i] = draft_tokens[i];
    overflow[i] = tallies[i].overflow_count();
  }
  nb::dict d;
  d["histogram"] = to_numpy(std::move(hist), {n, H});
  d["mean"] = to_numpy(std::move(mean), {n});
  d["variance"] = to_numpy(std::move(var), {n});
  d["std_error"] = to_numpy(std::move(se), {n});
  d["draft_tokens"] = to_numpy(std::move(drafts), {n});
  d["overflow"] = to_numpy(std::move(overflow), {n});
  return d;
}

inline void same_count(std::size_t n, std::initializer_list<std::size_t> counts) {
  for (const std::size_t c : counts)
    if (c != n) throw nb::value_error("simulate: the parameter arrays must have one entry (or row) each");
}

// Calls f(i, options_i) for the n configurations with the GIL released.
template <class F>
void for_each_config(std::size_t n, const vec<std::uint32_t>& stream, std::uint64_t seed, std::uint64_t first,
                     std::uint64_t draws, F&& f) {
  same_count(n, {stream.shape(0)});
  nb::gil_scoped_release release;
  for (std::size_t i = 0; i < n; ++i)
    f(i, sim::run_options{.seed = seed, .stream = stream.data()[i], .first = first, .draws = draws});
}

// Runs f(i, options_i) for the n configurations with the GIL released; f returns (tally, draft tokens).
template <class F>
nb::dict run_all(std::size_t n, const vec<std::uint32_t>& stream, std::uint64_t seed, std::uint64_t first, std::uint64_t draws,
                 F&& f) {
  std::vector<sim::count_tally> tallies(n);
  std::vector<std::uint64_t> drafts(n);
  for_each_config(n, stream, seed, first, draws, [&](std::size_t i, const sim::run_options& o) {
    auto [t, d] = f(i, o);
    tallies[i] = std::move(t);
    drafts[i] = d;
  });
  return pack(tallies, drafts);
}

}  // namespace specdec_python::simulate_common
