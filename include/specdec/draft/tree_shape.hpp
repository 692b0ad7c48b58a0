//! \file draft/tree_shape.hpp
//! \brief Static draft-tree shapes: Medusa-style choice lists (Cai et al. 2024, arXiv 2401.10774,
//! section 2.1.2 "tree attention") and full top-k expansions.
//!
//! A shape says which candidates a static tree drafter (draft/tree.hpp) keeps, before any token is
//! known. Node 0 is the root (the verified context). Every other node is a *choice*: the path of
//! candidate ranks from the root, e.g. {0, 1} = "the rank-1 candidate among the children of the
//! rank-0 candidate of the root". The i-th element of a choice is a rank among the candidates drawn
//! at depth i (Medusa: the top-k index of head i; here: the rank under the drafter's `tree_sampling`).
//!
//! **Numbering** (Medusa's `generate_medusa_buffers`, `sorted(choices, key=lambda x: (len(x), x))`):
//! the choices sorted by (length, lexicographic order of the ranks); node i + 1 is the i-th of them.
//! Hence parent(n) < n, the nodes of one depth are consecutive, and siblings have ascending ranks
//! (and ascending ids).
//!
//! **Draws per node.** A node whose children have ranks r_1 < ... < r_m needs r_m + 1 candidates
//! (`candidates(n)`): the drafter draws that many at the node and keeps the ranks the shape names.
//! `has_rank_prefixes()` says whether every node's child ranks are exactly 0..m-1, which recursive
//! rejection sampling needs (a kept draw must be the j-th draw without replacement).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/tree.hpp"

namespace specdec {

//! A static tree shape: a parent, a candidate rank and a depth per node (node 0 = root). Building
//! one validates it; a tree_shape always describes a well-formed tree.
class tree_shape {
 public:
  //! The largest number of nodes a shape may have (root included): 2^20.
  static constexpr std::size_t max_nodes = std::size_t{1} << 20;

  //! The root alone: a tree that drafts nothing.
  tree_shape() { add_node(no_node, 0); }

  //! The shape of a Medusa choice list. The choices may come in any order; they are numbered after
  //! sorting by (length, lexicographic), see the file comment.
  //! \throws specdec::error when a choice is empty, holds a negative rank, appears twice, or its
  //!         prefix (the choice without its last rank) is not a choice itself; or when there are
  //!         more than max_nodes - 1 choices
  static tree_shape from_choices(const std::vector<std::vector<std::int32_t>>& choices) {
    SPECDEC_EXPECTS(choices.size() < max_nodes, "tree_shape: too many choices (max_nodes)");
    std::vector<std::vector<std::int32_t>> sorted = choices;
    const auto medusa_order = [](const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    };
    std::sort(sorted.begin(), sorted.end(), medusa_order);
    tree_shape shape;
    shape.reserve(sorted.size() + 1);
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      const std::vector<std::int32_t>& choice = sorted[i];
      SPECDEC_EXPECTS(!choice.empty(), "tree_shape: an empty choice (the root is implicit)");
      SPECDEC_EXPECTS(std::all_of(choice.begin(), choice.end(), [](std::int32_t r) { return r >= 0; }),
                      "tree_shape: a negative rank in a choice");
      SPECDEC_EXPECTS(i == 0 || sorted[i - 1] != choice, "tree_shape: a choice appears twice");
      std::int32_t parent = 0;
      if (choice.size() > 1) {
        const std::vector<std::int32_t> prefix(choice.begin(), choice.end() - 1);
        const auto end = sorted.begin() + static_cast<std::ptrdiff_t>(i);
        const auto at = std::lower_bound(sorted.begin(), end, prefix, medusa_order);
        SPECDEC_EXPECTS(at != end && *at == prefix, "tree_shape: a choice whose prefix is not a choice");
        parent = static_cast<std::int32_t>(at - sorted.begin()) + 1;
      }
      shape.add_node(parent, choice.back());
    }
    return shape;
  }

  //! The full tree of a top-k expansion: every node of depth d - 1 (d = 1..branching.size()) has
  //! branching[d - 1] children of ranks 0..branching[d - 1] - 1. It is the shape of the choice list
  //! of every rank path (r_1..r_d) with r_i < branching[i - 1], with the same numbering (level
  //! order; children of earlier parents first). Node count 1 + sum_d prod_{i <= d} branching[i - 1].
  //! \throws specdec::error when the tree would exceed max_nodes nodes
  static tree_shape full(const std::vector<std::size_t>& branching) {
    tree_shape shape;
    std::size_t level_begin = 0, level_end = 1, total = 1;
    for (const std::size_t k : branching) {
      const std::size_t level_size = level_end - level_begin;
      SPECDEC_EXPECTS(k == 0 || level_size <= (max_nodes - total) / k, "tree_shape: the full tree exceeds max_nodes");
      total += level_size * k;
      shape.reserve(total);
      for (std::size_t parent = level_begin; parent < level_end; ++parent)
        for (std::size_t r = 0; r < k; ++r) shape.add_node(static_cast<std::int32_t>(parent), static_cast<std::int32_t>(r));
      level_begin = level_end;
      level_end = total;
    }
    return shape;
  }

  //! Nodes, the root included.
  std::size_t num_nodes() const noexcept { return parent_.size(); }
  //! The deepest node's depth (0 for the root alone).
  std::size_t max_depth() const noexcept { return level_begin_.size() - 2; }
  //! The parent of node n (`no_node` for the root).
  std::int32_t parent(std::size_t n) const noexcept { return parent_[n]; }
  //! The rank of node n among the candidates drawn at its parent (0 for the root).
  std::int32_t rank(std::size_t n) const noexcept { return rank_[n]; }
  //! Edges from the root.
  std::int32_t depth(std::size_t n) const noexcept { return depth_[n]; }
  //! The candidates a drafter draws at node n: 1 + the largest rank among its children, 0 for a leaf.
  std::size_t candidates(std::size_t n) const noexcept { return static_cast<std::size_t>(candidates_[n]); }
  //! The largest candidates(n) of the shape.
  std::size_t max_candidates() const noexcept {
    return static_cast<std::size_t>(*std::max_element(candidates_.begin(), candidates_.end()));
  }
  //! The first node of depth d; the nodes of depth d are level_begin(d) .. level_begin(d + 1) - 1.
  //! \pre d <= max_depth() + 1
  std::size_t level_begin(std::size_t d) const noexcept { return level_begin_[d]; }
  //! The parent of every node, as `tree_layout::from_parents` takes them.
  std::span<const std::int32_t> parents() const noexcept { return parent_; }
  //! True when the child ranks of every node are exactly 0..m-1 (m = its number of children), so that
  //! the children are the node's first m draws: what recursive rejection sampling needs.
  bool has_rank_prefixes() const noexcept {
    std::vector<std::int32_t> children(num_nodes(), 0);
    for (std::size_t n = 1; n < num_nodes(); ++n) ++children[static_cast<std::size_t>(parent_[n])];
    return std::equal(children.begin(), children.end(), candidates_.begin());
  }

 private:
  void reserve(std::size_t n) {
    parent_.reserve(n);
    rank_.reserve(n);
    depth_.reserve(n);
    candidates_.reserve(n);
  }
  // Appends a node; nodes arrive in level order, so the level table grows with them.
  void add_node(std::int32_t parent, std::int32_t rank) {
    const std::int32_t depth = parent == no_node ? 0 : depth_[static_cast<std::size_t>(parent)] + 1;
    parent_.push_back(parent);
    rank_.push_back(rank);
    depth_.push_back(depth);
    candidates_.push_back(0);
    if (parent != no_node) {
      std::int32_t& c = candidates_[static_cast<std::size_t>(parent)];
      c = std::max(c, rank + 1);
    }
    if (level_begin_.empty())
      level_begin_ = {0, 1};
    else if (static_cast<std::size_t>(depth) + 2 > level_begin_.size())
      level_begin_.push_back(num_nodes());
    else
      level_begin_.back() = num_nodes();
  }

  std::vector<std::int32_t> parent_, rank_, depth_, candidates_;
  std::vector<std::size_t> level_begin_;  // max_depth + 2 entries: level d is [level_begin_[d], level_begin_[d + 1])
};

//! The choice list of `default_tree_shape()`: 14 drafted nodes over 3 levels, built for specdec
//! (not Medusa's tuned `mc_sim_7b_63`). More children go to higher-ranked candidates, because a
//! path's acceptance falls with the ranks along it: ranks 0-3 at depth 1, three children under
//! rank 0, two under rank 1, one under rank 2; at depth 3, two under {0, 0} and one under {0, 1}
//! and {1, 0}. Every node's child ranks are 0..m-1 (`has_rank_prefixes()`), so the shape suits
//! every sampling mode and verification rule.
inline std::vector<std::vector<std::int32_t>> default_tree_choices() {
  return {{0},       {1},       {2},       {3},                       // depth 1
          {0, 0},    {0, 1},    {0, 2},    {1, 0},   {1, 1}, {2, 0},  // depth 2
          {0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {1, 0, 0}};                // depth 3
}

//! A ready-made small static shape (15 nodes, depth 3): `tree_shape::from_choices(default_tree_choices())`.
inline tree_shape default_tree_shape() { return tree_shape::from_choices(default_tree_choices()); }

}  // namespace specdec
