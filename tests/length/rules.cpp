// The draft-length rules of length/ on hand-made cases (each reproduces its source's behaviour), on
// the step decoder, the oracle's bound against every other rule on a simulated acceptance profile,
// BiLD's rollback rule, and bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "specdec/acceptance/bild.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/length/confidence.hpp"
#include "specdec/length/cumulative_acceptance.hpp"
#include "specdec/length/dynamic_goodput.hpp"
#include "specdec/length/entropy.hpp"
#include "specdec/length/heuristic.hpp"
#include "specdec/length/oracle.hpp"
#include "specdec/length/p_min.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/models/kv_cache.hpp"
#include "specdec/simulate/lengths.hpp"
#include "support/wave_models.hpp"

namespace {
using specdec::draft_decision;
using specdec::token_id;
constexpr std::size_t V = 6;

// A view of one drafted position with q row `q` and drafted token x.
struct one_position {
  std::vector<token_id> drafts;
  std::vector<float> q;
  specdec::decode_stats stats;
  specdec::draft_view view() const { return {drafts.size() - 1, drafts, q, q.size() / drafts.size(), &stats}; }
};

template <class Decoder>
std::map<specdec::request_handle, std::vector<specdec::step_event>> run_events(Decoder& d) {
  std::map<specdec::request_handle, std::vector<specdec::step_event>> out;
  while (d.active() > 0)
    for (const auto& e : d.step()) out[e.request].push_back(e);
  return out;
}
}  // namespace

TEST_CASE("heuristic_length: +2 after a fully accepted round, -1 otherwise, within its bounds", "[length]") {
  specdec::heuristic_length h(5, 2, 9);
  const specdec::decode_stats s;
  std::vector<std::size_t> seen;
  for (const auto& [drafted, accepted] : std::vector<std::pair<std::size_t, std::size_t>>{
           {5, 5}, {7, 7}, {9, 9}, {9, 3}, {8, 0}, {7, 6}, {6, 1}, {5, 0}, {4, 0}, {3, 0}, {2, 2}, {0, 0}}) {
    h.record({drafted, accepted});
    seen.push_back(h.next_length(s));
  }
  CHECK(seen == std::vector<std::size_t>{7, 9, 9, 8, 7, 6, 5, 4, 3, 2, 4, 4});

  // On the decoder, with a draft equal to the target every draft is accepted: 5, 7, 9, 9, ...
  const auto model = specdec::make_model(V, specdec_test::wave_logits(0.0));
  specdec::kv_cached_model<decltype(model)> t(model), q(model);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  specdec::request_options o;
  o.prompt = {1, 2};
  o.max_new_tokens = 200;
  o.length = specdec::length_stage(specdec::heuristic_length(5, 1, 9));
  const auto h1 = decoder.add(o);
  const auto events = run_events(decoder).at(h1);
  REQUIRE(events.size() > 4);
  CHECK(events[0].drafted == 5);
  CHECK(events[1].drafted == 7);
  CHECK(events[2].drafted == 9);
  CHECK(events[3].drafted == 9);
}

TEST_CASE("confidence_stop: stops after a draft below the threshold; the refit minimises fpr + 3 fnr", "[length]") {
  specdec::confidence_stop c(0.4);
  one_position low{{2}, {0.1f, 0.2f, 0.3f, 0.4f}, {}}, high{{3}, {0.1f, 0.2f, 0.3f, 0.4f}, {}};
  CHECK(c.decide(low.view()) == draft_decision::stop);   // q(2) = 0.3 < 0.4: the token is kept, drafting stops
  CHECK(c.decide(high.view()) == draft_decision::next);  // q(3) = 0.4

  // Brute force over every candidate threshold of a hand-made sample.
  const std::vector<std::pair<double, bool>> samples{{0.9, true}, {0.8, true},  {0.7, false}, {0.6, true}, {0.5, false},
                                                     {0.4, true}, {0.3, false}, {0.2, false}, {0.1, true}};
  double best = std::numeric_limits<double>::infinity(), best_t = 0.0;
  for (const double t : {std::numeric_limits<double>::infinity(), 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1}) {
    double fp = 0, tn = 0, tp = 0, fn = 0;
    for (const auto& [s, label] : samples) (label ? (s >= t ? tp : fn) : (s >= t ? fp : tn)) += 1;
    const double cost = fp / (fp + tn) + 3.0 * fn / (tp + fn);
    if (cost < best) best = cost, best_t = t;
  }
  CHECK(specdec::weighted_roc_threshold(samples, 3.0) == best_t);

  // Re-fitted on the decoder from the labels of verified drafts.
  const auto target = specdec::make_model(V, specdec_test::wave_logits(0.0));
  const auto draft = specdec::make_model(V, specdec_test::wave_logits(0.9));
  specdec::kv_cached_model<decltype(target)> t(target);
  specdec::kv_cached_model<decltype(draft)> q(draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  specdec::confidence_stop refit(0.4, true);
  specdec::request_options o;
  o.prompt = {1, 2};
  o.max_new_tokens = 400;
  o.gamma = 6;
  o.stop = [&refit](const specdec::draft_view& v) { return refit.decide(v); };
  decoder.add(o);
  run_events(decoder);
  std::size_t pos = 0;
  for (const auto& s : refit.samples()) pos += s.second;
  CHECK(pos > 5);
  CHECK(refit.samples().size() - pos > 5);
  CHECK(refit.threshold() == specdec::weighted_roc_threshold(refit.samples().first(refit.samples().size()), 3.0));
}

TEST_CASE("p_min_stop drops the draft exactly where the draft's top probability falls below p_min", "[length]") {
  const specdec::p_min_stop rule{0.75};
  CHECK(rule.decide(one_position{{0}, {0.76f, 0.24f}, {}}.view()) == draft_decision::next);
  CHECK(rule.decide(one_position{{1}, {0.74f, 0.26f}, {}}.view()) == draft_decision::drop);
  CHECK(rule.decide(one_position{{0}, {0.75f, 0.25f}, {}}.view()) == draft_decision::next);

  // On the decoder: p_min = 1 drops every draft (only one-hot rows pass): one token per target call,
  // and the wasted draft forwards are counted.
  const auto target = specdec::make_model(V, specdec_test::wave_logits(0.0));
  const auto draft = specdec::make_model(V, specdec_test::wave_logits(0.4));
  specdec::kv_cached_model<decltype(target)> t(target);
  specdec::kv_cached_model<decltype(draft)> q(draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  specdec::request_options o;
  o.prompt = {3};
  o.max_new_tokens = 30;
  o.stop = specdec::stop_stage(specdec::p_min_stop{1.0});
  const auto h = decoder.add(o);
  decoder.set_verify_length_stage(specdec::min_drafts_lengths(0));
  const auto events = run_events(decoder);  // named: a range-for keeps only the last temporary alive
  for (const auto& e : events.at(h)) CHECK(e.drafted == 0);
  // n_min: a request that drafted fewer than n_min verifies none.
  specdec::batch_decoder short_drafts(specdec::exec::seq, t, q, specdec::strict);
  short_drafts.set_verify_length_stage(specdec::min_drafts_lengths(5));
  o.stop = {};
  o.gamma = 3;
  const auto h2 = short_drafts.add(o);
  const auto short_events = run_events(short_drafts);
  for (const auto& e : short_events.at(h2)) {
    CHECK(e.verified == 0);
    CHECK(e.tokens.size() <= 1);
  }
}

TEST_CASE("entropy_stop and cumulative_acceptance_stop on hand-made rows", "[length]") {
  // Uniform over 4: H = ln 4, beta = 1 - sqrt(0.3 ln 4) = 0.355.
  const one_position uniform{{0}, {0.25f, 0.25f, 0.25f, 0.25f}, {}};
  CHECK(specdec::entropy_nats(uniform.q) == Approx(std::log(4.0)));
  CHECK(specdec::entropy_stop{0.3, 0.4}.decide(uniform.view()) == draft_decision::drop);
  CHECK(specdec::entropy_stop{0.3, 0.3}.decide(uniform.view()) == draft_decision::next);
  const one_position certain{{1}, {0.0f, 1.0f, 0.0f, 0.0f}, {}};
  CHECK(specdec::entropy_stop{10.0, 0.99}.decide(certain.view()) == draft_decision::next);

  // Predicted acceptance 0.8 per token: 1 - 0.8 = 0.2, then 1 - 0.64 = 0.36 > h = 0.3 at the second draft.
  specdec::cumulative_acceptance_stop stop([](const specdec::draft_view&) { return 0.8; }, 0.3, 1);
  one_position two{{0, 1}, std::vector<float>(8, 0.25f), {}};
  one_position first{{0}, std::vector<float>(4, 0.25f), {}};
  CHECK(stop.decide(first.view()) == draft_decision::next);
  CHECK(stop.decide(two.view()) == draft_decision::stop);
  CHECK(stop.decide(first.view()) == draft_decision::next);  // a new round starts from 1 again
  specdec::cumulative_acceptance_stop bounded([](const specdec::draft_view&) { return 0.1; }, 0.3, 2);
  CHECK(bounded.decide(first.view()) == draft_decision::next);  // not before min_drafts = 2
  CHECK(bounded.decide(two.view()) == draft_decision::stop);
}

TEST_CASE("dynamic_goodput_length: the argmax of (1 + sum a_i) / ITL(B, k) after its warm-up", "[length]") {
  const specdec::step_latency_table itl({1.0, 8.0}, {{1.0, 1.1, 1.2, 1.3, 1.4}, {2.0, 2.4, 2.8, 3.2, 3.6}});
  CHECK(itl(1.0, 2) == Approx(1.2));
  CHECK(itl(4.5, 2) == Approx(2.0));  // halfway between 1.2 and 2.8
  CHECK(itl(100.0, 4) == Approx(3.6));
  CHECK(itl.max_drafts() == 4);

  // Two requests with a_0 = 0.9, a_1 = 0.5, a_2 = 0.1, a_3 = 0 (accepted / drafted at each position).
  specdec::decode_stats s;
  s.drafted_at = {10, 10, 10, 10};
  s.accepted_at = {9, 5, 1, 0};
  const std::vector<specdec::length_request> requests{{&s, 4, 1}, {&s, 3, 2}};
  std::vector<std::size_t> lengths{4, 3};
  specdec::dynamic_goodput_length stage(itl, 1);
  stage(requests, lengths);  // warm-up step: unchanged
  CHECK(lengths == std::vector<std::size_t>{4, 3});
  stage(requests, lengths);
  const std::vector<double> a{0.9, 0.5, 0.1, 0.0};
  std::size_t best_k = 0;
  double best = 0.0, expected = 1.0;
  for (std::size_t k = 0; k <= 4; ++k) {
    if (k > 0) expected += a[k - 1];
    if (expected / itl(2.0, k) > best) best = expected / itl(2.0, k), best_k = k;
  }
  CHECK(stage.last_choice() == best_k);
  CHECK(lengths == std::vector<std::size_t>{std::min<std::size_t>(4, best_k), std::min<std::size_t>(3, best_k)});
}

TEST_CASE("the oracle's rate bounds every other rule's on a simulated acceptance profile", "[length]") {
  // Acceptance of position j is an independent coin alpha_j; a round of k drafts costs k t_d + L(k).
  const std::vector<double> alpha{0.95, 0.85, 0.7, 0.6, 0.45, 0.3, 0.2, 0.1};
  const double t_d = 0.05;
  const auto latency = [](int k) { return 1.0 + 0.08 * k; };
  const specdec::oracle_length oracle(alpha, t_d, latency);
  // The oracle's rate is the best fixed length's, in closed form.
  double best_fixed = 0.0;
  for (std::size_t k = 0; k <= alpha.size(); ++k)
    best_fixed = std::max(best_fixed, specdec::expected_round_tokens(alpha, k) / (double(k) * t_d + latency(int(k))));
  CHECK(oracle.rate() == Approx(best_fixed));

  // Adaptive rules, simulated: tokens per unit time over many rounds.
  const auto none = [](const specdec::round_record&) {};
  specdec::heuristic_length heuristic(5, 1, 8);
  const double heuristic_rate = specdec::simulate::length_policy_rate(
      alpha, t_d, latency, 200000, 1, [&](const specdec::decode_stats& s) { return heuristic.next_length(s); },
      [&](const specdec::round_record& r) { heuristic.record(r); });
  std::vector<double> itl;
  for (int k = 0; k <= 8; ++k) itl.push_back(latency(k) + k * t_d);
  specdec::dynamic_goodput_length dynamic(specdec::step_latency_table({1.0}, {itl}), 10);
  const double dynamic_rate = specdec::simulate::length_policy_rate(alpha, t_d, latency, 200000, 2,
                                                                    specdec::simulate::single_request_choice(dynamic, 8), none);
  const double oracle_rate = specdec::simulate::length_policy_rate(
      alpha, t_d, latency, 200000, 3, [&](const specdec::decode_stats& s) { return oracle.next_length(s); }, none);
  INFO("oracle " << oracle.rate() << " (simulated " << oracle_rate << "), heuristic " << heuristic_rate << ", dynamic "
                 << dynamic_rate);
  CHECK(oracle_rate == Approx(oracle.rate()).epsilon(0.01));
  // Monte-Carlo error of 200000 rounds is far below 1 %.
  CHECK(oracle.rate() * 1.01 >= heuristic_rate);
  CHECK(oracle.rate() * 1.01 >= dynamic_rate);
  CHECK(heuristic_rate < oracle.rate());  // the heuristic oscillates around a length, the oracle holds the best
}

TEST_CASE("bild_verify: rollback at the earliest position past the threshold, the large model's argmax there", "[length][bild]") {
  // Rows over V = 3; -log p of the drafts: row 0 p(x0 = 1) = 0.5 (0.69), row 1 p(x1 = 2) = 0.001 (6.9).
  const std::vector<float> rows{0.2f, 0.5f, 0.3f, 0.9f, 0.099f, 0.001f, 0.1f, 0.1f, 0.8f};
  const std::vector<token_id> drafts{1, 2};
  const auto r =
      specdec::bild_verify(specdec::bild_rule(5.0), std::span<const token_id>(drafts), std::span<const float>(rows), 3);
  CHECK(r.tokens == std::vector<token_id>{1, 0});  // x1 rolled back, replaced by argmax row 1 = 0
  CHECK(r.num_accepted == 1);
  const auto all =
      specdec::bild_verify(specdec::bild_rule(10.0), std::span<const token_id>(drafts), std::span<const float>(rows), 3);
  CHECK(all.tokens == std::vector<token_id>{1, 2, 2});  // every draft kept, then the argmax of the last row
  // Threshold 0 keeps only the large model's argmax: row 0's argmax is 1 = x0, kept.
  const auto strictest =
      specdec::bild_verify(specdec::bild_rule(0.0), std::span<const token_id>(drafts), std::span<const float>(rows), 3);
  CHECK(strictest.tokens == std::vector<token_id>{1, 0});
  const std::vector<token_id> bad{5};
  CHECK(specdec::bild_verify(specdec::bild_rule(), std::span<const token_id>(bad), std::span<const float>(rows).first(6), 3)
            .status == specdec::verify_status::bad_draft_token);
}

TEST_CASE("bild_verify: a row without mass is unusable: invalid_row, no token", "[length][bild][bad_input]") {
  // Found by the fuzz harness tests/fuzz/verify.cpp: an all-zero row used to give its argmax, token 0,
  // which has p = 0, with status ok.
  const std::vector<token_id> drafts{1};
  const std::vector<float> zero_first{0.0f, 0.0f, 0.0f, 0.2f, 0.5f, 0.3f};  // row 0 has no mass
  const std::vector<float> zero_bonus{0.2f, 0.5f, 0.3f, 0.0f, 0.0f, 0.0f};  // the bonus row has none
  const auto first =
      specdec::bild_verify(specdec::bild_rule(5.0), std::span<const token_id>(drafts), std::span<const float>(zero_first), 3);
  CHECK(first.status == specdec::verify_status::invalid_row);
  CHECK(first.tokens.empty());
  CHECK(first.num_accepted == 0);
  const auto bonus =
      specdec::bild_verify(specdec::bild_rule(5.0), std::span<const token_id>(drafts), std::span<const float>(zero_bonus), 3);
  CHECK(bonus.status == specdec::verify_status::invalid_row);
  CHECK(bonus.tokens == std::vector<token_id>{1});  // the draft before the unusable row stays
  CHECK(bonus.num_accepted == 1);
}

TEST_CASE("BiLD on the decoder: threshold 0 is greedy decoding of the target; lossy otherwise", "[length][bild]") {
  const auto target = specdec::make_model(V, specdec_test::wave_logits(0.0));
  const auto draft = specdec::make_model(V, specdec_test::wave_logits(0.5));
  specdec::kv_cached_model<decltype(target)> t(target);
  specdec::kv_cached_model<decltype(draft)> q(draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  std::map<specdec::request_handle, std::vector<token_id>> prompts;
  std::map<specdec::request_handle, double> thresholds;
  for (std::uint32_t id = 0; id < 8; ++id) {
    specdec::request_options o;
    o.prompt = {static_cast<token_id>(id % V), static_cast<token_id>((id + 3) % V)};
    o.request_id = id;
    o.max_new_tokens = 40;
    o.gamma = 10;                                            // BiLD's n small steps
    o.draft_params.temperature = 0.0;                        // greedy small model
    o.stop = specdec::stop_stage(specdec::p_min_stop{0.6});  // fallback when its top probability < 0.6
    const double threshold = id < 4 ? 0.0 : 2.0;
    o.acceptance = specdec::bild_rule(threshold);
    const auto h = decoder.add(o);
    prompts[h] = o.prompt;
    thresholds[h] = threshold;
  }
  std::map<specdec::request_handle, std::vector<token_id>> got;
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) got[e.request].insert(got[e.request].end(), e.tokens.begin(), e.tokens.end());
  int differing = 0;
  for (const auto& [h, tokens] : got) {
    std::vector<token_id> context = prompts[h], greedy;
    std::vector<float> row(V);
    while (greedy.size() < 40) {
      target.next_logits(std::span<const token_id>(context), std::span<float>(row));
      greedy.push_back(static_cast<token_id>(std::max_element(row.begin(), row.end()) - row.begin()));
      context.push_back(greedy.back());
    }
    if (thresholds[h] == 0.0)
      CHECK(tokens == greedy);
    else
      differing += tokens != greedy;
  }
  CHECK(differing > 0);  // a threshold of 2 keeps tokens the target would not have chosen
}

TEST_CASE("length rules reject bad parameters", "[length][bad_input]") {
  CHECK_THROWS_AS(specdec::heuristic_length(5, 6, 9), specdec::error);
  CHECK_THROWS_AS(specdec::heuristic_length(5, 1, 4), specdec::error);
  CHECK_THROWS_AS(specdec::heuristic_length(0, 0, 4), specdec::error);
  CHECK_THROWS_AS(specdec::confidence_stop(1.5), specdec::error);
  CHECK_THROWS_AS(specdec::confidence_stop(-0.1), specdec::error);
  const one_position any{{0}, {0.5f, 0.5f}, {}};
  CHECK_THROWS_AS(specdec::p_min_stop{1.5}.decide(any.view()), specdec::error);
  CHECK_THROWS_AS((specdec::entropy_stop{-1.0, 0.5}.decide(any.view())), specdec::error);
  CHECK_THROWS_AS((specdec::cumulative_acceptance_stop([](const specdec::draft_view&) { return 1.0; }, 1.5)), specdec::error);
  CHECK_THROWS_AS(specdec::step_latency_table({}, {}), specdec::error);
  CHECK_THROWS_AS(specdec::step_latency_table({2.0, 1.0}, {{1.0}, {1.0}}), specdec::error);
  CHECK_THROWS_AS(specdec::step_latency_table({1.0}, {{1.0, -1.0}}), specdec::error);
  CHECK_THROWS_AS(specdec::oracle_length({0.5, 1.5}, 0.1, [](int) { return 1.0; }), specdec::error);
  CHECK_THROWS_AS(specdec::oracle_length({0.5}, -0.1, [](int) { return 1.0; }), specdec::error);
  CHECK_THROWS_AS(specdec::bild_rule(-1.0), specdec::error);
}
