//! \file conformance/logits.hpp
//! \brief The kit's logits form: the verifier under test receives logits and each side's warping
//! parameters (temperature, top-k, top-p, min-p) and must emit by the law of the warped rows. The
//! checks are the exact laws (on Markov pairs of logits whose warped rows are the pair's exact
//! distributions), determinism and batch invariance, and a logits bad-input catalogue; the coins'
//! independence and the impossible-token check do not depend on the rows' form and run in the
//! probability form (`check_chain_verifier`).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "specdec/conformance/bad_input.hpp"
#include "specdec/conformance/drafting.hpp"
#include "specdec/conformance/interface.hpp"
#include "specdec/conformance/kit.hpp"
#include "specdec/conformance/law.hpp"
#include "specdec/conformance/options.hpp"
#include "specdec/conformance/report.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::conformance {

//! The logits configurations: a target with temperature and top-k against a nucleus draft, top-p
//! against min-p, and both sides with the same parameters (what engines do when the draft inherits
//! the request's sampling parameters). `model.mix` scales the draft's logit noise, `zero_fraction`
//! masks logits with -inf, `equal_every` gives contexts whose draft logits are the target's.
inline std::vector<law_config> logit_law_configs(std::uint64_t seed) {
  const auto config = [](model_config model, int horizon, std::size_t prompt, std::size_t min_gamma, std::size_t max_gamma,
                         warp_params target, warp_params draft) {
    law_config c;
    c.model = std::move(model);
    c.horizon = horizon;
    c.prompt = prompt;
    c.min_gamma = min_gamma;
    c.max_gamma = max_gamma;
    c.target_warp = target;
    c.draft_warp = draft;
    return c;
  };
  return {
      config({"v6_logits_topk_vs_topp", 6, 0.8, 0.15, 0, seed + 31}, 3, 1, 1, 4, {0.7, 4, 1.0, 0.0}, {1.0, 0, 0.9, 0.0}),
      config({"v5_logits_topp_vs_minp", 5, 1.2, 0.0, 3, seed + 32}, 3, 0, 2, 2, {1.3, 0, 0.8, 0.0}, {0.8, 0, 1.0, 0.1}),
      config({"v8_logits_same_params", 8, 0.5, 0.25, 0, seed + 33}, 2, 5, 3, 3, {1.0, 0, 0.95, 0.05}, {1.0, 0, 0.95, 0.05}),
  };
}

namespace detail {

//! Which tokens `params` keeps of `logits`, as the warped row's support.
inline std::vector<bool> kept(std::span<const double> logits, const warp_params& params) {
  std::vector<double> probs(logits.size());
  warp_logits(logits, std::span<double>(probs), params);
  std::vector<bool> keep(probs.size());
  for (std::size_t v = 0; v < probs.size(); ++v) keep[v] = probs[v] > 0.0;
  return keep;
}

//! Warps one float logit row in double into `out`. False when the kept set is fragile: it changes
//! when top-p or min-p move by 0.1 %, so a float32 verifier could keep a different set.
inline bool warp_stably(std::span<const float> logits, const warp_params& params, std::span<double> out) {
  const std::vector<double> l(logits.begin(), logits.end());
  if (warp_logits(std::span<const double>(l), out, params) != row_status::ok) return false;
  const auto base = kept(l, params);
  for (const double f : {0.999, 1.001}) {
    warp_params moved = params;
    moved.top_p = std::min(1.0, params.top_p * f);
    moved.min_p = std::min(1.0, params.min_p * f);
    if (params.top_p == 1.0) moved.top_p = 1.0;
    if (kept(l, moved) != base) return false;
  }
  return true;
}

//! Logits of scale 2 from the stream; -inf for a `zero_fraction` of the entries (never the two largest).
inline void random_logit_row(random::philox_stream& s, std::span<float> row, double zero_fraction) {
  for (float& x : row) {
    const double u1 = 1.0 - s.uniform(), u2 = s.uniform();  // Box-Muller
    x = static_cast<float>(2.0 * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
  std::vector<float> sorted(row.begin(), row.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const float second = sorted.size() > 1 ? sorted[1] : sorted[0];
  for (float& x : row)
    if (x < second && s.uniform() < zero_fraction) x = -std::numeric_limits<float>::infinity();
}

}  // namespace detail

//! The Markov pair of a logits configuration: float logit tables, and their warped rows in double
//! (the exact distributions). Tables whose warping is fragile in any context are redrawn.
inline model_tables logit_tables(const law_config& c) {
  const std::size_t V = c.model.vocab;
  for (std::uint32_t attempt = 0;; ++attempt) {
    random::philox_stream s(random::stream_address{c.model.seed, attempt, 0, 0, random::purpose::user});
    std::vector<float> target(V * V), draft(V * V);
    markov_pair pair{V, std::vector<double>(V * V), std::vector<double>(V * V)};
    bool stable = true;
    for (std::size_t a = 0; a < V && stable; ++a) {
      const auto t = std::span<float>(target).subspan(a * V, V), d = std::span<float>(draft).subspan(a * V, V);
      detail::random_logit_row(s, t, c.model.zero_fraction);
      detail::random_logit_row(s, d, c.model.zero_fraction);
      for (std::size_t v = 0; v < V; ++v)
        d[v] = (c.model.equal_every > 0 && a % c.model.equal_every == 0) || std::isinf(t[v])
                   ? t[v]
                   : t[v] + static_cast<float>(c.model.mix) * d[v];
      stable = detail::warp_stably(t, c.target_warp, std::span<double>(pair.target).subspan(a * V, V)) &&
               detail::warp_stably(d, c.draft_warp, std::span<double>(pair.draft).subspan(a * V, V));
    }
    if (stable) return model_tables(std::move(pair), std::move(target), std::move(draft));
  }
}

//! The requests `order` of a logits batch, in that order.
inline chain_logit_inputs select_requests(const chain_logit_inputs& in, std::span<const std::size_t> order) {
  chain_logit_inputs out;
  static_cast<chain_inputs&>(out) = select_requests(static_cast<const chain_inputs&>(in), order);
  for (const std::size_t b : order) {
    out.target_warp.push_back(in.target_warp[b]);
    out.draft_warp.push_back(in.draft_warp[b]);
  }
  return out;
}

//! A chain-from-logits batch of no request over a vocabulary of `vocab` tokens.
inline chain_logit_inputs empty_logit_batch(std::size_t vocab) {
  chain_logit_inputs in;
  static_cast<chain_inputs&>(in) = empty_chain_batch(vocab);
  return in;
}

//! Appends a request of configuration `c` (its drafts sampled from the warped draft rows).
inline void append_logit_request(chain_logit_inputs& in, const model_tables& m, const request_spec& r, const law_config& c,
                                 std::uint64_t kit_seed) {
  append_chain_request(in, m, r, kit_seed);
  in.target_warp.push_back(c.target_warp);
  in.draft_warp.push_back(c.draft_warp);
}

namespace detail {
//! The catalogue's logits model (V = 8) and its warping.
inline law_config logit_catalogue_config(std::uint64_t seed) {
  law_config c = logit_law_configs(seed).front();
  c.model = {"logit_catalogue", 8, 0.8, 0.0, 0, seed};
  return c;
}
inline chain_logit_inputs logit_neighbours(const kit_options& o) {
  const law_config c = logit_catalogue_config(o.seed + 23);
  const model_tables m = logit_tables(c);
  chain_logit_inputs in = empty_logit_batch(8);
  for (std::uint64_t k = 0; k < 3; ++k) append_logit_request(in, m, request_spec{k, 2, o.seed + 9, 9000 + k, 0}, c, o.seed);
  return in;
}
}  // namespace detail

//! The logits catalogue: NaN and +inf logits at the drafted token, an all -inf row, NaN draft
//! logits, a draft id outside [0, V), invalid warping parameters (report); masked (-inf) tokens
//! besides the drafted ones (succeed).
inline std::vector<bad_input_case<chain_logit_inputs>> logit_bad_inputs(const kit_options& o) {
  const law_config c = detail::logit_catalogue_config(o.seed + 23);
  const model_tables m = logit_tables(c);
  std::vector<bad_input_case<chain_logit_inputs>> cases;
  const auto add = [&](std::string name, expectation e, auto mutate) {
    chain_logit_inputs in = empty_logit_batch(8);
    append_logit_request(in, m, request_spec{2, 3, o.seed + 5, 2000 + cases.size(), 0}, c, o.seed);
    mutate(in);
    cases.push_back({std::move(name), e, std::move(in), -1, 0});
  };
  const auto target_row = [](chain_logit_inputs& in, std::size_t i) {
    return std::span<float>(in.target_rows).subspan(in.target_index(0, i) * in.vocab_size, in.vocab_size);
  };
  const auto x0 = [](const chain_logit_inputs& in) { return static_cast<std::size_t>(in.draft_tokens[0]); };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  add("logits_nan_at_draft", expectation::report, [&](chain_logit_inputs& in) { target_row(in, 0)[x0(in)] = nan; });
  add("logits_pos_inf_at_draft", expectation::report, [&](chain_logit_inputs& in) { target_row(in, 0)[x0(in)] = inf; });
  add("logits_all_neg_inf", expectation::report, [&](chain_logit_inputs& in) {
    for (float& x : target_row(in, 0)) x = -inf;
  });
  add("draft_logits_all_nan", o.reads_draft_probs ? expectation::report : expectation::either, [&](chain_logit_inputs& in) {
    for (float& x : std::span<float>(in.draft_rows).first(in.vocab_size)) x = nan;
  });
  add("logits_draft_token_equals_vocab", expectation::report,
      [&](chain_logit_inputs& in) { in.draft_tokens[0] = static_cast<token_id>(in.vocab_size); });
  add("logits_top_p_zero", expectation::report, [&](chain_logit_inputs& in) { in.target_warp[0].top_p = 0.0; });
  add("logits_masked_tokens", expectation::succeed, [&](chain_logit_inputs& in) {
    for (std::size_t i = 0; i <= 3; ++i) {
      auto row = target_row(in, i);
      for (std::size_t v = 0; v < in.vocab_size; ++v)
        if ((i == 3 || static_cast<token_id>(v) != in.draft_tokens[i]) && v % 2 == 1) row[v] = -inf;
    }
  });
  return cases;
}

//! Runs the kit on a verifier from logits: exact laws on three warped Markov pairs, determinism and
//! batch invariance, and the logits bad-input catalogue.
inline report check_chain_logits_verifier(const std::string& name, const chain_logits_verifier& verify, const guarantee& g,
                                          const kit_options& o = {}) {
  if (g.kind == claim::stated_law && !g.law) throw std::invalid_argument("conformance: a stated-law guarantee needs its law");
  report r{name, g.name + ", from logits", {}};
  const auto append = [&o](chain_logit_inputs& in, const model_tables& m, const request_spec& s, const law_config& c) {
    append_logit_request(in, m, s, c, o.seed);
  };
  detail::run_common<chain_logit_inputs>(r, verify, g, o, logit_law_configs(o.seed), logit_bad_inputs(o),
                                         detail::logit_neighbours(o), logit_tables, empty_logit_batch, append);
  return r;
}

}  // namespace specdec::conformance
