// SPECDEC_TEST_LABELS: statistical
//
// Draft-time stop rules and length controllers keep strict speculative decoding exact when their
// decision is a stopping time of the draft process (length/concepts.hpp): sequence-level chi-squared
// (Boost.Math-free Pearson test of tests/support, false-failure rate 1e-6, fixed seeds) of 40000
// three-token generations on the step decoder against the target's exact law, for p_min, confidence
// (re-fitted), entropy and cumulative-acceptance stops and the heuristic schedule. Two negative controls
// must fail: a rule that drops x_j because q_j(x_j) is small (it looks at the drawn token), and one that
// drops x_j when the target gives it less mass than the draft (it peeks at the target).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "specdec/decode/batch_decoder.hpp"
#include "specdec/length/confidence.hpp"
#include "specdec/length/cumulative_acceptance.hpp"
#include "specdec/length/entropy.hpp"
#include "specdec/length/heuristic.hpp"
#include "specdec/length/p_min.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/models/kv_cache.hpp"
#include "support/chi_squared.hpp"
#include "support/sequence_counts.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/wave_models.hpp"

namespace {
using specdec::token_id;
constexpr std::size_t vocab = 4;
constexpr int horizon = 3;

const specdec_test::markov_pair& tables() {
  static const auto pair = specdec_test::make_markov_pair(vocab, 0x570B, 0.6);
  return pair;
}

// The chi-squared test of 40000 generations with `configure`'s stages against the target's law, and the
// tokens drafted in all (a rule that never cut a draft would test nothing).
struct sampled {
  specdec_test::gof_result gof;
  std::size_t drafted = 0;
};
template <class Configure>
sampled sample(Configure configure, std::uint64_t seed) {
  const auto& pair = tables();
  const auto target = specdec::make_model(vocab, specdec_test::table_logits(pair.target, vocab));
  const auto draft = specdec::make_model(vocab, specdec_test::table_logits(pair.draft, vocab));
  const auto law = specdec_test::target_sequence_distribution(pair, 1, horizon);
  specdec::kv_cached_model<decltype(target)> t(target);
  specdec::kv_cached_model<decltype(draft)> q(draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  const auto c = specdec_test::count_sequences(decoder, vocab, horizon, law.size(), seed, configure);
  return {specdec_test::chi_squared_gof(c.counts, law), c.drafted};
}

// Drops x_j when q_j(x_j) < 0.3: the decision reads the drawn token (not exact).
struct drops_unlikely_drafts {
  specdec::draft_decision decide(const specdec::draft_view& v) const {
    return v.token_probability() < 0.3 ? specdec::draft_decision::drop : specdec::draft_decision::next;
  }
};

// Drops x_j (j >= 1) when the target gives it less mass than the draft: it peeks at the target.
struct peeks_at_target {
  specdec::draft_decision decide(const specdec::draft_view& v) const {
    if (v.position == 0) return specdec::draft_decision::next;
    const auto prev = static_cast<std::size_t>(v.drafts[v.position - 1]), x = static_cast<std::size_t>(v.token());
    return tables().target[prev * vocab + x] < tables().draft[prev * vocab + x] ? specdec::draft_decision::drop
                                                                                : specdec::draft_decision::next;
  }
};
}  // namespace

TEST_CASE("draft-time stop rules and length controllers keep strict SD exact; rules that peek do not", "[length][statistical]") {
  const std::size_t uncut = sample([](specdec::request_options&) {}, 70).drafted;
  const auto check_exact = [&](const char* name, auto configure, std::uint64_t seed) {
    const auto r = sample(configure, seed);
    INFO(name << ": " << r.gof << "; drafted " << r.drafted << " of " << uncut << " without the rule");
    CHECK(r.gof.p_value > specdec_test::gof_alpha);
    CHECK(r.drafted > 0);       // the rule let drafts through,
    CHECK(r.drafted != uncut);  // and changed the lengths (a stop rule cuts them)
  };
  check_exact(
      "p_min 0.45", [](specdec::request_options& o) { o.stop = specdec::stop_stage(specdec::p_min_stop{0.45}); }, 71);
  check_exact(
      "confidence 0.4, re-fitted",
      [](specdec::request_options& o) { o.stop = specdec::stop_stage(specdec::confidence_stop(0.4, true)); }, 72);
  check_exact(
      "entropy",
      [](specdec::request_options& o) {
        o.stop = specdec::stop_stage(specdec::entropy_stop{0.2, 0.53});
      },
      73);
  check_exact(
      "cumulative acceptance",
      [](specdec::request_options& o) {
        const auto predict = [](const specdec::draft_view& v) { return v.token_probability(); };
        o.stop = specdec::stop_stage(specdec::cumulative_acceptance_stop(predict, 0.5, 1));
      },
      74);
  check_exact(
      "heuristic schedule",
      [](specdec::request_options& o) { o.length = specdec::length_stage(specdec::heuristic_length(2, 1, 4)); }, 75);

  const auto check_biased = [](const char* name, auto configure, std::uint64_t seed) {
    const auto r = sample(configure, seed);
    INFO(name << " (negative control): " << r.gof);
    CHECK(r.gof.p_value < specdec_test::gof_alpha);
  };
  check_biased(
      "drops x_j on q_j(x_j)", [](specdec::request_options& o) { o.stop = specdec::stop_stage(drops_unlikely_drafts{}); }, 76);
  check_biased(
      "peeks at the target", [](specdec::request_options& o) { o.stop = specdec::stop_stage(peeks_at_target{}); }, 77);
}
