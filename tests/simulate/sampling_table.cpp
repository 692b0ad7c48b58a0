// The sampling tables of the token simulators (simulate/detail/sampling_table.hpp) against the
// library's sampler: the lookup returns sample_by_weights' token for random uniforms, at u = 0 and
// the largest uniform, around every tile end, and on both sides of every token boundary (found by
// bisection over the 2^53 uniforms with sample_by_weights as the oracle), for rows with one and
// several tiles, zero runs, tiny weights, no mass and NaN. Then the per-draw steps of the SD and
// SPRINTER token simulators run over table_rows (what the cuda backend's kernels run) give the
// same counts as the CPU simulators (host_rows), draw for draw.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "simulate/check.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/simulate/detail/sampling_table.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/sprinter.hpp"

namespace sim = specdec::simulate;
namespace sd_detail = specdec::simulate::detail;
using specdec::token_id;

namespace {

constexpr std::uint64_t seed = 0x7AB1E5;

// The uniform k * 2^-53 (k < 2^53).
double grid(std::uint64_t k) { return static_cast<double>(k) * 0x1.0p-53; }

token_id oracle(const std::vector<double>& w, double u) {
  return specdec::sample_categorical(std::span<const double>(w), u).token;
}

// The smallest k with oracle(grid(k)) >= v (the token is non-decreasing in u), or 2^53.
std::uint64_t boundary(const std::vector<double>& w, token_id v) {
  std::uint64_t lo = 0, hi = std::uint64_t{1} << 53;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (oracle(w, grid(mid)) >= v)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Checks the table of `w` against the oracle at `u`; returns the number of mismatches (0 or 1).
int mismatch(const std::vector<double>& w, const sd_detail::sampling_table_view& t, double u) {
  const token_id expected = oracle(w, u), got = t.sample(u);
  if (expected == got) return 0;
  std::cout << "  mismatch: V = " << w.size() << ", u = " << u << ": sample_by_weights " << expected << ", table " << got << "\n";
  return 1;
}

// Whether u takes the table through rule 5's fallback (no strip of the chosen tile crosses u Z).
bool rule5_fallback(const sd_detail::sampling_table_view& t, double u) {
  const double goal = u * t.total;
  const std::size_t tile = sd_detail::first_above(t.tile_end, 0, t.tiles, goal);
  if (tile == t.tiles) return false;
  const std::size_t k0 = tile * sd_detail::strips_per_tile;
  const std::size_t k1 = std::min(t.strips, k0 + sd_detail::strips_per_tile);
  return sd_detail::first_above(t.strip_end, k0, k1, goal) == k1;
}

// Exp(1) weights with zero runs (whole strips and a whole tile when the row is long enough) and a
// few tiny (subnormal) weights.
std::vector<double> make_row(std::size_t v, std::uint32_t id) {
  specdec::random::philox_stream s({seed, id, 0, 0, specdec::random::purpose::user});
  std::vector<double> w(v);
  for (std::size_t i = 0; i < v; ++i) {
    w[i] = s.exponential() * (s.uniform() < 0.5 ? 1e-3 : 1.0);  // mixed magnitudes: more rounding
    if (s.uniform() < 0.2) w[i] = 0.0;
    if (s.uniform() < 0.01) w[i] = 1e-310;
  }
  for (std::size_t i = 64; i < 192 && i < v; ++i) w[i] = 0.0;     // two zero strips
  for (std::size_t i = 4096; i < 6144 && i < v; ++i) w[i] = 0.0;  // a zero tile
  if (v > 1) w[v - 1] = 0.0;                                      // the row ends with a zero
  return w;
}

}  // namespace

TEST_CASE("sampling_table: the lookup returns sample_by_weights' token", "[simulate][sampling_table]") {
  std::cout << "sampling_table vs sample_by_weights: seed " << seed << "\n";
  std::uint32_t id = 0;
  std::size_t fallbacks = 0;
  for (const std::size_t v : {1u, 2u, 7u, 64u, 65u, 2047u, 2048u, 2049u, 5000u, 9000u}) {
    const std::vector<double> w = make_row(v, id++);
    const auto row = [&w](std::size_t i) { return w[i]; };
    const sd_detail::sampling_table table(v, row);
    const sd_detail::sampling_table_view t = table.view();
    const specdec::sample_result whole = specdec::sample_by_weights(v, row, 0.5);
    CHECK(t.status == whole.status);
    CHECK(t.total == whole.mass);
    int bad = 0;
    // Random uniforms, the extremes, and the tile ends.
    specdec::random::philox_stream s({seed, id, 1, 0, specdec::random::purpose::user});
    for (int k = 0; k < 2000; ++k) bad += mismatch(w, t, s.uniform());
    bad += mismatch(w, t, 0.0);
    bad += mismatch(w, t, grid((std::uint64_t{1} << 53) - 1));
    for (std::size_t tile = 0; tile < t.tiles; ++tile) {
      const auto k = static_cast<std::uint64_t>(std::ldexp(t.tile_end[tile] / t.total, 53));
      for (std::uint64_t d = 0; d < 81; ++d) {
        if (k + d < 40 || k + d - 40 >= (std::uint64_t{1} << 53)) continue;
        bad += mismatch(w, t, grid(k + d - 40));
        fallbacks += rule5_fallback(t, grid(k + d - 40));
      }
    }
    // Both sides of token boundaries (every one in short rows, a spread of them in long rows).
    const std::size_t step = v <= 300 ? 1 : v / 150;
    std::size_t boundaries = 0;
    for (std::size_t x = 1; x < v; x += step) {
      if (!(w[x] > 0.0)) continue;
      const std::uint64_t k = boundary(w, static_cast<token_id>(x));
      ++boundaries;
      for (std::uint64_t d = 0; d < 3; ++d)
        if (k + d >= 1 && k + d - 1 < (std::uint64_t{1} << 53)) bad += mismatch(w, t, grid(k + d - 1));
    }
    std::cout << "  V = " << v << " (" << t.tiles << " tiles): " << boundaries << " token boundaries checked\n";
    CHECK(bad == 0);
  }
  std::cout << "  uniforms that took rule 5's fallback (no strip crosses): " << fallbacks << "\n";
  CHECK(fallbacks > 0);
}

TEST_CASE("sampling_table: rows without mass or with NaN report the oracle's status", "[simulate][sampling_table]") {
  const std::vector<double> zero(3000, 0.0);
  const sd_detail::sampling_table z(zero.size(), [&](std::size_t i) { return zero[i]; });
  CHECK(z.view().status == specdec::row_status::no_mass);
  CHECK(z.view().sample(0.3) == specdec::no_token);
  std::vector<double> nan_row(100, 0.01);
  nan_row[50] = std::numeric_limits<double>::quiet_NaN();
  const sd_detail::sampling_table n(nan_row.size(), [&](std::size_t i) { return nan_row[i]; });
  CHECK(n.view().status == specdec::row_status::not_finite);
  CHECK(n.view().sample(0.3) == specdec::no_token);
}

namespace {

using specdec_sim_test::random_row_pair;
using specdec_sim_test::row_pair;
using specdec_sim_test::same_tally;

// sd::token_process against the same loop over table_rows (what the cuda kernels run).
template <class Rule>
void check_sd_equal(const Rule& rule, const row_pair& pr, std::size_t gamma, const sim::run_options& o) {
  const std::span<const double> p(pr.p), q(pr.q);
  const auto cpu = sim::sd::token_process(rule, p, q, gamma, o);
  const sd_detail::pair_tables tables = sd_detail::make_pair_tables(rule, p, q);
  const auto tab = sd_detail::run_sd_token_process(sd_detail::host_table_rows(rule, p, q, tables), p.size(), gamma, o);
  CHECK(same_tally(cpu.chain.accepted, tab.chain.accepted));
  CHECK(same_tally(cpu.first_token, tab.first_token));
  CHECK(same_tally(cpu.bonus_token, tab.bonus_token));
  CHECK(cpu.chain.draft_tokens == tab.chain.draft_tokens);
  CHECK(cpu.first_accepted == tab.first_accepted);
  CHECK(cpu.fallbacks == tab.fallbacks);
}

}  // namespace

TEST_CASE("token simulators: the per-draw steps over sampling tables give the CPU simulators' counts",
          "[simulate][sampling_table]") {
  std::cout << "token simulators over tables: seed " << seed << "\n";
  const row_pair small = random_row_pair(9, seed, 1), large = random_row_pair(4500, seed, 2);
  check_sd_equal(specdec::strict, small, 4, {seed, 1, 0, 20000});
  check_sd_equal(specdec::lenient_rule(1.7), small, 3, {seed, 2, 5, 20000});
  check_sd_equal(specdec::strict, large, 3, {seed, 3, 0, 3000});
  // p == q: the residual has no mass, every correction falls back to p.
  check_sd_equal(specdec::lenient_rule(0.5), row_pair{small.p, small.p}, 2, {seed, 4, 0, 5000});

  const std::span<const double> p(small.p), q(small.q);
  const sim::run_options o{seed, 5, 11, 20000};
  const auto cpu = sim::sprinter::token_process(p, q, 0.8, 0.3, o);
  const sd_detail::pair_tables tables = sd_detail::make_pair_tables(specdec::strict, p, q);
  const auto tab =
      sd_detail::run_sprinter_token_process(sd_detail::host_table_rows(specdec::strict, p, q, tables), p.size(), 0.8, 0.3, o);
  CHECK(same_tally(cpu.token, tab.token));
  CHECK(cpu.kept == tab.kept);
  CHECK(cpu.verifier_accepted == tab.verifier_accepted);
  CHECK(cpu.fallbacks == tab.fallbacks);
}
