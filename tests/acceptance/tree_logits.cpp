// `verify_tree_from_logits` (acceptance/tree.hpp): target rows given as logits and warped where the
// walk reads them give exactly `verify_tree`'s tokens, paths, counts and statuses on the rows warped
// beforehand, for every tree rule, on seq and simd, with per-request warping (temperature, top-k,
// top-p, min-p); a logit row without usable mass flags its request `invalid_row` alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "specdec/acceptance/tree.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/exec/simd.hpp"
#include "support/tree_rules.hpp"

namespace {
using specdec::token_id;

struct logits_case {
  std::size_t V = 0;
  std::vector<std::int32_t> num_nodes, parents;
  std::vector<token_id> tokens;
  std::vector<float> logits, warped, draft;  // [rows][V]
  std::vector<specdec::warp_params> params;
  std::vector<specdec::random::request_stream> streams;
  specdec::tree_layout layout;
};

logits_case make_case(std::uint64_t seed, std::size_t B, std::size_t V) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  logits_case c;
  c.V = V;
  for (std::size_t b = 0; b < B; ++b) {
    const std::size_t n = 1 + rng() % 9;
    c.num_nodes.push_back(static_cast<std::int32_t>(n));
    c.parents.push_back(specdec::no_node);
    c.tokens.push_back(specdec::no_token);
    for (std::size_t i = 1; i < n; ++i) {
      c.parents.push_back(static_cast<std::int32_t>(rng() % i));
      c.tokens.push_back(static_cast<token_id>(rng() % V));
    }
    const specdec::warp_params choices[] = {
        {}, {.temperature = 0.7, .top_k = 20}, {.temperature = 1.3, .top_p = 0.9}, {.temperature = 1.0, .min_p = 0.05}};
    c.params.push_back(choices[b % 4]);
    c.streams.push_back({seed, static_cast<std::uint32_t>(b), 3});
  }
  c.layout = specdec::tree_layout::from_parents(c.num_nodes, c.parents);
  const std::size_t rows = c.layout.num_rows();
  c.logits.resize(rows * V);
  c.draft.resize(rows * V);
  c.warped.resize(rows * V);
  for (auto& x : c.logits) x = static_cast<float>(normal(rng));
  for (std::size_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (std::size_t v = 0; v < V; ++v) sum += c.draft[r * V + v] = static_cast<float>(unit(rng) * unit(rng));
    for (std::size_t v = 0; v < V; ++v) c.draft[r * V + v] = static_cast<float>(c.draft[r * V + v] / sum);
  }
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t n = 0; n < c.layout.num_nodes(b); ++n) {
      const std::size_t r = c.layout.node_row(b, n);
      specdec::warp_logits(std::span<const float>(c.logits).subspan(r * V, V), std::span<float>(c.warped).subspan(r * V, V),
                           c.params[b]);
    }
  return c;
}

struct outputs {
  std::vector<token_id> tokens;
  std::vector<std::int32_t> path, accepted;
  std::vector<specdec::verify_status> status;
  explicit outputs(const specdec::tree_layout& l)
      : tokens(l.batch_size() * (l.max_depth() + 1)), path(tokens.size()), accepted(l.batch_size()), status(l.batch_size()) {}
  specdec::tree_outputs view() { return {tokens, path, accepted, status}; }
};
}  // namespace

TEST_CASE("verify_tree_from_logits equals verify_tree on the warped rows, for every rule, seq and simd", "[tree][logits]") {
  for (const std::size_t V : {std::size_t{13}, std::size_t{3000}}) {
    logits_case c = make_case(20261125 + V, 24, V);
    // One request's root logits are unusable: it alone is flagged, before anything is read from the
    // row (the warped copy compared against is NaN throughout).
    const std::size_t spoiled = c.layout.node_row(5, 0);
    c.logits[spoiled * V + 1] = std::numeric_limits<float>::quiet_NaN();
    std::fill_n(c.warped.begin() + static_cast<std::ptrdiff_t>(spoiled * V), V, std::numeric_limits<float>::quiet_NaN());
    const specdec::tree_batch<float> logits{c.layout, V, c.tokens, c.draft, c.logits};
    const specdec::tree_batch<float> probs{c.layout, V, c.tokens, c.draft, c.warped};
    specdec_test::for_each_tree_rule([&](const auto& rule, const char* name) {
      INFO(name << ", V = " << V);
      outputs expected(c.layout), seq(c.layout), simd(c.layout);
      specdec::verify_tree(specdec::exec::seq, rule, probs, c.streams, expected.view());
      specdec::verify_tree_from_logits(specdec::exec::seq, rule, logits, c.params, c.streams, seq.view());
      specdec::verify_tree_from_logits(specdec::exec::simd, rule, logits, c.params, c.streams, simd.view());
      CHECK(seq.tokens == expected.tokens);
      CHECK(seq.path == expected.path);
      CHECK(seq.accepted == expected.accepted);
      CHECK(seq.status == expected.status);
      CHECK(simd.tokens == expected.tokens);
      CHECK(simd.accepted == expected.accepted);
      CHECK(simd.status == expected.status);
      CHECK(has_flag(seq.status[5], specdec::verify_status::invalid_row));
      for (std::size_t b = 0; b < c.layout.batch_size(); ++b)
        if (b != 5) CHECK(specdec::is_valid(seq.status[b]));
    });
  }
}

TEST_CASE("verify_tree_from_logits checks its warp parameters", "[tree][logits]") {
  logits_case c = make_case(7, 3, 11);
  const specdec::tree_batch<float> logits{c.layout, 11, c.tokens, c.draft, c.logits};
  outputs out(c.layout);
  CHECK_THROWS_AS(
      specdec::verify_tree_from_logits(specdec::exec::seq, specdec::target_only, logits,
                                       std::span<const specdec::warp_params>(c.params).first(2), c.streams, out.view()),
      specdec::error);
  c.params[1].top_p = 1.5;
  CHECK_THROWS_AS(
      specdec::verify_tree_from_logits(specdec::exec::seq, specdec::target_only, logits, c.params, c.streams, out.view()),
      specdec::error);
}
