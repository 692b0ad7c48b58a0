// SPECDEC_TEST_LABELS: statistical
//
// Beam drafts (draft/beam.hpp, MTAD seed 003 section 2.1): top-W selection, deterministic beam search
// against exhaustive enumeration and greedy decoding, beam sampling with and without replacement
// against the exact distribution of the documented process (chi-squared, with a negative control),
// the joint log q of every prefix, batching, log-space finiteness and bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "specdec/draft/beam.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/models/enumerate.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/sampling/top_w.hpp"
#include "support/chi_squared.hpp"

namespace {

using specdec::token_id;
constexpr specdec::warp_params identity{};

// The warped draft row after `context`, in double, exactly as the drafter computes it.
template <class M>
std::vector<double> warped_row(const M& m, std::span<const token_id> context, const specdec::warp_params& w) {
  std::vector<float> logits(m.vocab_size());
  std::vector<double> q(m.vocab_size());
  m.next_logits(context, std::span<float>(logits));
  REQUIRE(specdec::warp_logits(std::span<const float>(logits), std::span<double>(q), w) == specdec::row_status::ok);
  return q;
}

// log q~(continuation | context): the sum of the logs of the warped conditionals.
template <class M>
double warped_log_joint(const M& m, std::span<const token_id> context, std::span<const token_id> continuation,
                        const specdec::warp_params& w) {
  std::vector<token_id> full(context.begin(), context.end());
  double lq = 0.0;
  for (const token_id t : continuation) {
    lq += std::log(warped_row(m, full, w)[static_cast<std::size_t>(t)]);
    full.push_back(t);
  }
  return lq;
}

// Index of a sequence in base V, first token most significant.
std::size_t index_of(std::span<const token_id> s, std::size_t V) {
  std::size_t i = 0;
  for (const token_id t : s) i = i * V + static_cast<std::size_t>(t);
  return i;
}

// Exact distribution of the chosen draft of the documented beam-sampling process, by enumerating every
// sequence of draws: per step, the candidates (beam b, token v) with q~ > 0 in (beam, token) order and
// weight q~(prefix_b) q~(v | prefix_b); `without` draws min(W, n) of them one after another without
// replacement (each proportional to the remaining weights), otherwise W i.i.d. draws. Beams keep the
// draw order; the chosen draft is the first beam of largest joint.
template <class M>
std::vector<double> exact_chosen_distribution(const M& m, std::span<const token_id> context, std::size_t gamma, std::size_t W,
                                              bool without, const specdec::warp_params& w) {
  const std::size_t V = m.vocab_size();
  std::vector<double> dist(static_cast<std::size_t>(std::pow(double(V), double(gamma))), 0.0);
  struct beam {
    std::vector<token_id> tokens;
    double lq;
  };
  std::function<void(const std::vector<beam>&, double)> grow = [&](const std::vector<beam>& beams, double prob) {
    if (beams.front().tokens.size() == gamma) {
      std::size_t best = 0;
      for (std::size_t b = 1; b < beams.size(); ++b)
        if (beams[b].lq > beams[best].lq) best = b;
      dist[index_of(beams[best].tokens, V)] += prob;
      return;
    }
    std::vector<beam> cand;
    for (const beam& b : beams) {
      std::vector<token_id> full(context.begin(), context.end());
      full.insert(full.end(), b.tokens.begin(), b.tokens.end());
      const auto q = warped_row(m, full, w);
      for (std::size_t v = 0; v < V; ++v)
        if (q[v] > 0.0) {
          beam c{b.tokens, b.lq + std::log(q[v])};
          c.tokens.push_back(static_cast<token_id>(v));
          cand.push_back(std::move(c));
        }
    }
    std::vector<double> weight(cand.size());
    for (std::size_t i = 0; i < cand.size(); ++i) weight[i] = std::exp(cand[i].lq);
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    const std::size_t k = without ? std::min(W, cand.size()) : W;
    std::vector<beam> picked;
    std::vector<bool> used(cand.size(), false);
    std::function<void(double, double)> draw = [&](double p, double removed) {
      if (picked.size() == k) {
        grow(picked, p);
        return;
      }
      for (std::size_t i = 0; i < cand.size(); ++i) {
        if (without && used[i]) continue;
        const double pi = weight[i] / (without ? total - removed : total);
        used[i] = true;
        picked.push_back(cand[i]);
        draw(p * pi, removed + weight[i]);
        picked.pop_back();
        used[i] = false;
      }
    };
    draw(prob, 0.0);
  };
  grow({beam{{}, 0.0}}, 1.0);
  return dist;
}

struct sampled {
  std::vector<std::uint64_t> counts;
  std::uint64_t bad = 0;  // drafts whose log q disagrees with a recomputation
};

template <class M>
sampled sample_chosen(const M& m, std::span<const token_id> context, std::size_t gamma, const specdec::beam_params& params,
                      std::uint64_t seed, std::uint64_t n) {
  const std::size_t V = m.vocab_size();
  sampled s;
  s.counts.assign(static_cast<std::size_t>(std::pow(double(V), double(gamma))), 0);
  specdec::beam_drafter<M> drafter(m, params);
  specdec::beam_block block;
  for (std::uint64_t i = 0; i < n; ++i) {
    drafter.draft(context, gamma, specdec::random::request_stream{seed, static_cast<std::uint32_t>(i), 0}, block);
    ++s.counts[index_of(block.tokens, V)];
    if (std::abs(block.log_q.back() - block.beam_log_q.front()) > 1e-12) ++s.bad;
  }
  return s;
}

}  // namespace

TEST_CASE("top_w_indices selects the W largest usable keys, ties to the lowest index", "[beam][top_w]") {
  const double ninf = -std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> keys{0.5, ninf, 2.0, 0.5, nan, 3.0, 0.5, -1.0};
  std::vector<std::size_t> out;
  specdec::top_w_indices(std::span<const double>(keys), 3, out);
  CHECK(out == std::vector<std::size_t>{5, 2, 0});
  specdec::top_w_indices(std::span<const double>(keys), 4, out);
  CHECK(out == std::vector<std::size_t>{5, 2, 0, 3});
  specdec::top_w_indices(std::span<const double>(keys), 100, out);  // -inf and NaN are never selected
  CHECK(out == std::vector<std::size_t>{5, 2, 0, 3, 6, 7});
  specdec::top_w_indices(std::span<const double>(keys), 0, out);
  CHECK(out.empty());

  // Against a full sort on random keys with many ties.
  std::uint64_t state = 12345;
  for (std::size_t trial = 0; trial < 200; ++trial) {
    std::vector<float> k(1 + trial % 37);
    for (float& x : k) x = static_cast<float>((state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 60);
    std::vector<std::size_t> all(k.size());
    std::iota(all.begin(), all.end(), 0);
    std::stable_sort(all.begin(), all.end(), [&](std::size_t a, std::size_t b) { return k[a] > k[b]; });
    const std::size_t w = static_cast<std::size_t>(trial % 9);
    all.resize(std::min(w, all.size()));
    specdec::top_w_indices(std::span<const float>(k), w, out);
    CHECK(out == all);
  }
}

TEST_CASE("beam search with W >= V^gamma returns the exhaustive arg-max of the joint", "[beam][search]") {
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    const auto m = specdec::random_markov_model(3, 2, seed, 0.7);
    for (const auto& warp : {identity, specdec::warp_params{.top_p = 0.8}, specdec::mtad_default_warp}) {
      for (const std::size_t gamma : {1u, 2u, 3u, 4u}) {
        const std::vector<token_id> context{static_cast<token_id>(seed % 3)};
        const std::size_t W = static_cast<std::size_t>(std::pow(3.0, double(gamma)));
        const auto block =
            specdec::draft_beams(m, std::span<const token_id>(context), gamma,
                                 specdec::beam_params{.width = W, .mode = specdec::beam_mode::search, .warp = warp},
                                 specdec::random::request_stream{});
        // Exhaustive: every sequence of length gamma with its warped joint (identity: enumerate_sequences).
        double best = -std::numeric_limits<double>::infinity();
        std::vector<token_id> best_seq;
        std::vector<token_id> s(gamma, 0);
        for (std::size_t idx = 0; idx < W; ++idx) {
          for (std::size_t i = 0, rest = idx; i < gamma; ++i, rest /= 3) s[gamma - 1 - i] = static_cast<token_id>(rest % 3);
          const double lq = warped_log_joint(m, context, s, warp);
          if (lq > best) {
            best = lq;
            best_seq = s;
          }
        }
        CAPTURE(seed, gamma, warp.top_p);
        CHECK(block.tokens == best_seq);
        CHECK(block.log_q.back() == Approx(best).epsilon(1e-12));
        if (warp.is_identity()) {
          const auto all = specdec::enumerate_sequences(m, std::span<const token_id>(context), gamma);
          const auto it = std::max_element(all.begin(), all.end(),
                                           [](const auto& a, const auto& b) { return a.probability < b.probability; });
          CHECK(block.tokens == it->tokens);
        }
      }
    }
  }
}

TEST_CASE("beam search with W = 1 is greedy decoding of the draft model", "[beam][search]") {
  const auto m = specdec::random_markov_model(7, 2, 99, 0.5);
  specdec::chain_drafter<specdec::markov_model> greedy(m, specdec::warp_params{.temperature = 0.0});
  specdec::draft_block chain;
  for (token_id start = 0; start < 7; ++start)
    for (const std::size_t gamma : {1u, 3u, 6u}) {
      const std::vector<token_id> context{start, static_cast<token_id>((start + 3) % 7)};
      greedy.draft(context, gamma, specdec::random::request_stream{}, chain);
      for (const auto& warp : {identity, specdec::mtad_default_warp}) {
        const auto block =
            specdec::draft_beams(m, std::span<const token_id>(context), gamma,
                                 specdec::beam_params{.width = 1, .mode = specdec::beam_mode::search, .warp = warp},
                                 specdec::random::request_stream{});
        CAPTURE(start, gamma);
        CHECK(block.tokens == chain.tokens);
        CHECK(block.beam_count == 1);
        CHECK(block.model_calls == gamma);
      }
    }
}

TEST_CASE("a beam block reports the joint log q of every prefix and of every beam", "[beam]") {
  const auto m = specdec::random_markov_model(6, 1, 7, 0.8);
  const std::vector<token_id> context{2};
  for (const auto mode : {specdec::beam_mode::search, specdec::beam_mode::sample, specdec::beam_mode::sample_without_replacement})
    for (const std::size_t W : {1u, 2u, 4u}) {
      const std::size_t gamma = 5;
      const specdec::beam_params params{.width = W, .mode = mode, .warp = specdec::mtad_default_warp};
      const auto b =
          specdec::draft_beams(m, std::span<const token_id>(context), gamma, params, specdec::random::request_stream{42, 3, 1});
      CAPTURE(static_cast<int>(mode), W);
      REQUIRE(b.tokens.size() == gamma);
      REQUIRE(b.log_q.size() == gamma);
      for (std::size_t j = 1; j <= gamma; ++j) {
        CHECK(b.log_q[j - 1] ==
              Approx(warped_log_joint(m, context, std::span<const token_id>(b.tokens).first(j), params.warp)).epsilon(1e-12));
        if (j > 1) CHECK(b.log_q[j - 1] <= b.log_q[j - 2]);
      }
      REQUIRE(b.beam_count >= 1);
      REQUIRE(b.beam_count <= W);
      REQUIRE(b.beam_tokens.size() == b.beam_count * gamma);
      for (std::size_t k = 0; k < b.beam_count; ++k) {
        const auto beam = std::span<const token_id>(b.beam_tokens).subspan(k * gamma, gamma);
        CHECK(b.beam_log_q[k] == Approx(warped_log_joint(m, context, beam, params.warp)).epsilon(1e-12));
        if (k > 0) CHECK(b.beam_log_q[k] <= b.beam_log_q[k - 1]);
        for (const token_id t : beam) CHECK(specdec::in_vocabulary(t, 6));
      }
      CHECK(std::equal(b.tokens.begin(), b.tokens.end(), b.beam_tokens.begin()));  // the chosen draft is the best beam
      CHECK(b.batched_calls == gamma);
      // One evaluation per live beam per step: 1 at the first step, at most W afterwards.
      CHECK(b.model_calls >= gamma);
      CHECK(b.model_calls <= 1 + (gamma - 1) * W);
      if (mode == specdec::beam_mode::sample) CHECK(b.model_calls == 1 + (gamma - 1) * W);  // duplicates live on
    }
}

TEST_CASE("fewer candidates than W keep every candidate", "[beam]") {
  const auto m = specdec::random_markov_model(5, 1, 3, 1.0);
  for (const auto mode : {specdec::beam_mode::search, specdec::beam_mode::sample_without_replacement}) {
    // top-1 leaves one candidate per row: a single beam survives, which is greedy decoding.
    const auto b =
        specdec::draft_beams(m, std::vector<token_id>{1}, 4, specdec::beam_params{.width = 8, .mode = mode, .warp = {.top_k = 1}},
                             specdec::random::request_stream{5, 0, 0});
    CHECK(b.beam_count == 1);
    CHECK(b.model_calls == 4);
    CHECK(b.log_q.back() == Approx(0.0).margin(1e-12));  // every warped row is one-hot
    // top-2 on the first row: 2 beams after step 1, 4 candidates afterwards.
    const auto c =
        specdec::draft_beams(m, std::vector<token_id>{1}, 3, specdec::beam_params{.width = 8, .mode = mode, .warp = {.top_k = 2}},
                             specdec::random::request_stream{5, 0, 0});
    CHECK(c.beam_count == 8);
    CHECK(c.model_calls == 1 + 2 + 4);
  }
}

TEST_CASE("a BatchedModel is called once per step with every live beam", "[beam][batched]") {
  const auto m = specdec::random_markov_model(6, 2, 17, 0.6);
  struct batched {
    const specdec::markov_model* inner;
    mutable std::size_t batch_calls = 0, rows = 0, single_calls = 0;
    std::size_t vocab_size() const { return inner->vocab_size(); }
    void next_logits(std::span<const token_id> c, std::span<float> l) const {
      ++single_calls;
      inner->next_logits(c, l);
    }
    void next_logits_batch(std::span<const std::span<const token_id>> cs, std::span<float> l) const {
      ++batch_calls;
      rows += cs.size();
      for (std::size_t b = 0; b < cs.size(); ++b) inner->next_logits(cs[b], l.subspan(b * vocab_size(), vocab_size()));
    }
  };
  static_assert(specdec::BatchedModel<batched>);
  const batched bm{&m};
  const std::vector<token_id> context{0, 4};
  for (const auto mode :
       {specdec::beam_mode::search, specdec::beam_mode::sample, specdec::beam_mode::sample_without_replacement}) {
    const specdec::beam_params params{.width = 4, .mode = mode, .warp = identity};
    const specdec::random::request_stream stream{8, 1, 2};
    bm.batch_calls = bm.rows = bm.single_calls = 0;
    const auto a = specdec::draft_beams(bm, std::span<const token_id>(context), 5, params, stream);
    const auto b = specdec::draft_beams(m, std::span<const token_id>(context), 5, params, stream);
    CHECK(bm.batch_calls == 5);
    CHECK(bm.single_calls == 0);
    CHECK(bm.rows == a.model_calls);
    CHECK(a.model_calls == 1 + 4 * 4);  // identity warp: V = 6 >= W candidates per row
    CHECK(a.tokens == b.tokens);
    CHECK(a.beam_tokens == b.beam_tokens);
  }
}

TEST_CASE("beam drafts are reproducible from their stream and vary across streams", "[beam][seed]") {
  const auto m = specdec::random_markov_model(8, 1, 23, 1.0);
  const std::vector<token_id> context{3};
  for (const auto mode : {specdec::beam_mode::sample, specdec::beam_mode::sample_without_replacement}) {
    const specdec::beam_params params{.width = 3, .mode = mode, .warp = identity};
    const auto a =
        specdec::draft_beams(m, std::span<const token_id>(context), 4, params, specdec::random::request_stream{1, 2, 3});
    const auto b =
        specdec::draft_beams(m, std::span<const token_id>(context), 4, params, specdec::random::request_stream{1, 2, 3});
    CHECK(a.beam_tokens == b.beam_tokens);
    int differing = 0;
    for (std::uint32_t step = 0; step < 20; ++step)
      differing +=
          specdec::draft_beams(m, std::span<const token_id>(context), 4, params, specdec::random::request_stream{1, 2, 4 + step})
              .beam_tokens != a.beam_tokens;
    CHECK(differing >= 5);
  }
}

TEST_CASE("beam sampling draws the documented distribution (chi-squared, with a negative control)", "[beam][statistical]") {
  // V = 3, gamma = 3, W = 2, top-p 0.95: the law of the chosen draft of the documented process,
  // enumerated exactly over every path of draws, against 200000 drafts. Negative control: drafts
  // sampled WITH replacement tested against the without-replacement law must fail.
  const auto m = specdec::random_markov_model(3, 1, 2024, 1.0);
  const std::vector<token_id> context{1};
  const std::size_t gamma = 3, W = 2;
  const std::uint64_t n = 200000, seed = 777;
  const specdec::warp_params warp{.top_p = 0.95};
  const auto without = exact_chosen_distribution(m, std::span<const token_id>(context), gamma, W, true, warp);
  const auto with = exact_chosen_distribution(m, std::span<const token_id>(context), gamma, W, false, warp);
  CHECK(std::accumulate(without.begin(), without.end(), 0.0) == Approx(1.0).epsilon(1e-12));
  CHECK(std::accumulate(with.begin(), with.end(), 0.0) == Approx(1.0).epsilon(1e-12));

  const auto s_without =
      sample_chosen(m, std::span<const token_id>(context), gamma,
                    {.width = W, .mode = specdec::beam_mode::sample_without_replacement, .warp = warp}, seed, n);
  const auto s_with = sample_chosen(m, std::span<const token_id>(context), gamma,
                                    {.width = W, .mode = specdec::beam_mode::sample, .warp = warp}, seed + 1, n);
  CHECK(s_without.bad == 0);
  CHECK(s_with.bad == 0);

  const auto g_without = specdec_test::chi_squared_gof(s_without.counts, without);
  const auto g_with = specdec_test::chi_squared_gof(s_with.counts, with);
  const auto g_control = specdec_test::chi_squared_gof(s_with.counts, without);  // with replacement vs the other law
  std::cout << "beam sampling (seeds " << seed << ", " << seed + 1 << "; N = " << n << ")\n"
            << "  without replacement vs its law: " << g_without << "\n"
            << "  with replacement vs its law:    " << g_with << "\n"
            << "  negative control (with replacement vs the without-replacement law): " << g_control << "\n";
  CHECK(g_without.p_value > specdec_test::gof_alpha);
  CHECK(g_with.p_value > specdec_test::gof_alpha);
  CHECK(g_control.p_value < specdec_test::gof_alpha);
}

TEST_CASE("joint log q stays finite for long drafts of small probabilities", "[beam][numerics]") {
  // V = 50 near-uniform: every token has q about 0.02, so q(x_{1:1000}) is about 1e-1700, far below
  // the smallest double; its logarithm is about -3900.
  const auto m = specdec::random_markov_model(50, 1, 5, 200.0);
  const std::size_t gamma = 1000;
  for (const auto mode : {specdec::beam_mode::search, specdec::beam_mode::sample_without_replacement}) {
    const auto b = specdec::draft_beams(m, std::vector<token_id>{0}, gamma, {.width = 2, .mode = mode, .warp = identity},
                                        specdec::random::request_stream{3, 0, 0});
    REQUIRE(b.log_q.size() == gamma);
    CHECK(std::isfinite(b.log_q.back()));
    CHECK(b.log_q.back() < -3000.0);
    CHECK(b.log_q.back() > -5000.0);
    CHECK(std::exp(b.log_q.back()) == 0.0);  // the linear-space joint would have underflowed
    CHECK(b.log_q.back() == Approx(m.sequence_log_probability(std::vector<token_id>{0}, b.tokens)).epsilon(1e-6));
  }
}

TEST_CASE("beam drafts refuse bad parameters and unusable rows", "[beam][errors]") {
  const auto m = specdec::random_markov_model(4, 1, 1, 1.0);
  const std::vector<token_id> context{0};
  const specdec::random::request_stream s{};
  CHECK_THROWS_AS(specdec::draft_beams(m, std::span<const token_id>(context), 3, {.width = 0}, s), specdec::error);
  CHECK_THROWS_AS(specdec::draft_beams(m, std::span<const token_id>(context), 0, {.width = 2}, s), specdec::error);
  CHECK_THROWS_AS(specdec::draft_beams(m, std::span<const token_id>(context), 3, {.width = 2, .warp = {.top_p = 0.0}}, s),
                  specdec::error);
  CHECK_THROWS_AS(
      specdec::draft_beams(m, std::span<const token_id>(context), 3, {.width = 2, .mode = static_cast<specdec::beam_mode>(9)}, s),
      specdec::error);
  const auto nan_model = specdec::make_model(4, [](std::span<const token_id>, std::span<float> out) {
    for (float& x : out) x = std::numeric_limits<float>::quiet_NaN();
  });
  CHECK_THROWS_AS(specdec::draft_beams(nan_model, std::span<const token_id>(context), 2, {.width = 2}, s),
                  specdec::numerical_error);
}
