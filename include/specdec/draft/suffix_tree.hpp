//! \file draft/suffix_tree.hpp
//! \brief A depth-limited suffix tree over token sequences with occurrence counts, the index of
//! SuffixDecoding (Oliaro et al. 2024, arXiv 2411.04975, section 3.1: "suffix tree" with a
//! frequency per node) for model-free drafting (draft/suffix_drafter.hpp).
//!
//! **What it holds.** A trie of every suffix of every stored sequence, each suffix truncated at
//! `max_depth` tokens (an uncompressed trie: one node per token of a path). Node v, at depth d with
//! path s = (s_1..s_d) from the root, has count(v) = the number of indexed suffixes that pass through
//! it = the number of positions where s occurs inside one stored sequence (occurrences never span two
//! sequences). The root's count is the number of stored tokens. Since every substring of length <= d
//! of an occurring string occurs too, the set of paths is closed under taking suffixes: when the last
//! m tokens of a context are a path, so are its last m' < m.
//!
//! **Children order.** A node's children are kept sorted by token id, ascending (binary-search
//! look-up, `children()` returns them so); the drafter orders them by count when it drafts
//! (suffix_drafter.hpp: count descending, ties to the lower token id). Most nodes of such a trie have
//! at most one child (deep paths are mostly unique), so a single child is stored in the node itself
//! and only nodes with two or more children own a list.
//!
//! **Updates.** Sequences are appended one at a time: `begin_sequence()` opens a new one, `extend(t)`
//! appends a token to the open one in O(max_depth * log(children)) time (it keeps the nodes of the
//! open sequence's last max_depth - 1 suffixes, each stepped one token deeper), `insert(seq)` does
//! both. `evict_oldest()` removes the oldest sequence: each of its suffixes is walked, the counts on
//! the way drop by one and the nodes that reach count 0 are freed (O(n * max_depth * log(children))
//! for a sequence of n tokens). Freed nodes are reused by later insertions.
//!
//! **Memory bound.** A stored token starts one suffix of at most max_depth nodes, so
//! `num_nodes() <= 1 + num_tokens() * max_depth`. Each node costs `node_bytes()` (24 bytes), and a node
//! with c >= 2 children a list of c entries besides (4 bytes each and the list's header; the lists
//! hold fewer entries than there are nodes); `memory_bytes()` adds up what the containers reserved
//! (node pool, child lists, sequences), the allocator's own overhead left out. The pool keeps its largest
//! size after evictions (freed nodes are reused), so it is bounded by the largest tree held.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

//! A node of a `suffix_tree`, by index; the root is 0.
using suffix_node = std::uint32_t;

//! "No such node" (a child that does not exist).
inline constexpr suffix_node no_suffix_node = std::numeric_limits<suffix_node>::max();

//! The longest suffix of a context that is a path of a suffix tree: the node it ends at (the root
//! when `length` is 0) and its length.
struct suffix_match {
  suffix_node node = 0;    //!< the node the matched path ends at (the root when `length` is 0)
  std::size_t length = 0;  //!< the number of context tokens matched
};

//! A depth-limited suffix tree with counts (see the file comment).
class suffix_tree {
 public:
  static constexpr suffix_node root = 0;  //!< the root: the empty path

  //! An empty tree whose suffixes are cut at `max_depth` tokens.
  //! \throws specdec::error when max_depth is 0
  explicit suffix_tree(std::size_t max_depth) : max_depth_(max_depth) {
    SPECDEC_EXPECTS(max_depth >= 1, "specdec::suffix_tree: max_depth must be at least 1");
    SPECDEC_EXPECTS(max_depth < std::numeric_limits<std::uint32_t>::max(), "specdec::suffix_tree: max_depth is too large");
    nodes_.push_back(node_data{});
  }

  //! The depth limit: the longest suffix indexed (and matched).
  std::size_t max_depth() const noexcept { return max_depth_; }

  //! Opens a new, empty sequence; the one open before is closed (it can no longer be extended).
  void begin_sequence() {
    sequences_.emplace_back();
    active_.clear();
    open_ = true;
  }

  //! Appends `t` to the open sequence (opening one when none is open) and indexes the suffixes it
  //! extends: the max_depth - 1 longest that end at the previous token, and the new one-token suffix.
  //! \throws specdec::error when t is negative
  void extend(token_id t) {
    SPECDEC_EXPECTS(t >= 0, "specdec::suffix_tree: a token id must be non-negative");
    SPECDEC_EXPECTS(num_tokens_ < std::numeric_limits<std::uint32_t>::max(), "specdec::suffix_tree: too many tokens");
    if (!open_) begin_sequence();
    sequences_.back().push_back(t);
    ++num_tokens_;
    ++nodes_[root].count;
    active_.push_back(root);  // the suffix that starts at the new token
    std::size_t kept = 0;
    for (const suffix_node v : active_) {
      const suffix_node c = step(v, t);
      if (nodes_[c].depth < max_depth_) active_[kept++] = c;  // a suffix at max_depth is complete
    }
    active_.resize(kept);
  }

  //! Stores `sequence` as a new sequence (begin_sequence, then extend with each token).
  void insert(std::span<const token_id> sequence) {
    begin_sequence();
    for (const token_id t : sequence) extend(t);
  }

  //! Removes the oldest sequence and its suffixes; nodes whose count drops to 0 are freed. Removing the
  //! open sequence (the only one) closes it.
  //! \throws specdec::error when no sequence is stored
  void evict_oldest() {
    SPECDEC_EXPECTS(!sequences_.empty(), "specdec::suffix_tree: no sequence to evict");
    if (sequences_.size() == 1) {
      active_.clear();
      open_ = false;
    }
    const std::vector<token_id>& seq = sequences_.front();
    std::vector<suffix_node> path;
    path.reserve(max_depth_);
    for (std::size_t i = 0; i < seq.size(); ++i) {
      --nodes_[root].count;
      path.clear();
      suffix_node v = root;
      for (std::size_t j = i; j < seq.size() && j - i < max_depth_; ++j) {
        v = child(v, seq[j]);
        SPECDEC_EXPECTS(v != no_suffix_node && nodes_[v].count > 0, "specdec::suffix_tree: corrupt tree");
        --nodes_[v].count;
        path.push_back(v);
      }
      // Counts do not grow along a path, so the nodes at 0 are its deepest ones; free them bottom-up.
      for (std::size_t k = path.size(); k-- > 0 && nodes_[path[k]].count == 0;) release(path[k]);
    }
    num_tokens_ -= seq.size();
    sequences_.pop_front();
  }

  //! Removes every sequence and node but the root.
  void clear() {
    nodes_.assign(1, node_data{});
    free_.clear();
    lists_.clear();
    free_lists_.clear();
    sequences_.clear();
    active_.clear();
    open_ = false;
    num_tokens_ = 0;
  }

  //! The number of stored sequences.
  std::size_t num_sequences() const noexcept { return sequences_.size(); }
  //! The i-th stored sequence, oldest first.
  std::span<const token_id> sequence(std::size_t i) const {
    SPECDEC_EXPECTS(i < sequences_.size(), "specdec::suffix_tree: no such sequence");
    return std::span<const token_id>(sequences_[i]);
  }
  //! Whether the newest sequence is open (extend() appends to it).
  bool is_open() const noexcept { return open_; }
  //! Tokens of all stored sequences.
  std::size_t num_tokens() const noexcept { return num_tokens_; }
  //! Nodes, the root included: at most 1 + num_tokens() * max_depth().
  std::size_t num_nodes() const noexcept { return nodes_.size() - free_.size(); }
  //! Bytes of one node's record, which holds its child when it has one (a node with two or more owns
  //! a child list besides, counted by memory_bytes()).
  static constexpr std::size_t node_bytes() noexcept { return sizeof(node_data); }

  //! Bytes the tree's containers reserved (node pool, child lists, sequences, the active suffixes),
  //! the allocator's overhead left out. O(nodes).
  std::size_t memory_bytes() const noexcept {
    std::size_t bytes = sizeof(*this) + nodes_.capacity() * sizeof(node_data) + free_.capacity() * sizeof(suffix_node) +
                        active_.capacity() * sizeof(suffix_node) + lists_.capacity() * sizeof(std::vector<suffix_node>) +
                        free_lists_.capacity() * sizeof(std::uint32_t);
    for (const std::vector<suffix_node>& l : lists_) bytes += l.capacity() * sizeof(suffix_node);
    for (const std::vector<token_id>& s : sequences_) bytes += sizeof(s) + s.capacity() * sizeof(token_id);
    return bytes;
  }

  //! The token on the edge into v (no_token for the root).
  token_id token(suffix_node v) const noexcept { return nodes_[v].token; }
  //! The number of indexed suffixes through v (occurrences of its path).
  std::size_t count(suffix_node v) const noexcept { return nodes_[v].count; }
  //! v's parent (no_suffix_node for the root).
  suffix_node parent(suffix_node v) const noexcept { return nodes_[v].parent; }
  //! v's depth: the length of its path.
  std::size_t depth(suffix_node v) const noexcept { return nodes_[v].depth; }
  //! v's children, sorted by token id, ascending.
  std::span<const suffix_node> children(suffix_node v) const noexcept {
    const node_data& n = nodes_[v];
    if (n.list != no_list) return std::span<const suffix_node>(lists_[n.list]);
    return std::span<const suffix_node>(&n.child, n.child == no_suffix_node ? 0 : 1);
  }

  //! v's child through token t, or no_suffix_node.
  suffix_node child(suffix_node v, token_id t) const noexcept {
    const node_data& n = nodes_[v];
    if (n.list == no_list) return n.child != no_suffix_node && nodes_[n.child].token == t ? n.child : no_suffix_node;
    const std::vector<suffix_node>& c = lists_[n.list];
    const auto it = lower_child(c, t);
    return it != c.end() && nodes_[*it].token == t ? *it : no_suffix_node;
  }

  //! The node whose path is `path`, or no_suffix_node (the root for an empty path).
  suffix_node find(std::span<const token_id> path) const noexcept {
    suffix_node v = root;
    for (std::size_t i = 0; i < path.size() && v != no_suffix_node; ++i) v = child(v, path[i]);
    return v;
  }

  //! The longest suffix of `context`, at most max_depth tokens, that is a path from the root (length
  //! 0 and the root when none is). Binary search on the length (paths are closed under suffixes):
  //! O(max_depth * log(max_depth)) child look-ups.
  suffix_match match(std::span<const token_id> context) const noexcept {
    suffix_match best;
    std::size_t lo = 0, hi = std::min(context.size(), max_depth_);  // the suffix of length lo is a path
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo + 1) / 2;
      const suffix_node v = find(context.last(mid));
      if (v != no_suffix_node) {
        lo = mid;
        best = {v, mid};
      } else {
        hi = mid - 1;
      }
    }
    return best;
  }

 private:
  static constexpr std::uint32_t no_list = std::numeric_limits<std::uint32_t>::max();

  struct node_data {
    token_id token = no_token;
    std::uint32_t count = 0;
    suffix_node parent = no_suffix_node;
    std::uint32_t depth = 0;
    suffix_node child = no_suffix_node;  // the only child, when `list` is no_list
    std::uint32_t list = no_list;        // else the index in lists_ of its children, sorted by token id
  };

  std::vector<suffix_node>::const_iterator lower_child(const std::vector<suffix_node>& c, token_id t) const noexcept {
    return std::lower_bound(c.begin(), c.end(), t, [this](suffix_node n, token_id x) { return nodes_[n].token < x; });
  }

  // v's child through t with its count raised by one, created when missing.
  suffix_node step(suffix_node v, token_id t) {
    if (const suffix_node found = child(v, t); found != no_suffix_node) {
      ++nodes_[found].count;
      return found;
    }
    suffix_node c;
    if (!free_.empty()) {
      c = free_.back();
      free_.pop_back();
    } else {
      SPECDEC_EXPECTS(nodes_.size() < no_suffix_node, "specdec::suffix_tree: too many nodes");
      c = static_cast<suffix_node>(nodes_.size());
      nodes_.emplace_back();
    }
    nodes_[c] = node_data{t, 1, v, nodes_[v].depth + 1, no_suffix_node, no_list};
    add_child(v, c);
    return c;
  }

  // Links the new node c under v, keeping v's children sorted by token id.
  void add_child(suffix_node v, suffix_node c) {
    const token_id t = nodes_[c].token;
    if (nodes_[v].list != no_list) {
      std::vector<suffix_node>& l = lists_[nodes_[v].list];
      l.insert(lower_child(l, t), c);
    } else if (nodes_[v].child == no_suffix_node) {
      nodes_[v].child = c;
    } else {  // a second child: v gets a list
      std::uint32_t index;
      if (!free_lists_.empty()) {
        index = free_lists_.back();
        free_lists_.pop_back();
      } else {
        SPECDEC_EXPECTS(lists_.size() < no_list, "specdec::suffix_tree: too many child lists");
        index = static_cast<std::uint32_t>(lists_.size());
        lists_.emplace_back();
      }
      const suffix_node other = nodes_[v].child;
      std::vector<suffix_node>& l = lists_[index];
      l.reserve(2);
      l.push_back(nodes_[other].token < t ? other : c);
      l.push_back(nodes_[other].token < t ? c : other);
      nodes_[v].child = no_suffix_node;
      nodes_[v].list = index;
    }
  }

  // Detaches a node of count 0 (and no children left) from its parent and frees it.
  void release(suffix_node v) {
    node_data& n = nodes_[v];
    node_data& p = nodes_[n.parent];
    if (p.list == no_list) {
      p.child = no_suffix_node;
    } else {
      std::vector<suffix_node>& l = lists_[p.list];
      l.erase(lower_child(l, n.token));
      if (l.size() == 1) {  // back to a single child, held in the node
        p.child = l.front();
        std::vector<suffix_node>().swap(l);  // returns its buffer
        free_lists_.push_back(p.list);
        p.list = no_list;
      }
    }
    n = node_data{};
    free_.push_back(v);
  }

  std::size_t max_depth_;
  std::vector<node_data> nodes_;                 // the pool; nodes_[0] is the root
  std::vector<suffix_node> free_;                // freed pool entries, reused first
  std::vector<std::vector<suffix_node>> lists_;  // child lists of the nodes with two or more children
  std::vector<std::uint32_t> free_lists_;        // freed entries of lists_
  std::deque<std::vector<token_id>> sequences_;  // oldest first
  std::vector<suffix_node> active_;              // the open sequence's suffixes shorter than max_depth, oldest first
  bool open_ = false;
  std::size_t num_tokens_ = 0;
};

}  // namespace specdec
