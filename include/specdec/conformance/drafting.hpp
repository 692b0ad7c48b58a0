//! \file conformance/drafting.hpp
//! \brief The kit's side of speculative decoding: Markov model pairs with float rows, drafts sampled
//! from q with the kit's own coins, and the chain and tree batches built from them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec/conformance/interface.hpp"
#include "specdec/conformance/sequence_law.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::conformance {

//! A Markov pair for a check: how it is made (conformance/sequence_law.hpp).
struct model_config {
  std::string name;             //!< the configuration's name in reports
  std::size_t vocab = 4;        //!< V, the vocabulary size
  double mix = 0.5;             //!< draft = (1 - mix) target + mix other
  double zero_fraction = 0.2;   //!< entries set to 0 (`sparsify`)
  std::size_t equal_every = 0;  //!< contexts with q = p
  std::uint64_t seed = 0;       //!< seeds the pair's rows and the zero entries
};

//! The pair's distributions in double (the exact laws; the drafts are drawn from q) and the float
//! rows handed to the verifier: the same probabilities, or the logits they are warped from
//! (conformance/logits.hpp).
struct model_tables {
  markov_pair pair;                      //!< the exact laws p and q, in double
  std::vector<float> target_f, draft_f;  //!< the float draft rows handed to the verifier, [V][V]
  //! \var target_f
  //! The float target rows handed to the verifier, [V][V].

  //! The pair `c` describes; the rows handed over are its probabilities.
  explicit model_tables(const model_config& c) : pair(make_markov_pair(c.vocab, c.seed, c.mix)) {
    sparsify(pair, c.seed, c.zero_fraction, c.equal_every);
    target_f.assign(pair.target.begin(), pair.target.end());
    draft_f.assign(pair.draft.begin(), pair.draft.end());
  }
  //! Given rows (e.g. logits) whose distributions are `distributions`.
  model_tables(markov_pair distributions, std::vector<float> target_rows, std::vector<float> draft_rows)
      : pair(std::move(distributions)), target_f(std::move(target_rows)), draft_f(std::move(draft_rows)) {}
  //! V, the vocabulary size.
  std::size_t vocab() const noexcept { return pair.vocab; }
  //! The target's row after the token `last`, as handed to the verifier.
  std::span<const float> target_row(std::size_t last) const {
    return std::span<const float>(target_f).subspan(last * pair.vocab, pair.vocab);
  }
  //! The draft's row after the token `last`, as handed to the verifier.
  std::span<const float> draft_row(std::size_t last) const {
    return std::span<const float>(draft_f).subspan(last * pair.vocab, pair.vocab);
  }
};

namespace detail {

//! Draws from `weights` (non-negative, positive sum) by inverse CDF with a uniform in [0, 1); zero
//! weights are never drawn.
inline std::size_t draw(std::span<const double> weights, double u) {
  double total = 0.0;
  for (const double w : weights) total += w;
  const double target = u * total;
  double cumulative = 0.0;
  std::size_t last_positive = 0;
  for (std::size_t v = 0; v < weights.size(); ++v) {
    if (weights[v] <= 0.0) continue;
    cumulative += weights[v];
    last_positive = v;
    if (target < cumulative) return v;
  }
  return last_positive;
}

//! The kit's coins for drafting request `request` at `step`: a stream the verifier never sees.
inline random::philox_stream draft_coins(std::uint64_t kit_seed, std::uint64_t request, std::uint64_t step) {
  return random::philox_stream(random::stream_address{kit_seed ^ 0xD1B54A32D192ED03ull, static_cast<std::uint32_t>(request),
                                                      static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(request >> 32),
                                                      random::purpose::draft});
}

inline void append_row(std::vector<float>& rows, std::span<const float> row) { rows.insert(rows.end(), row.begin(), row.end()); }

inline void append_identity(request_identities& ids, std::uint64_t seed, std::uint64_t request_id, std::uint64_t step) {
  ids.seeds.push_back(seed);
  ids.request_ids.push_back(request_id);
  ids.steps.push_back(step);
}

}  // namespace detail

//! One request's part of a batch: where it stands and who it is.
struct request_spec {
  std::size_t last = 0;          //!< the last committed token (the Markov context)
  std::size_t gamma = 1;         //!< the number of tokens drafted
  std::uint64_t seed = 0;        //!< the request's seed (request_identities::seeds)
  std::uint64_t request_id = 0;  //!< the request's id
  std::uint64_t step = 0;        //!< the request's verification step
};

//! A chain batch of no request over a vocabulary of `vocab` tokens.
inline chain_inputs empty_chain_batch(std::size_t vocab) {
  chain_inputs in;
  in.vocab_size = vocab;
  in.offsets.push_back(0);
  return in;
}

//! Appends a request that drafts `gamma` tokens from q after `last` (coins from `kit_seed`).
inline void append_chain_request(chain_inputs& in, const model_tables& m, const request_spec& r, std::uint64_t kit_seed) {
  auto coins = detail::draft_coins(kit_seed, r.request_id, r.step);
  std::size_t last = r.last;
  for (std::size_t i = 0; i < r.gamma; ++i) {
    detail::append_row(in.draft_rows, m.draft_row(last));
    detail::append_row(in.target_rows, m.target_row(last));
    last = detail::draw(m.pair.q_row(last), coins.uniform());
    in.draft_tokens.push_back(static_cast<token_id>(last));
  }
  detail::append_row(in.target_rows, m.target_row(last));
  in.num_drafts.push_back(static_cast<std::int32_t>(r.gamma));
  in.offsets.push_back(in.offsets.back() + static_cast<std::int64_t>(r.gamma));
  detail::append_identity(in, r.seed, r.request_id, r.step);
}

//! A tree batch of no request over a vocabulary of `vocab` tokens, whose siblings are drawn by `sampling`.
inline tree_inputs empty_tree_batch(std::size_t vocab, sibling_sampling sampling) {
  tree_inputs in;
  in.vocab_size = vocab;
  in.sampling = sampling;
  in.offsets.push_back(0);
  return in;
}

//! Appends a tree drafted after `last`: every node at depth d gets branching[d] children drawn from
//! its draft row, i.i.d. or without replacement (fewer when q has fewer tokens left).
inline void append_tree_request(tree_inputs& in, const model_tables& m, const request_spec& r,
                                std::span<const std::size_t> branching, std::uint64_t kit_seed) {
  auto coins = detail::draft_coins(kit_seed, r.request_id, r.step);
  std::vector<std::int32_t> parents{-1};
  std::vector<std::size_t> context{r.last};  // the Markov context of each node: its token, or `last` for the root
  std::vector<std::size_t> level{0};
  for (const std::size_t k : branching) {
    std::vector<std::size_t> next;
    for (const std::size_t node : level) {
      std::vector<double> weights(m.pair.q_row(context[node]).begin(), m.pair.q_row(context[node]).end());
      for (std::size_t c = 0; c < k; ++c) {
        if (std::none_of(weights.begin(), weights.end(), [](double w) { return w > 0.0; })) break;
        const std::size_t token = detail::draw(weights, coins.uniform());
        if (in.sampling == sibling_sampling::without_replacement) weights[token] = 0.0;
        parents.push_back(static_cast<std::int32_t>(node));
        context.push_back(token);
        next.push_back(parents.size() - 1);
      }
    }
    level.swap(next);
  }
  for (std::size_t n = 0; n < parents.size(); ++n) {
    in.parents.push_back(parents[n]);
    in.tokens.push_back(n == 0 ? token_id{-1} : static_cast<token_id>(context[n]));
    detail::append_row(in.draft_rows, m.draft_row(context[n]));
    detail::append_row(in.target_rows, m.target_row(context[n]));
  }
  in.num_nodes.push_back(static_cast<std::int32_t>(parents.size()));
  in.offsets.push_back(in.offsets.back() + static_cast<std::int64_t>(parents.size()));
  detail::append_identity(in, r.seed, r.request_id, r.step);
}

//! The requests `order` of a chain batch, in that order (a request may appear once).
inline chain_inputs select_requests(const chain_inputs& in, std::span<const std::size_t> order) {
  chain_inputs out = empty_chain_batch(in.vocab_size);
  const std::size_t V = in.vocab_size;
  for (const std::size_t b : order) {
    const std::size_t n = static_cast<std::size_t>(in.num_drafts[b]);
    const auto d = static_cast<std::ptrdiff_t>(in.draft_index(b, 0)), t = static_cast<std::ptrdiff_t>(in.target_index(b, 0));
    out.draft_tokens.insert(out.draft_tokens.end(), in.draft_tokens.begin() + d,
                            in.draft_tokens.begin() + d + static_cast<std::ptrdiff_t>(n));
    out.draft_rows.insert(out.draft_rows.end(), in.draft_rows.begin() + d * static_cast<std::ptrdiff_t>(V),
                          in.draft_rows.begin() + (d + static_cast<std::ptrdiff_t>(n)) * static_cast<std::ptrdiff_t>(V));
    out.target_rows.insert(out.target_rows.end(), in.target_rows.begin() + t * static_cast<std::ptrdiff_t>(V),
                           in.target_rows.begin() + (t + static_cast<std::ptrdiff_t>(n) + 1) * static_cast<std::ptrdiff_t>(V));
    out.num_drafts.push_back(in.num_drafts[b]);
    out.offsets.push_back(out.offsets.back() + in.num_drafts[b]);
    detail::append_identity(out, in.seeds[b], in.request_ids[b], in.steps[b]);
  }
  return out;
}

//! The requests `order` of a tree batch, in that order.
inline tree_inputs select_requests(const tree_inputs& in, std::span<const std::size_t> order) {
  tree_inputs out = empty_tree_batch(in.vocab_size, in.sampling);
  const auto V = static_cast<std::ptrdiff_t>(in.vocab_size);
  for (const std::size_t b : order) {
    const auto n = static_cast<std::ptrdiff_t>(in.num_nodes[b]);
    const auto first = static_cast<std::ptrdiff_t>(in.node_index(b, 0));
    out.parents.insert(out.parents.end(), in.parents.begin() + first, in.parents.begin() + first + n);
    out.tokens.insert(out.tokens.end(), in.tokens.begin() + first, in.tokens.begin() + first + n);
    out.draft_rows.insert(out.draft_rows.end(), in.draft_rows.begin() + first * V, in.draft_rows.begin() + (first + n) * V);
    out.target_rows.insert(out.target_rows.end(), in.target_rows.begin() + first * V, in.target_rows.begin() + (first + n) * V);
    out.num_nodes.push_back(in.num_nodes[b]);
    out.offsets.push_back(out.offsets.back() + in.num_nodes[b]);
    detail::append_identity(out, in.seeds[b], in.request_ids[b], in.steps[b]);
  }
  return out;
}

}  // namespace specdec::conformance
