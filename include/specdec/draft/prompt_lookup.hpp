//! \file draft/prompt_lookup.hpp
//! \brief N-gram prompt lookup, a drafter that costs no model call: the last n tokens of the request's
//! context (prompt and output) are looked up earlier in the same context, and the tokens that
//! followed that occurrence are the draft (Saxena's prompt lookup decoding; transformers'
//! `prompt_lookup_num_tokens`, vLLM's n-gram proposer, llama.cpp's lookup examples).
//!
//! Rule: for n = max_n down to min_n, the most recent earlier occurrence of the context's last n
//! tokens (scanning backward from the end, as llama.cpp does; vLLM takes the earliest) gives up to k
//! tokens that followed it (fewer when the context ends first; they may run into the last n tokens
//! themselves). The first n that matches wins; no match drafts nothing (the round is a target-only
//! step). Example: context [1, 2, 3, 4, 2, 3], min_n 2, max_n 3, k 4: [4, 2, 3] has no earlier
//! occurrence, [2, 3] occurs at 1, and [4, 2, 3] followed it.
//! Cost: O(L * max_n) comparisons per round for a context of L tokens, no memory beyond the stage.
//!
//! Guarantee: the drafts are a deterministic function of the context, with no probabilities. The
//! output law is exactly the target's with greedy, sample-and-match, or strict / lenient 1 with the
//! one-hot q that `one_hot_vocab` writes (a proposal that puts all its mass on the drafted token is
//! the law it was drawn from). No frequency or score is ever handed to a rule as q.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/draft/model_free.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! Parameters of n-gram prompt lookup.
struct prompt_lookup_options {
  std::size_t min_n = 1;  //!< shortest n-gram looked up (>= 1)
  std::size_t max_n = 3;  //!< longest n-gram looked up first (>= min_n)
  std::size_t k = 8;      //!< most tokens proposed per round (>= 1; the round's length caps it too)
  //! 0: the stage writes no q rows (for greedy, sample-and-match and typical acceptance). V: it writes
  //! a one-hot q row per draft over a vocabulary of V tokens, for rules that read q (strict, lenient,
  //! block), at V floats per draft.
  std::size_t one_hot_vocab = 0;
};

//! \throws specdec::error naming the parameter when min_n is 0, max_n < min_n or k is 0.
inline void validate(const prompt_lookup_options& o) {
  SPECDEC_EXPECTS(o.min_n >= 1, "specdec::prompt_lookup: min_n must be at least 1");
  SPECDEC_EXPECTS(o.max_n >= o.min_n, "specdec::prompt_lookup: max_n must be at least min_n");
  SPECDEC_EXPECTS(o.k >= 1, "specdec::prompt_lookup: k must be at least 1");
}

//! The continuation the lookup proposes after `context` (see the file comment), at most `limit`
//! tokens, written to `out` (cleared first). Returns the n that matched, or 0.
inline std::size_t prompt_lookup(std::span<const token_id> context, const prompt_lookup_options& o, std::size_t limit,
                                 std::vector<token_id>& out) {
  out.clear();
  const std::size_t L = context.size();
  limit = std::min(limit, o.k);
  if (limit == 0) return 0;
  for (std::size_t n = std::min(o.max_n, L > 0 ? L - 1 : 0); n >= o.min_n && n > 0; --n) {
    const std::span<const token_id> tail = context.last(n);
    // Earlier occurrences start at s < L - n; the most recent first.
    for (std::size_t s = L - n; s-- > 0;) {
      if (!std::equal(tail.begin(), tail.end(), context.begin() + static_cast<std::ptrdiff_t>(s))) continue;
      const std::size_t from = s + n, count = std::min(limit, L - from);
      out.assign(context.begin() + static_cast<std::ptrdiff_t>(from),
                 context.begin() + static_cast<std::ptrdiff_t>(from + count));
      return n;
    }
  }
  return 0;
}

//! N-gram prompt lookup as a drafter stage of the step decoder (request_options::drafter).
//! \throws specdec::error on invalid options (validate).
inline draft_stage_of<draft_output::chain> prompt_lookup_stage(prompt_lookup_options o) {
  validate(o);
  return draft_stage_of<draft_output::chain>(
      [o, found = std::vector<token_id>{}](std::span<const token_id> context, std::size_t gamma,
                                           const random::request_stream& /*stream*/, stage_draft& out) mutable {
        prompt_lookup(context, o, gamma, found);
        write_model_free_chain(std::span<const token_id>(found), o.one_hot_vocab, out);
      });
}

}  // namespace specdec
