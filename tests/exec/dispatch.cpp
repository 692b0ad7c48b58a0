// exec::dispatch (exec/dispatch.hpp): every dispatched row algorithm gives, through its policy entry,
// exactly what the backend's own kernel gives (seq: the reference functions; simd: backend::simd's
// kernels on the policy's architecture); the batched entries equal their rows one by one; a backend
// without an implementation runs seq's where the tag allows it; row_batch checks its shape.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "specdec/core/row_batch.hpp"
#include "specdec/distributions/with_policy.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/with_policy.hpp"

namespace {

namespace exec = specdec::exec;
using specdec::row_status;

std::vector<float> random_logits(std::size_t V, std::uint64_t seed) {
  specdec::random::philox_stream s(specdec::random::stream_address{seed, 3, 0, 0, specdec::random::purpose::user});
  std::vector<float> logits(V);
  for (auto& x : logits) x = static_cast<float>(8.0 * s.uniform() - 4.0);
  return logits;
}

std::vector<float> probabilities(const std::vector<float>& logits) {
  std::vector<float> p(logits.size());
  REQUIRE(specdec::softmax(std::span<const float>(logits), std::span<float>(p)) == row_status::ok);
  return p;
}

// `Kernels` is how the backend under test computes each algorithm on its own; the entry point must
// give exactly that.
template <class Policy, class Kernels>
void check_entries(const Policy& policy, const Kernels& k) {
  for (const std::size_t V : {std::size_t{5}, std::size_t{333}, std::size_t{4096}}) {
    const auto x = random_logits(V, V), y = random_logits(V, V + 1);
    const auto p = probabilities(x), q = probabilities(y);
    const std::span<const float> xs(x), ps(p), qs(q);
    std::vector<float> a(V), b(V);
    CHECK(specdec::softmax(policy, xs, std::span<float>(a), 0.7) == k.softmax(xs, std::span<float>(b), 0.7));
    CHECK(a == b);
    CHECK(specdec::log_softmax(policy, xs, std::span<float>(a), 1.3) == k.log_softmax(xs, std::span<float>(b), 1.3));
    CHECK(a == b);
    CHECK(specdec::log_sum_exp(policy, xs, 0.9) == k.log_sum_exp(xs, 0.9));
    const specdec::warp_params w{.temperature = 0.8, .top_k = 20, .top_p = 0.9};
    CHECK(specdec::warp_logits(policy, xs, std::span<float>(a), w) == k.warp_logits(xs, std::span<float>(b), w));
    CHECK(a == b);
    a = p;
    b = p;
    CHECK(specdec::warp_probs(policy, std::span<float>(a), w) == k.warp_probs(std::span<float>(b), w));
    CHECK(a == b);
    for (const double u : {0.0, 0.31, 0.999}) {
      CHECK(specdec::sample_categorical(policy, ps, u).token == k.sample_categorical(ps, u).token);
      CHECK(specdec::sample_logits(policy, xs, w, u).token == k.sample_logits(xs, w, u).token);
    }
    CHECK(specdec::argmax(policy, xs) == k.argmax(xs));
    std::vector<std::size_t> top_a, top_b;
    specdec::top_w_indices(policy, xs, 4, top_a);
    k.top_w_indices(xs, std::size_t{4}, top_b);
    CHECK(top_a == top_b);
    CHECK(specdec::overlap(policy, ps, qs) == k.overlap(ps, qs));
    CHECK(specdec::total_variation(policy, ps, qs) == k.total_variation(ps, qs));
    CHECK(specdec::entropy(policy, ps) == k.entropy(ps));
    CHECK(specdec::cross_entropy(policy, ps, qs) == k.cross_entropy(ps, qs));
    CHECK(specdec::kl_divergence(policy, ps, qs) == k.kl_divergence(ps, qs));
  }
}

struct seq_kernels {
  // clang-format off
  template <class... A> auto softmax(A&&... a) const { return specdec::softmax(a...); }
  template <class... A> auto log_softmax(A&&... a) const { return specdec::log_softmax(a...); }
  template <class... A> auto log_sum_exp(A&&... a) const { return specdec::log_sum_exp(a...); }
  template <class... A> auto warp_logits(A&&... a) const { return specdec::warp_logits(a...); }
  template <class... A> auto warp_probs(A&&... a) const { return specdec::warp_probs(a...); }
  template <class... A> auto sample_categorical(A&&... a) const { return specdec::sample_categorical(a...); }
  template <class... A> auto sample_logits(A&&... a) const { return specdec::sample_logits(a...); }
  template <class... A> auto argmax(A&&... a) const { return specdec::argmax(a...); }
  template <class... A> void top_w_indices(A&&... a) const { specdec::top_w_indices(a...); }
  template <class... A> auto overlap(A&&... a) const { return specdec::overlap(a...); }
  template <class... A> auto total_variation(A&&... a) const { return specdec::total_variation(a...); }
  template <class... A> auto entropy(A&&... a) const { return specdec::entropy(a...); }
  template <class... A> auto cross_entropy(A&&... a) const { return specdec::cross_entropy(a...); }
  template <class... A> auto kl_divergence(A&&... a) const { return specdec::kl_divergence(a...); }
  // clang-format on
};

#if SPECDEC_ENABLE_SIMD
template <class Arch>
struct simd_kernels {
  // clang-format off
  template <class... A> auto softmax(A&&... a) const { return specdec::backend::simd::softmax<Arch>(a...); }
  template <class... A> auto log_softmax(A&&... a) const { return specdec::backend::simd::log_softmax<Arch>(a...); }
  template <class... A> auto log_sum_exp(A&&... a) const { return specdec::backend::simd::log_sum_exp<Arch>(a...); }
  template <class... A> auto warp_logits(A&&... a) const { return specdec::backend::simd::warp_logits<Arch>(a...); }
  template <class... A> auto warp_probs(A&&... a) const { return specdec::backend::simd::warp_probs<Arch>(a...); }
  template <class... A> auto sample_categorical(A&&... a) const { return specdec::backend::simd::sample_categorical<Arch>(a...); }
  template <class... A> auto sample_logits(A&&... a) const { return specdec::backend::simd::sample_logits<Arch>(a...); }
  template <class... A> auto argmax(A&&... a) const { return specdec::backend::simd::argmax<Arch>(a...); }
  template <class... A> void top_w_indices(A&&... a) const { specdec::backend::simd::top_w_indices<Arch>(a...); }
  template <class... A> auto overlap(A&&... a) const { return specdec::backend::simd::overlap<Arch>(a...); }
  template <class... A> auto total_variation(A&&... a) const { return specdec::backend::simd::total_variation<Arch>(a...); }
  template <class... A> auto entropy(A&&... a) const { return specdec::backend::simd::entropy<Arch>(a...); }
  template <class... A> auto cross_entropy(A&&... a) const { return specdec::backend::simd::cross_entropy<Arch>(a...); }
  template <class... A> auto kl_divergence(A&&... a) const { return specdec::backend::simd::kl_divergence<Arch>(a...); }
  // clang-format on
};
#endif

// The batched entries against the row entries on the same policy.
template <class Policy>
void check_batches(const Policy& policy) {
  const std::size_t V = 257, rows = 4;
  std::vector<float> logits;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = random_logits(V, 40 + r);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  logits[V + 3] = std::numeric_limits<float>::quiet_NaN();  // row 1 is not finite
  const specdec::row_batch<const float> in(logits, V);
  REQUIRE(in.rows() == rows);
  const std::vector<double> temperatures{0.5, 1.0, 1.5, 2.0};
  std::vector<float> out(rows * V), row_out(V);
  std::vector<row_status> statuses(rows);
  std::vector<double> lse(rows);

  specdec::softmax(policy, in, specdec::row_batch<float>(out, V), statuses, temperatures);
  for (std::size_t r = 0; r < rows; ++r) {
    CHECK(statuses[r] == specdec::softmax(policy, in.row(r), std::span<float>(row_out), temperatures[r]));
    CHECK(std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(r * V),
                             out.begin() + static_cast<std::ptrdiff_t>((r + 1) * V)) == row_out);
  }
  CHECK(statuses[1] == row_status::not_finite);
  specdec::log_softmax(policy, in, specdec::row_batch<float>(out, V), statuses);  // no temperatures: all 1
  for (std::size_t r = 0; r < rows; ++r) {
    CHECK(statuses[r] == specdec::log_softmax(policy, in.row(r), std::span<float>(row_out)));
    for (std::size_t v = 0; v < V; ++v) CHECK(std::isnan(out[r * V + v]) == std::isnan(row_out[v]));
  }
  specdec::log_sum_exp(policy, in, std::span<double>(lse), statuses, temperatures);
  for (std::size_t r = 0; r < rows; ++r) {
    const double one = specdec::log_sum_exp(policy, in.row(r), temperatures[r]);
    CHECK((lse[r] == one || (std::isnan(lse[r]) && std::isnan(one))));
    CHECK(statuses[r] == (r == 1 ? row_status::not_finite : row_status::ok));
  }
  const std::vector<specdec::warp_params> params(rows, specdec::warp_params{.temperature = 0.9, .top_k = 30, .min_p = 0.01});
  specdec::warp_logits(policy, in, specdec::row_batch<float>(out, V), params, statuses);
  for (std::size_t r = 0; r < rows; ++r) {
    CHECK(statuses[r] == specdec::warp_logits(policy, in.row(r), std::span<float>(row_out), params[r]));
    if (statuses[r] == row_status::ok)
      CHECK(std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(r * V),
                               out.begin() + static_cast<std::ptrdiff_t>((r + 1) * V)) == row_out);
  }
  // Sampling a batch: row r's uniform is streams[r].open(position, purpose).uniform().
  std::vector<specdec::random::request_stream> streams;
  for (std::size_t r = 0; r < rows; ++r) streams.push_back({.seed = 9, .request = static_cast<std::uint32_t>(r), .step = 2});
  std::vector<float> probs(rows * V);
  specdec::softmax(policy, in, specdec::row_batch<float>(probs, V), statuses);
  const specdec::row_batch<const float> p_rows(probs, V);
  std::vector<specdec::token_id> tokens(rows);
  const specdec::row_sampling at{.position = 5, .what = specdec::random::purpose::draft};
  specdec::sample_categorical(policy, p_rows, streams, tokens, statuses, at);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto one =
        specdec::sample_categorical(policy, p_rows.row(r), streams[r].open(5, specdec::random::purpose::draft).uniform());
    CHECK(tokens[r] == one.token);
    CHECK(statuses[r] == one.status);
  }
  CHECK(statuses[1] == row_status::no_mass);  // softmax zero-filled the NaN row
  const std::vector<specdec::warp_params> filters{{.top_k = 3}, {.top_p = 0.5}, {.min_p = 0.2}, {.top_k = 40, .top_p = 0.9}};
  specdec::sample_filtered(policy, p_rows, filters, streams, tokens, statuses);
  for (std::size_t r = 0; r < rows; ++r) {
    std::vector<float> kept(p_rows.row(r).begin(), p_rows.row(r).end());
    specdec::keep_top_k(std::span<float>(kept), filters[r].top_k);
    specdec::keep_top_p(std::span<float>(kept), filters[r].top_p);
    specdec::keep_min_p(std::span<float>(kept), filters[r].min_p);
    const auto one = specdec::sample_categorical(std::span<const float>(kept),
                                                 streams[r].open(0, specdec::random::purpose::target_sample).uniform());
    CHECK(tokens[r] == one.token);
    if (statuses[r] == row_status::ok) CHECK(kept[static_cast<std::size_t>(tokens[r])] > 0.0f);
  }
  const std::vector<specdec::warp_params> hot(rows, specdec::warp_params{.temperature = 0.5, .top_k = 3});
  CHECK_THROWS_AS(specdec::sample_filtered(policy, p_rows, hot, streams, tokens, statuses), specdec::error);
  CHECK_THROWS_AS(specdec::sample_categorical(policy, p_rows, std::span(streams).first(2), tokens, statuses), specdec::error);

  // Shapes: the output's shape, one status per row, one temperature per row (or none).
  std::vector<float> short_out((rows - 1) * V);
  CHECK_THROWS_AS(specdec::softmax(policy, in, specdec::row_batch<float>(short_out, V), statuses), specdec::error);
  CHECK_THROWS_AS(specdec::softmax(policy, in, specdec::row_batch<float>(out, V), std::span<row_status>(statuses).first(2)),
                  specdec::error);
  CHECK_THROWS_AS(
      specdec::softmax(policy, in, specdec::row_batch<float>(out, V), statuses, std::span<const double>(temperatures).first(3)),
      specdec::error);
  CHECK_THROWS_AS(
      specdec::warp_logits(policy, in, specdec::row_batch<float>(out, V), std::span<const specdec::warp_params>{}, statuses),
      specdec::error);
}

}  // namespace

// A tag registered for seq only: host policies without their own implementation run seq's.
namespace {
struct double_all : specdec::algorithm::tag<true> {};
}  // namespace
template <>
struct specdec::exec::implementation<specdec::exec::backend::seq, double_all> {
  static int run(const sequenced_policy&, int x) { return 2 * x; }
};

TEST_CASE("row_batch: rows of a width, one row, const views, shape errors") {
  std::vector<float> data(12);
  const specdec::row_batch<float> rows(data, 4);
  CHECK(rows.rows() == 3);
  CHECK(rows.width() == 4);
  CHECK(rows.row(2).data() == data.data() + 8);
  const specdec::row_batch<const float> view = rows;  // mutable -> const
  CHECK(view.rows() == 3);
  const specdec::row_batch<float> one{std::span<float>(data)};
  CHECK(one.rows() == 1);
  CHECK(one.width() == 12);
  CHECK(specdec::row_batch<float>().rows() == 0);
  CHECK_THROWS_AS(specdec::row_batch<float>(data, 5), specdec::error);  // 5 does not divide 12
  CHECK_THROWS_AS(specdec::row_batch<float>(data, 0), specdec::error);
  CHECK(specdec::row_batch<float>(std::span<float>{}, 0).rows() == 0);
}

TEST_CASE("exec::dispatch: seq's entries are the reference functions") { check_entries(exec::seq, seq_kernels{}); }

TEST_CASE("exec::dispatch: batched entries equal their rows, and check shapes (seq)") { check_batches(exec::seq); }

TEST_CASE("exec::dispatch: registrations, and seq standing in where a tag allows it") {
  static_assert(exec::implements<exec::backend::seq, specdec::algorithm::verify>);
  static_assert(exec::implements<exec::backend::seq, specdec::algorithm::compute_indicators>);
  static_assert(!exec::implements<exec::backend::seq, specdec::algorithm::verify_workspace_bytes>);  // device only
  static_assert(!exec::implements<exec::backend::seq, specdec::algorithm::softmax_rows>);            // rows one by one
  CHECK(exec::dispatch<double_all>(exec::seq, 21) == 42);
#if SPECDEC_ENABLE_SIMD
  static_assert(!exec::implements<exec::backend::simd, double_all>);
  CHECK(exec::dispatch<double_all>(exec::simd, 21) == 42);  // seq stands in
#endif
}

#if SPECDEC_ENABLE_SIMD
TEST_CASE("exec::dispatch: simd's entries are backend::simd's kernels on the policy's architecture") {
  static_assert(exec::implements<exec::backend::simd, specdec::algorithm::verify>);
  static_assert(exec::implements<exec::backend::simd, specdec::algorithm::verify_tree_from_logits>);
  check_entries(exec::simd, simd_kernels<xsimd::default_arch>{});
#if XSIMD_WITH_SSE2
  check_entries(exec::simd_policy<xsimd::sse2>{}, simd_kernels<xsimd::sse2>{});  // a named architecture
#endif
}

TEST_CASE("exec::dispatch: batched entries equal their rows, and check shapes (simd)") { check_batches(exec::simd); }
#endif
