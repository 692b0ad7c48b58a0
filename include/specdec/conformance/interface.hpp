//! \file conformance/interface.hpp
//! \brief What the conformance kit hands to a verifier under test, what it expects back, and the
//! guarantee the verifier claims. Engine-neutral: plain vectors in the packed layouts engines use
//! (vLLM's and FlashInfer's for chains, parent arrays for trees), float32 rows, 64-bit seeds and
//! ids. Nothing here requires the verifier to use specdec. docs/conformance.md describes the checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/distribution.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/warp.hpp"

namespace specdec::conformance {

//! The randomness identity of each request in a batch: a verifier that claims to be seeded draws
//! its coins from (seed, request id, step) alone, never from its position in the batch. No two
//! requests of a batch share all three; they may share any one or two (the independence checks).
struct request_identities {
  std::vector<std::uint64_t> seeds;        //!< [B]
  std::vector<std::uint64_t> request_ids;  //!< [B]
  std::vector<std::uint64_t> steps;        //!< [B] the request's verification step: 0, 1, ...
};

//! A batch of drafted chains. Request b drafted `num_drafts[b]` tokens, each sampled from its row of
//! `draft_rows` (q); `target_rows` holds the target's rows (p) at every drafted position and one
//! more for the bonus token. Rows are packed request after request.
struct chain_inputs : request_identities {
  std::size_t vocab_size = 0;            //!< V, the vocabulary size
  std::vector<std::int32_t> num_drafts;  //!< [B]
  std::vector<std::int64_t> offsets;     //!< [B + 1] prefix sums of num_drafts
  std::vector<token_id> draft_tokens;    //!< [sum n_b]
  std::vector<float> draft_rows;         //!< [sum n_b][V]
  std::vector<float> target_rows;        //!< [sum (n_b + 1)][V]; request b's rows start at row offsets[b] + b

  //! B, the number of requests.
  std::size_t batch_size() const noexcept { return num_drafts.size(); }
  //! The packed index of request b's draft i (into `draft_tokens`, and the row of `draft_rows`).
  std::size_t draft_index(std::size_t b, std::size_t i) const noexcept { return static_cast<std::size_t>(offsets[b]) + i; }
  //! The row of `target_rows` of request b's position i (i = num_drafts[b]: the bonus row).
  std::size_t target_index(std::size_t b, std::size_t i) const noexcept { return static_cast<std::size_t>(offsets[b]) + b + i; }
  //! Request b's draft row i (q), V entries.
  std::span<const float> draft_row(std::size_t b, std::size_t i) const {
    return std::span<const float>(draft_rows).subspan(draft_index(b, i) * vocab_size, vocab_size);
  }
  //! Request b's target row i (p), V entries; i = num_drafts[b] is the bonus row.
  std::span<const float> target_row(std::size_t b, std::size_t i) const {
    return std::span<const float>(target_rows).subspan(target_index(b, i) * vocab_size, vocab_size);
  }
};

//! A batch of drafted chains given as logits (`check_chain_logits_verifier`): `draft_rows` and
//! `target_rows` hold logits (-inf masks a token), and request b's q and p are those rows warped by
//! `draft_warp[b]` and `target_warp[b]` in specdec's order (distributions/warp.hpp: temperature,
//! then top-k, top-p, min-p). Each draft was sampled from its warped draft row.
struct chain_logit_inputs : chain_inputs {
  std::vector<warp_params> target_warp;  //!< [B]
  std::vector<warp_params> draft_warp;   //!< [B]
};

//! How the children of one tree node were drawn from the node's draft row.
enum class sibling_sampling {
  independent,          //!< i.i.d. with replacement (SpecInfer's multi-step sampling, SpecTr's K-SEQ)
  without_replacement,  //!< sequentially without replacement (recursive rejection sampling)
};

//! A batch of drafted token trees. Node 0 of each tree is the root (the verified context, token -1);
//! the parent of node i is an earlier node. Node n's draft row is the distribution its children were
//! drawn from and its target row the target's distribution after the path to n.
struct tree_inputs : request_identities {
  std::size_t vocab_size = 0;                                 //!< V, the vocabulary size
  sibling_sampling sampling = sibling_sampling::independent;  //!< how each node's children were drawn
  std::vector<std::int32_t> num_nodes;                        //!< [B] including the root
  std::vector<std::int64_t> offsets;                          //!< [B + 1] prefix sums of num_nodes
  std::vector<std::int32_t> parents;                          //!< [sum num_nodes] local ids; -1 for the root
  std::vector<token_id> tokens;                               //!< [sum num_nodes]; -1 for the root
  std::vector<float> draft_rows;                              //!< [sum num_nodes][V]
  std::vector<float> target_rows;                             //!< [sum num_nodes][V]

  //! B, the number of trees.
  std::size_t batch_size() const noexcept { return num_nodes.size(); }
  //! The packed index of request b's node n (into `parents`, `tokens` and the rows).
  std::size_t node_index(std::size_t b, std::size_t n) const noexcept { return static_cast<std::size_t>(offsets[b]) + n; }
  //! The draft row of request b's node n: the distribution its children were drawn from.
  std::span<const float> draft_row(std::size_t b, std::size_t n) const {
    return std::span<const float>(draft_rows).subspan(node_index(b, n) * vocab_size, vocab_size);
  }
  //! The target row of request b's node n: the target's distribution after the path to n.
  std::span<const float> target_row(std::size_t b, std::size_t n) const {
    return std::span<const float>(target_rows).subspan(node_index(b, n) * vocab_size, vocab_size);
  }
};

//! What the verifier under test returns for one request.
struct verdict {
  //! The emitted tokens: the accepted drafts (a chain's first drafts, or the tokens of a root-to-node
  //! path of the tree), then one correction or bonus token. A request whose input was reported may
  //! return fewer (even none).
  std::vector<token_id> tokens;
  //! The verifier flagged the request's input as unusable (an error status or code). Throwing from
  //! the verifier reports every request of that call.
  bool reported = false;
};

//! A verifier under test: one verdict per request of the batch, in batch order.
using chain_verifier = std::function<std::vector<verdict>(const chain_inputs&)>;
//! A verifier from logits under test: one verdict per request of the batch, in batch order.
using chain_logits_verifier = std::function<std::vector<verdict>(const chain_logit_inputs&)>;
//! A tree verifier under test: one verdict per tree of the batch, in batch order.
using tree_verifier = std::function<std::vector<verdict>(const tree_inputs&)>;

//! The output law of one drafted position of a chain rule: from the rows p and q, accepted[v] is the
//! probability of keeping draft v and going on, corrected[v] that of emitting v and ending the block
//! (acceptance/distribution.hpp). The bonus position emits from p.
using emission_law = std::function<void(std::span<const double> p, std::span<const double> q, std::span<double> accepted,
                                        std::span<double> corrected)>;

//! What the verifier promises about the tokens it emits.
enum class claim {
  lossless,    //!< the emitted sequence follows the target's law, whatever the draft
  greedy,      //!< every emitted token is the target's argmax (a deterministic check)
  stated_law,  //!< lossy, chains only: each drafted position emits by `guarantee::law`
};

//! A claim, with the law it states when it is lossy.
struct guarantee {
  claim kind = claim::lossless;  //!< the claim
  emission_law law;              //!< stated_law only
  std::string name{};            //!< how reports name the claim

  //! The lossless claim: the emitted sequence follows the target's law.
  static guarantee lossless() { return {claim::lossless, {}, "lossless"}; }
  //! The greedy claim: every emitted token is the target's argmax.
  static guarantee greedy() { return {claim::greedy, {}, "greedy"}; }
  //! A lossy chain claim: each drafted position emits by `law`; `name` names it in reports.
  static guarantee stated(emission_law law, std::string name) { return {claim::stated_law, std::move(law), std::move(name)}; }
  //! The law of a specdec rejection-family rule (e.g. `lenient_rule{0.5}`), by
  //! `specdec::emission_distribution`.
  template <RejectionRule Rule>
  static guarantee of_rule(const Rule& rule, std::string name) {
    return stated([rule](std::span<const double> p, std::span<const double> q, std::span<double> accepted,
                         std::span<double> corrected) { emission_distribution(rule, p, q, accepted, corrected); },
                  std::move(name));
  }
};

}  // namespace specdec::conformance
