//! \file simulate/chain.hpp
//! \brief The Bernoulli-chain kernel shared by the SD, SV and SPRINTER simulators: run independent
//! trials k = 0, 1, 2, ... that succeed with probability prob(k) until the first failure or until
//! `limit` successes, and tally the number of successes.
//!
//! This is the process behind Leviathan et al.'s eq. (1) (prob(k) = alpha, limit = gamma), SV's
//! eq. (3) (prob(k) = a[k], limit = gamma) and SPRINTER's Theorem 3.3 (prob(k) = eta_tp for k < r,
//! eta_fp after, no limit). Each trial reads one 53-bit uniform u from the draw's Philox stream and
//! succeeds iff u < prob(k), so a success has probability prob(k) up to 2^-53.
//!
//! One draw is `run_chain_draw`, host and device code: the CPU loop below and the cuda backend's
//! kernels (backend/cuda/simulate.cuh) call the same function for draw i, with the same success
//! probabilities (`constant_probability`, `table_probability`, `two_phase_probability`), so they
//! produce identical counts for the same seeds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"

namespace specdec::simulate::detail {

//! The outcome of one chain run: its successes, and the trials (uniforms) it drew.
struct chain_draw {
  std::uint64_t successes = 0;
  std::uint64_t trials = 0;
};

//! One chain run on the stream `s`: trial k succeeds iff the next uniform is < prob(k); stops at the
//! first failure or after `limit` successes (then without a further trial). Host and device.
template <class Prob>
SPECDEC_HOST_DEVICE constexpr chain_draw run_chain_draw(random::philox_stream s, std::uint64_t limit, const Prob& prob) noexcept {
  chain_draw d;
  while (d.successes < limit) {
    ++d.trials;
    if (!(s.uniform() < prob(d.successes))) break;
    ++d.successes;
  }
  return d;
}

//! prob(k) = p for every trial (SD with i.i.d. acceptance, Leviathan eq. (1)).
struct constant_probability {
  double p;
  SPECDEC_HOST_DEVICE constexpr double operator()(std::uint64_t) const noexcept { return p; }
};

//! prob(k) = p[k] (position-dependent acceptance; SV's a[k]). `p` holds at least `limit` entries
//! (host memory for the CPU loop, device memory in a kernel).
struct table_probability {
  const double* p;
  SPECDEC_HOST_DEVICE constexpr double operator()(std::uint64_t k) const noexcept { return p[k]; }
};

//! prob(k) = head for k < r, tail after (SPRINTER's i.i.d. verifier, Theorem 3.3).
struct two_phase_probability {
  double head, tail;
  std::uint64_t r;
  SPECDEC_HOST_DEVICE constexpr double operator()(std::uint64_t k) const noexcept { return k < r ? head : tail; }
};

//! The raw outcome of a chain run: successes per draw, and the total number of trials drawn.
struct chain_counts {
  count_tally successes;
  std::uint64_t trials = 0;
};

//! Runs options.draws chains (`run_chain_draw` for draws first, first + 1, ...); `prob(k)` is the
//! success probability of trial k (0-based), `limit` the largest number of successes. The caller
//! guarantees that the chain ends with probability 1 (prob(k) < 1 eventually, or a finite limit).
//! `reserve` sizes the histogram (values beyond it grow it).
template <class Prob>
chain_counts run_bernoulli_chain(std::uint64_t limit, const Prob& prob, const run_options& options, std::size_t reserve) {
  chain_counts out{count_tally(reserve), 0};
  const std::uint64_t end = options.first + options.draws;
  for (std::uint64_t i = options.first; i != end; ++i) {
    const chain_draw d = run_chain_draw(draw_stream(options, i), limit, prob);
    out.trials += d.trials;
    out.successes.add(d.successes);
  }
  return out;
}

}  // namespace specdec::simulate::detail
