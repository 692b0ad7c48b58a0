//! \file backend/walks/tree.hpp
//! \brief The tree walk of one request (acceptance/multi_candidate.hpp's rules but typical acceptance),
//! written once for every backend: seq and simd run it through `seq::detail::tree_walk_ops` over their
//! row kernels (backend/seq/verify_tree.hpp), the cuda kernel through `tree_block_ops`, one thread block
//! per request (backend/cuda/kernels/verify_tree.cuh).
//!
//! The walk starts at the root; at each node the rule accepts a child (descend) or emits one token and
//! stops; a leaf emits the bonus from its row, drawn as the chain rule draws it. Randomness of node n:
//! the sibling tests read the stream (n, accept) in sibling order, the emitted token (n, resample),
//! sample-and-match's target sample (n, target_sample); on a chain (node id = depth) these are the chain
//! verifier's addresses, so a chain tree yields its tokens. A stream that keys the target's samples by
//! output position (random/stream.hpp) addresses sample-and-match's sample by the node's depth instead:
//! the walk visits one node per depth, so each output position's uniform decides one token, as on a
//! chain, and a tree emits what target-only decoding emits (docs/reference/sampling-contract.md).
//!
//! `Tree` is one request's tree: num_nodes(), first_child(n), next_sibling(n), parent(n) (`no_node`
//! where there is none) and token(n). `Ops` reads the rows of a node (`Sample`: the backend's
//! sampled-token type, with `token` and `status`); the operations that check a row return its flags
//! (unusable: `invalid_row`; with `check_normalisation`, off its sum: `not_normalised`):
//!   check_target(node) -> verify_status             row p (greedy and the coin rules, before any read)
//!   greedy(node) -> greedy_row                      greedy_usable and argmax of p
//!   sample_target(node, u) -> row_draw<Sample>      row p checked, then sample_categorical(p, u)
//!   check_draft(node) -> verify_status              row q (the rules that read it)
//!   target_at(node, x), draft_at(node, x)           the scalars p(x), q(x) as doubles
//!   draft_has_mass(node)                            some q(v) > 0
//!   stage_children(node)                            the children's tokens, in sibling order, for
//!   child_token_in(x, j)                            "x is the token of one of the first j children"
//!   k_seq_rho(node, k)                              K-SEQ's rho* (`k_seq_rho`; k_seq only)
//!   strict_residual(node, u) -> row_draw<Sample>    sample_residual(p, q, strict, u)
//!   sample_without_children(node, k, u)             sample_masked(p, the k children's tokens, u), else p
//!   scaled_residual_mass(node, s) -> mass           sample_residual(p, q, scaled_draft_residual{s})'s
//!                                                   mass (0 when it falls back to p)
//!   scaled_residual(node, s, u) -> row_draw<Sample> that residual's token, else p's (fallback)
//!   subtract(node, scale, j, materialised) -> mass  r <- max(0, r - scale q'), q' = q without the
//!                                                   first j children's tokens; r = p when not materialised
//!   residual_at(x), sample_residual_row(node, u)    r(x); a sample of r, else of p (fallback)
//! The residual draws set no flags (`row_draw::flags` is ok).
#pragma once

#include <cstddef>
#include <cstdint>

#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/walks/steps.hpp"
#include "specdec/config.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::walks {

//! One node's outcome: the accepted child, or `no_node` and the emitted token.
struct tree_choice {
  std::int32_t child = no_node;  //!< the accepted child, or no_node
  token_id emitted = no_token;   //!< the emitted token when no child was accepted
};

//! The outcome of one request's walk: where it ended and what it emits.
struct tree_walk_result {
  std::int32_t node = 0;                     //!< the last accepted node (the root when nothing was accepted)
  std::int32_t depth = 0;                    //!< its depth: the accepted count
  token_id emitted = no_token;               //!< the correction or bonus token
  verify_status status = verify_status::ok;  //!< the request's status flags
  bool ids_ok = true;                        //!< false: a node token outside [0, V); nothing is written, not even the root
};

//! The child of `node` whose token is `token`, or, when none is, that token emitted.
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Tree>
SPECDEC_HOST_DEVICE tree_choice child_with_token(const Tree& tree, std::int32_t node, token_id token) {
  for (std::int32_t c = tree.first_child(node); c != no_node; c = tree.next_sibling(c))
    if (tree.token(c) == token) return {c, no_token};
  return {no_node, token};
}

//! Greedy and sample-and-match at a node of depth `depth`: the child whose token is the target's choice
//! (the argmax, or a sample y ~ p), or that choice emitted.
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <tree_method Method, class Ops, class Tree>
SPECDEC_HOST_DEVICE tree_choice match_target_choice(Ops& ops, const Tree& tree, std::int32_t node, std::int32_t depth,
                                                    std::size_t vocab, const random::request_stream& stream,
                                                    verify_status& status) {
  token_id choice = no_token;
  if constexpr (Method == tree_method::greedy) {
    const greedy_row g = ops.greedy(node);
    if (!g.usable) {
      status |= verify_status::invalid_row;
      return {};
    }
    choice = g.token;
  } else {
    const std::int32_t address = stream.output_position == random::keyed_by_round ? node : depth;
    const auto y = ops.sample_target(node, first_uniform(stream, address, random::purpose::target_sample));
    status |= y.flags;
    if (!is_valid(status)) return {};
    emit_sample(y.sample, vocab, choice, status);
    if (choice == no_token) return {};
  }
  return child_with_token(tree, node, choice);
}

//! The coin-based rules at a node with children (acceptance/multi_candidate.hpp's table): multi-step
//! sampling (`strict`), recursive rejection, K-SEQ and target-only.
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <tree_method Method, class Ops, class Tree>
SPECDEC_HOST_DEVICE tree_choice decide_by_coins(Ops& ops, const Tree& tree, std::int32_t node, std::size_t vocab,
                                                const random::request_stream& stream, verify_status& status) {
  constexpr bool by_target_only = Method == tree_method::target_only;
  constexpr bool by_recursive_rejection = Method == tree_method::recursive_rejection;
  constexpr bool by_k_seq = Method == tree_method::k_seq;
  if constexpr (!by_target_only) {
    status |= ops.check_draft(node);
    if (!is_valid(status)) return {};
  }
  std::int32_t k = 0;
  for (std::int32_t c = tree.first_child(node); c != no_node; c = tree.next_sibling(c)) ++k;
  if constexpr (by_target_only || by_recursive_rejection) ops.stage_children(node);
  double rho = 1.0;  // K-SEQ: the test is u rho q(c) < p(c), the residual max(0, p - rho q)
  if constexpr (by_k_seq) rho = ops.k_seq_rho(node, k);
  double mass = 1.0;       // r's mass: p is taken as normalised
  double scale = 0.0;      // multi-step sampling: r = max(0, p - scale q) (scaled_draft_residual)
  double remaining = 1.0;  // recursive rejection: the draft mass not yet drawn, Q_j
  bool materialised = false;
  int q_has_mass = -1;  // unknown until a child has q_j(c) = 0
  random::philox_stream coins = stream.open(static_cast<std::uint32_t>(node), random::purpose::accept);
  std::int32_t j = 0;
  for (std::int32_t c = tree.first_child(node); c != no_node; c = tree.next_sibling(c), ++j) {
    const token_id x = tree.token(c);
    const double u = coins.uniform();
    const double px = ops.target_at(node, x);
    if (!specdec::detail::usable_weight(px)) {
      status |= verify_status::invalid_row;
      return {};
    }
    if constexpr (by_target_only) {
      // q_j = delta_c: r(c) is p(c) until c is rejected, then 0; r's mass drops by what it held.
      const bool seen = ops.child_token_in(x, j);
      const double rx = seen ? 0.0 : px;
      if (u * mass < rx) return {c, no_token};
      if (!seen) mass -= rx;
    } else {
      const double qx = ops.draft_at(node, x);
      if (!specdec::detail::usable_weight(qx)) {
        status |= verify_status::invalid_row;
        return {};
      }
      const bool was_drawn = by_recursive_rejection && ops.child_token_in(x, j);
      const double q_now = was_drawn || !(remaining > 0.0) ? 0.0 : qx;  // q_j(c) Q_j
      if (q_now == 0.0) {
        status |= verify_status::draft_prob_zero;
        if (q_has_mass < 0) q_has_mass = ops.draft_has_mass(node) ? 1 : 0;
        if (q_has_mass == 0) {  // as for chains: a q without mass is unusable, not a residual of p
          status |= verify_status::invalid_row;
          return {};
        }
      } else {
        double rx = materialised ? ops.residual_at(x) : px;  // r(c), the weight the residual sampler gives c
        if constexpr (Method == tree_method::multi_step)
          rx = scale == 0.0 ? px : px - scaled_draft_residual{scale}.accepted_mass(px, qx);
        if (by_k_seq ? u * rho * qx < px : u * mass * q_now < rx * remaining) return {c, no_token};
      }
      if constexpr (by_k_seq) continue;  // K-SEQ's residual is taken once, below
      if (k == 1) break;                 // a single child: strict's residual, read in one pass below
      if constexpr (by_recursive_rejection) {
        if (remaining > 0.0) {
          mass = ops.subtract(node, mass / remaining, j, materialised);
          materialised = true;
        }
        if (!was_drawn) remaining -= qx;
      } else {  // s_{j+1} = s_j + M_j; M_{j+1} is the residual sampler's mass (0 when it has none)
        scale += mass;
        mass = ops.scaled_residual_mass(node, scale);
      }
    }
  }
  // Every child was rejected: one token from the last residual.
  const double u = first_uniform(stream, node, random::purpose::resample);
  decltype(ops.strict_residual(node, u)) r;
  if constexpr (by_k_seq)
    r = ops.scaled_residual(node, rho, u);
  else if constexpr (by_target_only)
    r = ops.sample_without_children(node, k, u);
  else if (Method == tree_method::multi_step && scale > 0.0)
    r = ops.scaled_residual(node, scale, u);
  else if (!materialised)
    r = ops.strict_residual(node, u);
  else
    r = ops.sample_residual_row(node, u);
  if (r.fallback) status |= verify_status::residual_fallback;
  tree_choice d;
  emit_sample(r.sample, vocab, d.emitted, status);
  return d;
}

//! The walk of one request's tree with the rule of tree method `Method` (not typical acceptance).
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <tree_method Method, class Ops, class Tree>
SPECDEC_HOST_DEVICE tree_walk_result walk_tree(Ops& ops, const Tree& tree, std::size_t vocab,
                                               const random::request_stream& stream) {
  constexpr bool samples_target = Method == tree_method::sample_and_match;
  tree_walk_result r;
  const std::int32_t n = tree.num_nodes();
  for (std::int32_t i = 1; i < n; ++i)
    if (!in_vocabulary(tree.token(i), vocab)) {
      r.status = verify_status::bad_draft_token;
      r.ids_ok = false;
      return r;
    }
  for (;;) {
    const std::int32_t node = r.node;
    const bool leaf = tree.first_child(node) == no_node;
    tree_choice d;
    if (samples_target || (leaf && Method != tree_method::greedy)) {
      // A target sample: sample-and-match's at every node (the matching child, or emitted); the other
      // rules' bonus at a leaf, drawn as the chain rule draws it.
      if constexpr (samples_target) {
        d = match_target_choice<Method>(ops, tree, node, r.depth, vocab, stream, r.status);
      } else {
        const auto y = ops.sample_target(node, first_uniform(stream, node, random::purpose::resample));
        r.status |= y.flags;
        if (is_valid(r.status)) emit_sample(y.sample, vocab, d.emitted, r.status);
      }
    } else {
      r.status |= ops.check_target(node);
      if (!is_valid(r.status)) return r;
      if constexpr (Method == tree_method::greedy)  // the argmax: the matching child, or emitted
        d = match_target_choice<Method>(ops, tree, node, r.depth, vocab, stream, r.status);
      else
        d = decide_by_coins<Method>(ops, tree, node, vocab, stream, r.status);
    }
    if (!is_valid(r.status)) return r;
    if (d.child == no_node) {
      r.emitted = d.emitted;
      return r;
    }
    r.node = d.child;
    ++r.depth;
  }
}

//! A request's output rows (`width` entries each) from its walk: the accepted tokens then the emitted
//! one, and the path's node ids, root first; -1 pads both (also for requests that stopped on an error).
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Tree>
SPECDEC_HOST_DEVICE void write_tree_row(const Tree& tree, const tree_walk_result& r, token_id* out_tokens, std::int32_t* out_path,
                                        std::size_t width) {
  for (std::size_t j = 0; j < width; ++j) {
    out_tokens[j] = no_token;
    out_path[j] = no_node;
  }
  if (!r.ids_ok) return;
  out_path[0] = 0;
  std::int32_t node = r.node;
  for (std::int32_t j = r.depth; j > 0; --j) {
    out_path[j] = node;
    out_tokens[j - 1] = tree.token(node);
    node = tree.parent(node);
  }
  out_tokens[r.depth] = r.emitted;
}

}  // namespace specdec::backend::walks
