//! \file conformance/bad_input.hpp
//! \brief The bad-input catalogue: rows with NaN, infinities, negative entries or no mass, draft ids
//! outside [0, V), q(x) = 0, a residual without mass, V = 1, a large vocabulary with tiny masses, an
//! empty chain. Invalid input must be reported (never hidden behind a plausible token), valid edge
//! cases must verify without a report, and nothing may ever come back outside [0, V). Each case also
//! runs beside healthy requests, which must verify as if it were not there.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "specdec/conformance/drafting.hpp"
#include "specdec/conformance/harness.hpp"
#include "specdec/conformance/options.hpp"
#include "specdec/conformance/report.hpp"
#include "specdec/conformance/seeding.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::conformance {

//! What a case demands of the verdict of its bad request.
enum class expectation {
  report,   //!< the input is invalid: it must be reported (a verdict flag or an exception)
  succeed,  //!< the input is valid: no report, and the tokens are the case's
  either,   //!< reporting and verifying are both acceptable; the tokens must still be in range
};

//! One case: a batch whose every request is the bad one (usually one; a rare-event case repeats it).
template <class Inputs>
struct bad_input_case {
  std::string name;                          //!< the case's name in the report (bad_input/`name`)
  expectation expect = expectation::report;  //!< what the verifier must do with the request
  Inputs batch;                              //!< the inputs, each request the bad one
  //! For `succeed`: every token must be this one (V = 1 cases); -1: any.
  token_id only_token = -1;
  //! For `succeed`: the number of tokens due (an empty chain emits one); 0: any.
  std::size_t tokens_due = 0;
};

namespace detail {

//! A healthy request of the catalogue's model (V = 8) after context `last`.
inline model_tables catalogue_model(std::uint64_t seed) { return model_tables(model_config{"catalogue", 8, 0.5, 0.0, 0, seed}); }

inline chain_inputs healthy_chain(const model_tables& m, std::size_t last, std::size_t gamma, std::uint64_t seed,
                                  std::uint64_t id, std::uint64_t kit_seed) {
  chain_inputs in = empty_chain_batch(m.vocab());
  append_chain_request(in, m, request_spec{last, gamma, seed, id, 0}, kit_seed);
  return in;
}

inline std::span<float> mutable_target_row(chain_inputs& in, std::size_t i) {
  return std::span<float>(in.target_rows).subspan(in.target_index(0, i) * in.vocab_size, in.vocab_size);
}
inline std::span<float> mutable_draft_row(chain_inputs& in, std::size_t i) {
  return std::span<float>(in.draft_rows).subspan(in.draft_index(0, i) * in.vocab_size, in.vocab_size);
}

//! A chain of one request given all its rows (V, drafts, q rows, p rows).
inline chain_inputs literal_chain(std::size_t vocab, std::vector<token_id> drafts, std::vector<float> q, std::vector<float> p,
                                  std::uint64_t seed, std::uint64_t id) {
  chain_inputs in = empty_chain_batch(vocab);
  in.num_drafts.push_back(static_cast<std::int32_t>(drafts.size()));
  in.offsets.push_back(static_cast<std::int64_t>(drafts.size()));
  in.draft_tokens = std::move(drafts);
  in.draft_rows = std::move(q);
  in.target_rows = std::move(p);
  append_identity(in, seed, id, 0);
  return in;
}

}  // namespace detail

//! The chain catalogue. `reads_draft_probs` false relaxes the cases of bad draft rows to `either`.
inline std::vector<bad_input_case<chain_inputs>> chain_bad_inputs(const kit_options& o) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const auto m = detail::catalogue_model(o.seed + 21);
  const std::uint64_t seed = o.seed + 5;
  std::vector<bad_input_case<chain_inputs>> cases;
  const auto add = [&](std::string name, expectation e, auto mutate) {
    chain_inputs in = detail::healthy_chain(m, 2, 3, seed, 1000 + cases.size(), o.seed);
    mutate(in);
    cases.push_back({std::move(name), e, std::move(in), -1, 0});
  };
  const auto x0 = [](const chain_inputs& in) { return static_cast<std::size_t>(in.draft_tokens[0]); };
  const expectation bad_q = o.reads_draft_probs ? expectation::report : expectation::either;

  add("target_row_all_nan", expectation::report, [&](chain_inputs& in) {
    for (float& x : detail::mutable_target_row(in, 0)) x = nan;
  });
  add("target_nan_at_draft", expectation::report, [&](chain_inputs& in) { detail::mutable_target_row(in, 0)[x0(in)] = nan; });
  add("target_inf_at_draft", expectation::report, [&](chain_inputs& in) { detail::mutable_target_row(in, 0)[x0(in)] = inf; });
  add("target_negative_at_draft", expectation::report,
      [&](chain_inputs& in) { detail::mutable_target_row(in, 0)[x0(in)] = -0.5f; });
  add("target_row_zero", expectation::report, [&](chain_inputs& in) {
    for (float& x : detail::mutable_target_row(in, 0)) x = 0.0f;
  });
  add("bonus_row_nan", expectation::report, [&](chain_inputs& in) {
    // p = q = one-hot at each draft: every rule accepts every draft and then reads the bonus row.
    for (std::size_t i = 0; i < 3; ++i) {
      auto q = detail::mutable_draft_row(in, i), p = detail::mutable_target_row(in, i);
      for (std::size_t v = 0; v < in.vocab_size; ++v)
        q[v] = p[v] = v == static_cast<std::size_t>(in.draft_tokens[i]) ? 1.0f : 0.0f;
    }
    for (float& x : detail::mutable_target_row(in, 3)) x = nan;
  });
  add("draft_row_all_nan", bad_q, [&](chain_inputs& in) {
    for (float& x : detail::mutable_draft_row(in, 0)) x = nan;
  });
  add("draft_negative_at_draft", bad_q, [&](chain_inputs& in) { detail::mutable_draft_row(in, 0)[x0(in)] = -0.1f; });
  add("draft_token_equals_vocab", expectation::report,
      [&](chain_inputs& in) { in.draft_tokens[0] = static_cast<token_id>(in.vocab_size); });
  add("draft_token_negative", expectation::report, [&](chain_inputs& in) { in.draft_tokens[0] = -1; });
  add("draft_token_int_max", expectation::report,
      [&](chain_inputs& in) { in.draft_tokens[0] = std::numeric_limits<token_id>::max(); });
  add("draft_prob_zero", expectation::either, [&](chain_inputs& in) { detail::mutable_draft_row(in, 0)[x0(in)] = 0.0f; });

  // q(1) exceeds p(1) by 2^-12 while p <= q everywhere: max(0, p - q) has no mass, yet x = 1 is
  // rejected with probability ~5e-4. 65536 copies make the zero-mass residual happen ~30 times.
  {
    bad_input_case<chain_inputs> c{"residual_without_mass", expectation::either, empty_chain_batch(2), -1, 0};
    for (std::uint64_t r = 0; r < 65536; ++r) {
      const auto one = detail::literal_chain(2, {1}, {0.5f, 0.5f + 1.0f / 4096.0f}, {0.5f, 0.5f, 0.5f, 0.5f}, seed, 5000 + r);
      c.batch.draft_tokens.push_back(1);
      c.batch.draft_rows.insert(c.batch.draft_rows.end(), one.draft_rows.begin(), one.draft_rows.end());
      c.batch.target_rows.insert(c.batch.target_rows.end(), one.target_rows.begin(), one.target_rows.end());
      c.batch.num_drafts.push_back(1);
      c.batch.offsets.push_back(c.batch.offsets.back() + 1);
      detail::append_identity(c.batch, seed, 5000 + r, 0);
    }
    cases.push_back(std::move(c));
  }
  cases.push_back({"vocab_one", expectation::succeed,
                   detail::literal_chain(1, {0, 0, 0}, {1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 1.0f, 1.0f}, seed, 7000), 0, 0});
  {
    // V = 2^17 with masses of order 1/V, a tail of 1e-30 and exact zeros.
    constexpr std::size_t V = std::size_t{1} << 17;
    random::philox_stream s(random::stream_address{o.seed, 77, 0, 0, random::purpose::user});
    std::vector<float> q(2 * V), p(3 * V);
    for (auto* rows : {&q, &p})
      for (std::size_t r = 0; r < rows->size() / V; ++r) {
        double sum = 0.0;
        for (std::size_t v = 0; v < V; ++v) {
          const double u = s.uniform();
          const double w = u < 0.1 ? 0.0 : u < 0.2 ? 1e-30 : s.exponential();
          (*rows)[r * V + v] = static_cast<float>(w);
          sum += w;
        }
        for (std::size_t v = 0; v < V; ++v) (*rows)[r * V + v] = static_cast<float>((*rows)[r * V + v] / sum);
      }
    // Drafts where q is positive.
    std::vector<token_id> drafts;
    for (std::size_t i = 0; i < 2; ++i) {
      std::size_t v = V - 1;
      while (q[i * V + v] <= 0.0f) --v;
      drafts.push_back(static_cast<token_id>(v));
    }
    cases.push_back({"large_vocab_tiny_masses", expectation::succeed, detail::literal_chain(V, drafts, q, p, seed, 7001), -1, 0});
  }
  cases.push_back({"empty_chain", expectation::succeed, detail::healthy_chain(m, 4, 0, seed, 7002, o.seed), -1, 1});
  return cases;
}

//! The tree catalogue: a NaN root row, a node id outside [0, V), and V = 1.
inline std::vector<bad_input_case<tree_inputs>> tree_bad_inputs(const kit_options& o) {
  const auto m = detail::catalogue_model(o.seed + 22);
  const std::uint64_t seed = o.seed + 6;
  const std::vector<std::size_t> branching{2, 1};
  const auto healthy = [&](std::uint64_t id) {
    tree_inputs in = empty_tree_batch(m.vocab(), o.tree_sampling);
    append_tree_request(in, m, request_spec{2, 0, seed, id, 0}, branching, o.seed);
    return in;
  };
  std::vector<bad_input_case<tree_inputs>> cases;
  {
    tree_inputs in = healthy(1000);
    for (std::size_t v = 0; v < in.vocab_size; ++v) in.target_rows[v] = std::numeric_limits<float>::quiet_NaN();
    cases.push_back({"tree_root_row_all_nan", expectation::report, std::move(in), -1, 0});
  }
  {
    tree_inputs in = healthy(1001);
    in.tokens[1] = static_cast<token_id>(in.vocab_size);
    cases.push_back({"tree_node_token_equals_vocab", expectation::report, std::move(in), -1, 0});
  }
  {
    tree_inputs in = empty_tree_batch(1, o.tree_sampling);
    in.num_nodes = {3};
    in.offsets.push_back(3);
    in.parents = {-1, 0, 1};
    in.tokens = {-1, 0, 0};
    in.draft_rows = {1.0f, 1.0f, 1.0f};
    in.target_rows = {1.0f, 1.0f, 1.0f};
    detail::append_identity(in, seed, 1002, 0);
    cases.push_back({"tree_vocab_one", expectation::succeed, std::move(in), 0, 0});
  }
  return cases;
}

namespace detail {

//! What is wrong with verdict b of a case, or "".
template <class Inputs>
std::string case_problem(const bad_input_case<Inputs>& c, const Inputs& in, std::size_t b, const verdict& v) {
  const std::string shape = shape_problem(in, b, v);
  if (!shape.empty()) return shape;
  switch (c.expect) {
    case expectation::report:
      if (!v.reported) return "invalid input was not reported";
      break;
    case expectation::succeed:
      if (v.reported) return "valid input was reported";
      for (const token_id t : v.tokens)
        if (c.only_token >= 0 && t != c.only_token)
          return "emitted " + std::to_string(t) + " where only " + std::to_string(c.only_token) + " exists";
      if (c.tokens_due > 0 && v.tokens.size() != c.tokens_due)
        return "emitted " + std::to_string(v.tokens.size()) + " tokens; " + std::to_string(c.tokens_due) + " are due";
      break;
    case expectation::either: break;
  }
  return {};
}

//! Healthy neighbours for the isolation runs of the chain catalogue: three requests of its model.
inline chain_inputs chain_neighbours(const kit_options& o) {
  const auto m = catalogue_model(o.seed + 21);
  chain_inputs in = empty_chain_batch(8);
  for (std::uint64_t k = 0; k < 3; ++k) append_chain_request(in, m, request_spec{k, 2, o.seed + 9, 9000 + k, 0}, o.seed);
  return in;
}
//! Healthy neighbours for the tree catalogue.
inline tree_inputs tree_neighbours(const kit_options& o) {
  const auto m = catalogue_model(o.seed + 22);
  tree_inputs in = empty_tree_batch(8, o.tree_sampling);
  const std::vector<std::size_t> branching{2, 1};
  for (std::uint64_t k = 0; k < 3; ++k)
    append_tree_request(in, m, request_spec{k, 0, o.seed + 9, 9000 + k, 0}, branching, o.seed);
  return in;
}

//! `bad` (one request) followed by the requests of `neighbours`.
template <class Inputs>
Inputs concatenate(const Inputs& bad, const Inputs& neighbours) {
  Inputs both = bad;
  const std::size_t base = bad.batch_size();
  std::vector<std::size_t> all(neighbours.batch_size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  Inputs copy = select_requests(neighbours, all);
  auto append = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
  if constexpr (std::is_base_of_v<chain_inputs, Inputs>) {
    append(both.num_drafts, copy.num_drafts);
    append(both.draft_tokens, copy.draft_tokens);
    if constexpr (std::is_same_v<Inputs, chain_logit_inputs>) {
      append(both.target_warp, copy.target_warp);
      append(both.draft_warp, copy.draft_warp);
    }
  } else {
    append(both.num_nodes, copy.num_nodes);
    append(both.parents, copy.parents);
    append(both.tokens, copy.tokens);
  }
  append(both.draft_rows, copy.draft_rows);
  append(both.target_rows, copy.target_rows);
  for (std::size_t b = 1; b < copy.offsets.size(); ++b) both.offsets.push_back(both.offsets[base] + copy.offsets[b]);
  append(both.seeds, copy.seeds);
  append(both.request_ids, copy.request_ids);
  append(both.steps, copy.steps);
  return both;
}

}  // namespace detail

//! Runs every case: alone, then (single-request cases of the neighbours' vocabulary) at the head of
//! the batch `neighbours` of healthy requests, whose verdicts must be valid and, for a seeded
//! verifier, equal to their verdicts alone.
template <class Inputs, class Verifier>
std::vector<check_result> check_bad_inputs(const Verifier& verify, const std::vector<bad_input_case<Inputs>>& cases,
                                           const Inputs& neighbours, const kit_options& o) {
  std::vector<check_result> results;
  for (const auto& c : cases) {
    const std::string name = "bad_input/" + c.name;
    if (!o.wants(name)) continue;
    check_result check{name, true, {}, {}, {}};
    const auto got = detail::call(verify, c.batch);
    if (!got.error.empty() && !got.threw) {
      check.fail(got.error);
      results.push_back(std::move(check));
      continue;
    }
    std::size_t reported = 0;
    for (std::size_t b = 0; b < c.batch.batch_size(); ++b) {
      reported += got.verdicts[b].reported ? 1 : 0;
      const std::string problem = detail::case_problem(c, c.batch, b, got.verdicts[b]);
      if (!problem.empty()) detail::record_failure(check, c.batch, b, &got.verdicts[b], problem, 1);
    }
    check.figures = {{"requests", static_cast<double>(c.batch.batch_size())}, {"reported", static_cast<double>(reported)}};
    if (got.threw) check.figures.emplace_back("threw", 1.0);
    // Isolation: the bad request beside healthy ones.
    if (check.passed && c.batch.batch_size() == 1 && c.batch.vocab_size == neighbours.vocab_size && neighbours.batch_size() > 0) {
      const auto alone = detail::call(verify, neighbours);
      const Inputs both = detail::concatenate(c.batch, neighbours);
      const auto mixed = detail::call(verify, both);
      if (!mixed.threw && mixed.error.empty() && alone.error.empty() && !alone.threw) {
        for (std::size_t k = 0; k < neighbours.batch_size(); ++k) {
          const verdict& v = mixed.verdicts[k + 1];
          std::string problem = detail::shape_problem(both, k + 1, v);
          if (problem.empty() && v.reported) problem = "a healthy request beside the bad one was reported";
          if (problem.empty() && o.seeded && !detail::same_verdict(v, alone.verdicts[k]))
            problem = "a healthy request's verdict changed because a bad request shared its batch";
          if (!problem.empty()) detail::record_failure(check, both, k + 1, &v, problem, 2);
        }
      }
    }
    if (check.passed)
      check.summary = c.expect == expectation::report    ? (got.threw ? "reported (threw: " + got.error + ")" : "reported")
                      : c.expect == expectation::succeed ? "verified without a report"
                                                         : "tokens in range (" + std::to_string(reported) + " reported)";
    if (o.progress) *o.progress << "  " << (check.passed ? "pass " : "FAIL ") << name << "\n";
    results.push_back(std::move(check));
  }
  return results;
}

}  // namespace specdec::conformance
