//! \file acceptance/typical.hpp
//! \brief Typical acceptance (Medusa, Cai et al. 2024, arXiv 2401.10774, section 2.3.1). **Lossy.**
//!
//! Accept the drafted x at a position with target row p iff
//!   p(x) > min(epsilon, delta * exp(-H(p))),   H(p) = -sum_v p(v) log(p(v) + log_offset)
//! and keep the longest accepted prefix; on a tree, the deepest node whose whole path is accepted
//! (ties: the larger sum of log p(x) along the path, then the lower node id). After the accepted
//! prefix one token is emitted from the row of its last node, by `typical_correction`:
//!  - `argmax`: argmax p (Medusa's `fast` mode, its default);
//!  - `typical_sample`: a sample of p restricted to {v : p(v) >= threshold}, renormalised (Medusa's
//!    non-fast `get_typical_one_token`).
//! Neither reads q nor draws acceptance coins.
//!
//! **What it produces** (not the target's law): a one-hot p (H = 0, threshold min(epsilon, delta))
//! accepts only its argmax; a uniform p over V tokens (threshold min(epsilon, delta / V) < 1 / V)
//! accepts every token. In between, high-entropy rows accept almost any draft (the threshold
//! delta e^-H is tiny), so the output law is tilted towards the draft. Its total variation from the
//! target is measured on a Markov pair in tests/acceptance/typical.cpp and reported in docs/trees.md.
//! Defaults epsilon = 0.09, delta = 0.3 are Medusa's (`posterior_threshold`, `posterior_alpha`);
//! Medusa and vLLM V0 compute H with log(p + 1e-5): set `log_offset = 1e-5` to reproduce their
//! thresholds; the default 0 is the exact entropy.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/contracts.hpp"

namespace specdec {

//! The token typical acceptance emits after the accepted prefix.
enum class typical_correction : unsigned char {
  argmax,          //!< argmax p (Medusa `fast`)
  typical_sample,  //!< a sample of p restricted to p(v) >= threshold
};

//! Typical acceptance with threshold min(epsilon, delta exp(-H(p))).
struct typical_rule {
  //! Decided by p alone against the entropy threshold (rule_family::typical).
  static constexpr rule_family family = rule_family::typical;
  //! On a tree: the deepest passing path (lossy, acceptance/typical.hpp).
  static constexpr tree_method method = tree_method::typical;
  double epsilon = 0.09;    //!< the hard threshold (Medusa's posterior_threshold)
  double delta = 0.3;       //!< the entropy-scaled threshold's factor (Medusa's posterior_alpha)
  double log_offset = 0.0;  //!< H uses log(p + log_offset); Medusa and vLLM V0 use 1e-5
  //! The token emitted after the accepted prefix (argmax p by default).
  typical_correction correction = typical_correction::argmax;

  //! Equal parameters.
  bool operator==(const typical_rule&) const = default;

  //! \throws specdec::error unless epsilon, delta are finite and >= 0 and log_offset is finite and >= 0
  void validate() const {
    SPECDEC_EXPECTS(std::isfinite(epsilon) && epsilon >= 0.0, "typical_rule: epsilon must be finite and >= 0");
    SPECDEC_EXPECTS(std::isfinite(delta) && delta >= 0.0, "typical_rule: delta must be finite and >= 0");
    SPECDEC_EXPECTS(std::isfinite(log_offset) && log_offset >= 0.0, "typical_rule: log_offset must be finite and >= 0");
  }

  //! min(epsilon, delta exp(-H(p))) for a row p; NaN when the row holds a NaN, infinite or negative
  //! entry (the caller flags the row), so that no comparison with it passes.
  template <class T>
  double threshold(std::span<const T> p) const {
    double entropy = 0.0;
    bool usable = true;
    for (const T x : p) {
      const double v = static_cast<double>(x);
      usable = usable && v >= 0.0 && std::isfinite(v);
      if (v > 0.0) entropy -= v * std::log(v + log_offset);
    }
    if (!usable || !std::isfinite(entropy)) return std::nan("");
    const double scaled = delta * std::exp(-entropy);
    return scaled < epsilon ? scaled : epsilon;
  }
};

}  // namespace specdec
