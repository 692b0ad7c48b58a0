//! \file learn/generate.hpp
//! \brief Training-data generation for SPRINTER's verifier from a draft/target pair (seed 000,
//! section 3.2 "Verifier Training Methodology").
//!
//! For example i: take a prefix of the corpus, extend it according to the category i mod 4 (the four
//! kinds of prefix the verifier meets at inference, in equal proportion: original, completed by the
//! draft, completed by the target, completed token by token by either), sample a token x from the
//! draft's warped row q, read p(x) from the target's warped row, label 1 iff q(x) <= lambda p(x), and
//! store the features s(x, prefix) computed by the given extractor (the same one used at inference).
//! Randomness: example i uses request_stream{seed, i, 0}; the corpus position, the completion length,
//! the completion tokens and x have their own purposes/positions, so the data are reproducible.
//! `estimate_acceptable_runs` measures, from the same prefixes, the law of the number r of leading
//! acceptable draft tokens (Theorem 3.3's r) that the threshold optimiser needs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/errors.hpp"
#include "specdec/learn/dataset.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::learn {

//! Options of `generate_verifier_data`.
struct generation_options {
  std::size_t examples = 10000;    //!< number of examples (a multiple of 4 keeps the categories equal)
  double lambda = 1.2;             //!< label threshold, 1.2 as in A.5
  std::size_t max_completion = 8;  //!< completions (categories b-d) have 1..max_completion tokens
  warp_params draft_params{};      //!< how q is warped (as at inference)
  warp_params target_params{};     //!< how p is warped (as at inference)
  std::uint64_t seed = 0;          //!< seeds the prefixes, completions and drafts
};

namespace detail {
inline constexpr auto pick_purpose = static_cast<random::purpose>(static_cast<int>(random::purpose::user) + 2);
inline constexpr auto complete_purpose = static_cast<random::purpose>(static_cast<int>(random::purpose::user) + 3);

//! Writes the warped next-token row of `m` after `context` into `row`.
//! \throws specdec::numerical_error when the row has no usable mass.
template <Model M>
void warped_row(const M& m, std::span<const token_id> context, const warp_params& w, std::vector<float>& logits,
                std::span<float> row) {
  m.next_logits(context, std::span<float>(logits));
  if (warp_logits(std::span<const float>(logits), row, w) != row_status::ok)
    throw numerical_error("specdec::learn::generate_verifier_data: a model returned a row without usable mass");
}
}  // namespace detail

//! Draws the prefixes of section 3.2 for a draft/target pair: a cut uniformly over the tokens of
//! `documents` (every position 0..len-1 of every document; a cut at 0 is the empty prefix), then the
//! completion of the category (1..max_completion tokens from the draft, the target, or either by a fair
//! coin per token). Prefix i uses request_stream{seed, i, 0}, purposes user + 2 (cut, length) and
//! user + 3 (completion tokens, one position each).
template <Model Target, Model Draft>
class prefix_sampler {
 public:
  //! \pre one vocabulary; at least one token in `documents`, every id in the vocabulary; max_completion >= 1.
  //! \throws specdec::error otherwise. Stores references to the models and the documents.
  prefix_sampler(const Target& target, const Draft& draft, std::span<const std::vector<token_id>> documents,
                 std::size_t max_completion, warp_params draft_params = {}, warp_params target_params = {})
      : target_(&target),
        draft_(&draft),
        documents_(documents),
        max_completion_(max_completion),
        draft_params_(draft_params),
        target_params_(target_params) {
    validate(draft_params_);
    validate(target_params_);
    SPECDEC_EXPECTS(max_completion >= 1, "max_completion must be >= 1");
    vocab_ = static_cast<std::size_t>(target.vocab_size());
    SPECDEC_EXPECTS(static_cast<std::size_t>(draft.vocab_size()) == vocab_, "the draft and target vocabularies differ");
    for (const auto& doc : documents) {
      for ([[maybe_unused]] const token_id t : doc)
        SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "a document token is outside the vocabulary");
      total_ += doc.size();
      cumulative_.push_back(total_);
    }
    SPECDEC_EXPECTS(total_ > 0, "the documents hold no token");
    logits_.resize(vocab_);
    row_.resize(vocab_);
  }

  //! V, the models' vocabulary size.
  std::size_t vocab_size() const noexcept { return vocab_; }

  //! Writes prefix `index` of `category` under `seed` into `prefix`.
  //! \throws specdec::numerical_error when a model returns a row without usable mass.
  void sample(std::uint64_t seed, std::uint32_t index, prefix_category category, std::vector<token_id>& prefix) {
    const random::request_stream stream{seed, index, 0};
    auto pick = stream.open(0, detail::pick_purpose);
    const auto g = std::min(total_ - 1, static_cast<std::size_t>(pick.uniform() * static_cast<double>(total_)));
    const auto k = static_cast<std::size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), g) - cumulative_.begin());
    const std::size_t cut = g - (k == 0 ? 0 : cumulative_[k - 1]);
    prefix.assign(documents_[k].begin(), documents_[k].begin() + static_cast<std::ptrdiff_t>(cut));
    if (category == prefix_category::original) return;
    const std::size_t len =
        1 + std::min(max_completion_ - 1, static_cast<std::size_t>(pick.uniform() * static_cast<double>(max_completion_)));
    for (std::size_t j = 0; j < len; ++j) {
      auto r = stream.open(static_cast<std::uint32_t>(j), detail::complete_purpose);
      const bool by_draft =
          category == prefix_category::draft_completed || (category == prefix_category::mixed && r.uniform() < 0.5);
      if (by_draft)
        draft_row(prefix, std::span<float>(row_));
      else
        target_row(prefix, std::span<float>(row_));
      prefix.push_back(sample_categorical(std::span<const float>(row_), r.uniform()).token);
    }
  }
  //! The warped draft row q after `context`. \throws specdec::numerical_error on an unusable row.
  void draft_row(std::span<const token_id> context, std::span<float> q) {
    detail::warped_row(*draft_, context, draft_params_, logits_, q);
  }
  //! The warped target row p after `context`. \throws specdec::numerical_error on an unusable row.
  void target_row(std::span<const token_id> context, std::span<float> p) {
    detail::warped_row(*target_, context, target_params_, logits_, p);
  }

 private:
  const Target* target_;
  const Draft* draft_;
  std::span<const std::vector<token_id>> documents_;
  std::size_t max_completion_;
  warp_params draft_params_, target_params_;
  std::size_t vocab_ = 0, total_ = 0;
  std::vector<std::size_t> cumulative_;  // cumulative_[k] = tokens in documents [0, k]
  std::vector<float> logits_, row_;
};

//! Generates `options.examples` verifier examples (file comment), example i from prefix i of category
//! i mod 4 (`prefix_sampler`), x ~ q from (position 0, purpose::draft).
//! \pre target and draft share one vocabulary; at least one token in `documents`; every id in the
//!      vocabulary; options.examples >= 1; lambda finite and >= 1; max_completion >= 1;
//!      features.feature_size() >= 1.
//! \throws specdec::error otherwise; specdec::numerical_error on an unusable model row.
template <Model Target, Model Draft, FeatureExtractor F>
verifier_dataset generate_verifier_data(const Target& target, const Draft& draft, F& features,
                                        std::span<const std::vector<token_id>> documents, const generation_options& options) {
  validate_lambda(options.lambda);
  SPECDEC_EXPECTS(options.examples >= 1, "examples must be >= 1");
  prefix_sampler<Target, Draft> prefixes(target, draft, documents, options.max_completion, options.draft_params,
                                         options.target_params);
  const std::size_t V = prefixes.vocab_size();
  const std::size_t d = static_cast<std::size_t>(features.feature_size());
  SPECDEC_EXPECTS(d >= 1, "the feature extractor has no features");
  verifier_dataset out;
  out.feature_size = d;
  out.lambda = options.lambda;
  std::vector<float> q(V), p(V), s(d);
  std::vector<token_id> prefix;
  for (std::size_t i = 0; i < options.examples; ++i) {
    const auto category = static_cast<prefix_category>(i % 4);
    prefixes.sample(options.seed, static_cast<std::uint32_t>(i), category, prefix);
    prefixes.draft_row(prefix, std::span<float>(q));
    prefixes.target_row(prefix, std::span<float>(p));
    const random::request_stream stream{options.seed, static_cast<std::uint32_t>(i), 0};
    const token_id x = sample_categorical(std::span<const float>(q), stream.open(0, random::purpose::draft).uniform()).token;
    const verifier_query query{std::span<const token_id>(prefix), x, std::span<const float>(q), stream, 0};
    features.extract(query, std::span<float>(s));
    const auto xi = static_cast<std::size_t>(x);
    out.add(std::span<const float>(s), static_cast<double>(q[xi]), static_cast<double>(p[xi]),
            total_variation(std::span<const float>(p), std::span<const float>(q)), category);
  }
  return out;
}

//! The law of r, the number of leading acceptable tokens of a draft (Theorem 3.3's r; Figure 4), from
//! `options.examples` prefixes of the four categories (as `generate_verifier_data`, same seeds): from
//! each prefix the draft samples x_1, x_2, ... (x_j at position j, purpose::draft) and r counts them
//! while q(x_j) <= lambda p(x_j) (lambda = options.lambda; 1 is the paper's acceptable). Returns
//! pmf[k] = P(r = k) for k < max_r and pmf[max_r] = P(r >= max_r) (a run cannot be longer than the
//! cap anyway). This is the `r_pmf` of optimize::sprinter::choose_threshold.
//! \pre as generate_verifier_data; max_r >= 1. \throws specdec::error otherwise;
//!      specdec::numerical_error on an unusable model row.
template <Model Target, Model Draft>
std::vector<double> estimate_acceptable_runs(const Target& target, const Draft& draft,
                                             std::span<const std::vector<token_id>> documents, const generation_options& options,
                                             std::size_t max_r) {
  validate_lambda(options.lambda);
  SPECDEC_EXPECTS(options.examples >= 1, "examples must be >= 1");
  SPECDEC_EXPECTS(max_r >= 1, "max_r must be >= 1");
  prefix_sampler<Target, Draft> prefixes(target, draft, documents, options.max_completion, options.draft_params,
                                         options.target_params);
  const std::size_t V = prefixes.vocab_size();
  std::vector<double> pmf(max_r + 1, 0.0);
  std::vector<float> q(V), p(V);
  std::vector<token_id> prefix;
  for (std::size_t i = 0; i < options.examples; ++i) {
    prefixes.sample(options.seed, static_cast<std::uint32_t>(i), static_cast<prefix_category>(i % 4), prefix);
    const random::request_stream stream{options.seed, static_cast<std::uint32_t>(i), 0};
    std::size_t r = 0;
    for (; r < max_r; ++r) {
      prefixes.draft_row(prefix, std::span<float>(q));
      prefixes.target_row(prefix, std::span<float>(p));
      const token_id x = sample_categorical(std::span<const float>(q),
                                            stream.open(static_cast<std::uint32_t>(r), random::purpose::draft).uniform())
                             .token;
      const auto xi = static_cast<std::size_t>(x);
      if (!is_acceptable(static_cast<double>(p[xi]), static_cast<double>(q[xi]), options.lambda)) break;
      prefix.push_back(x);
    }
    pmf[r] += 1.0;
  }
  for (double& v : pmf) v /= static_cast<double>(options.examples);
  return pmf;
}

}  // namespace specdec::learn
