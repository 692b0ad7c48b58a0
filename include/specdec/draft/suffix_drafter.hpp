//! \file draft/suffix_drafter.hpp
//! \brief Suffix-tree drafting, a drafter that costs no model call: SuffixDecoding (Oliaro, Jia,
//! Campos, Qiao, arXiv 2411.04975). The request's context (prompt and output) is indexed in a
//! per-request suffix tree (draft/suffix_tree.hpp), earlier requests' outputs in an optional global
//! `suffix_cache` shared by many requests; the tail of the context is matched in both and the most
//! frequent continuations after the match are the draft, as a chain or as a tree.
//!
//! **Rule** (the paper's section 3, as its reference implementation in Arctic Inference computes it).
//! In one tree, for each match length m = min_match, min_match + 1, ... while the context's last m
//! tokens are a path (at most the tree's max_depth), a candidate is drafted from that path's node u:
//! - the path probability of a node w below u is the product of count(child) / count(parent) over the
//!   edges from u to w (the empirical probability of that continuation; a parent's count includes the
//!   occurrences that end at it, such as the context's own last one in the per-request tree);
//! - the candidate has at most budget(m) = min(gamma, max_spec, floor(factor * m)) tokens (the paper's
//!   MAX_SPEC = alpha * p, eq. in section 3.2: longer matches speculate further);
//! - chain (`tree` false): from u, repeatedly the child with the largest count (ties to the lower
//!   token id), while its path probability is >= min_probability and the budget lasts;
//! - tree (`tree` true): best-first (section 3.2's greedy expansion): the frontier starts with u's
//!   children; the frontier node of largest path probability (ties to the one that entered it first;
//!   siblings enter by count descending, then token id ascending) joins the draft and its children
//!   enter the frontier; only nodes of path probability >= min_probability ever enter; until the draft
//!   has budget(m) tokens or the frontier is empty. Path probabilities never grow along a path, so a
//!   parent always joins before its children and the draft is the budget(m) most probable such nodes.
//! - score = the sum of the draft's path probabilities (the expected number of accepted tokens if the
//!   counts were the target's law). The candidate of highest score wins, ties to the longer match.
//! Between the per-request tree and the global cache, the higher score wins, ties to the per-request
//! tree. No match, or no child above min_probability, drafts nothing (the round is a target-only step).
//! Example: context [1, 2, 3, 4, 2, 3], factor 2, gamma 4: m = 1 ([3], count 2) drafts [4, 2] (path
//! probability 1/2 each: [3] also ends the context), m = 2 ([2, 3], count 2) drafts [4, 2, 3] (score
//! 1.5, what follows the earlier [2, 3]), m >= 3 only the context's own occurrence: the draft is
//! [4, 2, 3]. With the default factor 1, budget(2) = 2: [4, 2].
//!
//! **State.** `suffix_stage` returns a stateful stage for one request: each call indexes only the
//! tokens appended since the last call (O(max_depth log) each); a context that does not extend the
//! one it saw (another request, a rewound one) is indexed again from scratch, so one stage object
//! reused across requests stays correct. Copies of the stage are independent (they share the cache).
//!
//! **Cost and memory.** Per round, O(max_depth^2) child look-ups to match plus, per match length,
//! O(budget) steps each scanning one node's children (sorted at draft time for trees). The
//! per-request tree holds at most 1 + L * max_depth nodes for a context of L tokens; the global cache
//! at most 1 + max_tokens * its max_depth (suffix_tree.hpp: `node_bytes()` each), evicting the oldest
//! outputs first.
//!
//! **Guarantee.** The drafts are a deterministic function of the context and the cache's contents,
//! drawn with no randomness of the round's stream. The output law is exactly the target's with greedy
//! decoding, sample-and-match and target-only tree verification (which never read q), or with strict
//! verification given a one-hot q on the drafted token (a proposal that puts all its mass on the
//! drafted token is the law it was drawn from). The stage writes no q rows: the counts and path
//! probabilities are never handed to a rule as q (they are not the law the tokens were drawn from).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/draft/suffix_tree.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! Parameters of suffix-tree drafting (defaults: vLLM's SuffixDecoding settings, from Arctic Inference).
struct suffix_options {
  std::size_t max_depth = 24;    //!< depth of the per-request tree, and longest match looked up there (>= 1)
  std::size_t max_spec = 32;     //!< most tokens per draft (>= 1); the round's gamma caps it too
  double factor = 1.0;           //!< alpha: a match of m tokens drafts at most floor(factor * m) tokens (> 0)
  double min_probability = 0.1;  //!< least path probability of a drafted token, in (0, 1]
  bool tree = false;             //!< false: a chain; true: a best-first tree (writes stage_draft::parents)
  std::size_t min_match = 1;     //!< shortest match drafted from (>= 1, <= max_depth)
};

//! \throws specdec::error naming the parameter when max_depth, max_spec or min_match is 0, min_match
//! exceeds max_depth, factor is not > 0 or min_probability is not in (0, 1].
inline void validate(const suffix_options& o) {
  SPECDEC_EXPECTS(o.max_depth >= 1, "specdec::suffix_options: max_depth must be at least 1");
  SPECDEC_EXPECTS(o.max_spec >= 1, "specdec::suffix_options: max_spec must be at least 1");
  SPECDEC_EXPECTS(o.factor > 0 && std::isfinite(o.factor), "specdec::suffix_options: factor must be finite and > 0");
  SPECDEC_EXPECTS(o.min_probability > 0 && o.min_probability <= 1, "specdec::suffix_options: min_probability must be in (0, 1]");
  SPECDEC_EXPECTS(o.min_match >= 1 && o.min_match <= o.max_depth, "specdec::suffix_options: min_match must be in [1, max_depth]");
}

//! A draft from a suffix tree: tokens, their parents (0 = the context, k = the k-th token; k - 1 for
//! the k-th token of a chain), their path probabilities, the score (their sum) and the match length
//! it came from (0: no draft).
struct suffix_draft {
  std::vector<token_id> tokens;       //!< the drafted tokens, parents first
  std::vector<std::int32_t> parents;  //!< the parent of each token (0: the context)
  std::vector<double> probabilities;  //!< each token's path probability (never handed to a rule as q)
  double score = 0.0;                 //!< the sum of the path probabilities (expected accepted tokens)
  std::size_t match_length = 0;       //!< the match the draft continues (0: no draft)

  //! Empties the draft, keeping its buffers.
  void clear() noexcept {
    tokens.clear();
    parents.clear();
    probabilities.clear();
    score = 0.0;
    match_length = 0;
  }
};

//! Reused buffers of suffix drafting.
struct suffix_workspace {
  //! A node on the best-first frontier.
  struct frontier_entry {
    double probability;   //!< its path probability
    std::uint64_t order;  //!< when it entered: ties go to the earlier
    suffix_node node;     //!< the tree node
    std::int32_t parent;  //!< 0 = the match node, k = the k-th drafted token
  };
  suffix_draft candidate;                //!< a candidate draft being built
  std::vector<frontier_entry> frontier;  //!< the best-first frontier (a heap)
  std::vector<suffix_node> siblings;     //!< a node's children in drafting order
};

//! The candidate drafted from node `u` of `tree` with at most `budget` tokens (see the file comment:
//! chain or best-first tree by `o.tree`), written to `out` (cleared first; match_length left 0).
inline void suffix_draft_from(const suffix_tree& tree, suffix_node u, std::size_t budget, const suffix_options& o,
                              suffix_draft& out, suffix_workspace& work) {
  out.clear();
  const auto ratio = [&tree](suffix_node child, suffix_node parent) {
    return static_cast<double>(tree.count(child)) / static_cast<double>(tree.count(parent));
  };
  const auto append = [&out](token_id t, std::int32_t parent, double p) {
    out.tokens.push_back(t);
    out.parents.push_back(parent);
    out.probabilities.push_back(p);
    out.score += p;
  };
  if (!o.tree) {
    double p = 1.0;
    for (suffix_node v = u; out.tokens.size() < budget;) {
      suffix_node best = no_suffix_node;
      for (const suffix_node c : tree.children(v))  // by token id: a strictly larger count replaces
        if (best == no_suffix_node || tree.count(c) > tree.count(best)) best = c;
      if (best == no_suffix_node) break;
      p *= ratio(best, v);
      if (p < o.min_probability) break;
      append(tree.token(best), static_cast<std::int32_t>(out.tokens.size()), p);
      v = best;
    }
    return;
  }
  using entry = suffix_workspace::frontier_entry;
  const auto later = [](const entry& a, const entry& b) {  // the heap's top is the most probable, then the earliest
    return a.probability < b.probability || (a.probability == b.probability && a.order > b.order);
  };
  std::uint64_t order = 0;
  const auto enter_children = [&](suffix_node v, double p, std::int32_t parent) {
    const std::span<const suffix_node> c = tree.children(v);
    work.siblings.assign(c.begin(), c.end());
    std::stable_sort(work.siblings.begin(), work.siblings.end(),  // stable: equal counts stay by token id
                     [&tree](suffix_node a, suffix_node b) { return tree.count(a) > tree.count(b); });
    for (const suffix_node s : work.siblings) {
      const double q = p * ratio(s, v);
      if (q < o.min_probability) break;  // the rest have smaller counts
      work.frontier.push_back(entry{q, order++, s, parent});
      std::push_heap(work.frontier.begin(), work.frontier.end(), later);
    }
  };
  work.frontier.clear();
  enter_children(u, 1.0, 0);
  while (out.tokens.size() < budget && !work.frontier.empty()) {
    std::pop_heap(work.frontier.begin(), work.frontier.end(), later);
    const entry e = work.frontier.back();
    work.frontier.pop_back();
    append(tree.token(e.node), e.parent, e.probability);
    enter_children(e.node, e.probability, static_cast<std::int32_t>(out.tokens.size()));
  }
}

//! The draft `tree` proposes after `context` with at most `limit` tokens: the best candidate over the
//! match lengths (see the file comment), written to `out` (cleared first; empty when nothing matches).
inline void suffix_speculate(const suffix_tree& tree, std::span<const token_id> context, std::size_t limit,
                             const suffix_options& o, suffix_draft& out, suffix_workspace& work) {
  out.clear();
  const std::size_t cap = std::min(limit, o.max_spec);
  if (cap == 0) return;
  const std::size_t longest = std::min(context.size(), tree.max_depth());
  for (std::size_t m = o.min_match; m <= longest; ++m) {
    const suffix_node u = tree.find(context.last(m));
    if (u == no_suffix_node) break;  // paths are closed under suffixes: no longer match either
    const double scaled = o.factor * static_cast<double>(m);
    const std::size_t budget = scaled >= static_cast<double>(cap) ? cap : static_cast<std::size_t>(scaled + 1e-9);
    if (budget == 0) continue;
    suffix_draft_from(tree, u, budget, o, work.candidate, work);
    if (!work.candidate.tokens.empty() && work.candidate.score >= out.score) {
      std::swap(out, work.candidate);
      out.match_length = m;
    }
  }
}

//! Makes `tree` index exactly `context` as its one, open sequence: appends only the tokens it lacks
//! when `context` extends what it holds, and indexes it from scratch otherwise.
inline void index_context(suffix_tree& tree, std::span<const token_id> context) {
  bool extends = tree.num_sequences() == 1 && tree.is_open();
  if (extends) {
    const std::span<const token_id> seen = tree.sequence(0);
    extends = seen.size() <= context.size() && std::equal(seen.begin(), seen.end(), context.begin());
  }
  if (!extends) {
    tree.clear();
    tree.begin_sequence();
  }
  for (const token_id t : context.subspan(tree.num_tokens())) tree.extend(t);
}

//! A global suffix tree over earlier requests' outputs, shared by many requests' stages (through a
//! std::shared_ptr) and safe to use from several threads: drafting takes a shared lock, `insert` an
//! exclusive one. It holds at most `max_tokens` tokens (oldest outputs evicted first), hence at most
//! 1 + max_tokens * max_depth nodes.
class suffix_cache {
 public:
  //! \throws specdec::error when max_tokens or max_depth is 0
  explicit suffix_cache(std::size_t max_tokens, std::size_t max_depth = suffix_options{}.max_depth)
      : max_tokens_(max_tokens), tree_(max_depth) {
    SPECDEC_EXPECTS(max_tokens >= 1, "specdec::suffix_cache: max_tokens must be at least 1");
  }

  //! Adds a finished request's output (call it when the request ends); an output longer than
  //! max_tokens keeps its last max_tokens tokens. Then evicts the oldest outputs until the cache
  //! holds at most max_tokens tokens.
  void insert(std::span<const token_id> output) {
    if (output.empty()) return;
    if (output.size() > max_tokens_) output = output.last(max_tokens_);
    std::unique_lock lock(mutex_);
    tree_.insert(output);
    while (tree_.num_tokens() > max_tokens_) tree_.evict_oldest();
  }

  //! `suffix_speculate` on the cache's tree (matches up to the cache's max_depth).
  void speculate(std::span<const token_id> context, std::size_t limit, const suffix_options& o, suffix_draft& out,
                 suffix_workspace& work) const {
    std::shared_lock lock(mutex_);
    suffix_speculate(tree_, context, limit, o, out, work);
  }

  //! Calls `f(const suffix_tree&)` under the shared lock and returns what it returns.
  template <class F>
  decltype(auto) inspect(F&& f) const {
    std::shared_lock lock(mutex_);
    return std::forward<F>(f)(static_cast<const suffix_tree&>(tree_));
  }

  //! The most tokens the cache holds.
  std::size_t max_tokens() const noexcept { return max_tokens_; }
  //! The tokens it holds now.
  std::size_t num_tokens() const {
    return inspect([](const suffix_tree& t) { return t.num_tokens(); });
  }
  //! The outputs it holds now.
  std::size_t num_sequences() const {
    return inspect([](const suffix_tree& t) { return t.num_sequences(); });
  }
  //! The nodes of its tree.
  std::size_t num_nodes() const {
    return inspect([](const suffix_tree& t) { return t.num_nodes(); });
  }
  //! The bytes its tree's containers reserved.
  std::size_t memory_bytes() const {
    return inspect([](const suffix_tree& t) { return t.memory_bytes(); });
  }

 private:
  mutable std::shared_mutex mutex_;
  std::size_t max_tokens_;
  suffix_tree tree_;
};

namespace detail {
//! The call of a suffix-tree drafter stage for one request (see the file comment for the state it keeps).
inline auto suffix_call(const suffix_options& o, std::shared_ptr<suffix_cache> global) {
  validate(o);
  struct state {
    suffix_tree local;
    suffix_draft mine, theirs;
    suffix_workspace work;
  };
  return [o, global = std::move(global), s = state{suffix_tree(o.max_depth), {}, {}, {}}](
             std::span<const token_id> context, std::size_t gamma, const random::request_stream& /*stream*/,
             stage_draft& out) mutable {
    index_context(s.local, context);
    suffix_speculate(s.local, context, gamma, o, s.mine, s.work);
    if (global) {
      global->speculate(context, gamma, o, s.theirs, s.work);
      if (s.theirs.score > s.mine.score) std::swap(s.mine, s.theirs);
    }
    out.tokens.assign(s.mine.tokens.begin(), s.mine.tokens.end());
    if (o.tree)
      out.parents.assign(s.mine.parents.begin(), s.mine.parents.end());
    else
      out.parents.clear();
    out.q_rows.clear();
    out.log_q.clear();
    out.model_calls = 0;
    out.charged_steps = 0;
  };
}
}  // namespace detail

//! Suffix-tree drafting as a drafter stage of the step decoder (request_options::drafter), for one
//! request: writes the tokens, and for `o.tree` the parents; no q rows, no model call, no draft step
//! charged. Its output (`o.tree`: a tree, else a chain) is known at run time; `suffix_chain_stage` and
//! `suffix_tree_stage` carry it in their type.
//! \throws specdec::error on invalid options (validate)
inline draft_stage suffix_stage(const suffix_options& o, std::shared_ptr<suffix_cache> global = {}) {
  return draft_stage(o.tree ? draft_output::tree : draft_output::chain, detail::suffix_call(o, std::move(global)));
}

//! `suffix_stage` drafting chains (`o.tree` ignored). \throws specdec::error on invalid options
inline draft_stage_of<draft_output::chain> suffix_chain_stage(suffix_options o, std::shared_ptr<suffix_cache> global = {}) {
  o.tree = false;
  return draft_stage_of<draft_output::chain>(detail::suffix_call(o, std::move(global)));
}

//! `suffix_stage` drafting trees (`o.tree` ignored). \throws specdec::error on invalid options
inline draft_stage_of<draft_output::tree> suffix_tree_stage(suffix_options o, std::shared_ptr<suffix_cache> global = {}) {
  o.tree = true;
  return draft_stage_of<draft_output::tree>(detail::suffix_call(o, std::move(global)));
}

}  // namespace specdec
