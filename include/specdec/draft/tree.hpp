//! \file draft/tree.hpp
//! \brief Tree drafters: a draft model proposes a token tree (core/tree.hpp) for tree verification
//! (acceptance/tree.hpp). Static trees from a `tree_shape` (Medusa's choice lists, Cai et al. 2024,
//! arXiv 2401.10774; full top-k expansions) and EAGLE-2's dynamic tree (Li et al. 2024, arXiv
//! 2406.16858, section 4 "context-aware dynamic draft tree").
//!
//! **Result.** A `drafted_tree` per request: node 0 is the root (the context); node n > 0 holds a
//! token, its parent (parent(n) < n), the row q(. | context + path to n) its children were drawn
//! from (the warped draft distribution, `warp_params`; peers.md §2.3: a rule that reads q needs the
//! row the draws came from) and log q(path to n) = sum of log q(token | path above it) over the path
//! (double, root 0). A node the drafter evaluated (one that had to propose children) has its row;
//! every other node's row (the leaves) is zero: no rule reads it. `packed_trees` lays a batch of
//! them out as `tree_layout::assign_parents` and `tree_batch` take them.
//!
//! **Candidates** (`tree_sampling`), drawn at a node from its warped row q:
//! - `top_k`: the tokens of the m largest q, ties to the lower id (deterministic, distinct);
//! - `iid`: m independent draws from q, with replacement (siblings may repeat);
//! - `without_replacement`: m distinct draws, each from q restricted to the tokens not drawn yet
//!   (successive sampling), by Gumbel-top-k: the m largest log q(v) + G_v, G_v i.i.d. standard
//!   Gumbel (Vieira 2014; Kool, van Hoof, Welling 2019, arXiv 1903.06059), kept in draw order.
//! Only tokens with q > 0 are ever candidates, so `top_k` and `without_replacement` give fewer than m
//! when q has fewer positive entries. Siblings keep the order of their draws (= descending q for
//! `top_k`): the rules that read q assume the j-th sibling is the j-th draw.
//!
//! **Which rule a tree suits** (acceptance/multi_candidate.hpp). A rule that reads q gets candidates
//! drawn from q, with or without replacement as the rule assumes, and each node's kept children must
//! not be chosen by looking at their own values:
//!
//! | drafter, `tree_sampling`        | `target_only`, `greedy`, `sample_and_match` | `strict` (SpecInfer MSS), `k_seq` | `recursive_rejection` |
//! |---------------------------------|-------------------|------------------------|-----------------------|
//! | static, `top_k`                 | lossless          | no (not draws from q)  | no                    |
//! | static, `iid`                   | lossless (repeats are rejected again) | lossless | no            |
//! | static, `without_replacement`   | lossless          | no (not i.i.d.)        | lossless when `tree_shape::has_rank_prefixes()` |
//! | dynamic (EAGLE-2), any sampling | lossless          | no                     | no                    |
//!
//! Why the dynamic tree is for `target_only` (and greedy) only, whatever its sampling: its pruning
//! keeps a node's child when the child's own score log q(path) is among the best, so the kept
//! siblings are a function of their own values, not draws from q. Example: q = (0.9, 0.1), two i.i.d.
//! draws of which only the better one is kept: the kept child is token 0 with probability 0.99, not
//! 0.9; with p = (0.5, 0.5), MSS then emits token 0 with probability 0.99 * 0.5 / 0.9 = 0.55, not 0.5.
//! Independence from the verification coins is necessary but not enough. The target-only rule is
//! lossless for any candidates chosen without its coins (draft randomness is `purpose::draft`, the
//! rule's coins `purpose::accept`), so the dynamic tree with `iid` or `without_replacement` is a
//! deterministic function of the draft draws that this rule verifies exactly. A static shape fixes
//! which draw indices are kept before any draw, so its `iid` children are i.i.d. draws from q.
//! tests/draft/tree.cpp checks the first emitted token's law through `verify_tree` for six lossless
//! cells, and that two "no" cells (static top_k + strict, dynamic iid + strict) fail the same test.
//!
//! **Randomness.** The candidates of node n come from the stream (position n, `purpose::draft`) of
//! the request's step, with n the node's id in the shape (static) or its creation index (dynamic,
//! root 0): results depend on the request's stream only, never on the batch. `top_k` reads nothing;
//! `iid` reads one uniform per draw (`sample_categorical`); `without_replacement` one Gumbel per token
//! with q > 0, in token order.
//!
//! **Cost.** One draft-model evaluation per evaluated node, the nodes of one depth (static) or one
//! frontier (dynamic) in one `batch_next_logits` call (one batched forward for a `BatchedModel`).
//! Each evaluation copies context + path into a reused buffer (O(L + depth) per node).
//!
//! **Decoding.** `tree_drafter_stage` makes either drafter a drafter stage of the step decoder
//! (draft/stage.hpp), the round's length being the depth limit; `packed_trees` feeds `verify_tree`
//! directly.
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/draft/tree_shape.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/top_w.hpp"

namespace specdec {

//! How the candidate children of a node are drawn from its warped draft row q (see the file comment
//! for which verification rule needs which).
enum class tree_sampling : std::uint8_t {
  top_k,                //!< deterministic, distinct: the largest q (target-only, greedy rules)
  iid,                  //!< i.i.d. draws from q with replacement (SpecInfer multi-step sampling, SpecTr K-SEQ)
  without_replacement,  //!< distinct draws by Gumbel-top-k (recursive rejection sampling)
};

//! \throws specdec::error when `s` is not a tree_sampling.
inline void validate(tree_sampling s) {
  SPECDEC_EXPECTS(s == tree_sampling::top_k || s == tree_sampling::iid || s == tree_sampling::without_replacement,
                  "unknown tree_sampling");
}

//! One request's drafted tree (see the file comment). All vectors have one entry per node
//! (`q_rows` one row of V), node 0 being the root.
struct drafted_tree {
  std::vector<std::int32_t> parents;  //!< parents[0] = no_node, parents[n] < n
  std::vector<token_id> tokens;       //!< tokens[0] = no_token
  std::vector<float> q_rows;          //!< [num_nodes][V]: q(. | context + path to n); zero when n was not evaluated
  std::vector<double> log_q;          //!< log q(path to n), log_q[0] = 0
  std::size_t model_calls = 0;        //!< draft-model evaluations (rows)
  std::size_t batched_calls = 0;      //!< batch_next_logits calls

  //! Nodes, the root included (0 before any drafting).
  std::size_t num_nodes() const noexcept { return parents.size(); }
  //! The vocabulary size V of the rows (0 before any drafting).
  std::size_t vocab_size() const noexcept { return parents.empty() ? 0 : q_rows.size() / parents.size(); }
  //! The row of node n.
  std::span<const float> q_row(std::size_t n) const noexcept {
    const std::size_t V = vocab_size();
    return std::span<const float>(q_rows).subspan(n * V, V);
  }
};

//! A batch of drafted trees as flat arrays, request after request: what `tree_layout::assign_parents`
//! (`num_nodes`, `parents`) and `tree_batch<float>` (`tokens`, `draft_rows` = `q_rows`) read.
//! `clear()` keeps the buffers, so packing a batch again allocates nothing once they are large enough.
struct packed_trees {
  std::size_t vocab_size = 0;           //!< V, the length of every q row
  std::vector<std::int32_t> num_nodes;  //!< [B], the roots included
  std::vector<std::int32_t> parents;    //!< [sum num_nodes], local ids
  std::vector<token_id> tokens;         //!< [sum num_nodes]
  std::vector<float> q_rows;            //!< [sum num_nodes][V]

  //! Empties the batch, keeping its buffers.
  void clear() noexcept {
    vocab_size = 0;
    num_nodes.clear();
    parents.clear();
    tokens.clear();
    q_rows.clear();
  }

  //! Appends one request's tree.
  //! \throws specdec::error when the tree is empty or inconsistent, or its V differs from the batch's
  void append(const drafted_tree& tree) {
    const std::size_t n = tree.num_nodes();
    SPECDEC_EXPECTS(n >= 1, "packed_trees: a drafted tree needs its root");
    SPECDEC_EXPECTS(tree.tokens.size() == n && tree.q_rows.size() % n == 0,
                    "packed_trees: a drafted tree needs one token and one q row per node");
    if (num_nodes.empty()) vocab_size = tree.vocab_size();
    SPECDEC_EXPECTS(tree.vocab_size() == vocab_size, "packed_trees: trees of one batch share V");
    num_nodes.push_back(static_cast<std::int32_t>(n));
    parents.insert(parents.end(), tree.parents.begin(), tree.parents.end());
    tokens.insert(tokens.end(), tree.tokens.begin(), tree.tokens.end());
    q_rows.insert(q_rows.end(), tree.q_rows.begin(), tree.q_rows.end());
  }

  //! Appends several requests' trees, in order.
  void append(std::span<const drafted_tree> trees) {
    for (const drafted_tree& t : trees) append(t);
  }

  //! Points `batch` at this packing: its layout is rebuilt in place (validated, no allocation once
  //! its buffers are large enough), its tokens and draft rows view these arrays, its target rows are
  //! `target_rows` ([sum num_nodes][V]). The views live as long as this object is unchanged.
  //! \throws specdec::error when the parents do not form trees (tree_layout::assign_parents)
  void assign_to(tree_batch<float>& batch, std::span<const float> target_rows) const {
    batch.layout.assign_parents(num_nodes, parents);
    batch.vocab_size = vocab_size;
    batch.tokens = tokens;
    batch.draft_rows = q_rows;
    batch.target_rows = target_rows;
  }
};

//! Packs `trees` into `out` (cleared first; its buffers are reused).
inline void pack_trees(std::span<const drafted_tree> trees, packed_trees& out) {
  out.clear();
  out.append(trees);
}

//! The default `max_depth` of the tree drafters' `draft`: no cut.
inline constexpr std::size_t no_depth_limit = static_cast<std::size_t>(-1);

namespace detail {

//! Makes `t` the root alone, with `rows` zero rows of V (the drafter shrinks them at the end).
inline void start_tree(drafted_tree& t, std::size_t rows, std::size_t V) {
  t.parents.assign(1, no_node);
  t.tokens.assign(1, no_token);
  t.log_q.assign(1, 0.0);
  t.q_rows.assign(rows * V, 0.0f);
  t.model_calls = 0;
  t.batched_calls = 0;
}

//! Appends a node; returns its id.
inline std::int32_t add_tree_node(drafted_tree& t, std::int32_t parent, token_id token, double log_q) {
  t.parents.push_back(parent);
  t.tokens.push_back(token);
  t.log_q.push_back(log_q);
  return static_cast<std::int32_t>(t.parents.size() - 1);
}

//! q = warp(softmax(logits)), or a numerical_error naming `who`.
inline void warp_draft_row(std::span<const float> logits, std::span<float> q, const warp_params& warp, const char* who) {
  if (warp_logits(logits, q, warp) != row_status::ok)
    throw numerical_error(std::string(who) + ": the draft model returned a row without usable mass");
}

//! The first `count` candidates drawn at a node from its warped row q under `how` (file comment),
//! in draw order, into `out`; `rng` is the node's stream. `keys` and `picked` are scratch.
inline void draw_tree_candidates(std::span<const float> q, std::size_t count, tree_sampling how, random::philox_stream rng,
                                 std::vector<double>& keys, std::vector<std::size_t>& picked, std::vector<token_id>& out) {
  out.clear();
  if (how == tree_sampling::iid) {
    for (std::size_t j = 0; j < count; ++j) out.push_back(sample_categorical(q, rng.uniform()).token);
    return;
  }
  keys.resize(q.size());
  for (std::size_t v = 0; v < q.size(); ++v) {
    const double log_q = q[v] > 0.0f ? std::log(static_cast<double>(q[v])) : -INFINITY;
    keys[v] = how == tree_sampling::without_replacement && q[v] > 0.0f ? log_q + rng.gumbel() : log_q;
  }
  top_w_indices(std::span<const double>(keys), count, picked);
  for (const std::size_t v : picked) out.push_back(static_cast<token_id>(v));
}

//! Evaluates the draft model after context + path to each of several tree nodes in one
//! `batch_next_logits` call, reusing its buffers.
template <Model M>
class tree_node_evaluator {
 public:
  //! Logits [nodes.size()][V] for `nodes` of the tree given by `parents` and `tokens` (root 0).
  std::span<const float> evaluate(const M& model, std::span<const token_id> context, std::span<const std::int32_t> parents,
                                  std::span<const token_id> tokens, std::span<const std::int32_t> nodes) {
    flat_.clear();
    ends_.clear();
    for (const std::int32_t node : nodes) {
      flat_.insert(flat_.end(), context.begin(), context.end());
      const std::size_t path_begin = flat_.size();
      for (auto n = static_cast<std::size_t>(node); n > 0; n = static_cast<std::size_t>(parents[n])) flat_.push_back(tokens[n]);
      std::reverse(flat_.begin() + static_cast<std::ptrdiff_t>(path_begin), flat_.end());
      ends_.push_back(flat_.size());
    }
    spans_.clear();
    std::size_t begin = 0;
    for (const std::size_t end : ends_) {
      spans_.emplace_back(flat_.data() + begin, end - begin);
      begin = end;
    }
    logits_.resize(nodes.size() * model.vocab_size());
    batch_next_logits(model, std::span<const std::span<const token_id>>(spans_), std::span<float>(logits_));
    return logits_;
  }

 private:
  std::vector<token_id> flat_;
  std::vector<std::size_t> ends_;
  std::vector<std::span<const token_id>> spans_;
  std::vector<float> logits_;
};

}  // namespace detail

//! Drafts the static tree of a `tree_shape` (Medusa-style): at every node the shape gives children,
//! the draft model is evaluated after context + path, its row is warped, `shape.candidates(n)`
//! candidates are drawn under `tree_sampling` and the child of rank r gets the r-th of them (`top_k`:
//! the r-th largest q; `iid`: the r-th i.i.d. draw; `without_replacement`: the r-th Gumbel-top-k
//! draw). A child whose rank has no candidate (`top_k`, `without_replacement`: q has r or fewer
//! positive entries) is left out with its subtree; the other nodes keep the shape's order, so
//! drafted ids equal shape ids when nothing is left out. Holds a pointer to the model (it must
//! outlive the drafter) and reusable buffers.
template <Model DraftModel>
class static_tree_drafter {
 public:
  //! \throws specdec::error on invalid warp parameters or sampling, or when a rank of the shape is
  //!         not below the vocabulary size
  static_tree_drafter(const DraftModel& model, tree_shape shape, warp_params warp = {},
                      tree_sampling sampling = tree_sampling::top_k)
      : model_(&model), shape_(std::move(shape)), warp_(warp), sampling_(sampling) {
    validate(warp_);
    validate(sampling_);
    SPECDEC_EXPECTS(shape_.max_candidates() <= model.vocab_size(), "a rank of the tree shape is not below the vocabulary size");
  }

  //! V, the draft model's vocabulary size.
  std::size_t vocab_size() const { return model_->vocab_size(); }
  //! The shape every drafted tree follows.
  const tree_shape& shape() const noexcept { return shape_; }
  //! The warp applied to every draft row.
  const warp_params& warp() const noexcept { return warp_; }
  //! How a node's children are chosen among the candidates of its row.
  tree_sampling sampling() const noexcept { return sampling_; }

  //! Drafts the whole tree after `context` into `out` (`draft(context, no_depth_limit, stream, out)`).
  std::size_t draft(std::span<const token_id> context, const random::request_stream& stream, drafted_tree& out) {
    return draft(context, no_depth_limit, stream, out);
  }
  //! Drafts the tree after `context` into `out` (its buffers are reused), down to depth `max_depth`
  //! at most (the shape cut there); the arguments in a chain `Drafter`'s order. Returns the number of
  //! draft-model evaluations (`out.model_calls`): the kept nodes above the cut that the shape gives
  //! children.
  //! \throws specdec::numerical_error when the draft model returns a row without usable mass
  std::size_t draft(std::span<const token_id> context, std::size_t max_depth, const random::request_stream& stream,
                    drafted_tree& out) {
    const std::size_t V = vocab_size();
    detail::start_tree(out, shape_.num_nodes(), V);  // drafted ids never exceed shape ids
    drafted_id_.assign(shape_.num_nodes(), no_node);
    drafted_id_[0] = 0;
    drawn_begin_.assign(shape_.num_nodes(), 0);
    drawn_count_.assign(shape_.num_nodes(), 0);
    drawn_.clear();
    for (std::size_t d = 0; d < std::min(shape_.max_depth(), max_depth); ++d) {
      evaluated_.clear();
      evaluated_ids_.clear();
      for (std::size_t n = shape_.level_begin(d); n < shape_.level_begin(d + 1); ++n)
        if (drafted_id_[n] != no_node && shape_.candidates(n) > 0) {
          evaluated_.push_back(n);
          evaluated_ids_.push_back(drafted_id_[n]);
        }
      if (evaluated_.empty()) break;
      const auto logits = evaluator_.evaluate(*model_, context, out.parents, out.tokens, evaluated_ids_);
      out.model_calls += evaluated_.size();
      ++out.batched_calls;
      for (std::size_t i = 0; i < evaluated_.size(); ++i) {
        const std::size_t n = evaluated_[i];
        const std::span<float> q(out.q_rows.data() + static_cast<std::size_t>(evaluated_ids_[i]) * V, V);
        detail::warp_draft_row(logits.subspan(i * V, V), q, warp_, "specdec::static_tree_drafter::draft");
        detail::draw_tree_candidates(q, shape_.candidates(n), sampling_,
                                     stream.open(static_cast<std::uint32_t>(n), random::purpose::draft), keys_, picked_,
                                     candidates_);
        drawn_begin_[n] = drawn_.size();
        drawn_count_[n] = candidates_.size();
        drawn_.insert(drawn_.end(), candidates_.begin(), candidates_.end());
      }
      for (std::size_t c = shape_.level_begin(d + 1); c < shape_.level_begin(d + 2); ++c) {
        const auto parent = static_cast<std::size_t>(shape_.parent(c));
        const auto rank = static_cast<std::size_t>(shape_.rank(c));
        if (drafted_id_[parent] == no_node || rank >= drawn_count_[parent]) continue;
        const std::int32_t pid = drafted_id_[parent];
        const token_id x = drawn_[drawn_begin_[parent] + rank];
        const float q_x = out.q_rows[static_cast<std::size_t>(pid) * V + static_cast<std::size_t>(x)];
        const double log_q_x = std::log(static_cast<double>(q_x));
        drafted_id_[c] = detail::add_tree_node(out, pid, x, out.log_q[static_cast<std::size_t>(pid)] + log_q_x);
      }
    }
    out.q_rows.resize(out.num_nodes() * V);
    return out.model_calls;
  }

 private:
  const DraftModel* model_;
  tree_shape shape_;
  warp_params warp_;
  tree_sampling sampling_;
  detail::tree_node_evaluator<DraftModel> evaluator_;
  std::vector<std::int32_t> drafted_id_, evaluated_ids_;
  std::vector<std::size_t> evaluated_, drawn_begin_, drawn_count_, picked_;
  std::vector<token_id> drawn_, candidates_;
  std::vector<double> keys_;
};

//! EAGLE-2's default number of frontier expansions after the root's (`depth`, SafeAILab/EAGLE
//! `ea_model.py`).
inline constexpr std::size_t eagle2_default_depth = 7;
//! EAGLE-2's default frontier width and children per expanded node (`top_k`).
inline constexpr std::size_t eagle2_default_top_k = 10;
//! EAGLE-2's default number of drafted tokens kept (`total_token`).
inline constexpr std::size_t eagle2_default_total_tokens = 60;

//! Parameters of EAGLE-2's dynamic draft tree. Defaults: EAGLE's (depth 7, top_k 10, total_tokens
//! 60), deterministic top-k candidates, no warping (EAGLE scores with the draft's log-softmax).
struct dynamic_tree_params {
  std::size_t depth = eagle2_default_depth;                //!< frontier expansions after the root's
  std::size_t top_k = eagle2_default_top_k;                //!< >= 1: frontier width and children per expanded node
  std::size_t total_tokens = eagle2_default_total_tokens;  //!< >= 1: drafted nodes kept (the root not counted)
  tree_sampling sampling = tree_sampling::top_k;           //!< see the file comment: any sampling suits target_only only
  warp_params warp{};                                      //!< applied to every draft row (T > 0: T = 0 gives a chain)
};

//! The number of nodes (the root not counted) a dynamic tree generates before pruning when every
//! row offers top_k candidates: top_k + depth * top_k^2.
constexpr std::size_t dynamic_tree_generated_nodes(const dynamic_tree_params& p) noexcept {
  return p.top_k + p.depth * p.top_k * p.top_k;
}

//! \throws specdec::error when top_k or total_tokens is 0, the sampling or warp is invalid, or the
//!         tree would generate more than 2^24 nodes
inline void validate(const dynamic_tree_params& p) {
  SPECDEC_EXPECTS(p.top_k >= 1, "dynamic_tree_params: top_k must be >= 1");
  SPECDEC_EXPECTS(p.total_tokens >= 1, "dynamic_tree_params: total_tokens must be >= 1");
  SPECDEC_EXPECTS(p.top_k <= 4096 && p.depth <= (std::size_t{1} << 24) / (p.top_k * p.top_k),
                  "dynamic_tree_params: the tree would generate more than 2^24 nodes");
  validate(p.sampling);
  validate(p.warp);
}

//! EAGLE-2's dynamic draft tree (arXiv 2406.16858 section 4; SafeAILab/EAGLE `cnets.py`
//! `topK_genrate`). A node's score is its cumulative draft log-probability log q(path), the log of
//! EAGLE-2's value V = prod of the confidences along the path.
//! - Expansion: the frontier starts as {root}. Step s = 0..depth evaluates every frontier node (one
//!   batched call) and each proposes top_k children (its candidates under `tree_sampling`), all
//!   kept as generated nodes in creation order (frontier order, then draw order). Unless s = depth,
//!   the next frontier is the top_k children generated at step s by score, ties to the earlier node.
//!   So drafted tokens reach depth + 1 levels, and there are 1 + depth * top_k evaluations in
//!   depth + 1 batched calls (fewer when rows offer fewer candidates).
//! - Reranking: the kept tree is the min(total_tokens, generated) generated nodes of highest score,
//!   ties to the earlier node. It is connected: a child's score is its parent's plus log q <= 0, and
//!   a parent precedes its child, so a parent always ranks before its child.
//! - Numbering: kept nodes in creation order (EAGLE sorts the kept indices), so parent(i) < i, the
//!   nodes of one depth are consecutive, and siblings keep draw order (descending score for top_k).
//! - Rows: every kept node that was evaluated has its row; the others are zero.
//! Randomness: node n's candidates use stream position n (its creation index, root 0).
template <Model DraftModel>
class dynamic_tree_drafter {
 public:
  //! \throws specdec::error on invalid parameters (validate(dynamic_tree_params))
  dynamic_tree_drafter(const DraftModel& model, dynamic_tree_params params) : model_(&model), params_(params) {
    validate(params_);
  }

  //! V, the draft model's vocabulary size.
  std::size_t vocab_size() const { return model_->vocab_size(); }
  //! The drafter's parameters.
  const dynamic_tree_params& params() const noexcept { return params_; }

  //! Drafts the whole tree after `context` into `out` (`draft(context, no_depth_limit, stream, out)`).
  std::size_t draft(std::span<const token_id> context, const random::request_stream& stream, drafted_tree& out) {
    return draft(context, no_depth_limit, stream, out);
  }
  //! Drafts the tree after `context` into `out` (its buffers are reused), down to depth `max_depth`
  //! at most (min(depth, max_depth - 1) frontier expansions after the root's; max_depth = 0 drafts
  //! nothing); the arguments in a chain `Drafter`'s order. Returns the number of draft-model
  //! evaluations (`out.model_calls`).
  //! \throws specdec::numerical_error when the draft model returns a row without usable mass
  std::size_t draft(std::span<const token_id> context, std::size_t max_depth, const random::request_stream& stream,
                    drafted_tree& out) {
    const std::size_t V = vocab_size();
    if (max_depth == 0) {
      detail::start_tree(out, 1, V);
      return 0;
    }
    grow(context, stream, std::min(params_.depth, max_depth - 1), out);
    // Reranking: the best total_tokens generated nodes (the root excluded), then creation order.
    keys_.assign(gen_log_q_.begin() + 1, gen_log_q_.end());
    top_w_indices(std::span<const double>(keys_), params_.total_tokens, picked_);
    std::sort(picked_.begin(), picked_.end());
    const std::size_t calls = out.model_calls, batches = out.batched_calls;
    detail::start_tree(out, picked_.size() + 1, V);
    out.model_calls = calls;
    out.batched_calls = batches;
    kept_id_.assign(gen_parent_.size(), no_node);
    kept_id_[0] = 0;
    copy_row(0, 0, out);
    for (const std::size_t p : picked_) {
      const std::size_t g = p + 1;
      const std::int32_t parent = kept_id_[static_cast<std::size_t>(gen_parent_[g])];
      assert(parent != no_node && "a dynamic tree keeps a node's parent before the node");
      kept_id_[g] = detail::add_tree_node(out, parent, gen_token_[g], gen_log_q_[g]);
      copy_row(g, static_cast<std::size_t>(kept_id_[g]), out);
    }
    return out.model_calls;
  }

 private:
  // Expansion: fills the generated nodes (gen_*) and the rows of the evaluated ones; counts calls in out.
  void grow(std::span<const token_id> context, const random::request_stream& stream, std::size_t depth, drafted_tree& out) {
    const std::size_t V = vocab_size();
    gen_parent_.assign(1, no_node);
    gen_token_.assign(1, no_token);
    gen_log_q_.assign(1, 0.0);
    gen_row_.assign(1, no_node);
    frontier_.assign(1, 0);
    out.model_calls = 0;
    out.batched_calls = 0;
    std::size_t evaluated = 0;
    for (std::size_t step = 0; step <= depth && !frontier_.empty(); ++step) {
      const auto logits = evaluator_.evaluate(*model_, context, gen_parent_, gen_token_, frontier_);
      out.model_calls += frontier_.size();
      ++out.batched_calls;
      rows_.resize((evaluated + frontier_.size()) * V);
      const std::size_t step_begin = gen_parent_.size();
      for (std::size_t i = 0; i < frontier_.size(); ++i, ++evaluated) {
        const auto f = static_cast<std::size_t>(frontier_[i]);
        const std::span<float> q(rows_.data() + evaluated * V, V);
        detail::warp_draft_row(logits.subspan(i * V, V), q, params_.warp, "specdec::dynamic_tree_drafter::draft");
        gen_row_[f] = static_cast<std::int32_t>(evaluated);
        detail::draw_tree_candidates(q, params_.top_k, params_.sampling,
                                     stream.open(static_cast<std::uint32_t>(f), random::purpose::draft), keys_, picked_,
                                     candidates_);
        for (const token_id x : candidates_) {
          gen_parent_.push_back(frontier_[i]);
          gen_token_.push_back(x);
          gen_log_q_.push_back(gen_log_q_[f] + std::log(static_cast<double>(q[static_cast<std::size_t>(x)])));
          gen_row_.push_back(no_node);
        }
      }
      if (step == depth) break;
      keys_.assign(gen_log_q_.begin() + static_cast<std::ptrdiff_t>(step_begin), gen_log_q_.end());
      top_w_indices(std::span<const double>(keys_), params_.top_k, picked_);
      frontier_.clear();
      for (const std::size_t p : picked_) frontier_.push_back(static_cast<std::int32_t>(step_begin + p));
    }
  }

  void copy_row(std::size_t generated, std::size_t kept, drafted_tree& out) const {
    if (gen_row_[generated] == no_node) return;
    const std::size_t V = vocab_size();
    const auto from = rows_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(gen_row_[generated]) * V);
    std::copy(from, from + static_cast<std::ptrdiff_t>(V), out.q_rows.begin() + static_cast<std::ptrdiff_t>(kept * V));
  }

  const DraftModel* model_;
  dynamic_tree_params params_;
  detail::tree_node_evaluator<DraftModel> evaluator_;
  std::vector<std::int32_t> gen_parent_, gen_row_, frontier_, kept_id_;
  std::vector<token_id> gen_token_, candidates_;
  std::vector<double> gen_log_q_, keys_;
  std::vector<float> rows_;
  std::vector<std::size_t> picked_;
};

//! A drafter that writes a `drafted_tree` down to a depth limit: `static_tree_drafter`,
//! `dynamic_tree_drafter`. Its arguments come in a chain `Drafter`'s order (draft/chain.hpp: context,
//! length, stream, output), the length being the tree's depth limit.
template <class D>
concept TreeDrafter = requires(D& d, std::span<const token_id> context, std::size_t max_depth,
                               const random::request_stream& stream, drafted_tree& out) {
  { d.draft(context, max_depth, stream, out) } -> std::convertible_to<std::size_t>;
};

//! A tree drafter as a drafter stage of the step decoder (draft/stage.hpp; verified with
//! `tree_acceptance`, decode/batch_decoder.hpp). The round's length gamma is the tree's depth limit
//! (gamma = 0 drafts nothing). The stage writes nodes 1.. as `tokens` and `parents` (node ids, 0 =
//! the root), every node's row, the root's first, as `q_rows`, the evaluations as `model_calls`, and
//! one charged draft step per batched call (a depth or a frontier runs as one batched forward). The
//! stage refers to `drafter`, which must outlive it.
template <TreeDrafter D>
draft_stage_of<draft_output::tree> tree_drafter_stage(D& drafter) {
  return draft_stage_of<draft_output::tree>(
      [d = &drafter, tree = drafted_tree{}](std::span<const token_id> context, std::size_t gamma,
                                            const random::request_stream& stream, stage_draft& out) mutable {
        if (gamma == 0) return;
        d->draft(context, gamma, stream, tree);
        out.tokens.assign(tree.tokens.begin() + 1, tree.tokens.end());
        out.parents.assign(tree.parents.begin() + 1, tree.parents.end());
        out.q_rows.swap(tree.q_rows);  // the drafter refills its buffer: no copy, no allocation once warm
        out.model_calls = tree.model_calls;
        out.charged_steps = tree.batched_calls;
      });
}

//! One static tree after `context` (a `static_tree_drafter` used once).
//! \throws as static_tree_drafter's constructor and draft
template <Model DraftModel>
drafted_tree draft_static_tree(const DraftModel& model, std::span<const token_id> context, const tree_shape& shape,
                               const warp_params& warp, tree_sampling sampling, const random::request_stream& stream) {
  static_tree_drafter<DraftModel> drafter(model, shape, warp, sampling);
  drafted_tree out;
  drafter.draft(context, stream, out);
  return out;
}

//! One EAGLE-2 dynamic tree after `context` (a `dynamic_tree_drafter` used once).
//! \throws as dynamic_tree_drafter's constructor and draft
template <Model DraftModel>
drafted_tree draft_dynamic_tree(const DraftModel& model, std::span<const token_id> context, const dynamic_tree_params& params,
                                const random::request_stream& stream) {
  dynamic_tree_drafter<DraftModel> drafter(model, params);
  drafted_tree out;
  drafter.draft(context, stream, out);
  return out;
}

}  // namespace specdec
