// Test support for decoding across vocabularies: two pairs of piece tokenizers over the alphabet
// {a, b, c} (a character-level target with a draft that merges, ids deliberately not aligned; and a
// target with merges whose draft has strings the target lacks and lacks some of the target's), Markov
// models over each vocabulary's ids, and a loop that runs many requests on a step decoder over a
// target with no draft model (every request drafts through its stage) and returns their outputs.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "specdec/decode/batch_decoder.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/models/kv_cache.hpp"
#include "specdec/vocab/piece_tokenizer.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/wave_models.hpp"

namespace specdec_test {

// Pair 1: a character-level target; a draft with merges ("ab", "bc", "ca"), whose single letters have
// other ids than the target's.
inline specdec::piece_tokenizer char_target() { return specdec::piece_tokenizer::of_pieces({"a", "b", "c"}); }
inline specdec::piece_tokenizer merge_draft() { return specdec::piece_tokenizer::of_pieces({"ab", "c", "a", "bc", "b", "ca"}); }
// Pair 2: a target with merges ("ab", "ba") the draft lacks; a draft with strings ("bc", "cc", "abc")
// the target lacks. They share "a", "b" and "c".
inline specdec::piece_tokenizer merge_target() { return specdec::piece_tokenizer::of_pieces({"a", "b", "c", "ab", "ba"}); }
inline specdec::piece_tokenizer other_draft() { return specdec::piece_tokenizer::of_pieces({"c", "bc", "a", "cc", "b", "abc"}); }

// An order-1 Markov model over V ids with a random table (conformance/sequence_law.hpp).
inline auto table_model(std::size_t vocab, std::uint64_t seed) {
  return specdec::make_model(vocab, table_logits(random_stochastic_table(vocab, seed), vocab));
}

struct decoded {
  std::vector<std::vector<specdec::token_id>> outputs;  // by request
  std::size_t drafted = 0, accepted = 0;
};

// `n` requests (prompt {0}, seed, ids 0.., gamma 1 + id % 4, `tokens` new tokens, then `configure(id,
// options)`) in batches of 2000 on a step decoder over `target` with `rule` as its chain rule.
template <class Target, class Rule>
decoded decode_requests(const Target& target, Rule rule, std::uint32_t n, std::size_t tokens, std::uint64_t seed,
                        const std::function<void(std::uint32_t, specdec::request_options&)>& configure) {
  specdec::kv_cached_model<Target> t(target);
  specdec::no_sequence_model none(target.vocab_size());
  specdec::batch_decoder decoder(specdec::exec::seq, t, none, rule);
  decoded out;
  out.outputs.resize(n);
  constexpr std::uint32_t per_batch = 2000;
  for (std::uint32_t first = 0; first < n; first += per_batch) {
    std::map<specdec::request_handle, std::uint32_t> ids;
    for (std::uint32_t id = first; id < std::min(n, first + per_batch); ++id) {
      specdec::request_options o;
      o.prompt = {0};
      o.seed = seed;
      o.request_id = id;
      o.gamma = 1 + id % 4;
      o.max_new_tokens = tokens;
      configure(id, o);
      ids[decoder.add(o)] = id;
    }
    while (decoder.active() > 0)
      for (const auto& e : decoder.step()) {
        auto& output = out.outputs[ids.at(e.request)];
        output.insert(output.end(), e.tokens.begin(), e.tokens.end());
        out.drafted += e.drafted;
        if (e.finished != specdec::finish_reason::none) {
          REQUIRE(e.finished == specdec::finish_reason::length);
          out.accepted += decoder.stats(e.request).accepted;
        }
      }
  }
  return out;
}

// Target-only decoding's tokens for one request: the same decoder with a stage that drafts nothing
// (sample-and-match's target samples are keyed by output position: any drafter emits these tokens).
inline void no_drafts(std::span<const specdec::token_id>, std::size_t, const specdec::random::request_stream&,
                      specdec::stage_draft& out) {
  out.clear();
}

}  // namespace specdec_test
