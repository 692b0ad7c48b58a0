//! \file theory/detail/max_flow.hpp
//! \brief Internals of the theory module: a small maximum-flow solver on double capacities
//! (Dinic's blocking-flow algorithm), the exact oracle behind theory/multi_draft_bound.hpp.
//!
//! Each phase labels the nodes by their BFS distance from the source in the residual graph, then
//! pushes flow along shortest paths only (depth-first, each node remembering the next edge to try)
//! until the sink is cut off at that distance. A residual capacity at most `epsilon` counts as
//! zero, so rounding left-overs end the run: the value returned is within (number of edges leaving
//! the source side of the final cut) x epsilon of the exact maximum flow.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <queue>
#include <vector>

#include "specdec/contracts.hpp"

namespace specdec::theory::detail {

//! A directed graph with capacities and its maximum flow; nodes are 0 .. nodes - 1.
class max_flow_network {
 public:
  //! An empty network of `nodes` nodes.
  explicit max_flow_network(std::size_t nodes) : adjacency_(nodes), level_(nodes), next_edge_(nodes) {}

  //! Adds the edge from -> to with capacity `capacity` (>= 0, may be +infinity) and its reverse
  //! residual edge. \pre both nodes exist; capacity >= 0. \throws specdec::error otherwise.
  void add_edge(std::size_t from, std::size_t to, double capacity) {
    SPECDEC_EXPECTS(from < adjacency_.size() && to < adjacency_.size(), "an edge end is not a node of the network");
    SPECDEC_EXPECTS(capacity >= 0.0, "an edge capacity must be >= 0 (+infinity allowed)");
    adjacency_[from].push_back(edges_.size());
    edges_.push_back({to, capacity});
    adjacency_[to].push_back(edges_.size());
    edges_.push_back({from, 0.0});
  }

  //! The value of a maximum flow from `source` to `sink` (Dinic). Consumes the capacities: call once.
  //! \pre source != sink, both nodes exist; epsilon >= 0. \throws specdec::error otherwise.
  double solve(std::size_t source, std::size_t sink, double epsilon) {
    SPECDEC_EXPECTS(source < adjacency_.size() && sink < adjacency_.size() && source != sink,
                    "source and sink must be two different nodes of the network");
    SPECDEC_EXPECTS(epsilon >= 0.0, "epsilon must be >= 0");
    epsilon_ = epsilon;
    double flow = 0.0;
    while (label_levels(source, sink)) {
      std::fill(next_edge_.begin(), next_edge_.end(), std::size_t{0});
      for (double pushed; (pushed = push(source, sink, std::numeric_limits<double>::infinity())) > 0.0;) flow += pushed;
    }
    return flow;
  }

 private:
  struct edge {
    std::size_t to;
    double residual;  // edges 2i and 2i + 1 are each other's reverse
  };

  // BFS distances from the source over edges with residual > epsilon; true when the sink is reached.
  bool label_levels(std::size_t source, std::size_t sink) {
    std::fill(level_.begin(), level_.end(), unreached);
    level_[source] = 0;
    std::queue<std::size_t> frontier;
    frontier.push(source);
    while (!frontier.empty()) {
      const std::size_t node = frontier.front();
      frontier.pop();
      for (const std::size_t e : adjacency_[node]) {
        const edge& out = edges_[e];
        if (out.residual > epsilon_ && level_[out.to] == unreached) {
          level_[out.to] = level_[node] + 1;
          frontier.push(out.to);
        }
      }
    }
    return level_[sink] != unreached;
  }

  // Pushes at most `limit` from `node` to the sink along edges that go one level deeper.
  double push(std::size_t node, std::size_t sink, double limit) {
    if (node == sink) return limit;
    for (std::size_t& i = next_edge_[node]; i < adjacency_[node].size(); ++i) {
      const std::size_t e = adjacency_[node][i];
      const std::size_t to = edges_[e].to;
      if (!(edges_[e].residual > epsilon_) || level_[to] != level_[node] + 1) continue;
      const double pushed = push(to, sink, std::min(limit, edges_[e].residual));
      if (pushed > 0.0) {
        edges_[e].residual -= pushed;
        edges_[e ^ 1u].residual += pushed;
        return pushed;
      }
    }
    return 0.0;
  }

  static constexpr std::size_t unreached = std::numeric_limits<std::size_t>::max();
  std::vector<edge> edges_;
  std::vector<std::vector<std::size_t>> adjacency_;
  std::vector<std::size_t> level_, next_edge_;
  double epsilon_ = 0.0;
};

}  // namespace specdec::theory::detail
