//! \file tests/integrations/llama_cpp/two_token_law.hpp
//! \brief Test support for the law tests on llama.cpp: the exact law of the first two generated
//! tokens from a per-context next-token row, the pairs many requests emit, and the chi-squared test of
//! observed pairs against the law.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/stats/chi_squared.hpp"

namespace specdec_test::llama {

//! Counts or probabilities of the first two generated tokens (x1, x2).
template <class T>
using two_token_cells = std::map<std::pair<specdec::token_id, specdec::token_id>, T>;

//! The law of (x1, x2) after `prompt` when each token follows `row(context)` given its prefix.
inline two_token_cells<double> two_token_law(
    const std::vector<specdec::token_id>& prompt,
    const std::function<std::vector<double>(const std::vector<specdec::token_id>&)>& row) {
  two_token_cells<double> law;
  const auto p1 = row(prompt);
  for (std::size_t x1 = 0; x1 < p1.size(); ++x1) {
    if (p1[x1] == 0.0) continue;
    std::vector<specdec::token_id> context = prompt;
    context.push_back(static_cast<specdec::token_id>(x1));
    const auto p2 = row(context);
    for (std::size_t x2 = 0; x2 < p2.size(); ++x2)
      if (p2[x2] > 0.0) law[{static_cast<specdec::token_id>(x1), static_cast<specdec::token_id>(x2)}] = p1[x1] * p2[x2];
  }
  return law;
}

//! Chi-squared goodness of fit of the observed pairs `seen` against `law`; pairs outside the law's
//! support go to a cell of probability 0, where any count fails the test.
inline specdec::stats::gof_result two_token_gof(const two_token_cells<std::uint64_t>& seen, const two_token_cells<double>& law) {
  std::vector<std::uint64_t> observed;
  std::vector<double> expected;
  for (const auto& [cell, p] : law) {
    observed.push_back(seen.contains(cell) ? seen.at(cell) : 0);
    expected.push_back(p);
  }
  std::uint64_t outside = 0;
  for (const auto& [cell, n] : seen)
    if (!law.contains(cell)) outside += n;
  observed.push_back(outside);
  expected.push_back(0.0);
  return specdec::stats::chi_squared_gof(observed, expected);
}

//! The first two tokens of `samples` requests, request i being `make(i)`, decoded `chunk` at a time by
//! `decode` (which returns each request's tokens, in order).
//! \pre every request emits at least two tokens (a Catch2 REQUIRE).
inline two_token_cells<std::uint64_t> count_first_two(
    std::size_t samples, std::size_t chunk, const std::function<specdec::request_options(std::uint32_t)>& make,
    const std::function<std::vector<std::vector<specdec::token_id>>(std::vector<specdec::request_options>)>& decode) {
  two_token_cells<std::uint64_t> seen;
  for (std::size_t first = 0; first < samples; first += chunk) {
    std::vector<specdec::request_options> requests;
    for (std::size_t i = first; i < std::min(samples, first + chunk); ++i)
      requests.push_back(make(static_cast<std::uint32_t>(i)));
    for (const auto& tokens : decode(std::move(requests))) {
      REQUIRE(tokens.size() >= 2);
      ++seen[{tokens[0], tokens[1]}];
    }
  }
  return seen;
}

}  // namespace specdec_test::llama
