//! \file integrations/llama_cpp/tree_paths.hpp
//! \brief How a tree-shaped append (`sequence_append::parents`) becomes llama.cpp sequence ids: every
//! root-to-leaf path is one sequence, and a node carries the ids of every path through it.
//!
//! llama.cpp's attention mask keeps a cached entry for a query token when the entry belongs to the
//! query's first sequence id and is not at a later position (`llama_kv_cache::set_input_kq_mask`).
//! Which of a token's ids is first is not the order given (llama.cpp keeps them in an unordered set),
//! but a node carries only the ids of paths through it, and through any of them it attends to the
//! state (shared with every path by `llama_memory_seq_cp`, which in a unified cache tags the same
//! cells) and to its ancestors, never to a sibling's subtree: exact tree attention with no new kernel.
//! Its position is the state's length plus its depth, so each path's positions are consecutive, as
//! llama.cpp's batch checks require, and paths that share a node share its state before the batch, as
//! its check of "coupled" sequences requires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace specdec::llama_cpp::detail {

//! The paths of one tree-shaped append: `depth` of each node, the leaves (one path each, in node
//! order), and for each node the paths through it (`paths_of(i)`).
class tree_paths {
 public:
  //! Builds the paths of `parents` (parents[i] in [-1, i), checked by the caller).
  void assign(std::span<const std::int32_t> parents) {
    const std::size_t n = parents.size();
    depth_.assign(n, 0);
    std::vector<bool> has_child(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      if (parents[i] < 0) continue;
      const auto p = static_cast<std::size_t>(parents[i]);
      depth_[i] = depth_[p] + 1;
      has_child[p] = true;
    }
    leaves_.clear();
    for (std::size_t i = 0; i < n; ++i)
      if (!has_child[i]) leaves_.push_back(static_cast<std::int32_t>(i));
    // Each node lists the paths through it: walk up from every leaf.
    first_.assign(n + 1, 0);
    for (const std::int32_t leaf : leaves_)
      for (std::int32_t j = leaf; j >= 0; j = parents[static_cast<std::size_t>(j)]) ++first_[static_cast<std::size_t>(j) + 1];
    for (std::size_t i = 0; i < n; ++i) first_[i + 1] += first_[i];
    ids_.assign(first_[n], 0);
    std::vector<std::size_t> at(first_.begin(), first_.end() - 1);
    for (std::size_t path = 0; path < leaves_.size(); ++path)
      for (std::int32_t j = leaves_[path]; j >= 0; j = parents[static_cast<std::size_t>(j)])
        ids_[at[static_cast<std::size_t>(j)]++] = static_cast<std::uint32_t>(path);
  }

  //! The number of root-to-leaf paths (the sequence ids the tree needs).
  std::size_t count() const noexcept { return leaves_.size(); }
  //! The depth of node i (0 for a root).
  std::size_t depth(std::size_t i) const { return depth_[i]; }
  //! The paths through node i (indices into the leaves), in leaf order; never empty.
  std::span<const std::uint32_t> paths_of(std::size_t i) const {
    return std::span<const std::uint32_t>(ids_).subspan(first_[i], first_[i + 1] - first_[i]);
  }
  //! The leaf that ends path k.
  std::int32_t leaf(std::size_t k) const { return leaves_[k]; }

 private:
  std::vector<std::size_t> depth_;
  std::vector<std::int32_t> leaves_;
  std::vector<std::size_t> first_;  // node i's paths are ids_[first_[i], first_[i + 1])
  std::vector<std::uint32_t> ids_;
};

//! Whether `keep` (offsets into the last `count` of the append's n nodes) is a root-to-node path below a
//! chain trunk: the first n - count nodes each follow the one before, keep[0] follows the trunk's last
//! node (or is a root when there is no trunk), and each kept node follows the previous one.
inline bool is_trunk_and_path(std::span<const std::int32_t> parents, std::size_t count, std::span<const std::int32_t> keep) {
  const std::size_t n = parents.size();
  if (count > n) return false;
  const std::size_t trunk = n - count;
  for (std::size_t i = 0; i < trunk; ++i)
    if (parents[i] != static_cast<std::int32_t>(i) - 1) return false;
  std::int32_t previous = static_cast<std::int32_t>(trunk) - 1;
  for (const std::int32_t k : keep) {
    if (k < 0 || static_cast<std::size_t>(k) >= count) return false;
    const std::size_t node = trunk + static_cast<std::size_t>(k);
    if (parents[node] != previous) return false;
    previous = static_cast<std::int32_t>(node);
  }
  return true;
}

}  // namespace specdec::llama_cpp::detail
