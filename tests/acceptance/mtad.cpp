// SPECDEC_TEST_LABELS: statistical
//
// MTAD verification (acceptance/mtad.hpp, seed 003 section 3.2, Algorithm 1): the joint test in log
// space, the longest passing prefix, tau = 0 and tau = 1, the token sampled from the plain target row
// after the accepted prefix (chi-squared, with a negative control), finiteness and bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/mtad.hpp"
#include "support/chi_squared.hpp"

namespace {

using specdec::token_id;
constexpr double ninf = -std::numeric_limits<double>::infinity();

// Joint log q of the prefixes of a chain whose per-token draft probabilities are q_tok.
std::vector<double> prefix_logs(const std::vector<double>& per_token) {
  std::vector<double> out;
  double s = 0.0;
  for (const double x : per_token) out.push_back(s += std::log(x));
  return out;
}

// Target rows [n + 1][V] where the drafted token of row i has probability p_tok[i] and the rest of
// the mass is spread evenly; the last row is `last`.
std::vector<double> rows_with(const std::vector<token_id>& drafts, const std::vector<double>& p_tok, std::size_t V,
                              const std::vector<double>& last) {
  std::vector<double> rows;
  for (std::size_t i = 0; i < drafts.size(); ++i)
    for (std::size_t v = 0; v < V; ++v)
      rows.push_back(v == static_cast<std::size_t>(drafts[i]) ? p_tok[i] : (1.0 - p_tok[i]) / double(V - 1));
  rows.insert(rows.end(), last.begin(), last.end());
  return rows;
}

std::vector<std::uint64_t> sampled_tokens(const specdec::mtad_rule& rule, const std::vector<token_id>& drafts,
                                          const std::vector<double>& log_q, const std::vector<double>& rows, std::size_t V,
                                          std::size_t expect_accepted, std::uint64_t seed, std::uint64_t n) {
  std::vector<std::uint64_t> counts(V, 0);
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto r = specdec::mtad_verify(specdec::exec::seq, rule, drafts, log_q, rows, V,
                                        specdec::random::request_stream{seed, static_cast<std::uint32_t>(i), 0});
    REQUIRE(static_cast<std::size_t>(r.num_accepted) == expect_accepted);
    REQUIRE(r.tokens.size() == expect_accepted + 1);
    ++counts[static_cast<std::size_t>(r.tokens.back())];
  }
  return counts;
}

}  // namespace

TEST_CASE("mtad_rule tests min(1, p/q) > tau in log space", "[mtad][rule]") {
  const specdec::mtad_rule half(0.5);
  CHECK(half.tau() == 0.5);
  CHECK(half.log_tau() == Approx(std::log(0.5)));
  CHECK(half.passes(std::log(0.3), std::log(0.5)));         // ratio 0.6 > 0.5
  CHECK_FALSE(half.passes(std::log(0.2), std::log(0.5)));   // ratio 0.4
  CHECK_FALSE(half.passes(std::log(0.25), std::log(0.5)));  // ratio exactly 0.5: strict test
  CHECK(half.passes(std::log(0.9), std::log(0.1)));         // p > q: min(1, .) = 1
  // Magnitudes far beyond double's range in linear space: only the difference matters.
  CHECK(half.passes(-1.0e6, -1.0e6 - 0.1));
  CHECK(half.passes(-1.0e6, -1.0e6 + 0.5));
  CHECK_FALSE(half.passes(-1.0e6, -1.0e6 + 0.8));
  CHECK_FALSE(half.passes(ninf, -3.0));
  CHECK_FALSE(half.passes(-3.0, ninf));

  const specdec::mtad_rule zero(0.0), one(1.0);
  CHECK(zero.passes(-1.0e300, -1.0));  // tau = 0: anything with p > 0
  CHECK_FALSE(zero.passes(ninf, -1.0));
  CHECK_FALSE(one.passes(0.0, -10.0));  // tau = 1: nothing
  CHECK_FALSE(one.passes(-1.0, -1.0));
}

TEST_CASE("the accepted length is the longest passing prefix, not the first failure", "[mtad][rule]") {
  const specdec::mtad_rule rule(0.5);
  // Prefix 1: p/q = 0.2/0.6 = 0.33 fails; prefix 2: (0.2 * 0.9) / (0.6 * 0.2) = 1.5 passes;
  // prefix 3: 1.5 * 0.1 / 0.5 = 0.3 fails. Longest passing prefix: 2 (Algorithm 1 with eta <- i);
  // a chain reading that stops at the first failure would accept 0.
  const auto lp = prefix_logs({0.2, 0.9, 0.1}), lq = prefix_logs({0.6, 0.2, 0.5});
  CHECK(specdec::mtad_accepted_length(rule, lp, lq) == 2);
  CHECK(specdec::mtad_accepted_length(rule, std::vector<double>{}, std::vector<double>{}) == 0);
  CHECK_THROWS_AS(specdec::mtad_accepted_length(rule, lp, std::vector<double>{0.0}), specdec::error);

  // Brute force on random prefixes: the result passes, and no longer prefix does (eq. (13)).
  std::uint64_t state = 99;
  const auto next = [&] { return double((state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 11) * 0x1.0p-53; };
  for (int trial = 0; trial < 2000; ++trial) {
    const specdec::mtad_rule r(next());
    std::vector<double> p, q;
    for (int i = 0; i < 1 + trial % 8; ++i) {
      p.push_back(0.01 + next());
      q.push_back(0.01 + next());
    }
    const auto a = prefix_logs(p), b = prefix_logs(q);
    const std::size_t j = specdec::mtad_accepted_length(r, a, b);
    if (j > 0) CHECK(std::min(0.0, a[j - 1] - b[j - 1]) > r.log_tau());
    for (std::size_t k = j + 1; k <= a.size(); ++k) CHECK_FALSE(std::min(1.0, std::exp(a[k - 1] - b[k - 1])) > r.tau());
  }
}

TEST_CASE("mtad_verify with tau = 1 emits one token sampled from the first target row", "[mtad][statistical]") {
  const std::size_t V = 5;
  const std::vector<token_id> drafts{2, 0, 4};
  const std::vector<double> row0{0.05, 0.4, 0.25, 0.2, 0.1}, last{0.6, 0.1, 0.1, 0.1, 0.1};
  auto rows = rows_with(drafts, {0.9, 0.9, 0.9}, V, last);
  std::copy(row0.begin(), row0.end(), rows.begin());
  const auto log_q = prefix_logs({0.3, 0.3, 0.3});  // p >> q: every prefix would pass any tau < 1
  const std::uint64_t seed = 31337, n = 100000;
  const auto counts = sampled_tokens(specdec::mtad_rule(1.0), drafts, log_q, rows, V, 0, seed, n);
  const auto g = specdec_test::chi_squared_gof(counts, row0);
  const auto control = specdec_test::chi_squared_gof(counts, std::span<const double>(rows).subspan(V, V));  // the wrong row
  std::cout << "mtad_verify tau = 1 (seed " << seed << "): " << g << "\n  negative control (row 1): " << control << "\n";
  CHECK(g.p_value > specdec_test::gof_alpha);
  CHECK(control.p_value < specdec_test::gof_alpha);
}

TEST_CASE("mtad_verify samples the plain target row after the accepted prefix", "[mtad][statistical]") {
  const std::size_t V = 4;
  const std::vector<token_id> drafts{1, 3};
  const std::vector<double> last{0.1, 0.2, 0.3, 0.4};
  // Position 0 has p = 0.3 > q = 0.2, position 1 p = 0.5 > q = 0.4: tau = 0.5 accepts both and the
  // token comes from the bonus row, without any residual.
  const auto rows = rows_with(drafts, {0.3, 0.5}, V, last);
  const std::uint64_t seed = 4242, n = 100000;
  const auto counts = sampled_tokens(specdec::mtad_rule(0.5), drafts, prefix_logs({0.2, 0.4}), rows, V, 2, seed, n);
  const auto g = specdec_test::chi_squared_gof(counts, last);
  // Negative control: the residual norm(max(0, p - q)) of standard SD would be a different law.
  const std::vector<double> uniform(V, 0.25);
  const auto control = specdec_test::chi_squared_gof(counts, uniform);
  std::cout << "mtad_verify bonus row (seed " << seed << "): " << g << "\n  negative control (uniform): " << control << "\n";
  CHECK(g.p_value > specdec_test::gof_alpha);
  CHECK(control.p_value < specdec_test::gof_alpha);
}

TEST_CASE("tau = 0 accepts every draft token with p > 0", "[mtad]") {
  const std::size_t V = 3;
  const std::vector<token_id> drafts{0, 1, 2, 0, 1};
  const auto log_q = prefix_logs({0.9, 0.9, 0.9, 0.9, 0.9});
  const specdec::mtad_rule zero(0.0);
  const specdec::random::request_stream s{1, 0, 0};
  // Tiny but positive target probabilities: all accepted.
  auto r = specdec::mtad_verify(specdec::exec::seq, zero, drafts, log_q,
                                rows_with(drafts, {1e-30, 1e-20, 1e-10, 1e-30, 1e-5}, V, {1, 0, 0}), V, s);
  CHECK(r.num_accepted == 5);
  CHECK(r.tokens == std::vector<token_id>{0, 1, 2, 0, 1, 0});
  // p = 0 at position 3: the prefixes up to 3 pass, none after.
  r = specdec::mtad_verify(specdec::exec::seq, zero, drafts, log_q, rows_with(drafts, {0.5, 0.5, 0.5, 0.0, 0.5}, V, {1, 0, 0}), V,
                           s);
  CHECK(r.num_accepted == 3);
  CHECK(r.tokens.size() == 4);
  CHECK(specdec::is_valid(r.status));
  // tau > 0 with the same tiny probabilities rejects them.
  r = specdec::mtad_verify(specdec::exec::seq, specdec::mtad_rule(1e-9), drafts, log_q,
                           rows_with(drafts, {1e-30, 1e-20, 1e-10, 1e-30, 1e-5}, V, {1, 0, 0}), V, s);
  CHECK(r.num_accepted == 0);
}

TEST_CASE("mtad_verify stays exact in log space for long drafts and tiny probabilities", "[mtad][numerics]") {
  // 3000 drafts, each with p = 1e-30 and q = 1e-30 * 1.0001 (float rows: 1e-40 is subnormal but positive):
  // p(x_{1:j}) and q(x_{1:j}) underflow to 0 in linear space, the log ratio is -1e-4 j.
  const std::size_t V = 2, n = 3000;
  std::vector<token_id> drafts(n, 1);
  std::vector<double> rows_d, log_q;
  std::vector<float> rows_f;
  for (std::size_t i = 0; i < n; ++i) {
    rows_d.insert(rows_d.end(), {1.0 - 1e-30, 1e-30});
    rows_f.insert(rows_f.end(), {1.0f, 1e-40f});
    log_q.push_back(double(i + 1) * std::log(1e-30 * 1.0001));
  }
  rows_d.insert(rows_d.end(), {0.5, 0.5});
  rows_f.insert(rows_f.end(), {0.5f, 0.5f});
  // tau = 0.9: prefixes pass while 1e-4 j < -log 0.9 = 0.10536, i.e. j <= 1053.
  const specdec::mtad_rule rule(0.9);
  const auto r = specdec::mtad_verify(specdec::exec::seq, rule, drafts, log_q, rows_d, V, specdec::random::request_stream{});
  CHECK(r.num_accepted == 1053);
  CHECK(specdec::is_valid(r.status));
  // Float rows with subnormal probabilities: log p = j log(1e-40f) is finite; with log q equal to it, all pass.
  std::vector<double> log_q_f(n);
  for (std::size_t i = 0; i < n; ++i) log_q_f[i] = double(i + 1) * std::log(double(1e-40f));
  const auto f =
      specdec::mtad_verify(specdec::exec::seq, rule, std::span<const token_id>(drafts), std::span<const double>(log_q_f),
                           std::span<const float>(rows_f), V, specdec::random::request_stream{});
  CHECK(f.num_accepted == static_cast<std::int32_t>(n));
  CHECK(f.tokens.size() == n + 1);
}

TEST_CASE("mtad_verify handles bad input without emitting a bad token", "[mtad][errors]") {
  const std::size_t V = 3;
  const std::vector<token_id> drafts{0, 1};
  const auto log_q = prefix_logs({0.5, 0.5});
  const auto rows = rows_with(drafts, {0.6, 0.6}, V, {0.2, 0.3, 0.5});
  const specdec::mtad_rule rule(0.5);
  const specdec::random::request_stream s{2, 0, 0};

  CHECK_THROWS_AS(specdec::mtad_rule(-0.1), specdec::error);
  CHECK_THROWS_AS(specdec::mtad_rule(1.5), specdec::error);
  CHECK_THROWS_AS(specdec::mtad_rule(std::numeric_limits<double>::quiet_NaN()), specdec::error);
  // Shapes.
  CHECK_THROWS_AS(specdec::mtad_verify(specdec::exec::seq, rule, drafts, prefix_logs({0.5}), rows, V, s), specdec::error);
  CHECK_THROWS_AS(
      specdec::mtad_verify(specdec::exec::seq, rule, drafts, log_q, std::vector<double>(rows.begin(), rows.end() - 1), V, s),
      specdec::error);
  CHECK_THROWS_AS(specdec::mtad_verify(specdec::exec::seq, rule, drafts,
                                       std::vector<double>{-1.0, std::numeric_limits<double>::quiet_NaN()}, rows, V, s),
                  specdec::error);
  // A draft id outside [0, V): nothing is emitted.
  auto r = specdec::mtad_verify(specdec::exec::seq, rule, std::vector<token_id>{0, 3}, log_q, rows, V, s);
  CHECK(r.tokens.empty());
  CHECK(specdec::has_flag(r.status, specdec::verify_status::bad_draft_token));
  r = specdec::mtad_verify(specdec::exec::seq, rule, std::vector<token_id>{-1, 0}, log_q, rows, V, s);
  CHECK(r.tokens.empty());
  // log q = -inf: that prefix fails and is flagged; the earlier one still passes.
  r = specdec::mtad_verify(specdec::exec::seq, rule, drafts, std::vector<double>{std::log(0.5), ninf}, rows, V, s);
  CHECK(r.num_accepted == 1);
  CHECK(r.tokens.size() == 2);
  CHECK(specdec::has_flag(r.status, specdec::verify_status::draft_prob_zero));
  CHECK(specdec::is_valid(r.status));
  // A NaN target entry at position 1: prefix 1 may pass, nothing is sampled, the request is invalid.
  auto bad = rows;
  bad[V + 1] = std::numeric_limits<double>::quiet_NaN();
  r = specdec::mtad_verify(specdec::exec::seq, rule, drafts, log_q, bad, V, s);
  CHECK(r.num_accepted == 1);
  CHECK(r.tokens == std::vector<token_id>{0});
  CHECK(specdec::has_flag(r.status, specdec::verify_status::invalid_row));
  // A sampling row without mass: the accepted drafts only, flagged invalid.
  auto empty_last = rows;
  std::fill(empty_last.end() - 3, empty_last.end(), 0.0);
  r = specdec::mtad_verify(specdec::exec::seq, rule, drafts, log_q, empty_last, V, s);
  CHECK(r.num_accepted == 2);
  CHECK(r.tokens == drafts);
  CHECK_FALSE(specdec::is_valid(r.status));
  // No drafts: one token from the only row.
  r = specdec::mtad_verify(specdec::exec::seq, rule, std::vector<token_id>{}, std::vector<double>{},
                           std::vector<double>{0.0, 1.0, 0.0}, V, s);
  CHECK(r.tokens == std::vector<token_id>{1});
}
