// Verifier training data from a draft/target pair (learn/generate.hpp), the linear verifier on the
// n-gram pair (make_ngram_pair(load_default_corpus(), 4, 2)): equal prefix categories, labels
// 1[q(x) <= lambda p(x)] consistent with the models, features equal to draft_row_features of the
// stored prefix's row, reproducibility, and the held-out AUC the verifier reaches (stated: >= 0.6;
// measured about 0.62-0.66 here and in examples/sprinter_eval.cpp; a 2-gram draft's row says little
// about what a 4-gram target will think), and the whole chain: ROC -> threshold choice
// (optimize/threshold.hpp) -> SPRINTER decoding with the learned verifier, saved and reloaded.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <limits>
#include <vector>

#include "specdec/decode/sprinter.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/learn/generate.hpp"
#include "specdec/learn/linear_verifier.hpp"
#include "specdec/learn/roc.hpp"
#include "specdec/learn/train.hpp"
#include "specdec/models/corpus.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/models/ngram.hpp"
#include "specdec/models/tokenizer.hpp"
#include "specdec/optimize/threshold.hpp"

namespace {
namespace learn = specdec::learn;
using specdec::token_id;

struct corpus_pair {
  specdec::ngram_pair models;
  std::vector<std::vector<token_id>> documents;
};

const corpus_pair& ngram() {
  static const corpus_pair c = [] {
    const auto texts = specdec::load_default_corpus();
    corpus_pair out{specdec::make_ngram_pair(texts, 4, 2), {}};
    for (const auto& text : texts)
      for (const auto paragraph : specdec::split_paragraphs(text)) {
        auto doc = out.models.target.vocab().encode(paragraph);
        if (!doc.empty()) out.documents.push_back(std::move(doc));
      }
    return out;
  }();
  return c;
}

learn::verifier_dataset generate(std::size_t examples, std::uint64_t seed) {
  const auto& c = ngram();
  specdec::draft_row_features f;
  learn::generation_options g;
  g.examples = examples;
  g.seed = seed;
  return learn::generate_verifier_data(c.models.target, c.models.draft, f, c.documents, g);
}
}  // namespace

TEST_CASE("training data from the n-gram pair: categories, labels, reproducibility", "[learn][ngram]") {
  const auto d = generate(400, 5);
  REQUIRE(d.size() == 400);
  CHECK(d.feature_size == specdec::draft_row_features::size);
  CHECK(d.lambda == 1.2);
  std::size_t per_category[4] = {0, 0, 0, 0};
  for (const auto cat : d.category) ++per_category[static_cast<int>(cat)];
  for (const std::size_t n : per_category) CHECK(n == 100);
  std::size_t mismatched = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    mismatched += d.labels[i] != (d.q[i] <= 1.2 * d.p[i] ? 1 : 0);
    mismatched += !(d.q[i] > 0.0 && d.q[i] <= 1.0 && d.p[i] > 0.0 && d.p[i] <= 1.0 && d.tv[i] >= 0.0 && d.tv[i] <= 1.0);
    mismatched += d.row(i)[0] != static_cast<float>(d.q[i]);  // feature 0 is q(x)
  }
  CHECK(mismatched == 0);
  const double pos = d.positive_fraction();
  CHECK(pos > 0.1);
  CHECK(pos < 0.9);
  const auto again = generate(400, 5);
  CHECK(again.features == d.features);
  CHECK(again.labels == d.labels);
  CHECK(generate(400, 6).features != d.features);
}

TEST_CASE("the linear verifier on the n-gram pair reaches the stated held-out AUC", "[learn][ngram]") {
  const auto& c = ngram();
  const auto train = generate(6000, 2026);
  auto test = generate(2000, 2027);
  const auto t = learn::train_linear_verifier(train, learn::train_options{.seed = 1});
  const auto scores = learn::score_all(t.verifier, test);
  const auto roc = learn::compute_roc(scores, test.labels);
  test.relabel(1.0);
  const auto roc1 = learn::compute_roc(scores, test.labels);
  const auto at = learn::rates_at(roc1, 0.5);
  std::cout << "[learn] n-gram pair, lambda 1.2 (seeds 2026/2027/1): held-out AUC " << roc.auc << " (against lambda = 1 labels "
            << roc1.auc << "), at tau 0.5 eta_tp " << at.eta_tp << " eta_fp " << at.eta_fp << ", epochs " << t.report.epochs
            << "\n";
  CHECK(roc.auc >= 0.6);
  CHECK(roc1.auc >= 0.6);

  SECTION("ROC-aware threshold, then SPRINTER decoding with the learned (and the reloaded) verifier") {
    learn::generation_options g;
    g.examples = 400;
    g.lambda = 1.0;
    g.seed = 2028;
    const auto r_pmf = learn::estimate_acceptable_runs(c.models.target, c.models.draft, c.documents, g, 20);
    std::vector<learn::roc_point> reachable;
    for (const auto& pt : roc1.points)
      if (pt.threshold >= 0.0 && pt.threshold <= 1.0) reachable.push_back(pt);
    const specdec::optimize::sprinter::costs costs{.t_draft = 0.05, .t_verifier = 0.002, .t_target = 1.0};
    const double bound = 0.05;
    const auto choice = specdec::optimize::sprinter::choose_threshold(std::span<const learn::roc_point>(reachable), r_pmf, costs,
                                                                      test.mean_tv(), bound);
    REQUIRE(choice.has_value());
    CHECK(choice->total_variation <= bound);
    const double tau = choice->point.threshold;
    std::stringstream saved;
    t.verifier.save(saved);
    const auto reloaded = learn::linear_verifier::load(saved);
    specdec::decode_options o;
    o.max_new_tokens = 30;
    o.seed = 8;
    std::size_t calls = 0, runs = 0, accepted = 0;
    for (std::uint32_t i = 0; i < 4; ++i) {
      o.request_id = i;
      const auto& doc = c.documents[i * 37];
      const std::vector<token_id> prompt(doc.begin(), doc.begin() + std::min<std::ptrdiff_t>(3, std::ssize(doc)));
      const auto a = specdec::decode_sprinter(specdec::exec::seq, c.models.target, c.models.draft, specdec::warp_params{},
                                              specdec::draft_row_features{}, t.verifier,
                                              specdec::gating_params{.tau = tau, .max_run = 20}, {}, prompt, o);
      const auto b = specdec::decode_sprinter(specdec::exec::seq, c.models.target, c.models.draft, specdec::warp_params{},
                                              specdec::draft_row_features{}, reloaded,
                                              specdec::gating_params{.tau = tau, .max_run = 20}, {}, prompt, o);
      CHECK(a.tokens == b.tokens);
      CHECK(a.tokens.size() == 30);
      calls += a.stats.target_calls;
      runs += a.sprinter.run_lengths.size();
      accepted += a.sprinter.verifier_accepted;
    }
    std::cout << "[learn] n-gram SPRINTER at the chosen tau " << tau << " (bound " << bound << "): predicted E[N] "
              << choice->expected_tokens << ", measured " << double(accepted) / double(runs) << " over " << runs << " runs, "
              << calls << " target calls for 120 tokens\n";
  }
}

TEST_CASE("training-data generation rejects bad input", "[learn][ngram][errors]") {
  const auto target = specdec::markov_model::categorical({0.5, 0.5});
  const auto draft = specdec::markov_model::categorical({0.25, 0.75});
  const auto other = specdec::markov_model::categorical({0.2, 0.3, 0.5});
  specdec::draft_row_features f;
  const std::vector<std::vector<token_id>> docs{{0, 1, 1, 0}};
  learn::generation_options g;
  g.examples = 8;
  CHECK(learn::generate_verifier_data(target, draft, f, docs, g).size() == 8);
  for (const double lambda : {0.9, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    learn::generation_options b = g;
    b.lambda = lambda;
    CHECK_THROWS_AS(learn::generate_verifier_data(target, draft, f, docs, b), specdec::error);
  }
  learn::generation_options zero = g;
  zero.examples = 0;
  CHECK_THROWS_AS(learn::generate_verifier_data(target, draft, f, docs, zero), specdec::error);
  CHECK_THROWS_AS(learn::generate_verifier_data(target, other, f, docs, g), specdec::error);
  CHECK_THROWS_AS(learn::generate_verifier_data(target, draft, f, std::vector<std::vector<token_id>>{{}}, g), specdec::error);
  CHECK_THROWS_AS(learn::generate_verifier_data(target, draft, f, std::vector<std::vector<token_id>>{{0, 2}}, g), specdec::error);
}
