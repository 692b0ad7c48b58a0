//! \file simulate/tree.hpp
//! \brief Monte-Carlo simulator of token-tree verification under per-node acceptance, the process
//! behind theory/tree.hpp: from the root, try the children of the reached node in sibling order, each
//! child n accepted by its own coin u < alpha_n; descend into the first accepted child; stop at a node
//! whose children all fail (or that has none). Tallies the accepted drafts A (the depth of the last
//! reached node), the node where the path ended, and the coins drawn.
//! Randomness: simulate/options.hpp (one Philox stream per draw, one uniform per coin).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/core/tree.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"
#include "specdec/theory/tree.hpp"

namespace specdec::simulate::detail {

//! What one walk down the tree produced.
struct tree_walk_draw {
  std::size_t last_node = 0;   //!< the last reached node (0: every child of the root failed)
  std::uint64_t accepted = 0;  //!< its depth: the accepted drafts
  std::uint64_t coins = 0;     //!< acceptance tests drawn
};

//! One walk down request b's tree on the stream `s` (the per-draw step of `tree::walk`).
inline tree_walk_draw walk_tree_once(const tree_layout& layout, std::size_t b, std::span<const double> alphas,
                                     random::philox_stream s) {
  tree_walk_draw d;
  for (bool descended = true; descended;) {
    descended = false;
    for (std::int32_t c = layout.first_child(b, d.last_node); c != no_node;
         c = layout.next_sibling(b, static_cast<std::size_t>(c))) {
      ++d.coins;
      if (s.uniform() < alphas[static_cast<std::size_t>(c)]) {
        d.last_node = static_cast<std::size_t>(c);
        ++d.accepted;
        descended = true;
        break;
      }
    }
  }
  return d;
}

}  // namespace specdec::simulate::detail

namespace specdec::simulate::tree {

//! The outcome of simulated tree verifications.
struct walk_result {
  count_tally accepted;     //!< accepted drafts per step, A in {0..depth of the tree}
  count_tally last_node;    //!< the node each accepted path ended at (law: theory::tree::end_probabilities)
  std::uint64_t coins = 0;  //!< acceptance tests drawn in all

  //! E[A] (theory::tree::expected_accepted).
  estimate mean_accepted() const noexcept { return accepted.summary(); }
};

//! Simulates options.draws verifications of request b's tree with per-node acceptance alphas[n]
//! (alphas[0], the root's, is ignored).
//! \pre b < layout.batch_size(); alphas.size() == layout.num_nodes(b); alphas[n] in [0, 1] for
//!      n >= 1; first + draws does not overflow.
//! \throws specdec::error otherwise.
inline walk_result walk(const tree_layout& layout, std::size_t b, std::span<const double> alphas, const run_options& options) {
  theory::tree::detail::check_node_alphas(layout, b, alphas);
  SPECDEC_EXPECTS(detail::valid_range(options), "first + draws overflows");
  walk_result r{count_tally(layout.max_depth() + 1), count_tally(layout.num_nodes(b)), 0};
  const std::uint64_t end = options.first + options.draws;
  for (std::uint64_t i = options.first; i != end; ++i) {
    const detail::tree_walk_draw d = detail::walk_tree_once(layout, b, alphas, draw_stream(options, i));
    r.accepted.add(d.accepted);
    r.last_node.add(d.last_node);
    r.coins += d.coins;
  }
  return r;
}

}  // namespace specdec::simulate::tree
