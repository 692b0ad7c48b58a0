//! \file simulate/chain.hpp
//! \brief The Bernoulli-chain kernel shared by the SD, SV and SPRINTER simulators: run independent
//! trials k = 0, 1, 2, ... that succeed with probability prob(k) until the first failure or until
//! `limit` successes, and tally the number of successes.
//!
//! This is the process behind Leviathan et al.'s eq. (1) (prob(k) = alpha, limit = gamma), SV's
//! eq. (3) (prob(k) = a[k], limit = gamma) and SPRINTER's Theorem 3.3 (prob(k) = eta_tp for k < r,
//! eta_fp after, no limit). Each trial reads one 53-bit uniform u from the draw's Philox stream and
//! succeeds iff u < prob(k), so a success has probability prob(k) up to 2^-53.
#pragma once

#include <cstddef>
#include <cstdint>

#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"

namespace specdec::simulate::detail {

//! The raw outcome of a chain run: successes per draw, and the total number of trials drawn.
struct chain_counts {
  count_tally successes;
  std::uint64_t trials = 0;
};

//! Runs options.draws chains; `prob(k)` is the success probability of trial k (0-based), `limit`
//! the largest number of successes (the chain stops there without a further trial). The caller
//! guarantees that the chain ends with probability 1 (prob(k) < 1 eventually, or a finite limit).
//! `reserve` sizes the histogram (values beyond it grow it).
template <class Prob>
chain_counts run_bernoulli_chain(std::uint64_t limit, Prob&& prob, const run_options& options, std::size_t reserve) {
  chain_counts out{count_tally(reserve), 0};
  const std::uint64_t end = options.first + options.draws;
  std::uint64_t trials = 0;
  for (std::uint64_t i = options.first; i != end; ++i) {
    auto s = draw_stream(options, i);
    std::uint64_t k = 0;
    while (k < limit) {
      ++trials;
      if (!(s.uniform() < prob(k))) break;
      ++k;
    }
    out.successes.add(k);
  }
  out.trials = trials;
  return out;
}

}  // namespace specdec::simulate::detail
