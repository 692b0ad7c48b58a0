//! \file conformance/law.hpp
//! \brief The exact-law check: the kit decodes many requests on a small Markov pair (drafting from q
//! with its own coins, calling the verifier, appending what it emits, until each request has H
//! tokens) and compares the law of the first H tokens with the exact law of the claim: the target's
//! own law (lossless), the law composed from the stated per-position law (lossy chains), or, for a
//! greedy claim, the target's argmax path token for token. Zero-probability sequences are failures
//! on their own; the rest is Pearson's chi-squared at the kit's false-failure level.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec/conformance/drafting.hpp"
#include "specdec/conformance/harness.hpp"
#include "specdec/conformance/options.hpp"
#include "specdec/conformance/report.hpp"
#include "specdec/conformance/sequence_law.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/stats/chi_squared.hpp"

namespace specdec::conformance {

//! One exact-law configuration: a model pair, the tokens compared, and how much is drafted.
struct law_config {
  model_config model;                        //!< the model pair
  int horizon = 3;                           //!< H, the number of emitted tokens whose joint law is compared
  std::size_t prompt = 1;                    //!< the context token before the first emitted one
  std::size_t min_gamma = 1, max_gamma = 4;  //!< chains: request r drafts min + r % (max - min + 1)
  std::vector<std::size_t> branching;        //!< trees: children per node at each depth
  warp_params target_warp, draft_warp;       //!< logits form: how each side's logits are warped
  //! \var min_gamma
  //! Chains: the fewest drafts of a request (see `gamma_of`).
  //! \var target_warp
  //! Logits form: how the target's logits are warped.

  //! The number of drafts of request `request`: min_gamma + request % (max_gamma - min_gamma + 1).
  std::size_t gamma_of(std::size_t request) const noexcept { return min_gamma + request % (max_gamma - min_gamma + 1); }
};

//! The chain configurations: small vocabularies so that V^H cells stay few; context-dependent rows,
//! zero entries in p and q, some contexts with q = p, drafts far from and close to the target.
inline std::vector<law_config> chain_law_configs(std::uint64_t seed) {
  return {
      {{"v4_gamma1to4", 4, 0.5, 0.2, 3, seed + 1}, 3, 1, 1, 4, {}, {}, {}},
      {{"v3_far_draft_gamma2", 3, 0.9, 0.3, 3, seed + 2}, 4, 1, 2, 2, {}, {}, {}},
      {{"v8_close_draft_gamma5", 8, 0.25, 0.25, 0, seed + 3}, 2, 5, 5, 5, {}, {}, {}},
  };
}

//! The tree configurations: two-by-two trees, a wide root, and a deep narrow tree.
inline std::vector<law_config> tree_law_configs(std::uint64_t seed) {
  const auto tree = [](model_config model, int horizon, std::size_t prompt, std::vector<std::size_t> branching) {
    law_config c;
    c.model = std::move(model);
    c.horizon = horizon;
    c.prompt = prompt;
    c.min_gamma = c.max_gamma = 0;
    c.branching = std::move(branching);
    return c;
  };
  return {
      tree({"v4_tree_2x2", 4, 0.5, 0.2, 3, seed + 11}, 3, 1, {2, 2}),
      tree({"v3_tree_wide_root", 3, 0.9, 0.3, 2, seed + 12}, 4, 0, {3, 1}),
      tree({"v6_tree_deep", 6, 0.3, 0.25, 0, seed + 13}, 3, 2, {2, 1, 1}),
  };
}

namespace detail {

inline std::size_t argmax(std::span<const float> row) {
  return static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

//! How many tokens a greedy verifier accepts: the drafts that follow the argmax path `path`.
inline std::size_t greedy_accepts(const chain_inputs& in, std::size_t b, std::span<const std::size_t> path) {
  std::size_t k = 0;
  while (k < static_cast<std::size_t>(in.num_drafts[b]) &&
         in.draft_tokens[in.draft_index(b, k)] == static_cast<token_id>(path[k]))
    ++k;
  return k;
}
inline std::size_t greedy_accepts(const tree_inputs& in, std::size_t b, std::span<const std::size_t> path,
                                  std::int32_t node = 0) {
  std::size_t best = 0;
  for (std::size_t c = 1; c < static_cast<std::size_t>(in.num_nodes[b]) && !path.empty(); ++c)
    if (in.parents[in.node_index(b, c)] == node && in.tokens[in.node_index(b, c)] == static_cast<token_id>(path.front()))
      best = std::max(best, 1 + greedy_accepts(in, b, path.subspan(1), static_cast<std::int32_t>(c)));
  return best;
}
//! Whether a greedy walk can stop after accepting k drafts: in a chain, exactly after the drafts that
//! follow the argmax path; in a tree, at a node reached along the path none of whose children is on
//! it. Duplicated siblings may head subtrees of different depths, so a walk that takes the first
//! matching sibling and one that takes the deepest are both greedy.
inline bool greedy_can_stop(const chain_inputs& in, std::size_t b, std::span<const std::size_t> path, std::size_t k) {
  return k == greedy_accepts(in, b, path);
}
inline bool greedy_can_stop(const tree_inputs& in, std::size_t b, std::span<const std::size_t> path, std::size_t k,
                            std::int32_t node = 0) {
  bool matching_child = false;
  for (std::size_t c = 1; c < static_cast<std::size_t>(in.num_nodes[b]) && !path.empty(); ++c)
    if (in.parents[in.node_index(b, c)] == node && in.tokens[in.node_index(b, c)] == static_cast<token_id>(path.front())) {
      matching_child = true;
      if (k > 0 && greedy_can_stop(in, b, path.subspan(1), k - 1, static_cast<std::int32_t>(c))) return true;
    }
  return k == 0 && !matching_child;
}
inline std::size_t max_emitted(const chain_inputs& in, std::size_t b) { return static_cast<std::size_t>(in.num_drafts[b]) + 1; }
inline std::size_t max_emitted(const tree_inputs& in, std::size_t b) { return static_cast<std::size_t>(in.num_nodes[b]); }

//! The greedy claim on one verdict: every token on the argmax path from `last`, and as many
//! accepted as the drafts allow. "" when it holds.
template <class Inputs>
std::string greedy_problem(const Inputs& in, std::size_t b, const model_tables& m, std::size_t last, const verdict& v) {
  std::vector<std::size_t> path;
  for (std::size_t i = 0; i < max_emitted(in, b); ++i) path.push_back(last = argmax(m.target_row(last)));
  for (std::size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] != static_cast<token_id>(path[i]))
      return "emitted token " + std::to_string(i) + " is " + std::to_string(v.tokens[i]) + ", not the target's argmax " +
             std::to_string(path[i]);
  const std::size_t accepts = greedy_accepts(in, b, path);
  if (!greedy_can_stop(in, b, path, v.tokens.size() - 1))
    return "emitted " + std::to_string(v.tokens.size()) + " tokens, but a greedy walk does not stop after " +
           std::to_string(v.tokens.size() - 1) + " accepted drafts (the drafts match the argmax path for up to " +
           std::to_string(accepts) + ")";
  return {};
}

inline std::string law_config_json(const law_config& c, std::uint64_t kit_seed) {
  std::string out = "{\"config\": \"" + c.model.name + "\", \"vocab\": " + std::to_string(c.model.vocab) +
                    ", \"model_seed\": " + std::to_string(c.model.seed) + ", \"kit_seed\": " + std::to_string(kit_seed) +
                    ", \"horizon\": " + std::to_string(c.horizon) + ", \"prompt\": " + std::to_string(c.prompt);
  return out;
}

//! The exact law of the first H tokens under the claim (lossless or stated law; chains mix gammas).
inline std::vector<double> claimed_law(const law_config& c, const model_tables& m, const guarantee& g,
                                       std::span<const std::size_t> requests_per_gamma) {
  if (g.kind == claim::lossless) return target_sequence_distribution(m.pair, c.prompt, c.horizon);
  const std::size_t V = m.vocab();
  std::vector<double> accepted(V * V), corrected(V * V);
  for (std::size_t a = 0; a < V; ++a)
    g.law(m.pair.p_row(a), m.pair.q_row(a), std::span<double>(accepted).subspan(a * V, V),
          std::span<double>(corrected).subspan(a * V, V));
  std::vector<double> law(num_sequences(V, c.horizon), 0.0);
  double total = 0.0;
  for (const std::size_t n : requests_per_gamma) total += static_cast<double>(n);
  for (std::size_t gamma = 0; gamma < requests_per_gamma.size(); ++gamma) {
    if (requests_per_gamma[gamma] == 0) continue;
    const auto part = block_emission_distribution(accepted, corrected, m.pair.target, V, c.prompt, c.horizon, gamma);
    const double w = static_cast<double>(requests_per_gamma[gamma]) / total;
    for (std::size_t s = 0; s < law.size(); ++s) law[s] += w * part[s];
  }
  return law;
}

//! The cell that deviates most from its expected count, as JSON.
inline std::string most_deviant_cell(std::span<const std::uint64_t> counts, std::span<const double> law, std::size_t V,
                                     int horizon) {
  double n = 0.0;
  for (const auto x : counts) n += static_cast<double>(x);
  std::size_t worst = 0;
  double worst_z = -1.0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    const double e = n * law[s];
    const double z = e > 0.0 ? std::abs(static_cast<double>(counts[s]) - e) / std::sqrt(e) : (counts[s] > 0 ? INFINITY : 0.0);
    if (z > worst_z) worst_z = z, worst = s;
  }
  std::vector<std::size_t> tokens(static_cast<std::size_t>(horizon));
  for (std::size_t i = tokens.size(), s = worst; i-- > 0; s /= V) tokens[i] = s % V;
  std::string out = "\"most_deviant_sequence\": ";
  append_json_array(out, tokens);
  out += ", \"observed\": " + std::to_string(counts[worst]) + ", \"expected\": ";
  append_json_float(out, n * law[worst]);
  return out;
}

}  // namespace detail

//! Runs one exact-law configuration on the model `m` made for it. `append_request(batch, tables,
//! spec, config)` adds a drafted chain or tree; `empty_batch(V)` starts a batch.
template <class Inputs, class Verifier, class EmptyBatch, class AppendRequest>
check_result check_law(const std::string& name, const Verifier& verify, const guarantee& g, const law_config& c,
                       const model_tables& m, const kit_options& o, EmptyBatch empty_batch, AppendRequest append_request) {
  check_result check{name, true, {}, {}, {}};
  const std::size_t V = m.vocab(), H = static_cast<std::size_t>(c.horizon);
  std::vector<std::uint64_t> counts(num_sequences(V, c.horizon), 0);
  std::vector<std::size_t> per_gamma(c.max_gamma + 1, 0);
  std::size_t calls = 0, emitted = 0, blocks = 0, shape_failures = 0;
  const std::uint64_t request_seed = o.seed ^ (c.model.seed * 0x9E3779B97F4A7C15ull);
  for (std::size_t first = 0; first < o.law_requests && shape_failures < 100; first += o.batch_size) {
    const std::size_t count = std::min(o.batch_size, o.law_requests - first);
    std::vector<std::vector<token_id>> out(count);
    std::vector<std::size_t> active(count);
    for (std::size_t i = 0; i < count; ++i) active[i] = i;
    for (std::uint64_t step = 0; !active.empty(); ++step) {
      Inputs in = empty_batch(V);
      for (const std::size_t i : active) {
        const std::size_t r = first + i;
        const std::size_t last = out[i].empty() ? c.prompt : static_cast<std::size_t>(out[i].back());
        append_request(in, m, request_spec{last, c.gamma_of(r), request_seed, r, step}, c);
      }
      const auto outcome = detail::call(verify, in);
      ++calls;
      if (!outcome.error.empty()) {
        check.fail("the verifier failed on valid input: " + outcome.error);
        check.reproductions.push_back(detail::reproduction(in, 0, nullptr, outcome.error));
        return check;
      }
      std::vector<std::size_t> still;
      for (std::size_t b = 0; b < active.size(); ++b) {
        const verdict& v = outcome.verdicts[b];
        const std::size_t i = active[b];
        const std::size_t last = out[i].empty() ? c.prompt : static_cast<std::size_t>(out[i].back());
        std::string problem = detail::shape_problem(in, b, v);
        if (problem.empty() && v.reported) problem = "reported valid input";
        if (problem.empty() && g.kind == claim::greedy) problem = detail::greedy_problem(in, b, m, last, v);
        if (!problem.empty()) {
          ++shape_failures;
          detail::record_failure(check, in, b, &v, problem);
          continue;  // the request leaves the sample
        }
        out[i].insert(out[i].end(), v.tokens.begin(), v.tokens.end());
        emitted += v.tokens.size();
        ++blocks;
        if (out[i].size() < H) still.push_back(i);
      }
      active.swap(still);
    }
    for (std::size_t i = 0; i < count; ++i) {
      if (out[i].size() < H) continue;
      ++counts[sequence_cell(out[i], V, c.horizon)];
      ++per_gamma[c.gamma_of(first + i)];
    }
  }
  std::uint64_t sampled = 0;
  for (const auto x : counts) sampled += x;
  check.figures = {{"requests", static_cast<double>(sampled)},
                   {"verifier_calls", static_cast<double>(calls)},
                   {"tokens_per_block", blocks > 0 ? static_cast<double>(emitted) / static_cast<double>(blocks) : 0.0},
                   {"horizon", static_cast<double>(H)},
                   {"vocab", static_cast<double>(V)},
                   {"kit_seed", static_cast<double>(o.seed)}};
  if (g.kind == claim::greedy) {
    if (check.passed) check.summary = "every emitted token on the target's argmax path, as many accepted as due";
    return check;
  }
  if (sampled == 0) return check;  // every request failed above
  const auto law = detail::claimed_law(c, m, g, per_gamma);
  const auto gof = stats::chi_squared_gof(counts, law);
  check.figures.insert(check.figures.end(), {{"chi2", gof.statistic},
                                             {"dof", static_cast<double>(gof.dof)},
                                             {"p_value", gof.p_value},
                                             {"alpha", o.alpha},
                                             {"impossible_sequences", static_cast<double>(gof.impossible)}});
  const bool law_holds = gof.impossible == 0 && gof.p_value >= o.alpha;
  if (!law_holds) {
    check.fail(gof.impossible > 0
                   ? std::to_string(gof.impossible) + " sequences of probability 0 under the " + g.name + " law were emitted"
                   : "the law of the first " + std::to_string(H) + " tokens is not the " + g.name +
                         " law (p = " + std::to_string(gof.p_value) + " < alpha)");
    check.reproductions.push_back(detail::law_config_json(c, o.seed) + ", " +
                                  detail::most_deviant_cell(counts, law, V, c.horizon) + "}");
  } else if (check.passed) {
    check.summary = "law of the first " + std::to_string(H) + " tokens matches the " + g.name +
                    " law (p = " + std::to_string(gof.p_value) + ")";
  }
  return check;
}

}  // namespace specdec::conformance
