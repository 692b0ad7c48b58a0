//! \file conformance/seeding.hpp
//! \brief The checks of a seeded verifier: the same request (seed, request id, step, inputs) gives the
//! same verdict when called again, in another order, alone or beside other requests (determinism and
//! batch invariance); and two requests that differ only in seed, request id or step draw independent
//! coins (independence: a chi-squared test of independence of their first emitted tokens).
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "specdec/conformance/drafting.hpp"
#include "specdec/conformance/harness.hpp"
#include "specdec/conformance/options.hpp"
#include "specdec/conformance/report.hpp"
#include "specdec/stats/chi_squared.hpp"

namespace specdec::conformance {

namespace detail {
inline bool same_verdict(const verdict& a, const verdict& b) { return a.tokens == b.tokens && a.reported == b.reported; }
}  // namespace detail

//! Calls the verifier on `batch` (requests 0 .. tested-1 are compared; the rest are other requests)
//! several ways and compares each tested request's verdict with the first call's: again as is,
//! reversed, the first eight alone, and interleaved with the other requests.
template <class Inputs, class Verifier>
std::vector<check_result> check_determinism(const std::string& prefix, const Verifier& verify, const Inputs& batch,
                                            std::size_t tested) {
  check_result determinism{prefix + "determinism", true, "the same request gives the same verdict when called again", {}, {}};
  check_result invariance{
      prefix + "batch_invariance", true, "a request's verdict does not depend on its batch (order, size, neighbours)", {}, {}};
  std::vector<std::size_t> order(tested);
  std::iota(order.begin(), order.end(), std::size_t{0});
  const Inputs base_in = select_requests(batch, order);
  const auto base = detail::call(verify, base_in);
  if (!base.error.empty() || base.threw) {
    determinism.fail("the verifier failed on valid input: " + base.error);
    return {determinism};
  }
  const auto compare = [&](check_result& check, const std::vector<std::size_t>& variant, const std::string& how) {
    const Inputs in = select_requests(batch, variant);
    const auto got = detail::call(verify, in);
    if (!got.error.empty() || got.threw) return check.fail(how + ": the verifier failed: " + got.error);
    for (std::size_t k = 0; k < variant.size(); ++k) {
      const std::size_t b = variant[k];
      if (b >= tested || detail::same_verdict(got.verdicts[k], base.verdicts[b])) continue;
      detail::record_failure(
          check, base_in, b, &base.verdicts[b],
          how + ": the request's verdict changed; the first call returned the one shown, this one " +
              std::to_string(got.verdicts[k].tokens.size()) + " tokens" +
              (got.verdicts[k].tokens.empty() ? "" : " starting " + std::to_string(got.verdicts[k].tokens[0])));
    }
  };
  compare(determinism, order, "called again");
  std::vector<std::size_t> reversed(order.rbegin(), order.rend());
  compare(invariance, reversed, "in reverse order");
  for (std::size_t b = 0; b < std::min<std::size_t>(8, tested); ++b) compare(invariance, {b}, "alone");
  std::vector<std::size_t> mixed;
  for (std::size_t b = 0; b < batch.batch_size(); ++b) {
    if (b < tested) mixed.push_back(b);
    if (tested + b < batch.batch_size()) mixed.push_back(tested + b);
  }
  compare(invariance, mixed, "interleaved with other requests");
  return {determinism, invariance};
}

//! Which part of a request's identity two copies differ in.
enum class identity_part { request_id, seed, step };

//! Pairs of requests with the same inputs that differ only in `part`: one draft x with p(x) < q(x),
//! so that any lossless rule must emit something other than x with positive probability. Their
//! first emitted tokens must be independent.
template <class Verifier>
check_result check_independence(const Verifier& verify, identity_part part, const kit_options& o) {
  const char* part_name = part == identity_part::request_id ? "request_id" : part == identity_part::seed ? "seed" : "step";
  check_result check{std::string("independence/") + part_name, true, {}, {}, {}};
  constexpr std::size_t V = 4;
  const std::vector<float> q{0.5f, 0.2f, 0.2f, 0.1f}, p{0.15f, 0.25f, 0.35f, 0.25f}, bonus{0.25f, 0.25f, 0.25f, 0.25f};
  std::vector<std::uint64_t> joint(V * V, 0);
  const std::size_t per_call = std::max<std::size_t>(2, o.batch_size - o.batch_size % 2);
  for (std::size_t first = 0; first < 2 * o.independence_pairs; first += per_call) {
    chain_inputs in = empty_chain_batch(V);
    const std::size_t count = std::min(per_call, 2 * o.independence_pairs - first);
    for (std::size_t k = 0; k < count; ++k) {
      const std::uint64_t pair = (first + k) / 2, copy = (first + k) % 2;
      std::uint64_t seed = o.seed + 7 * pair, id = 2 * pair, step = pair % 5;
      if (copy == 1) {
        if (part == identity_part::request_id) id += 1;
        if (part == identity_part::seed) seed += 3;
        if (part == identity_part::step) step += 1;
      }
      in.draft_tokens.push_back(0);
      detail::append_row(in.draft_rows, q);
      detail::append_row(in.target_rows, p);
      detail::append_row(in.target_rows, bonus);
      in.num_drafts.push_back(1);
      in.offsets.push_back(in.offsets.back() + 1);
      detail::append_identity(in, seed, id, step);
    }
    const auto got = detail::call(verify, in);
    if (!got.error.empty() || got.threw) {
      check.fail("the verifier failed on valid input: " + got.error);
      return check;
    }
    for (std::size_t k = 0; k + 1 < count; k += 2) {
      const verdict &a = got.verdicts[k], &b = got.verdicts[k + 1];
      for (const std::size_t c : {k, k + 1}) {
        const std::string problem = detail::chain_shape_problem(in, c, got.verdicts[c]);
        if (!problem.empty() || got.verdicts[c].reported)
          detail::record_failure(check, in, c, &got.verdicts[c], problem.empty() ? "reported valid input" : problem);
      }
      if (a.tokens.empty() || b.tokens.empty() || !check.passed) continue;
      ++joint[static_cast<std::size_t>(a.tokens[0]) * V + static_cast<std::size_t>(b.tokens[0])];
    }
    if (!check.passed) return check;
  }
  stats::gof_result r;
  try {
    r = stats::chi_squared_independence(joint, V, V);
  } catch (const std::invalid_argument&) {
    check.fail("the first emitted token never varies although the draft x has p(x) < q(x): not a lossless or seeded verifier");
    return check;
  }
  check.figures = {{"pairs", static_cast<double>(r.n)},
                   {"chi2", r.statistic},
                   {"dof", static_cast<double>(r.dof)},
                   {"p_value", r.p_value},
                   {"alpha", o.alpha}};
  std::uint64_t same = 0;
  for (std::size_t v = 0; v < V; ++v) same += joint[v * V + v];
  check.figures.emplace_back("agreement", r.n > 0 ? static_cast<double>(same) / static_cast<double>(r.n) : 0.0);
  if (r.p_value < o.alpha) {
    check.fail(std::string("requests that differ only in ") + part_name +
               " emit dependent tokens (p = " + std::to_string(r.p_value) + "): their coins are shared or correlated");
    std::string repro = "{\"pairs_differ_in\": \"" + std::string(part_name) + "\", \"agreement\": ";
    detail::append_json_float(repro, check.figure("agreement"));
    repro += ", \"joint_first_tokens\": ";
    detail::append_json_array(repro, joint);
    check.reproductions.push_back(repro + "}");
  } else {
    check.summary =
        std::string("requests differing only in ") + part_name + " are independent (p = " + std::to_string(r.p_value) + ")";
  }
  return check;
}

}  // namespace specdec::conformance
