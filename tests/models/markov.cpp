// Markov reference models: validation, the table layout, exact probabilities and enumeration, and the
// random tables (determinism, sparsity, Dirichlet moments).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/models/enumerate.hpp"
#include "specdec/models/markov.hpp"

using specdec::markov_model;
using specdec::token_id;

static_assert(specdec::ProbabilityModel<markov_model>);
static_assert(specdec::ParallelScoringModel<markov_model>);

TEST_CASE("markov_model validates its table", "[models][markov]") {
  CHECK_NOTHROW(markov_model::categorical({0.25, 0.75}));
  CHECK_THROWS_AS(markov_model::categorical({}), specdec::error);
  CHECK_THROWS_AS(markov_model::categorical({0.5, 0.6}), specdec::error);           // sum 1.1
  CHECK_THROWS_AS(markov_model::categorical({1.5, -0.5}), specdec::error);          // negative
  CHECK_THROWS_AS(markov_model::categorical({std::nan(""), 1.0}), specdec::error);  // NaN
  CHECK_THROWS_AS(markov_model::categorical({std::numeric_limits<double>::infinity(), 0.0}), specdec::error);
  CHECK_NOTHROW(markov_model::categorical({0.5, 0.5 + 1e-10}));  // within 1e-9
  CHECK_THROWS_AS(markov_model::categorical({0.5, 0.5 + 1e-8}), specdec::error);
  // wrong table sizes
  CHECK_THROWS_AS(markov_model(2, 1, std::vector<double>(4, 0.5)), specdec::error);  // needs 3 rows
  CHECK_THROWS_AS(markov_model::chain({0.5, 0.5}, {1.0, 0.0, 0.0}), specdec::error);
  // a bad transition row is caught, not only a bad initial row
  CHECK_THROWS_AS(markov_model::chain({0.5, 0.5}, {1.0, 0.0, 0.3, 0.3}), specdec::error);
  // tables that would not fit
  CHECK_THROWS_AS(markov_model::table_rows(2, 40), specdec::error);
  CHECK_THROWS_AS(markov_model::table_rows(0, 1), specdec::error);
  CHECK(markov_model::table_rows(3, 2) == 1 + 3 + 9);
}

TEST_CASE("markov_model reads the row of the last min(L, k) tokens", "[models][markov]") {
  // Order 2 over V = 2: rows 0 (empty), 1-2 (one token), 3-6 (two tokens, oldest most significant).
  std::vector<double> table;
  const double rows[7][2] = {{0.5, 0.5}, {0.9, 0.1}, {0.2, 0.8}, {1.0, 0.0}, {0.0, 1.0}, {0.3, 0.7}, {0.6, 0.4}};
  for (const auto& r : rows) table.insert(table.end(), r, r + 2);
  const markov_model m(2, 2, table);
  CHECK(m.order() == 2);
  CHECK(m.row_count() == 7);
  const std::vector<token_id> empty{}, one{1}, two{1, 0}, long_ctx{0, 0, 1, 1, 0, 1};
  CHECK(m.row_index(empty) == 0);
  CHECK(m.row_index(one) == 2);
  CHECK(m.row_index(two) == 3 + 2);
  CHECK(m.row_index(long_ctx) == 3 + 1);  // last two tokens: 0, 1
  std::vector<double> p(2);
  m.next_probs(long_ctx, p);
  CHECK(p[0] == 0.0);
  CHECK(p[1] == 1.0);
  std::vector<float> l(2);
  m.next_logits(two, l);
  CHECK(l[0] == static_cast<float>(std::log(0.3)));
  CHECK(l[1] == static_cast<float>(std::log(0.7)));
  m.next_logits(long_ctx, l);
  CHECK(l[0] == -std::numeric_limits<float>::infinity());
  CHECK(l[1] == 0.0f);
  // only the last k ids are read; an id among them outside the vocabulary is an error
  const std::vector<token_id> bad{0, 2};
  CHECK_THROWS_AS(m.next_probs(bad, p), specdec::error);
  std::vector<double> wrong(3);
  CHECK_THROWS_AS(m.next_probs(empty, wrong), specdec::error);
}

TEST_CASE("markov_model: next_probs matches the table and logits are log p", "[models][markov]") {
  const markov_model m = specdec::random_markov_model(5, 2, 42, 0.7, 0.3);
  std::vector<double> p(5);
  std::vector<float> l(5);
  const std::vector<std::vector<token_id>> contexts{{}, {3}, {4, 0}, {1, 2, 3, 4}};
  for (const auto& ctx : contexts) {
    m.next_probs(ctx, p);
    const auto row = m.row_at(m.row_index(ctx));
    m.next_logits(ctx, l);
    for (std::size_t t = 0; t < 5; ++t) {
      CHECK(p[t] == row[t]);
      if (p[t] == 0.0)
        CHECK(l[t] == -std::numeric_limits<float>::infinity());
      else
        CHECK(l[t] == static_cast<float>(std::log(p[t])));
    }
  }
}

TEST_CASE("markov_model: score() equals next_logits on each prefix", "[models][markov]") {
  const markov_model m = specdec::random_markov_model(4, 3, 7);
  const std::vector<token_id> ctx{1}, cont{2, 3, 0, 0, 1};  // context shorter than the order
  std::vector<float> rows((cont.size() + 1) * 4), row(4);
  m.score(ctx, cont, rows);
  std::vector<token_id> grown = ctx;
  for (std::size_t i = 0; i <= cont.size(); ++i) {
    m.next_logits(grown, row);
    for (std::size_t t = 0; t < 4; ++t) CHECK(rows[i * 4 + t] == row[t]);
    if (i < cont.size()) grown.push_back(cont[i]);
  }
}

TEST_CASE("markov_model: sequence_probability is the exact product", "[models][markov]") {
  const markov_model m = markov_model::chain({0.5, 0.5}, {0.9, 0.1, 0.4, 0.6});
  const std::vector<token_id> seq{0, 0, 1, 1};
  CHECK(m.sequence_probability({}, seq) == 0.5 * 0.9 * 0.1 * 0.6);
  const std::vector<token_id> ctx{1}, cont{0, 1};
  CHECK(m.sequence_probability(ctx, cont) == 0.4 * 0.1);
  CHECK(m.sequence_log_probability(ctx, cont) == Approx(std::log(0.4 * 0.1)).epsilon(1e-14));
  CHECK(m.sequence_probability(ctx, {}) == 1.0);
  const std::vector<token_id> bad{0, 2};
  CHECK_THROWS_AS(m.sequence_probability({}, bad), specdec::error);
}

TEST_CASE("enumerate_sequences: V^h sequences whose exact probabilities sum to 1", "[models][markov]") {
  const markov_model m = specdec::random_markov_model(3, 2, 2024, 0.5, 0.2);
  const std::vector<token_id> ctx{2};
  const auto seqs = specdec::enumerate_sequences(m, ctx, 4);
  REQUIRE(seqs.size() == 81);
  double total = 0.0;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    REQUIRE(seqs[i].tokens.size() == 4);
    // lexicographic order: the index written in base 3
    std::size_t index = 0;
    for (token_id t : seqs[i].tokens) index = index * 3 + static_cast<std::size_t>(t);
    CHECK(index == i);
    CHECK(seqs[i].probability == Approx(m.sequence_probability(ctx, seqs[i].tokens)).epsilon(1e-14));
    total += seqs[i].probability;
  }
  CHECK(std::abs(total - 1.0) < 1e-12);
  // horizon 0: the empty sequence, with probability 1
  const auto none = specdec::enumerate_sequences(m, ctx, 0);
  REQUIRE(none.size() == 1);
  CHECK(none[0].probability == 1.0);
  CHECK_THROWS_AS(specdec::enumerate_sequences(m, ctx, 30), specdec::error);
}

TEST_CASE("random_markov_model is deterministic and seed-dependent", "[models][markov]") {
  const auto a = specdec::random_markov_model(6, 2, 99, 1.0);
  const auto b = specdec::random_markov_model(6, 2, 99, 1.0);
  const auto c = specdec::random_markov_model(6, 2, 100, 1.0);
  CHECK(std::equal(a.table().begin(), a.table().end(), b.table().begin()));
  CHECK_FALSE(std::equal(a.table().begin(), a.table().end(), c.table().begin()));
  CHECK_THROWS_AS(specdec::random_markov_model(6, 2, 1, 0.0), specdec::error);
  CHECK_THROWS_AS(specdec::random_markov_model(6, 2, 1, -1.0), specdec::error);
  CHECK_THROWS_AS(specdec::random_markov_model(6, 2, 1, 1.0, 1.0), specdec::error);
  CHECK_THROWS_AS(specdec::random_markov_model(0, 2, 1), specdec::error);
}

TEST_CASE("random_markov_model: sparse rows have exact zeros and stay valid", "[models][markov]") {
  const auto m = specdec::random_markov_model(8, 2, 5, 1.0, 0.6);
  std::size_t zeros = 0;
  for (std::size_t r = 0; r < m.row_count(); ++r) {
    const auto row = m.row_at(r);
    std::size_t nonzero = 0;
    for (double p : row) {
      zeros += p == 0.0 ? 1 : 0;
      nonzero += p > 0.0 ? 1 : 0;
    }
    CHECK(nonzero >= 1);
  }
  const double fraction = static_cast<double>(zeros) / static_cast<double>(m.table().size());
  CHECK(fraction > 0.5);
  CHECK(fraction < 0.7);
  // tiny concentrations must not underflow into an all-zero row
  CHECK_NOTHROW(specdec::random_markov_model(8, 1, 3, 1e-3));
}

TEST_CASE("random_markov_model rows have the Dirichlet variance", "[models][markov]") {
  // For Dirichlet(a, ..., a) over V entries, Var(p_i) = (1/V)(1 - 1/V) / (V a + 1). This checks the
  // gamma sampler, both for shape >= 1 and for the shape < 1 boost. 4^6 rows: the estimate's relative
  // standard error is about 1%, so 8% is a very loose bound.
  const std::size_t v = 4;
  for (double a : {0.3, 1.0, 2.5}) {
    const auto m = specdec::random_markov_model(v, 6, 11, a);
    const auto t = m.table();
    double sum = 0.0, sq = 0.0;
    for (double p : t) {
      sum += p;
      sq += p * p;
    }
    const double n = static_cast<double>(t.size());
    const double mean = sum / n, var = sq / n - mean * mean;
    const double expected = (1.0 / v) * (1.0 - 1.0 / v) / (static_cast<double>(v) * a + 1.0);
    INFO("concentration " << a << ": variance " << var << ", expected " << expected);
    CHECK(mean == Approx(0.25).epsilon(1e-12));
    CHECK(var == Approx(expected).epsilon(0.08));
  }
}
