// The interpolated modified Kneser-Ney n-gram model: hand-computed values on tiny data, and properties on
// the default corpus (normalisation, positivity, held-out perplexity, determinism, discounts). The cases
// on the corpus are tagged [needs_corpus] and run as the CTest test models/ngram:needs_corpus, which
// reports "Skipped" on a machine without the corpus (support/skip.hpp).
// SPECDEC_TEST_SPLIT: needs_corpus
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <limits>
#include <cmath>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/models/corpus.hpp"
#include "specdec/models/ngram.hpp"
#include "support/skip.hpp"

using specdec::ngram_model;
using specdec::token_id;
using specdec::vocabulary;
using docs = std::vector<std::vector<token_id>>;

static_assert(specdec::ProbabilityModel<ngram_model>);

namespace {
constexpr token_id A = 3, B = 4;  // the two words of the tiny vocabulary {<unk>, <s>, </s>, a, b}
const vocabulary tiny_vocab(std::vector<std::string>{"a", "b"});

std::vector<double> probs_of(const ngram_model& m, std::vector<token_id> ctx) {
  std::vector<double> p(m.vocab_size());
  m.next_probs(ctx, p);
  return p;
}

// The default corpus, loaded once (empty when the machine has none).
const std::vector<std::string>& corpus() {
  static const std::vector<std::string> texts = [] {
    const auto paths = specdec::default_corpus_paths();
    return paths.empty() ? std::vector<std::string>{} : specdec::load_text_files(paths);
  }();
  return texts;
}
}  // namespace

TEST_CASE("ngram: order 1 by hand (absolute-discount fallback)", "[models][ngram]") {
  // Sequence "a a b </s>": counts a 2, b 1, </s> 1; n1 = 2, n2 = 1, n3 = n4 = 0, so all discounts are
  // Y = n1 / (n1 + 2 n2) = 0.5; gamma = (0.5 * 3) / 4 = 0.375; the uniform part is 0.375 / 5 = 0.075.
  const ngram_model m(1, tiny_vocab, docs{{A, A, B}});
  CHECK(m.discounts(1).d1 == 0.5);
  CHECK(m.discounts(1).d2 == 0.5);
  const auto p = probs_of(m, {B, A});
  CHECK(p[A] == Approx(1.5 / 4 + 0.075).epsilon(1e-14));
  CHECK(p[B] == Approx(0.5 / 4 + 0.075).epsilon(1e-14));
  CHECK(p[vocabulary::eos] == Approx(0.2).epsilon(1e-14));
  CHECK(p[vocabulary::unk] == Approx(0.075).epsilon(1e-14));
  CHECK(p[vocabulary::bos] == Approx(0.075).epsilon(1e-14));
}

TEST_CASE("ngram: order 2 by hand (continuation counts, interpolation)", "[models][ngram]") {
  // Paragraphs "a b" and "a a", trained as "<s> a b </s>" and "<s> a a </s>".
  // Unigram level (continuation counts): a 2 ({<s>, a}), b 1 ({a}), </s> 2 ({b, a}); total 5;
  // n1 = 1, n2 = 2 -> fallback D = 1/5; gamma0 = 3 * 0.2 / 5 = 0.12; uniform part 0.12 / 5 = 0.024.
  const double p0_a = 1.8 / 5 + 0.024, p0_b = 0.8 / 5 + 0.024, p0_unk = 0.024;
  // Bigram level (raw counts): (<s>,a) 2, (a,b) 1, (b,</s>) 1, (a,a) 1, (a,</s>) 1; n1 = 4, n2 = 1 ->
  // fallback D = 4/6.
  const double d = 4.0 / 6.0;
  const ngram_model m(2, tiny_vocab, docs{{A, B}, {A, A}});
  CHECK(m.discounts(1).d1 == Approx(0.2).epsilon(1e-15));
  CHECK(m.discounts(2).d1 == Approx(d).epsilon(1e-15));

  SECTION("history a: followers b, a, </s> once each") {
    const double gamma = 3 * d / 3;
    const auto p = probs_of(m, {B, A});
    CHECK(p[B] == Approx((1 - d) / 3 + gamma * p0_b).epsilon(1e-14));
    CHECK(p[A] == Approx((1 - d) / 3 + gamma * p0_a).epsilon(1e-14));
    CHECK(p[vocabulary::eos] == Approx((1 - d) / 3 + gamma * p0_a).epsilon(1e-14));
    CHECK(p[vocabulary::unk] == Approx(gamma * p0_unk).epsilon(1e-14));
  }
  SECTION("empty context = history <s>: follower a twice") {
    const double gamma = d / 2;
    const auto p = probs_of(m, {});
    CHECK(p[A] == Approx((2 - d) / 2 + gamma * p0_a).epsilon(1e-14));
    CHECK(p[B] == Approx(gamma * p0_b).epsilon(1e-14));
    // a context ending in </s> starts a new paragraph
    CHECK(probs_of(m, {A, B, vocabulary::eos}) == p);
    CHECK(probs_of(m, {vocabulary::bos}) == p);
  }
  SECTION("an unseen history falls back to the unigram level") {
    const auto p = probs_of(m, {A, vocabulary::unk});
    CHECK(p[A] == Approx(p0_a).epsilon(1e-14));
    CHECK(p[B] == Approx(p0_b).epsilon(1e-14));
  }
  SECTION("probability() and log_probability() agree with next_probs") {
    const std::vector<token_id> ctx{A};
    const auto p = probs_of(m, {A});
    for (token_id w = 0; w < 5; ++w) CHECK(m.probability(ctx, w) == Approx(p[static_cast<std::size_t>(w)]).epsilon(1e-14));
    const std::vector<token_id> cont{B, vocabulary::eos};
    CHECK(m.log_probability(ctx, cont) ==
          Approx(std::log(m.probability(ctx, B)) + std::log(m.probability(std::vector<token_id>{A, B}, vocabulary::eos)))
              .epsilon(1e-14));
  }
}

TEST_CASE("ngram: preconditions", "[models][ngram]") {
  CHECK_THROWS_AS(ngram_model(0, tiny_vocab, docs{{A}}), specdec::error);
  CHECK_THROWS_AS(ngram_model(ngram_model::max_order + 1, tiny_vocab, docs{{A}}), specdec::error);
  CHECK_THROWS_AS(ngram_model(2, tiny_vocab, docs{{A, 5}}), specdec::error);
  const ngram_model m(3, tiny_vocab, docs{{A, B, A}});
  std::vector<double> wrong(4);
  CHECK_THROWS_AS(m.next_probs({}, wrong), specdec::error);
  std::vector<double> p(5);
  const std::vector<token_id> bad{A, 7};
  CHECK_THROWS_AS(m.next_probs(bad, p), specdec::error);
  CHECK_THROWS_AS(m.probability({}, 5), specdec::error);
  CHECK_THROWS_AS(m.perplexity(docs{{}}), specdec::error);
  // an empty training set leaves the uniform distribution
  const ngram_model empty(2, tiny_vocab, docs{});
  for (double x : probs_of(empty, {A})) CHECK(x == Approx(0.2).epsilon(1e-15));
}

TEST_CASE("ngram on the default corpus: rows sum to 1 and every token has p > 0", "[models][ngram][corpus][needs_corpus]") {
  if (corpus().empty()) {
    SPECDEC_SKIP("no default corpus under " << specdec::default_corpus_directory);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto pair = specdec::make_ngram_pair(corpus(), 4, 2);
  const auto t1 = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double>(t1 - t0).count() * 1e3;
  WARN("trained orders 4 and 2 on " << corpus().size() << " files, V = " << pair.target.vocab_size() << ", in " << ms << " ms");
  const auto& vocab = pair.target.vocab();
  REQUIRE(pair.draft.vocab_size() == pair.target.vocab_size());
  const std::vector<std::string> contexts{"",
                                          "this program is free software",
                                          "you may",
                                          "xyzzy plugh frobnicate",  // unseen words -> <unk>
                                          "the license , . ; (",
                                          "copyright"};
  std::vector<double> p(vocab.size());
  std::vector<float> logits(vocab.size());
  for (const ngram_model* m : {&pair.target, &pair.draft}) {
    for (const auto& text : contexts) {
      const auto ctx = vocab.encode(text);
      m->next_probs(ctx, p);
      INFO("order " << m->order() << ", context \"" << text << "\"");
      CHECK(std::abs(std::accumulate(p.begin(), p.end(), 0.0) - 1.0) < 1e-9);
      CHECK(*std::min_element(p.begin(), p.end()) > 0.0);
      m->next_logits(ctx, logits);
      for (std::size_t t = 0; t < p.size(); t += 97) {
        CHECK(logits[t] == static_cast<float>(std::log(p[t])));
        CHECK(m->probability(ctx, static_cast<token_id>(t)) == Approx(p[t]).epsilon(1e-12));
      }
    }
  }
  // the target predicts a frequent continuation sharply
  const auto ctx = vocab.encode("this program is free software; you can redistribute");
  pair.target.next_probs(ctx, p);
  CHECK(p[static_cast<std::size_t>(vocab.id("it"))] > 0.5);
}

TEST_CASE("ngram on the default corpus: higher orders have lower held-out perplexity", "[models][ngram][corpus][needs_corpus]") {
  if (corpus().empty()) {
    SPECDEC_SKIP("no default corpus under " << specdec::default_corpus_directory);
    return;
  }
  // Split: all paragraphs of all files (files sorted by name), numbered in order; every 10th paragraph
  // (index % 10 == 9) is held out, the rest is training text. The vocabulary comes from the training part
  // only, capped at 1500 words so <unk> is trained; held-out words outside it are <unk>.
  std::vector<std::string> train;
  std::vector<std::string> held_text;
  std::size_t index = 0;
  for (const auto& text : corpus())
    for (std::string_view para : specdec::split_paragraphs(text)) (index++ % 10 == 9 ? held_text : train).emplace_back(para);
  REQUIRE(held_text.size() > 20);
  const auto vocab = vocabulary::build(train, 1500);
  docs held;
  for (const auto& para : held_text) held.push_back(vocab.encode(para));
  double previous = std::numeric_limits<double>::infinity();
  for (const std::size_t order : std::array<std::size_t, 4>{1, 2, 3, 4}) {
    const ngram_model m(order, vocab, train);
    const double ppl = m.perplexity(held);
    WARN("order " << order << ": held-out perplexity " << ppl);
    CHECK(ppl < previous);
    CHECK(ppl < static_cast<double>(vocab.size()));  // better than uniform
    previous = ppl;
  }
}

TEST_CASE("ngram on the default corpus: training is deterministic", "[models][ngram][corpus][needs_corpus]") {
  if (corpus().empty()) {
    SPECDEC_SKIP("no default corpus under " << specdec::default_corpus_directory);
    return;
  }
  const auto a = specdec::train_ngram_model(3, corpus(), 800);
  const auto b = specdec::train_ngram_model(3, corpus(), 800);
  REQUIRE(a.vocab_size() == 803);
  CHECK(std::equal(a.vocab().words().begin(), a.vocab().words().end(), b.vocab().words().begin()));
  std::vector<double> pa(a.vocab_size()), pb(b.vocab_size());
  for (const char* text : {"", "the", "free software foundation", "permission is hereby granted"}) {
    const auto ctx = a.vocab().encode(text);
    a.next_probs(ctx, pa);
    b.next_probs(ctx, pb);
    CHECK(pa == pb);  // bit for bit
  }
  // with the cap, <unk> occurs in training and gets more than the uniform floor
  const auto ctx = a.vocab().encode("the");
  a.next_probs(ctx, pa);
  CHECK(pa[vocabulary::unk] > 1.0 / static_cast<double>(a.vocab_size()));
}

TEST_CASE("ngram on the default corpus: Kneser-Ney discounts are sane", "[models][ngram][corpus][needs_corpus]") {
  if (corpus().empty()) {
    SPECDEC_SKIP("no default corpus under " << specdec::default_corpus_directory);
    return;
  }
  const auto m = specdec::train_ngram_model(4, corpus());
  for (std::size_t level = 1; level <= 4; ++level) {
    const auto d = m.discounts(level);
    INFO("level " << level << ": D1 " << d.d1 << ", D2 " << d.d2 << ", D3+ " << d.d3);
    CHECK(d.d1 > 0.0);
    CHECK(d.d1 < 1.0);
    CHECK(d.d2 > 0.0);
    CHECK(d.d2 < 2.0);
    CHECK(d.d3 > 0.0);
    CHECK(d.d3 < 3.0);
    CHECK(d.d1 < d.d3);  // Chen & Goodman: larger counts take larger discounts
  }
}

TEST_CASE("ngram: a file that does not exist is an error", "[models][ngram][corpus]") {
  const std::vector<std::filesystem::path> paths{"/nonexistent/specdec/corpus.txt"};
  CHECK_THROWS_AS(specdec::load_text_files(paths), specdec::error);
}
