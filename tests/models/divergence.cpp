// Target/draft pairs with controlled divergence: exact TV of make_markov_pair, and the mixture, tempered
// and sparsified wrappers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/model/adapters.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/models/divergence.hpp"
#include "specdec/models/enumerate.hpp"
#include "specdec/models/markov.hpp"

using specdec::markov_model;
using specdec::token_id;

namespace {
double total_variation(std::span<const double> p, std::span<const double> q) {
  double s = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) s += std::abs(p[i] - q[i]);
  return 0.5 * s;
}
double sum(std::span<const double> p) { return std::accumulate(p.begin(), p.end(), 0.0); }

// A plain Model (no next_probs): logits 0, 1, 2, ... for V tokens.
auto ramp_model(std::size_t v) {
  return specdec::make_model(v, [](std::span<const token_id>, std::span<float> l) {
    for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(i);
  });
}
}  // namespace

TEST_CASE("make_markov_pair: exact TV(p, q) = e * TV(p, u) on every row", "[models][divergence]") {
  for (double e : {0.0, 0.1, 0.35, 1.0}) {
    const auto pair = specdec::make_markov_pair(5, 2, 17, e, 0.5, 0.3);
    REQUIRE(pair.target.row_count() == pair.draft.row_count());
    const std::vector<double> u(5, 0.2);
    for (std::size_t r = 0; r < pair.target.row_count(); ++r) {
      const auto p = pair.target.row_at(r), q = pair.draft.row_at(r);
      INFO("e = " << e << ", row " << r);
      CHECK(total_variation(p, q) == Approx(e * total_variation(p, u)).margin(1e-15));
      for (std::size_t t = 0; t < 5; ++t) CHECK(q[t] == (1.0 - e) * p[t] + e * 0.2);
    }
  }
  CHECK_THROWS_AS(specdec::make_markov_pair(5, 2, 17, 1.5), specdec::error);
  CHECK_THROWS_AS(specdec::make_markov_pair(5, 2, 17, -0.1), specdec::error);
}

TEST_CASE("make_markov_pair: the target is the random model of the same seed", "[models][divergence]") {
  const auto pair = specdec::make_markov_pair(4, 1, 3, 0.2);
  const auto target = specdec::random_markov_model(4, 1, 3);
  CHECK(std::equal(pair.target.table().begin(), pair.target.table().end(), target.table().begin()));
}

TEST_CASE("mixed_with_uniform over a markov model equals the pair's draft", "[models][divergence]") {
  const auto pair = specdec::make_markov_pair(3, 1, 8, 0.25);
  const auto draft = specdec::mixed_with_uniform(pair.target, 0.25);
  static_assert(specdec::ProbabilityModel<decltype(draft)>);
  static_assert(std::is_same_v<decltype(draft)::inner_type, markov_model>);
  CHECK(&draft.inner() == &pair.target);  // an lvalue is referred to
  const auto ours = specdec::enumerate_sequences(draft, {}, 3);
  const auto theirs = specdec::enumerate_sequences(pair.draft, {}, 3);
  REQUIRE(ours.size() == theirs.size());
  for (std::size_t i = 0; i < ours.size(); ++i) CHECK(ours[i].probability == Approx(theirs[i].probability).margin(1e-15));
  std::vector<float> l(3);
  std::vector<double> q(3);
  const std::vector<token_id> ctx{2};
  draft.next_logits(ctx, l);
  draft.next_probs(ctx, q);
  for (std::size_t t = 0; t < 3; ++t) CHECK(l[t] == static_cast<float>(std::log(q[t])));
  CHECK_THROWS_AS(specdec::mixed_with_uniform(pair.target, 1.01), specdec::error);
}

TEST_CASE("mixed_with_uniform over a logits-only model", "[models][divergence]") {
  auto inner = ramp_model(4);
  const auto mixed = specdec::mixed_with_uniform(std::move(inner), 0.5);
  static_assert(specdec::Model<decltype(mixed)>);
  static_assert(!specdec::ProbabilityModel<decltype(mixed)>);
  std::vector<double> p(4), q(4);
  specdec::next_probs(ramp_model(4), {}, p);
  specdec::next_probs(mixed, {}, q);
  CHECK(sum(q) == Approx(1.0).margin(1e-6));
  for (std::size_t t = 0; t < 4; ++t) CHECK(q[t] == Approx(0.5 * p[t] + 0.125).margin(1e-6));
  // e = 1 is the uniform distribution
  const auto uniform = specdec::mixed_with_uniform(ramp_model(4), 1.0);
  specdec::next_probs(uniform, {}, q);
  for (double x : q) CHECK(x == Approx(0.25).margin(1e-7));
}

TEST_CASE("tempered: rows normalised, equal to p^(1/T) / Z, zeros kept", "[models][divergence]") {
  const markov_model m = markov_model::categorical({0.5, 0.3, 0.2, 0.0});
  for (double t : {0.25, 0.5, 1.0, 2.0, 10.0}) {
    const auto tm = specdec::tempered(m, t);
    static_assert(specdec::ProbabilityModel<decltype(tm)>);
    std::vector<double> q(4);
    tm.next_probs({}, q);
    INFO("T = " << t);
    CHECK(std::abs(sum(q) - 1.0) < 1e-12);
    const double z = std::pow(0.5, 1 / t) + std::pow(0.3, 1 / t) + std::pow(0.2, 1 / t);
    CHECK(q[0] == Approx(std::pow(0.5, 1 / t) / z).epsilon(1e-12));
    CHECK(q[2] == Approx(std::pow(0.2, 1 / t) / z).epsilon(1e-12));
    CHECK(q[3] == 0.0);
    std::vector<float> l(4);
    tm.next_logits({}, l);
    CHECK(l[3] == -std::numeric_limits<float>::infinity());
  }
  // T < 1 sharpens, T > 1 flattens
  std::vector<double> cold(4), hot(4);
  specdec::tempered(m, 0.5).next_probs({}, cold);
  specdec::tempered(m, 3.0).next_probs({}, hot);
  CHECK(cold[0] > 0.5);
  CHECK(hot[0] < 0.5);
  CHECK_THROWS_AS(specdec::tempered(m, 0.0), specdec::error);
  CHECK_THROWS_AS(specdec::tempered(m, -1.0), specdec::error);
  CHECK_THROWS_AS(specdec::tempered(m, std::numeric_limits<double>::infinity()), specdec::error);
}

TEST_CASE("tempered over a logits-only model divides the logits by T", "[models][divergence]") {
  const auto tm = specdec::tempered(ramp_model(3), 2.0);
  static_assert(!specdec::ProbabilityModel<decltype(tm)>);
  std::vector<double> q(3);
  specdec::next_probs(tm, {}, q);
  const double z = 1.0 + std::exp(0.5) + std::exp(1.0);
  CHECK(q[0] == Approx(1.0 / z).epsilon(1e-6));
  CHECK(q[2] == Approx(std::exp(1.0) / z).epsilon(1e-6));
}

TEST_CASE("sparsified: top-k renormalised, ties to the smaller id", "[models][divergence]") {
  const markov_model m = markov_model::categorical({0.1, 0.3, 0.2, 0.2, 0.2});
  std::vector<double> q(5);
  specdec::sparsified(m, 1).next_probs({}, q);
  CHECK(q == std::vector<double>{0.0, 1.0, 0.0, 0.0, 0.0});
  const auto s2 = specdec::sparsified(m, 2);
  static_assert(specdec::ProbabilityModel<decltype(s2)>);
  s2.next_probs({}, q);
  CHECK(q[1] == Approx(0.6).epsilon(1e-14));
  CHECK(q[2] == Approx(0.4).epsilon(1e-14));  // of the tied 0.2s, id 2 is kept
  CHECK(q[3] == 0.0);
  CHECK(q[4] == 0.0);
  CHECK(std::abs(sum(q) - 1.0) < 1e-15);
  std::vector<float> l(5);
  s2.next_logits({}, l);
  CHECK(l[0] == -std::numeric_limits<float>::infinity());
  CHECK(l[1] == static_cast<float>(std::log(q[1])));
  // k >= V is the identity
  specdec::sparsified(m, 9).next_probs({}, q);
  CHECK(q == std::vector<double>{0.1, 0.3, 0.2, 0.2, 0.2});
  CHECK_THROWS_AS(specdec::sparsified(m, 0), specdec::error);
}

TEST_CASE("sparsified rows are normalised on every context of a random model", "[models][divergence]") {
  const markov_model m = specdec::random_markov_model(7, 1, 123, 0.8);
  const auto s = specdec::sparsified(m, 3);
  std::vector<double> q(7);
  for (token_id c = 0; c < 7; ++c) {
    const std::vector<token_id> ctx{c};
    s.next_probs(ctx, q);
    CHECK(std::abs(sum(q) - 1.0) < 1e-12);
    CHECK(std::count_if(q.begin(), q.end(), [](double x) { return x > 0.0; }) <= 3);
  }
  // an rvalue inner model is owned
  const auto owned = specdec::sparsified(specdec::random_markov_model(7, 1, 123, 0.8), 3);
  static_assert(std::is_same_v<decltype(owned), const specdec::sparsified_model<markov_model>>);
}

TEST_CASE("wrappers compose", "[models][divergence]") {
  const markov_model m = specdec::random_markov_model(6, 1, 31, 0.5);
  const auto composed = specdec::mixed_with_uniform(specdec::tempered(specdec::sparsified(m, 2), 0.7), 0.1);
  static_assert(specdec::ProbabilityModel<decltype(composed)>);
  const auto seqs = specdec::enumerate_sequences(composed, {}, 3);
  double total = 0.0;
  for (const auto& s : seqs) {
    CHECK(s.probability > 0.0);  // the uniform mixture makes everything possible
    total += s.probability;
  }
  CHECK(std::abs(total - 1.0) < 1e-12);
}
