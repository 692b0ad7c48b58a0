// specdec-llama's drafting across vocabularies (--cross-vocab tli|slem, --vocab-report): a draft model
// whose vocabulary is not the target's proposes through TLI (draft/tli.hpp: its row restricted to the
// tokens both vocabularies spell, renormalised, handed to the rule by target id) or SLEM
// (draft/slem.hpp: its text re-tokenized by the target's tokenizer, verified by exact match), reading
// the target's text in its own tokens from its own KV cache (one llama.cpp sequence per request,
// model/sequence_state.hpp).
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <specdec/draft/slem.hpp>
#include <specdec/draft/tli.hpp>
#include <specdec/integrations/llama_cpp.hpp>
#include <specdec/model/sequence_state.hpp>

namespace specdec_llama {

namespace lc = specdec::llama_cpp;

// Prints how much the two vocabularies share.
inline void print_vocab_report(const lc::model& target, const lc::model& draft, const specdec::vocab_map& map) {
  const specdec::vocab_overlap& o = map.overlap();
  std::printf("vocabularies: target %s, %zu tokens; draft %s, %zu tokens\n", target.path().c_str(), o.target_tokens,
              draft.path().c_str(), o.draft_tokens);
  std::printf("shared strings %zu; draft tokens mapped %zu (%.2f%%), special or empty %zu, duplicates %zu; target tokens "
              "mapped %zu (%.2f%%), special or empty %zu, duplicates %zu\n",
              o.shared_strings, o.draft_mapped, 100.0 * o.draft_fraction(), o.draft_special, o.draft_duplicates, o.target_mapped,
              100.0 * o.target_fraction(), o.target_special, o.target_duplicates);
}

// What the requests of a cross-vocabulary run share: the map, both tokenizers, and the draft's context
// (a sequence per request).
class cross_vocab_drafting {
 public:
  // `method`: tli or slem; `one_hot`: the rule reads q (SLEM then writes one-hot rows).
  cross_vocab_drafting(std::string method, const lc::model& target, const lc::model& draft, const lc::context_options& params,
                       specdec::warp_params draft_params, bool one_hot)
      : method_(std::move(method)),
        map_(lc::map_vocabularies(draft, target)),
        target_tok_(target),
        draft_tok_(draft),
        ctx_(draft, params),
        seq_(ctx_),
        one_hot_(one_hot ? target.vocab_size() : 0) {
    options_.draft_params = draft_params;
    if (llama_vocab_get_add_bos(draft.vocab())) options_.context.draft_prefix = {llama_vocab_bos(draft.vocab())};
  }

  const specdec::vocab_map& map() const noexcept { return map_; }
  const lc::sequence_model& draft() const noexcept { return seq_; }

  // The drafter stage of request `request` (its own draft sequence). A `specdec::error` it throws (a
  // tokenizer that cannot carry the text) ends only that request (`stage_error`); its message is kept
  // for `failures()`.
  specdec::draft_stage stage(std::size_t request) {
    specdec::sequence_state<lc::sequence_model> state(seq_, static_cast<specdec::sequence_id>(request));
    specdec::draft_stage inner = method_ == "tli"
                                     ? specdec::tli_stage(state, map_, target_tok_, draft_tok_, options_)
                                     : specdec::slem_stage(state, target_tok_, draft_tok_, options_, {.one_hot_vocab = one_hot_});
    return [this, request, inner = std::move(inner)](std::span<const specdec::token_id> context, std::size_t gamma,
                                                     const specdec::random::request_stream& stream, specdec::stage_draft& out) {
      try {
        inner(context, gamma, stream, out);
      } catch (const specdec::error& e) {
        failures_.push_back("prompt " + std::to_string(request) + ": drafting across vocabularies failed: " + e.what());
        throw;
      }
    };
  }
  // Why requests' drafting failed, one line each.
  const std::vector<std::string>& failures() const noexcept { return failures_; }

 private:
  std::string method_;
  specdec::vocab_map map_;
  lc::text_tokenizer target_tok_, draft_tok_;
  lc::context ctx_;
  lc::sequence_model seq_;
  specdec::cross_vocab_options options_;
  std::size_t one_hot_;
  std::vector<std::string> failures_;
};

}  // namespace specdec_llama
