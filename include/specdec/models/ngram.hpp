//! \file models/ngram.hpp
//! \brief A word-level n-gram language model with interpolated modified Kneser-Ney smoothing, trained at
//! run time on text.
//!
//! The reference language model of docs/design.md, 'Models': a low-order model drafts for a high-order one
//! (typically orders 2 and 4) trained on the same text with the same vocabulary (`make_ngram_pair`).
//!
//! **Smoothing** (Chen & Goodman 1998, "An empirical study of smoothing techniques for language
//! modeling", TR-10-98, section 3.6, eqs. 17-19 and 26). For a history h of length m - 1 (an m-gram level)
//! \f[ p(w|h) = \frac{\max(c(hw) - D_m(c(hw)), 0)}{\sum_v c(hv)} + \gamma(h)\, p(w|h'), \quad
//!     \gamma(h) = \frac{D_{m,1} N_1(h\cdot) + D_{m,2} N_2(h\cdot) + D_{m,3+} N_{3+}(h\cdot)}{\sum_v c(hv)} \f]
//! where h' drops the oldest token of h and \f$N_k(h\cdot)\f$ counts the words seen exactly k times
//! (k or more for 3+) after h. At the highest order c is the raw count; at lower orders it is the
//! continuation count \f$N_{1+}(\cdot h w)\f$, the number of distinct words seen before hw. The discounts
//! of each order come from its counts-of-counts n_1..n_4:
//! \f$Y = n_1/(n_1 + 2 n_2),\ D_1 = 1 - 2Y n_2/n_1,\ D_2 = 2 - 3Y n_3/n_2,\ D_{3+} = 3 - 4Y n_4/n_3\f$.
//! The recursion ends in the uniform distribution 1/V (after the unigram level), so every token, the
//! special ones included, has p > 0. A history never seen in training is skipped (p(w|h) = p(w|h')).
//! If some n_k is 0 (tiny corpora), the order falls back to one absolute discount D = Y (or 0.5);
//! every discount is finally clamped to [1e-3, k], so `D1` is in (0, 1], `D2` in (0, 2], `D3` in (0, 3].
//!
//! **Boundaries.** Training text is split into paragraphs (`split_paragraphs`); each paragraph is
//! encoded and trained as `<s>^(n-1) w_1 ... w_T </s>` (`</s>` inside a token document also ends a
//! paragraph). N-grams that would predict `<s>` are not counted. At query time the history is the last
//! n - 1 tokens of the context that follow its last `</s>`, left-padded with `<s>`: an empty context, or
//! one ending in `</s>`, is the start of a paragraph.
//!
//! **Cost.** Training is linear in the corpus size (hash maps keyed on history-node ids). A query walks
//! the n - 1 history nodes (one hash lookup each) and, for `next_probs`, adds every follower of each node
//! to a V-vector: O(V + n + followers), the followers of the empty history being at most V.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/models/tokenizer.hpp"

namespace specdec {

//! The modified Kneser-Ney discounts of one n-gram order: for counts 1, 2, and 3 or more.
struct kn_discounts {
  double d1 = 0.0;  //!< discount for n-grams seen once, in (0, 1]
  double d2 = 0.0;  //!< discount for n-grams seen twice, in (0, 2]
  double d3 = 0.0;  //!< discount for n-grams seen three times or more, in (0, 3]
};

namespace detail {

//! The discounts of Chen & Goodman (1998), eq. 26, from the counts-of-counts n1..n4 of one order, with the
//! fallback and clamping described in models/ngram.hpp.
inline kn_discounts estimate_kn_discounts(double n1, double n2, double n3, double n4) {
  kn_discounts d;
  if (n1 > 0 && n2 > 0 && n3 > 0 && n4 > 0) {
    const double y = n1 / (n1 + 2.0 * n2);
    d.d1 = 1.0 - 2.0 * y * n2 / n1;
    d.d2 = 2.0 - 3.0 * y * n3 / n2;
    d.d3 = 3.0 - 4.0 * y * n4 / n3;
  } else {
    const double y = n1 > 0 ? n1 / (n1 + 2.0 * n2) : 0.5;
    d.d1 = d.d2 = d.d3 = y;
  }
  constexpr double min_discount = 1e-3;
  d.d1 = std::clamp(d.d1, min_discount, 1.0);
  d.d2 = std::clamp(d.d2, min_discount, 2.0);
  d.d3 = std::clamp(d.d3, min_discount, 3.0);
  return d;
}

inline std::uint64_t ngram_key(std::uint32_t node, token_id t) noexcept {
  return (static_cast<std::uint64_t>(node) << 32) | static_cast<std::uint32_t>(t);
}

}  // namespace detail

//! An n-gram language model with interpolated modified Kneser-Ney smoothing over a word `vocabulary`
//! (details in the file comment). A `ProbabilityModel`: `next_probs` is exact in double and sums to 1,
//! `next_logits` is its logarithm.
class ngram_model {
 public:
  //! The largest supported order.
  static constexpr std::size_t max_order = 16;

  //! Trains an order-`order` model on already encoded documents (paragraphs) over `vocab`.
  //! \pre `1 <= order <= max_order`; every id is in `vocab`.
  //! \throws specdec::error otherwise.
  ngram_model(std::size_t order, vocabulary vocab, std::span<const std::vector<token_id>> documents)
      : order_(order), vocab_(std::move(vocab)) {
    SPECDEC_EXPECTS(order >= 1 && order <= max_order, "the order must be in [1, max_order]");
    train(documents);
  }

  //! Trains an order-`order` model on `texts`: each text is split into paragraphs, each paragraph encoded
  //! with `vocab` (unknown words become `<unk>`).
  //! \pre `1 <= order <= max_order`. \throws specdec::error otherwise.
  ngram_model(std::size_t order, vocabulary vocab, std::span<const std::string> texts) : order_(order), vocab_(std::move(vocab)) {
    SPECDEC_EXPECTS(order >= 1 && order <= max_order, "the order must be in [1, max_order]");
    train(encode_paragraphs(vocab_, texts));
  }

  //! The number of tokens V (specials included).
  std::size_t vocab_size() const noexcept { return vocab_.size(); }
  //! The order n: the model conditions on the last n - 1 tokens.
  std::size_t order() const noexcept { return order_; }
  //! The vocabulary, for encoding and decoding.
  const vocabulary& vocab() const noexcept { return vocab_; }
  //! The number of history nodes (distinct histories of length 0..n-1 seen in training).
  std::size_t history_count() const noexcept { return gamma_.size(); }

  //! The discounts of the m-gram level. \pre `1 <= m <= order()`. \throws specdec::error otherwise.
  kn_discounts discounts(std::size_t m) const {
    SPECDEC_EXPECTS(m >= 1 && m <= order_, "the level must be in [1, order()]");
    return discounts_[m - 1];
  }

  //! Writes p(w | context) for every token w, in double; the result sums to 1 (within rounding) and every
  //! entry is > 0. \pre `probs.size() == vocab_size()`; the ids read (the last n - 1) are in the
  //! vocabulary. \throws specdec::error otherwise.
  void next_probs(std::span<const token_id> context, std::span<double> probs) const {
    SPECDEC_EXPECTS(probs.size() == vocab_.size(), "probs must hold vocab_size() values");
    std::uint32_t chain[max_order];
    const std::size_t depth = history_chain(context, chain);
    std::fill(probs.begin(), probs.end(), 0.0);
    double weight = 1.0;  // product of the gammas of the levels above
    for (std::size_t l = depth; l-- > 0;) {
      const std::uint32_t node = chain[l];
      for (std::uint32_t i = begin_[node]; i < begin_[node + 1]; ++i)
        probs[static_cast<std::size_t>(follower_[i])] += weight * term_[i];
      weight *= gamma_[node];
    }
    const double base = weight / static_cast<double>(probs.size());
    for (double& p : probs) p += base;
  }

  //! Writes `log p(w | context)` as float. \pre `logits.size() == vocab_size()`.
  //! \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_.size(), "logits must hold vocab_size() values");
    std::vector<double> probs(logits.size());
    next_probs(context, probs);
    for (std::size_t i = 0; i < probs.size(); ++i) logits[i] = static_cast<float>(std::log(probs[i]));
  }

  //! p(w | context) for one token, in O(n log F) (a binary search among each history's F followers).
  //! \pre `w` and the ids read are in the vocabulary. \throws specdec::error otherwise.
  double probability(std::span<const token_id> context, token_id w) const {
    SPECDEC_EXPECTS(in_vocabulary(w, vocab_.size()), "the token is outside the vocabulary");
    std::uint32_t chain[max_order];
    const std::size_t depth = history_chain(context, chain);
    double p = 1.0 / static_cast<double>(vocab_.size());
    for (std::size_t l = 0; l < depth; ++l) {
      const std::uint32_t node = chain[l];
      const auto first = follower_.begin() + begin_[node], last = follower_.begin() + begin_[node + 1];
      const auto it = std::lower_bound(first, last, w);
      p = gamma_[node] * p + ((it != last && *it == w) ? term_[static_cast<std::size_t>(it - follower_.begin())] : 0.0);
    }
    return p;
  }

  //! `sum_i log p(continuation[i] | context + continuation[0..i))`.
  //! \pre the ids are in the vocabulary. \throws specdec::error otherwise.
  double log_probability(std::span<const token_id> context, std::span<const token_id> continuation) const {
    std::vector<token_id> full(context.begin(), context.end());
    full.reserve(context.size() + continuation.size());
    double lp = 0.0;
    for (token_id w : continuation) {
      lp += std::log(probability(full, w));
      full.push_back(w);
    }
    return lp;
  }

  //! The perplexity `exp(-(1/N) sum log p)` of encoded paragraphs, each scored as training sees it: every
  //! token after its paragraph prefix, then `</s>` (N counts those `</s>` too). Empty paragraphs are skipped.
  //! \pre at least one paragraph is non-empty; ids in the vocabulary. \throws specdec::error otherwise.
  double perplexity(std::span<const std::vector<token_id>> paragraphs) const {
    double lp = 0.0;
    std::size_t n = 0;
    for (const auto& doc : paragraphs) {
      if (doc.empty()) continue;
      std::vector<token_id> tokens = doc;
      tokens.push_back(vocabulary::eos);
      lp += log_probability({}, tokens);
      n += tokens.size();
    }
    SPECDEC_EXPECTS(n > 0, "no token to score");
    return std::exp(-lp / static_cast<double>(n));
  }

 private:
  static std::vector<std::vector<token_id>> encode_paragraphs(const vocabulary& vocab, std::span<const std::string> texts) {
    std::vector<std::vector<token_id>> docs;
    for (const std::string& text : texts)
      for (std::string_view paragraph : split_paragraphs(text)) docs.push_back(vocab.encode(paragraph));
    return docs;
  }

  // The history nodes of `context`, from the empty history (chain[0] = root) to the longest one seen in
  // training; returns how many were found (at least 1).
  std::size_t history_chain(std::span<const token_id> context, std::uint32_t* chain) const {
    const std::size_t h = order_ - 1;
    std::span<const token_id> recent = context.last(std::min(h, context.size()));
    for (std::size_t i = recent.size(); i-- > 0;) {
      if (recent[i] == vocabulary::eos) {
        recent = recent.subspan(i + 1);
        break;
      }
    }
    for ([[maybe_unused]] token_id t : recent)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_.size()), "a context token is outside the vocabulary");
    chain[0] = 0;
    std::size_t depth = 1;
    for (std::size_t l = 1; l <= h; ++l) {
      // the token l places back: from `recent` while it lasts, then <s> padding
      const token_id t = l <= recent.size() ? recent[recent.size() - l] : vocabulary::bos;
      const auto it = child_.find(detail::ngram_key(chain[l - 1], t));
      if (it == child_.end()) break;
      chain[depth++] = it->second;
    }
    return depth;
  }

  void train(std::span<const std::vector<token_id>> documents) {
    const std::size_t n = order_, h = n - 1;
    [[maybe_unused]] const std::size_t v = vocab_.size();
    // History nodes form a trie that grows to the left: the child of node x (history g) by token t is the
    // history t g. parent_/level_ describe it; child_ maps (parent, token) to the child.
    std::vector<std::uint32_t> parent{0};
    std::vector<std::uint32_t> level{0};
    auto child = [&](std::uint32_t node, token_id t) {
      const auto [it, inserted] = child_.try_emplace(detail::ngram_key(node, t), static_cast<std::uint32_t>(parent.size()));
      if (inserted) {
        if (parent.size() >= std::numeric_limits<std::uint32_t>::max())
          throw error("specdec::ngram_model::train: too many n-gram histories");
        parent.push_back(node);
        level.push_back(level[node] + 1);
      }
      return it->second;
    };
    // counts[l]: (history node at level l, word) -> count; raw at l = n - 1, continuation counts below.
    std::vector<std::unordered_map<std::uint64_t, std::uint32_t>> counts(n);
    std::vector<token_id> seq;
    for (const auto& doc : documents) {
      for ([[maybe_unused]] token_id t : doc) SPECDEC_EXPECTS(in_vocabulary(t, v), "a document token is outside the vocabulary");
      std::size_t start = 0;
      while (start < doc.size()) {  // each run up to a </s> is one paragraph
        std::size_t stop = start;
        while (stop < doc.size() && doc[stop] != vocabulary::eos) ++stop;
        if (stop > start) {
          seq.assign(h, vocabulary::bos);
          seq.insert(seq.end(), doc.begin() + static_cast<std::ptrdiff_t>(start),
                     doc.begin() + static_cast<std::ptrdiff_t>(stop));
          seq.push_back(vocabulary::eos);
          for (std::size_t j = h; j < seq.size(); ++j) {
            if (seq[j] == vocabulary::bos) continue;
            std::uint32_t node = 0;
            for (std::size_t l = 1; l <= h; ++l) node = child(node, seq[j - l]);
            ++counts[h][detail::ngram_key(node, seq[j])];
          }
        }
        start = stop + 1;
      }
    }
    // Continuation counts: N1+(. g w) at level l = number of distinct (t g, w) seen at level l + 1.
    for (std::size_t l = h; l-- > 0;)
      for (const auto& [key, c] : counts[l + 1]) {
        (void)c;
        const auto node = static_cast<std::uint32_t>(key >> 32);
        ++counts[l][detail::ngram_key(parent[node], static_cast<token_id>(key & 0xffffffffu))];
      }
    // Discounts per level from counts-of-counts.
    discounts_.resize(n);
    for (std::size_t l = 0; l < n; ++l) {
      double nk[5] = {0, 0, 0, 0, 0};
      for (const auto& [key, c] : counts[l])
        if (c <= 4) nk[c] += 1;
      discounts_[l] = detail::estimate_kn_discounts(nk[1], nk[2], nk[3], nk[4]);
    }
    // Followers of every node, sorted by (node, word), with their discounted terms and the gammas.
    std::vector<std::tuple<std::uint32_t, token_id, std::uint32_t>> entries;
    std::size_t total_entries = 0;
    for (const auto& m : counts) total_entries += m.size();
    entries.reserve(total_entries);
    for (const auto& m : counts)
      for (const auto& [key, c] : m)
        entries.emplace_back(static_cast<std::uint32_t>(key >> 32), static_cast<token_id>(key & 0xffffffffu), c);
    counts.clear();
    std::sort(entries.begin(), entries.end());
    const std::size_t nodes = parent.size();
    begin_.assign(nodes + 1, 0);
    gamma_.assign(nodes, 0.0);
    follower_.resize(entries.size());
    term_.resize(entries.size());
    for (const auto& e : entries) ++begin_[std::get<0>(e) + 1];
    for (std::size_t x = 0; x < nodes; ++x) begin_[x + 1] += begin_[x];
    for (std::size_t x = 0; x < nodes; ++x) {
      const kn_discounts& d = discounts_[level[x]];
      double total = 0.0, mass = 0.0;
      for (std::uint32_t i = begin_[x]; i < begin_[x + 1]; ++i) {
        const std::uint32_t c = std::get<2>(entries[i]);
        total += c;
        mass += c == 1 ? d.d1 : c == 2 ? d.d2 : d.d3;
      }
      // Every node has followers: a history is created only together with a word that follows it.
      for (std::uint32_t i = begin_[x]; i < begin_[x + 1]; ++i) {
        const std::uint32_t c = std::get<2>(entries[i]);
        const double discount = c == 1 ? d.d1 : c == 2 ? d.d2 : d.d3;
        follower_[i] = std::get<1>(entries[i]);
        term_[i] = std::max(static_cast<double>(c) - discount, 0.0) / total;
      }
      gamma_[x] = total > 0.0 ? mass / total : 1.0;
    }
  }

  std::size_t order_;
  vocabulary vocab_;
  std::unordered_map<std::uint64_t, std::uint32_t> child_;  // (node, token) -> node of the longer history
  std::vector<std::uint32_t> begin_;                        // followers of node x: [begin_[x], begin_[x + 1])
  std::vector<token_id> follower_;                          // follower words, sorted within a node
  std::vector<double> term_;                                // max(c - D(c), 0) / total(node)
  std::vector<double> gamma_;                               // interpolation weight of the lower level
  std::vector<kn_discounts> discounts_;                     // per level l = m - 1
};

//! Builds the vocabulary of `texts` (at most `max_words` words; 0 = all) and trains an order-`order`
//! model on them. \pre `1 <= order <= ngram_model::max_order`. \throws specdec::error otherwise.
inline ngram_model train_ngram_model(std::size_t order, std::span<const std::string> texts, std::size_t max_words = 0) {
  return ngram_model(order, vocabulary::build(texts, max_words), texts);
}

//! A target and a draft n-gram model trained on the same text with the same vocabulary.
struct ngram_pair {
  ngram_model target;  //!< the higher-order model, p
  ngram_model draft;   //!< the lower-order model, q
};

//! Trains a target of order `target_order` and a draft of order `draft_order` on `texts`, sharing one
//! vocabulary (at most `max_words` words; 0 = all).
//! \pre both orders in [1, ngram_model::max_order]. \throws specdec::error otherwise.
inline ngram_pair make_ngram_pair(std::span<const std::string> texts, std::size_t target_order = 4, std::size_t draft_order = 2,
                                  std::size_t max_words = 0) {
  vocabulary vocab = vocabulary::build(texts, max_words);
  ngram_model target(target_order, vocab, texts);
  ngram_model draft(draft_order, std::move(vocab), texts);
  return ngram_pair{std::move(target), std::move(draft)};
}

}  // namespace specdec
