// Strict speculative decoding through llama.cpp preserves the target's distribution: a chi-squared
// test of the first two generated tokens against their exact law, computed from the target's own
// rows, with a negative control (lenient verification, l = 0.3) that must fail. The same for token
// trees on llama.cpp's KV cache (a sequence id per root-to-leaf path): a static top-2 x top-2 tree from
// the draft model (read through prefix_cached_model lanes) verified by sample-and-match, with MSS
// (the strict tree rule, which assumes candidates drawn from q, not q's top two) as the negative control.
//
// Power: both models sample at temperature 1 with top-k 8, so the first two tokens take at most 64
// values and every cell is well filled; the draft is the target with noise of half its weights' size
// (acceptance about 0.15 per token in the CLI's measurement), so the lenient rule's acceptance of
// tokens the target does not want moves the law far from the target's (TV about 0.3 here).
// SPECDEC_TEST_LABELS: llama_cpp statistical
#include <map>
#include <utility>

#include <functional>

#include "integrations/llama_cpp/models.hpp"
#include "integrations/llama_cpp/two_token_law.hpp"
#include "specdec/draft/tree.hpp"
#include "specdec/model/prefix_cached_model.hpp"
#include "support/chi_squared.hpp"
#include "support/sample_scale.hpp"

namespace t = specdec_test::llama;
using specdec::token_id;

namespace {

const specdec::warp_params top8{.temperature = 1.0, .top_k = 8};

std::vector<double> warped(std::span<const float> logits) {
  std::vector<double> p(logits.size());
  specdec::warp_logits(logits, std::span<double>(p), top8);
  return p;
}

// The exact law of the first two tokens after `prompt`: (x1, x2) -> probability.
t::two_token_cells<double> exact_law(const t::lc::model& m, const std::vector<token_id>& prompt) {
  return t::two_token_law(prompt, [&m](const std::vector<token_id>& context) { return warped(t::fresh_logits(m, context)); });
}

// Decodes a chunk of requests, returning each one's tokens in order.
using chunk_decoder = std::function<std::vector<std::vector<token_id>>(std::vector<specdec::request_options>)>;

// Chains: the target and the draft model as the decoder's two sequence models.
std::vector<std::vector<token_id>> decode_chains(std::vector<specdec::request_options> requests) {
  return t::decode_all(t::model("target"), t::model("draft-noise-0.5"), std::move(requests));
}

// Trees: a static top-2 x top-2 tree per request from the draft model through two KV-cached lanes each.
std::vector<std::vector<token_id>> decode_trees(std::vector<specdec::request_options> requests) {
  using view = specdec::prefix_cached_model<t::lc::sequence_model>;
  const auto n = static_cast<std::uint32_t>(requests.size());
  t::lc::context target_ctx(t::model("target"), {.context_per_sequence = 64, .sequences = n, .threads = 1, .tree_paths = 4 * n});
  t::lc::context draft_ctx(t::model("draft-noise-0.5"), {.context_per_sequence = 64, .sequences = 2 * n, .threads = 1});
  t::lc::sequence_model target(target_ctx), draft(draft_ctx);
  specdec::no_sequence_model none(target.vocab_size());
#if SPECDEC_ENABLE_SIMD
  specdec::batch_decoder decoder(specdec::exec::simd, target, none, specdec::strict);
#else
  specdec::batch_decoder decoder(specdec::exec::seq, target, none, specdec::strict);
#endif
  std::vector<std::unique_ptr<view>> views;
  std::vector<std::unique_ptr<specdec::static_tree_drafter<view>>> drafters;
  std::vector<specdec::request_handle> handles;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    views.push_back(std::make_unique<view>(draft, 2, 2 * i));
    drafters.push_back(
        std::make_unique<specdec::static_tree_drafter<view>>(*views.back(), specdec::tree_shape::full({2, 2}), top8));
    requests[i].drafter = specdec::tree_drafter_stage(*drafters.back());
    handles.push_back(decoder.add(std::move(requests[i])));
  }
  return t::run_to_end(decoder, handles);
}

specdec::stats::gof_result first_two_tokens(specdec::request_acceptance acceptance, std::size_t samples, std::size_t chunk,
                                            const chunk_decoder& decode) {
  const auto& target = t::model("target");
  const std::vector<token_id> prompt = t::lc::tokenize(target, "Once upon a time");
  const auto law = exact_law(target, prompt);
  const auto seen = t::count_first_two(
      samples, chunk,
      [&](std::uint32_t i) {
        specdec::request_options r;
        r.prompt = prompt;
        r.seed = 20261125;
        r.request_id = i;
        r.gamma = 2;
        r.max_new_tokens = 3;  // a round of two drafts: the second token is a draft's or the bonus
        r.target_params = r.draft_params = top8;
        r.acceptance = acceptance;
        return r;
      },
      decode);
  return t::two_token_gof(seen, law);
}

}  // namespace

TEST_CASE("strict SD through llama.cpp samples the target's law of the first two tokens", "[llama_cpp]") {
  const std::size_t samples = static_cast<std::size_t>(specdec_test::scaled_sample_count(2000, 1000));
  const auto strict = first_two_tokens(specdec::request_acceptance{specdec::strict}, samples, 128, decode_chains);
  INFO("strict: " << strict);
  CHECK(strict.impossible == 0);
  CHECK(strict.p_value > specdec_test::gof_alpha);

  const auto lenient = first_two_tokens(specdec::request_acceptance{specdec::lenient_rule(0.3)}, samples, 128, decode_chains);
  INFO("negative control, lenient l = 0.3: " << lenient);
  CHECK(lenient.p_value < specdec_test::gof_alpha);
}

TEST_CASE("token trees through llama.cpp sample the target's law of the first two tokens", "[llama_cpp]") {
  const std::size_t samples = static_cast<std::size_t>(specdec_test::scaled_sample_count(2000, 1000));
  // 48 requests per context: 48 sequences and 4 path ids each, within llama.cpp's 256 ids.
  const auto matched = first_two_tokens(specdec::tree_acceptance{specdec::sample_and_match}, samples, 48, decode_trees);
  INFO("sample-and-match tree: " << matched);
  CHECK(matched.impossible == 0);
  CHECK(matched.p_value > specdec_test::gof_alpha);

  const auto mss = first_two_tokens(specdec::tree_acceptance{specdec::strict}, samples, 48, decode_trees);
  INFO("negative control, MSS on a top-k tree: " << mss);
  CHECK(mss.p_value < specdec_test::gof_alpha);
}
