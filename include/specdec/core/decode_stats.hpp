//! \file core/decode_stats.hpp
//! \brief What a generation counts per request: calls, acceptance per position, tokens, simulated and wall
//! time (kept by the step decoder, read by length policies and the single-request functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specdec {

//! Counters of one generation. Per-position vectors grow to the longest draft seen.
struct decode_stats {
  std::size_t iterations = 0;            //!< verification rounds (one target call each)
  std::size_t target_calls = 0;          //!< target-model calls (one per round that called the target)
  std::size_t target_positions = 0;      //!< positions the target scored, summed over calls
  std::size_t draft_calls = 0;           //!< draft-model evaluations, wasted drafts included
  std::size_t drafted = 0;               //!< draft tokens proposed
  std::size_t accepted = 0;              //!< draft tokens accepted
  std::size_t emitted = 0;               //!< tokens appended to the output (accepted + corrections + bonus)
  std::vector<std::size_t> drafted_at;   //!< drafted_at[i]: rounds that drafted a token at position i
  std::vector<std::size_t> accepted_at;  //!< accepted_at[i]: rounds that accepted the token at position i
  double simulated_time = 0.0;           //!< from the cost model
  double wall_seconds = 0.0;             //!< measured

  //! Accepted draft tokens per round (the "mean accepted length" of vLLM's metrics).
  double mean_accepted_length() const noexcept { return iterations ? double(accepted) / double(iterations) : 0.0; }
  //! Accepted over drafted tokens.
  double acceptance_rate() const noexcept { return drafted ? double(accepted) / double(drafted) : 0.0; }
  //! Emitted tokens per target call (Leviathan's expected tokens per iteration, measured).
  double tokens_per_target_call() const noexcept { return target_calls ? double(emitted) / double(target_calls) : 0.0; }
  //! P(accept position i | position i was drafted and reached).
  double acceptance_at(std::size_t i) const noexcept {
    return i < drafted_at.size() && drafted_at[i] ? double(accepted_at[i]) / double(drafted_at[i]) : 0.0;
  }

  //! Adds another run's counters to these (per-position vectors are summed entry by entry).
  void merge(const decode_stats& o) {
    iterations += o.iterations;
    target_calls += o.target_calls;
    target_positions += o.target_positions;
    draft_calls += o.draft_calls;
    drafted += o.drafted;
    accepted += o.accepted;
    emitted += o.emitted;
    simulated_time += o.simulated_time;
    wall_seconds += o.wall_seconds;
    if (drafted_at.size() < o.drafted_at.size()) {
      drafted_at.resize(o.drafted_at.size(), 0);
      accepted_at.resize(o.drafted_at.size(), 0);
    }
    for (std::size_t i = 0; i < o.drafted_at.size(); ++i) {
      drafted_at[i] += o.drafted_at[i];
      accepted_at[i] += o.accepted_at[i];
    }
  }

  //! Records one round that drafted `gamma` tokens and accepted the first `n_accepted`.
  void record_round(std::size_t gamma, std::size_t n_accepted) {
    if (drafted_at.size() < gamma) {
      drafted_at.resize(gamma, 0);
      accepted_at.resize(gamma, 0);
    }
    for (std::size_t i = 0; i < gamma; ++i) ++drafted_at[i];
    for (std::size_t i = 0; i < n_accepted; ++i) ++accepted_at[i];
    ++iterations;
    drafted += gamma;
    accepted += n_accepted;
  }
};

}  // namespace specdec
