// Checks shared by the tests/simulate/*.cpp executables: "estimate within k standard errors of a
// closed form", the standard error of a sample variance, and a cell-by-cell comparison of a
// simulated histogram with an exact law. Each prints what it compares, so a failure shows the
// numbers (and every test prints its seeds).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "specdec/random/stream.hpp"
#include "specdec/simulate/tally.hpp"

namespace specdec_sim_test {

using specdec::simulate::count_tally;
using specdec::simulate::estimate;

//! |e.mean - expected| <= k se + slack (1 + |expected|). The default slack 1e-12 covers rounding;
//! a rare-event case (an outcome of probability ~1e-9 that 10^5 draws never show, so se = 0)
//! passes its own, stated slack.
inline bool within(const std::string& what, const estimate& e, double expected, double k = 5.0, double slack = 1e-12) {
  std::cout << "  " << what << ": simulated " << e.mean << " +- " << e.std_error << " (" << e.count << " draws), closed form "
            << expected << ", z = " << e.z_score(expected) << "\n";
  return std::abs(e.mean - expected) <= k * e.std_error + slack * (1.0 + std::abs(expected));
}

//! The sample variance of a histogram and its standard error sqrt((m4 - m2^2) / n), from central
//! moments (long double).
inline estimate variance_of(const count_tally& t) {
  const estimate e = t.summary();
  const auto h = t.histogram();
  long double m2 = 0, m4 = 0;
  const long double n = static_cast<long double>(e.count);
  for (std::size_t v = 0; v < h.size(); ++v) {
    const long double d = static_cast<long double>(v) - e.mean, c = static_cast<long double>(h[v]);
    m2 += c * d * d;
    m4 += c * d * d * d * d;
  }
  m2 /= n;
  m4 /= n;
  const long double var_se2 = (m4 - m2 * m2) / n;
  return {e.count, e.variance, 0.0, static_cast<double>(var_se2 > 0 ? std::sqrt(var_se2) : 0.0L)};
}

//! Compares a histogram with an exact law over the values 0..cells-1 (the law's mass beyond
//! `cells` is its tail): every cell whose expected count n law(v) is >= 20 must satisfy
//! |count - n law(v)| <= k sqrt(n law(v) (1 - law(v))); the other cells and the tail are pooled
//! into one group, held to the same bound plus k counts (a Poisson-safe slack for small expected
//! counts). A cell of law exactly 0 must be empty, and no draw may fall outside when the tail is 0.
template <class Law>
bool law_matches(const std::string& what, const count_tally& t, std::size_t cells, Law&& law, double k = 5.0) {
  const double n = static_cast<double>(t.count());
  bool ok = true;
  double worst = 0.0, pooled_law = 0.0, pooled_count = 0.0, total_law = 0.0, inside = 0.0;
  const auto bound = [&](double count, double pv, double extra) {
    const double expected = n * pv, sd = std::sqrt(expected * std::max(0.0, 1.0 - pv));
    if (sd > 0) worst = std::max(worst, std::abs(count - expected) / sd);
    return std::abs(count - expected) <= k * sd + extra + 1e-9 * n;
  };
  for (std::size_t v = 0; v < cells; ++v) {
    const double pv = law(v), c = static_cast<double>(t.count_of(v));
    total_law += pv;
    inside += c;
    if (pv == 0.0 && c > 0) {
      std::cout << "    " << what << ": cell " << v << " has law 0 but " << c << " draws\n";
      ok = false;
    }
    if (n * pv >= 20.0) {
      if (!bound(c, pv, 0.0)) {
        std::cout << "    " << what << ": cell " << v << " frequency " << c / n << " vs law " << pv << "\n";
        ok = false;
      }
    } else {
      pooled_law += pv;
      pooled_count += c;
    }
  }
  const double tail_law = std::max(0.0, 1.0 - total_law);
  pooled_law += tail_law;
  pooled_count += n - inside;
  if (tail_law == 0.0 && n - inside > 0) {
    std::cout << "    " << what << ": " << (n - inside) << " draws outside the " << cells << " cells\n";
    ok = false;
  }
  if (!bound(pooled_count, std::min(1.0, pooled_law), k)) {
    std::cout << "    " << what << ": pooled small cells " << pooled_count << " draws vs " << n * pooled_law << " expected\n";
    ok = false;
  }
  std::cout << "  " << what << ": " << cells << " cells, " << static_cast<std::uint64_t>(n) << " draws, worst |z| = " << worst
            << "\n";
  return ok;
}

//! A target row p and a draft row q.
struct row_pair {
  std::vector<double> p, q;
};

//! The (p, q) pairs the token-level tests use: a generic pair with zeros on both sides, a skewed
//! draft, disjoint supports (TV = 1: nothing is acceptable) and p = q (everything is).
inline std::vector<row_pair> row_pairs() {
  return {
      {{0.5, 0.2, 0.15, 0.1, 0.05, 0.0}, {0.1, 0.3, 0.3, 0.1, 0.0, 0.2}},
      {{0.25, 0.25, 0.25, 0.25}, {0.7, 0.1, 0.1, 0.1}},
      {{1.0, 0.0, 0.0}, {0.0, 0.5, 0.5}},
      {{0.3, 0.3, 0.4}, {0.3, 0.3, 0.4}},
  };
}

//! A random pair over V tokens for the table and GPU comparisons: normalised Exp(1) weights from
//! the stream (seed, id, purpose user), with p(v) = 0 for v % 5 == 1 and q(v) = 0 for v % 7 == 2
//! (unacceptable tokens and vanishing residual entries).
inline row_pair random_row_pair(std::size_t v, std::uint64_t seed, std::uint32_t id) {
  specdec::random::philox_stream s({seed, id, 2, 0, specdec::random::purpose::user});
  row_pair r{std::vector<double>(v), std::vector<double>(v)};
  double sp = 0.0, sq = 0.0;
  for (std::size_t i = 0; i < v; ++i) {
    sp += (r.p[i] = i % 5 == 1 ? 0.0 : s.exponential());
    sq += (r.q[i] = i % 7 == 2 ? 0.0 : s.exponential());
  }
  for (double& x : r.p) x /= sp;
  for (double& x : r.q) x /= sq;
  return r;
}

//! True when two tallies hold the same draws: histogram sizes and counts, overflow count and summary
//! (what "identical counts" means for two simulators on the same streams); prints a difference.
inline bool same_tally(const count_tally& a, const count_tally& b) {
  bool ok = a.histogram().size() == b.histogram().size() && a.count() == b.count() && a.overflow_count() == b.overflow_count();
  for (std::size_t v = 0; ok && v < a.histogram().size(); ++v) ok = a.histogram()[v] == b.histogram()[v];
  ok = ok && a.summary().mean == b.summary().mean && a.summary().variance == b.summary().variance;
  if (!ok)
    std::cout << "  tallies differ: histogram sizes " << a.histogram().size() << " / " << b.histogram().size() << ", draws "
              << a.count() << " / " << b.count() << ", means " << a.summary().mean << " / " << b.summary().mean << "\n";
  return ok;
}

}  // namespace specdec_sim_test
