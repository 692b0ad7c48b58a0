// Compile-time checks of the theory module's constexpr closed forms (built as part of `all`, never
// run; see tests/CMakeLists.txt). Values are dyadic so that the constant-evaluation paths (Horner
// sums, binary exponentiation) are exact and == comparisons are safe.
#include <array>
#include <limits>
#include <span>

#include <specdec/theory/theory.hpp>

namespace {
namespace sd = specdec::theory::sd;
namespace sprinter = specdec::theory::sprinter;
namespace sv = specdec::theory::sv;
namespace mtad = specdec::theory::mtad;
namespace detail = specdec::theory::detail;

constexpr bool close(double a, double b) { return a - b < 1e-12 && b - a < 1e-12; }

// ---- detail: integer powers, geometric sums, truncated-geometric variance ------------------------
static_assert(detail::ipow(0.5, 0) == 1.0);
static_assert(detail::ipow(0.0, 0) == 1.0);
static_assert(detail::ipow(0.5, 10) == 1.0 / 1024.0);
static_assert(detail::ipow(3.0, 5) == 243.0);
static_assert(detail::ipow(1.0, 1'000'000'000'000ull) == 1.0);
static_assert(detail::pow_int(2.0, 62) == 4611686018427387904.0);
static_assert(detail::geometric_sum(0.5, 3) == 1.875);
static_assert(detail::geometric_sum(1.0, 7) == 8.0);
static_assert(detail::geometric_sum(0.0, 7) == 1.0);
static_assert(detail::geometric_sum(0.3, -1) == 0.0);
static_assert(detail::truncated_geometric_variance(0.5, 1) == 0.25);
static_assert(detail::truncated_geometric_variance(0.5, 0) == 0.0);
static_assert(detail::truncated_geometric_variance(1.0, 9) == 0.0);
static_assert(detail::is_probability(0.0) && detail::is_probability(1.0) && !detail::is_probability(1.5));
static_assert(!detail::is_probability(-0.25));
static_assert(!detail::is_finite(std::numeric_limits<double>::infinity()));
static_assert(!detail::is_finite(std::numeric_limits<double>::quiet_NaN()));
static_assert(detail::is_finite(std::numeric_limits<double>::max()));

// ---- sd: Leviathan eq. (1), Thm 3.8, Thm 3.11, the capped-geometric law --------------------------
static_assert(sd::expected_tokens(0.5, 3) == 1.875);  // 1 + 1/2 + 1/4 + 1/8
static_assert(sd::expected_tokens(0.0, 10) == 1.0);
static_assert(sd::expected_tokens(1.0, 10) == 11.0);
static_assert(sd::expected_tokens(0.75, 0) == 1.0);
static_assert(sd::speedup(0.5, 3, 0.0) == 1.875);
static_assert(sd::speedup(0.5, 2, 0.5) == 1.75 / 2.0);
static_assert(sd::speedup(0.9, 0, 0.25) == 1.0);
static_assert(sd::operations_factor(0.5, 2, 0.5) == 4.0 / 1.75);
static_assert(sd::operations_factor(0.5, 0, 0.5) == 1.0);
static_assert(sd::prob_tokens(1, 0.5, 2) == 0.5);
static_assert(sd::prob_tokens(2, 0.5, 2) == 0.25);
static_assert(sd::prob_tokens(3, 0.5, 2) == 0.25);
static_assert(sd::prob_tokens(4, 0.5, 2) == 0.0);
static_assert(sd::prob_tokens(0, 0.5, 2) == 0.0);
static_assert(sd::prob_tokens(1, 0.0, 0) == 1.0);    // gamma = 0: the target's token only
static_assert(sd::tokens_variance(0.5, 1) == 0.25);  // Bernoulli(1/2)
static_assert(sd::tokens_variance(0.0, 5) == 0.0);
static_assert(sd::tokens_variance(1.0, 5) == 0.0);
static_assert(sd::optimal_gamma(0.0, 0.5) == 0);
static_assert(sd::optimal_gamma(1.0, 0.0, 16) == 16);
static_assert(sd::optimal_gamma(0.5, 0.5) == 0);  // alpha <= c: do not speculate
static_assert(sd::optimal_gamma(0.5, 0.0, 0) == 0);
static_assert(sd::optimal_gamma(0.8, 0.05) >= 1);

// Position-dependent acceptance reduces to the constant case.
constexpr std::array<double, 3> half3{0.5, 0.5, 0.5};
constexpr std::array<double, 3> mixed{0.5, 0.25, 1.0};
static_assert(sd::expected_tokens(std::span<const double>(half3)) == sd::expected_tokens(0.5, 3));
static_assert(sd::expected_tokens(std::span<const double>(mixed)) == 1.0 + 0.5 + 0.125 + 0.125);
static_assert(sd::expected_tokens(std::span<const double>()) == 1.0);
static_assert(sd::tokens_variance(std::span<const double>(half3)) == sd::tokens_variance(0.5, 3));
static_assert(sd::speedup(std::span<const double>(half3), 0.5) == sd::speedup(0.5, 3, 0.5));
static_assert(sd::operations_factor(std::span<const double>(half3), 0.5) == sd::operations_factor(0.5, 3, 0.5));
// A constant latency profile with t_draft = c t_target gives Thm 3.8.
constexpr auto flat = [](int) { return 2.0; };
static_assert(sd::speedup(0.5, 3, 1.0, flat) == sd::speedup(0.5, 3, 0.5));
static_assert(sd::speedup(std::span<const double>(half3), 1.0, flat) == sd::speedup(0.5, 3, 0.5));
constexpr std::array<double, 4> profile{2.0, 2.0, 2.0, 2.0};
static_assert(sd::speedup(std::span<const double>(half3), 1.0, profile) == sd::speedup(0.5, 3, 0.5));
static_assert(specdec::theory::LatencyProfile<decltype(flat)>);
static_assert(specdec::theory::LatencyProfile<std::array<double, 4>>);
static_assert(specdec::theory::LatencyProfile<std::span<const double>>);
static_assert(!specdec::theory::LatencyProfile<double>);
static_assert(!specdec::theory::LatencyProfile<std::array<float, 4>>);

// Acceptance rate = 1 - TV for two rows.
constexpr std::array<double, 4> p4{0.5, 0.25, 0.25, 0.0};
constexpr std::array<double, 4> q4{0.25, 0.25, 0.25, 0.25};
static_assert(sd::acceptance_rate(std::span<const double>(p4), std::span<const double>(q4)) == 0.75);
static_assert(sd::acceptance_rate(std::span<const double>(p4), std::span<const double>(p4)) == 1.0);

// ---- SPRINTER: Thm 3.1, Thm 3.3, eqs. (3)-(6), Thm A.4 ---------------------------------------------
static_assert(sprinter::total_variation(0.5, 0.25) == 0.125);
static_assert(sprinter::total_variation(0.0, 0.75) == 0.0);
static_assert(sprinter::acceptance_rate(0.0, 0.25) == 0.75);  // Remark A.5: SD's beta
static_assert(sprinter::acceptance_rate(1.0, 0.25) == 1.0);
static_assert(sprinter::prob_tokens(0, 0.5, 0.5, 2) == 0.5);
static_assert(sprinter::prob_tokens(1, 0.5, 0.5, 2) == 0.25);
static_assert(sprinter::prob_tokens(2, 0.5, 0.5, 2) == 0.125);
static_assert(sprinter::prob_tokens(3, 0.5, 0.5, 2) == 0.0625);
static_assert(sprinter::prob_tokens(5, 1.0, 0.0, 5) == 1.0);  // perfect verifier stops exactly at r
static_assert(sprinter::prob_tokens(4, 1.0, 0.0, 5) == 0.0);
// eq. (3): (a - a^r)/(1 - a) + a^r/(1 - f) with a = f = 1/2, r = 2: 1/2 + 1/2 = 1.
static_assert(sprinter::expected_tokens(0.5, 0.5, 2) == 1.0);
static_assert(sprinter::expected_tokens(1.0, 0.0, 5) == 5.0);
static_assert(sprinter::expected_tokens(1.0, 0.5, 5) == 6.0);
static_assert(sprinter::expected_tokens(0.5, 0.5, 0) == 1.0);                      // r = 0: geometric mean f/(1 - f)
static_assert(sprinter::expected_tokens(0.0, 1.0, 3) == 0.0);                      // eta_fp = 1 but the verifier stops at once
static_assert(sprinter::expected_stopping_time(0.5, 0.5, 2, 0.25) == 0.25 * 2.0);  // t_d (E[N] + 1)
static_assert(sprinter::expected_stopping_time(1.0, 0.0, 5, 0.5) == 3.0);
static_assert(sprinter::tokens_variance(0.5, 0.0, 1) == 0.25);
static_assert(sprinter::tokens_variance(1.0, 0.0, 7) == 0.0);
static_assert(sprinter::flops_sd(4, 1.0, 8.0) == 36.0);
static_assert(sprinter::flops_sprinter(4, 1.0, 0.25, 8.0) == 13.0);
static_assert(sprinter::flops_sprinter_catch_up(4, 1.0, 0.25, 8.0) == 37.0);
static_assert(sprinter::flops_sprinter_catch_up(1, 1.0, 0.25, 8.0) == sprinter::flops_sprinter(1, 1.0, 0.25, 8.0));

constexpr std::array<double, 4> mix = [] {
  std::array<double, 4> out{};
  sprinter::token_distribution(std::span<const double>(p4), std::span<const double>(q4), 0.5, std::span<double>(out));
  return out;
}();
static_assert(mix[0] == 0.375 && mix[1] == 0.25 && mix[2] == 0.25 && mix[3] == 0.125);

// ---- SV: App. D eqs. (3)-(6) --------------------------------------------------------------------
constexpr std::array<double, 3> a3{0.5, 0.5, 0.25};
static_assert(sv::prob_accepted(0, std::span<const double>(a3), 3) == 0.5);
static_assert(sv::prob_accepted(1, std::span<const double>(a3), 3) == 0.25);
static_assert(sv::prob_accepted(2, std::span<const double>(a3), 3) == 0.1875);
static_assert(sv::prob_accepted(3, std::span<const double>(a3), 3) == 0.0625);
static_assert(sv::prob_accepted(4, std::span<const double>(a3), 3) == 0.0);
static_assert(sv::prob_accepted(0, std::span<const double>(a3), 0) == 1.0);
static_assert(sv::expected_accepted(std::span<const double>(a3), 3) == 0.25 + 2 * 0.1875 + 3 * 0.0625);
static_assert(sv::expected_accepted(std::span<const double>(a3), 0) == 0.0);
static_assert(sv::expected_accepted(std::span<const double>(a3), 3) == sd::expected_tokens(std::span<const double>(a3)) - 1.0);
static_assert(sv::variance_accepted(std::span<const double>(a3), 1) == 0.25);
static_assert(sv::goodput(3.0, 2.0) == 1.5);
static_assert(sv::estimated_goodput(std::span<const double>(a3), 2, flat) == 0.75 / 2.0);
static_assert(sv::estimated_goodput(std::span<const double>(a3), 0, flat) == 0.0);
constexpr std::array<double, 4> curve = [] {
  std::array<double, 4> out{};
  sv::estimated_goodput(std::span<const double>(a3), profile, std::span<double>(out));
  return out;
}();
static_assert(curve[0] == 0.0 && curve[1] == 0.25 && curve[2] == 0.375 && curve[3] == 0.40625);

// ---- MTAD: energy model eq. (9) ------------------------------------------------------------------
static_assert(mtad::energy(100.0, 0.5, 300.0, 2.0) == 650.0);
static_assert(mtad::energy(0.0, 0.0, 0.0, 0.0) == 0.0);

static_assert(close(sd::expected_tokens(0.3, 4), 1.0 + 0.3 + 0.09 + 0.027 + 0.0081));

}  // namespace
