//! \file decode/cost_model.hpp
//! \brief A latency model for simulated time: a draft call costs t_draft, a target call that scores
//! k positions costs t_target_base + k * t_target_per_token (constant-then-linear, as SV's assumption D.10
//! simplifies it; the memory-bound regime of a real target has a small per-token term).
#pragma once

#include <cmath>
#include <cstddef>

#include "specdec/contracts.hpp"

namespace specdec {

//! Times in any unit (the demo uses milliseconds). c = t_draft / t_target(1) is Leviathan's cost coefficient.
struct cost_model {
  double t_draft = 0.05;            //!< one draft-model call
  double t_target_base = 1.0;       //!< a target call's fixed cost
  double t_target_per_token = 0.0;  //!< each position a target call scores

  //! The time of one target call that scores k positions.
  constexpr double target_time(std::size_t k) const noexcept {
    return t_target_base + static_cast<double>(k) * t_target_per_token;
  }
  //! Leviathan's c: cost of a draft call over the cost of a one-position target call.
  constexpr double cost_coefficient() const noexcept { return t_draft / target_time(1); }
  //! The time of a round with `draft_steps` draft calls and a target call scoring `target_positions`
  //! positions (none when 0).
  constexpr double round_time(std::size_t draft_steps, std::size_t target_positions) const noexcept {
    return static_cast<double>(draft_steps) * t_draft + (target_positions > 0 ? target_time(target_positions) : 0.0);
  }
};

//! The simulated clock: an observer of the step decoder's events (decode/batch_decoder.hpp's
//! `step_event`: `draft_steps`, `target_positions`) that charges each round under a cost model. The
//! decoder keeps no clock; the research entry points (decode/decode.hpp) run one per request and
//! report it as `decode_stats::simulated_time`.
struct simulated_clock {
  cost_model cost{};  //!< the times charged
  double time = 0.0;  //!< the time so far

  //! Charges one step event's round.
  template <class StepEvent>
  void operator()(const StepEvent& e) noexcept {
    time += cost.round_time(e.draft_steps, e.target_positions);
  }
};

//! \throws specdec::error unless every time is finite and >= 0 and a target call costs > 0.
inline void validate(const cost_model& c) {
  SPECDEC_EXPECTS(std::isfinite(c.t_draft) && c.t_draft >= 0.0, "t_draft must be finite and >= 0");
  SPECDEC_EXPECTS(std::isfinite(c.t_target_base) && c.t_target_base >= 0.0, "t_target_base must be finite and >= 0");
  SPECDEC_EXPECTS(std::isfinite(c.t_target_per_token) && c.t_target_per_token >= 0.0,
                  "t_target_per_token must be finite and >= 0");
  SPECDEC_EXPECTS(c.target_time(1) > 0.0, "a target call must cost > 0");
}

}  // namespace specdec
