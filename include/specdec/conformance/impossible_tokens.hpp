//! \file conformance/impossible_tokens.hpp
//! \brief The rare-event check: single-draft requests whose draft the target never emits
//! (V = 2, q = (1, 0), p = (0, 1)). Every claim forbids emitting token 0, so one emission is a
//! failure. Bugs that only show when a uniform is exactly 0 (a float32 uniform of 24 bits with an
//! accept test u <= p/q, or an inverse CDF that stops at a first zero-mass token) happen about once
//! in 2^24 coins; the default 2^27 trials catch them with probability 1 - e^-8.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "specdec/conformance/drafting.hpp"
#include "specdec/conformance/harness.hpp"
#include "specdec/conformance/options.hpp"
#include "specdec/conformance/report.hpp"

namespace specdec::conformance {

//! Runs the rare-event check (see the file comment) on a chain verifier, `o.impossible_token_trials` requests in calls of at
//! least 65536; fails at the first emission of token 0, or on any error or report.
template <class Verifier>
check_result check_impossible_tokens(const Verifier& verify, const kit_options& o) {
  check_result check{"impossible_tokens", true, {}, {}, {}};
  const std::size_t per_call = std::max<std::size_t>(o.batch_size, 65536);
  chain_inputs in = empty_chain_batch(2);
  for (std::size_t b = 0; b < per_call; ++b) {
    in.draft_tokens.push_back(0);
    in.draft_rows.insert(in.draft_rows.end(), {1.0f, 0.0f});
    in.target_rows.insert(in.target_rows.end(), {0.0f, 1.0f, 0.0f, 1.0f});
    in.num_drafts.push_back(1);
    in.offsets.push_back(in.offsets.back() + 1);
    detail::append_identity(in, o.seed + 3, 0, 0);
  }
  std::uint64_t done = 0;
  for (std::uint64_t first = 0; first < o.impossible_token_trials && check.passed; first += per_call) {
    const std::size_t count = static_cast<std::size_t>(std::min<std::uint64_t>(per_call, o.impossible_token_trials - first));
    if (count < in.batch_size()) {
      std::vector<std::size_t> head(count);
      for (std::size_t b = 0; b < count; ++b) head[b] = b;
      in = select_requests(in, head);
    }
    for (std::size_t b = 0; b < count; ++b) in.request_ids[b] = first + b;
    const auto got = detail::call(verify, in);
    if (!got.error.empty() || got.threw) {
      check.fail("the verifier failed on valid input: " + got.error);
      break;
    }
    for (std::size_t b = 0; b < count && check.passed; ++b) {
      const verdict& v = got.verdicts[b];
      std::string problem = detail::chain_shape_problem(in, b, v);
      if (problem.empty() && v.reported) problem = "reported valid input";
      if (problem.empty() && std::find(v.tokens.begin(), v.tokens.end(), token_id{0}) != v.tokens.end())
        problem = "emitted token 0, which has target probability 0 (trial " + std::to_string(first + b) + ")";
      if (!problem.empty()) detail::record_failure(check, in, b, &v, problem);
    }
    done += count;
  }
  check.figures = {{"trials", static_cast<double>(done)}};
  if (check.passed) check.summary = "no token of probability 0 in " + std::to_string(done) + " trials";
  return check;
}

}  // namespace specdec::conformance
