//! \file backend/cuda/tree_layout.cuh
//! \brief A `tree_layout` as the flat arrays the tree kernels read (`tree_layout_view`) and their host
//! owner (`tree_layout_arrays`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "specdec/config.hpp"
#include "specdec/core/tree.hpp"

namespace specdec::backend::cuda {

//! A `tree_layout` as flat arrays (device memory on the GPU; host memory for host replays): request
//! b's nodes are rows first_row[b] .. first_row[b + 1] - 1, and row r holds its node's parent, first
//! child, next sibling (local ids, `no_node` ends a list) and depth.
struct tree_layout_view {
  const std::int64_t* first_row = nullptr;        //!< [B + 1]
  const std::int32_t* parent_of = nullptr;        //!< [rows]
  const std::int32_t* first_child_of = nullptr;   //!< [rows]
  const std::int32_t* next_sibling_of = nullptr;  //!< [rows]
  const std::int32_t* depth_of = nullptr;         //!< [rows]
  std::size_t batch = 0;                          //!< B, the number of requests
  std::size_t max_depth = 0;                      //!< the largest node depth of any request

  //! The row of request b's node n: first_row[b] + n.
  SPECDEC_HOST_DEVICE std::int64_t node_row(std::size_t b, std::int32_t n) const { return first_row[b] + n; }
  //! The number of nodes of request b.
  SPECDEC_HOST_DEVICE std::int32_t num_nodes(std::size_t b) const {
    return static_cast<std::int32_t>(first_row[b + 1] - first_row[b]);
  }
  //! The parent of request b's node n (local id).
  SPECDEC_HOST_DEVICE std::int32_t parent(std::size_t b, std::int32_t n) const { return parent_of[node_row(b, n)]; }
  //! The first child of request b's node n (local id, or `no_node`).
  SPECDEC_HOST_DEVICE std::int32_t first_child(std::size_t b, std::int32_t n) const { return first_child_of[node_row(b, n)]; }
  //! The next sibling of request b's node n (local id, or `no_node`).
  SPECDEC_HOST_DEVICE std::int32_t next_sibling(std::size_t b, std::int32_t n) const { return next_sibling_of[node_row(b, n)]; }
  //! The depth of request b's node n.
  SPECDEC_HOST_DEVICE std::int32_t depth(std::size_t b, std::int32_t n) const { return depth_of[node_row(b, n)]; }
};

//! The host arrays of a `tree_layout` in `tree_layout_view`'s format (what `verify_tree` uploads).
struct tree_layout_arrays {
  std::vector<std::int64_t> first_row;  //!< [B + 1]
  std::vector<std::int32_t> links;      //!< [4][rows]: parents, first children, next siblings, depths
  std::size_t max_depth = 0;            //!< the largest node depth of any request

  //! The arrays of layout `l`.
  static tree_layout_arrays of(const tree_layout& l) {
    tree_layout_arrays a;
    const std::size_t B = l.batch_size(), rows = l.num_rows();
    a.first_row.resize(B + 1);
    a.links.resize(4 * rows);
    a.max_depth = l.max_depth();
    for (std::size_t b = 0; b < B; ++b) {
      a.first_row[b] = static_cast<std::int64_t>(l.node_row(b, 0));
      for (std::size_t n = 0; n < l.num_nodes(b); ++n) {
        const std::size_t r = l.node_row(b, n);
        a.links[r] = l.parent(b, n);
        a.links[rows + r] = l.first_child(b, n);
        a.links[2 * rows + r] = l.next_sibling(b, n);
        a.links[3 * rows + r] = l.depth(b, n);
      }
    }
    a.first_row[B] = static_cast<std::int64_t>(rows);
    return a;
  }
  //! The number of node rows, over all requests.
  std::size_t rows() const noexcept { return links.size() / 4; }
  //! The view of copies of these arrays at `first_row` and `links` (device memory, or the vectors).
  tree_layout_view view_at(const std::int64_t* first_row_at, const std::int32_t* links_at) const noexcept {
    const std::size_t r = rows();
    return {first_row_at, links_at, links_at + r, links_at + 2 * r, links_at + 3 * r, first_row.size() - 1, max_depth};
  }
  //! The view of the host vectors themselves.
  tree_layout_view view() const noexcept { return view_at(first_row.data(), links.data()); }
};

}  // namespace specdec::backend::cuda
