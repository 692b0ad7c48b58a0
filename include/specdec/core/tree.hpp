//! \file core/tree.hpp
//! \brief Ragged batches of token trees: request b drafts a tree of n_b + 1 nodes.
//!
//! Node 0 of every tree is the root: the request's verified context, with no token of its own
//! (a token given for it is ignored). Nodes 1..n_b hold drafted tokens; the parent of node i is
//! an earlier node (parent(i) < i), which makes cycles impossible and lets every pass over a tree run
//! in node order. A node's children are visited in sibling order: ascending node id when the tree
//! is built from parents or paths, the caller's order when built from sibling lists.
//!
//! Rows: every node n has one target row, p(. | context, path to n), and optionally one draft row,
//! q(. | context, path to n): the distributions its children are verified against and were drafted
//! from. Request b's rows are rows `node_row(b, 0) .. node_row(b, n_b)`, packed in request order
//! ([sum (n_b + 1)][V]). A chain of n drafts is the one-branch tree 0 -> 1 -> ... -> n; its
//! target rows are the chain's n + 1 rows, its draft rows the chain's n rows plus one row for the
//! leaf (never read).
//!
//! Converters take the layouts engines use: a parent per node; SGLang's first-child / next-sibling
//! arrays (`retrive_next_token`, `retrive_next_sibling`); and root-to-leaf path lists (Medusa and
//! EAGLE's `retrieve_indices`, TensorRT-LLM's `paths`).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/errors.hpp"

namespace specdec {

//! "No node here": the parent of a root, the end of a child or sibling list, path padding.
inline constexpr std::int32_t no_node = -1;

//! The shapes of a batch of token trees: per request, the parent, first child, next sibling and
//! depth of each node (local ids, 0 = root). Building one validates it; a tree_layout is always a
//! forest of well-formed trees.
class tree_layout {
 public:
  tree_layout() = default;

  //! Trees from parent arrays: `parents` holds, request after request, the parent of each of the
  //! request's `num_nodes[b]` nodes (local ids; the root's entry must be `no_node`).
  //! \throws specdec::error if a request has no node, or a node's parent is not an earlier node
  static tree_layout from_parents(std::span<const std::int32_t> num_nodes, std::span<const std::int32_t> parents) {
    tree_layout l;
    l.assign_parents(num_nodes, parents);
    return l;
  }

  //! Makes this layout `from_parents(...)`, reusing its buffers (no allocation once they are large
  //! enough: what a decode loop calls every step).
  void assign_parents(std::span<const std::int32_t> num_nodes, std::span<const std::int32_t> parents) {
    reset(num_nodes);
    SPECDEC_EXPECTS(parents.size() == num_rows(), "tree_layout: one parent per node is required");
    for (std::size_t b = 0; b < batch_size(); ++b) {
      const std::size_t base = static_cast<std::size_t>(offsets_[b]);
      SPECDEC_EXPECTS(parents[base] == no_node, "tree_layout: a root (node 0) has a parent");
      for (std::size_t i = 1; i < num_nodes_of(b); ++i) {
        const std::int32_t parent = parents[base + i];
        SPECDEC_EXPECTS(parent >= 0 && static_cast<std::size_t>(parent) < i,
                        "tree_layout: a node's parent is not an earlier node of its tree");
        parent_[base + i] = parent;
      }
      link_children_in_id_order(b);
    }
    finish();
  }

  //! Trees from first-child / next-sibling lists (SGLang's `retrive_next_token`,
  //! `retrive_next_sibling`), local ids, `no_node` ends a list. Siblings keep the lists' order.
  //! \throws specdec::error if a list points outside its tree, a node is reached twice or never,
  //! or a child is not later than its parent
  static tree_layout from_sibling_lists(std::span<const std::int32_t> num_nodes, std::span<const std::int32_t> first_child,
                                        std::span<const std::int32_t> next_sibling) {
    tree_layout l;
    l.reset(num_nodes);
    SPECDEC_EXPECTS(first_child.size() == l.num_rows() && next_sibling.size() == l.num_rows(),
                    "tree_layout: first_child and next_sibling need one entry per node");
    for (std::size_t b = 0; b < l.batch_size(); ++b) {
      const std::size_t base = static_cast<std::size_t>(l.offsets_[b]), n = l.num_nodes_of(b);
      const auto in_tree = [n](std::int32_t id) { return id == no_node || (id >= 0 && static_cast<std::size_t>(id) < n); };
      for (std::size_t i = 0; i < n; ++i)  // every id is checked before any list is followed
        SPECDEC_EXPECTS(in_tree(first_child[base + i]) && in_tree(next_sibling[base + i]),
                        "tree_layout: a child or sibling id outside its tree");
      std::size_t linked = 0;  // a well-formed tree links exactly n - 1 children; more means a cycle or a shared node
      for (std::size_t i = 0; i < n; ++i) {
        for (std::int32_t c = first_child[base + i]; c != no_node; c = next_sibling[base + static_cast<std::size_t>(c)]) {
          ++linked;  // outside the check: SPECDEC_CONTRACTS_OFF compiles the condition away
          SPECDEC_EXPECTS(linked < n, "tree_layout: sibling lists longer than the tree (a cycle or a shared node)");
          SPECDEC_EXPECTS(static_cast<std::size_t>(c) > i, "tree_layout: a child is not later than its parent");
          SPECDEC_EXPECTS(l.parent_[base + static_cast<std::size_t>(c)] == no_node, "tree_layout: a node has two parents");
          l.parent_[base + static_cast<std::size_t>(c)] = static_cast<std::int32_t>(i);
        }
        l.first_child_[base + i] = first_child[base + i];
        l.next_sibling_[base + i] = next_sibling[base + i];
      }
      SPECDEC_EXPECTS(linked + 1 == n, "tree_layout: a node is not reached from the root");
      SPECDEC_EXPECTS(next_sibling[base] == no_node, "tree_layout: the root has a sibling");
    }
    l.finish();
    return l;
  }

  //! Trees from root-to-leaf paths (Medusa/EAGLE `retrieve_indices`, TensorRT-LLM `paths`): request b
  //! has `num_paths[b]` rows of `width` local node ids, request after request, each starting at the
  //! root 0 and ending at `no_node` padding (a row that starts with `no_node` is unused). Siblings
  //! are ordered by node id.
  //! \throws specdec::error if a path does not start at the root, a node gets two parents, a node
  //! is on no path, or a child is not later than its parent
  static tree_layout from_paths(std::span<const std::int32_t> num_nodes, std::span<const std::int32_t> num_paths,
                                std::size_t width, std::span<const std::int32_t> paths) {
    SPECDEC_EXPECTS(num_paths.size() == num_nodes.size(), "tree_layout: one path count per request is required");
    std::size_t rows = 0;
    for (const auto k : num_paths) {
      SPECDEC_EXPECTS(k >= 0, "tree_layout: a negative path count");
      rows += static_cast<std::size_t>(k);
    }
    SPECDEC_EXPECTS(paths.size() == rows * width, "tree_layout: paths must hold sum(num_paths) rows of `width` ids");
    std::vector<std::int32_t> parents;
    std::size_t row = 0;
    for (std::size_t b = 0; b < num_nodes.size(); ++b) {
      SPECDEC_EXPECTS(num_nodes[b] >= 1, "tree_layout: a tree needs its root");
      const std::size_t n = static_cast<std::size_t>(num_nodes[b]), base = parents.size();
      parents.resize(base + n, no_node - 1);  // "not yet seen"
      parents[base] = no_node;
      for (std::int32_t k = 0; k < num_paths[b]; ++k, ++row) {
        const auto path = paths.subspan(row * width, width);
        if (path.empty() || path[0] == no_node) continue;
        SPECDEC_EXPECTS(path[0] == 0, "tree_layout: a path does not start at the root");
        for (std::size_t j = 1; j < width && path[j] != no_node; ++j) {
          const std::int32_t node = path[j], parent = path[j - 1];
          SPECDEC_EXPECTS(node > parent && static_cast<std::size_t>(node) < n,
                          "tree_layout: a path node outside its tree or not later than its parent");
          std::int32_t& slot = parents[base + static_cast<std::size_t>(node)];
          SPECDEC_EXPECTS(slot == no_node - 1 || slot == parent, "tree_layout: a node has two parents");
          slot = parent;
        }
      }
      for (std::size_t i = 1; i < n; ++i) SPECDEC_EXPECTS(parents[base + i] != no_node - 1, "tree_layout: a node is on no path");
    }
    return from_parents(num_nodes, parents);
  }

  //! The one-branch trees of chains of `num_drafts[b]` drafts.
  static tree_layout chains(std::span<const std::int32_t> num_drafts) {
    std::vector<std::int32_t> nodes(num_drafts.size()), parents;
    for (std::size_t b = 0; b < num_drafts.size(); ++b) {
      SPECDEC_EXPECTS(num_drafts[b] >= 0, "tree_layout: a negative number of drafts");
      nodes[b] = num_drafts[b] + 1;
      for (std::int32_t i = 0; i <= num_drafts[b]; ++i) parents.push_back(i - 1);
    }
    return from_parents(nodes, parents);
  }

  //! B, the number of trees.
  std::size_t batch_size() const noexcept { return num_nodes_.size(); }
  //! Nodes of request b, the root included.
  std::size_t num_nodes(std::size_t b) const noexcept { return num_nodes_of(b); }
  //! All nodes of the batch: the number of target (and draft) rows.
  std::size_t num_rows() const noexcept { return offsets_.empty() ? 0 : static_cast<std::size_t>(offsets_.back()); }
  //! The row of node n of request b.
  std::size_t node_row(std::size_t b, std::size_t n) const noexcept { return static_cast<std::size_t>(offsets_[b]) + n; }
  //! The parent of request b's node n (local id; `no_node` for the root).
  std::int32_t parent(std::size_t b, std::size_t n) const noexcept { return parent_[node_row(b, n)]; }
  //! The first child of request b's node n (local id, or `no_node`).
  std::int32_t first_child(std::size_t b, std::size_t n) const noexcept { return first_child_[node_row(b, n)]; }
  //! The next sibling of request b's node n (local id, or `no_node`).
  std::int32_t next_sibling(std::size_t b, std::size_t n) const noexcept { return next_sibling_[node_row(b, n)]; }
  //! Edges from the root: 0 for the root, the number of drafted tokens on the path to n otherwise.
  std::int32_t depth(std::size_t b, std::size_t n) const noexcept { return depth_[node_row(b, n)]; }
  //! The deepest node of the batch: output rows hold max_depth() + 1 entries.
  std::size_t max_depth() const noexcept { return max_depth_; }
  //! The number of children of node n.
  std::size_t num_children(std::size_t b, std::size_t n) const noexcept {
    std::size_t k = 0;
    for (std::int32_t c = first_child(b, n); c != no_node; c = next_sibling(b, static_cast<std::size_t>(c))) ++k;
    return k;
  }

 private:
  std::size_t num_nodes_of(std::size_t b) const noexcept { return static_cast<std::size_t>(num_nodes_[b]); }

  void reset(std::span<const std::int32_t> num_nodes) {
    for (const auto n : num_nodes) SPECDEC_EXPECTS(n >= 1, "tree_layout: a tree needs its root");
    num_nodes_.assign(num_nodes.begin(), num_nodes.end());
    offsets_.assign(num_nodes.size() + 1, 0);
    for (std::size_t b = 0; b < num_nodes.size(); ++b) offsets_[b + 1] = offsets_[b] + num_nodes[b];
    const std::size_t rows = num_rows();
    parent_.assign(rows, no_node);
    first_child_.assign(rows, no_node);
    next_sibling_.assign(rows, no_node);
    depth_.assign(rows, 0);
  }
  //! Child lists in ascending id order, built backwards so that each insertion is at the head.
  void link_children_in_id_order(std::size_t b) {
    const std::size_t base = static_cast<std::size_t>(offsets_[b]);
    for (std::size_t i = num_nodes_of(b); i-- > 1;) {
      const std::size_t parent = base + static_cast<std::size_t>(parent_[base + i]);
      next_sibling_[base + i] = first_child_[parent];
      first_child_[parent] = static_cast<std::int32_t>(i);
    }
  }
  //! Depths in node order (parents come first).
  void finish() {
    max_depth_ = 0;
    for (std::size_t b = 0; b < batch_size(); ++b) {
      const std::size_t base = static_cast<std::size_t>(offsets_[b]);
      for (std::size_t i = 1; i < num_nodes_of(b); ++i) {
        depth_[base + i] = depth_[base + static_cast<std::size_t>(parent_[base + i])] + 1;
        max_depth_ = std::max(max_depth_, static_cast<std::size_t>(depth_[base + i]));
      }
    }
  }

  std::vector<std::int32_t> num_nodes_;
  std::vector<std::int64_t> offsets_;  // B + 1 prefix sums of num_nodes
  std::vector<std::int32_t> parent_, first_child_, next_sibling_, depth_;
  std::size_t max_depth_ = 0;
};

//! Inputs of a tree verification: one token per node (the root's is ignored), target rows p and
//! draft rows q per node. `T` is float or double. q may be empty for rules that never read it.
template <class T>
struct tree_batch {
  tree_layout layout;                //!< the shapes of the trees
  std::size_t vocab_size = 0;        //!< V, the length of every row
  std::span<const token_id> tokens;  //!< [num_rows]
  std::span<const T> draft_rows;     //!< [num_rows][V] or empty
  std::span<const T> target_rows;    //!< [num_rows][V]

  //! The token of request b's node n (the root's is ignored).
  token_id token(std::size_t b, std::size_t n) const { return tokens[layout.node_row(b, n)]; }
  //! The target row of request b's node n: p(. | context, path to n), V entries.
  std::span<const T> target_row(std::size_t b, std::size_t n) const {
    return target_rows.subspan(layout.node_row(b, n) * vocab_size, vocab_size);
  }
  //! The draft row of request b's node n: q(. | context, path to n), V entries.
  std::span<const T> draft_row(std::size_t b, std::size_t n) const {
    return draft_rows.subspan(layout.node_row(b, n) * vocab_size, vocab_size);
  }
};

}  // namespace specdec
