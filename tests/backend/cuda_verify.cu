// GPU chain verification (backend/cuda/verify.cuh) against the seq oracle: the same tokens, accepted
// counts and status flags for the same streams, for every rule, float and double, packed and padded
// layouts, V around the 2048-entry tile and up to 128256, with spoiled requests (NaN rows, q(x) = 0,
// ids out of range, all-zero q rows); the workspace overload; batch-composition invariance; the
// exact target distribution on the GPU path (chi-squared, with a negative control that must fail);
// and a garbage fuzz in which no token outside [-1, V) may appear; the fused verification from logits,
// with temperatures and with top-k / top-p / min-p (against seq, and bit for bit against
// backend::cuda::warp_logits followed by verify). Exits 77 without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/acceptance/verify.hpp"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/stream.hpp"
#include "support/batch_builder.hpp"
#include "support/chi_squared.hpp"
#include "support/device_array.cuh"
#include "support/random_requests.hpp"
#include "support/same_outputs.hpp"

namespace {

using specdec::token_id;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::stream_address;
using specdec::test::device_array;

//! Device copies of a verification's output buffers.
struct device_outputs {
  device_array<token_id> tokens;
  device_array<std::int32_t> accepted;
  device_array<specdec::verify_status> status;
  explicit device_outputs(const specdec_test::owned_outputs& host)
      : tokens(host.tokens), accepted(host.num_accepted), status(host.status) {}
  specdec::chain_outputs view() const { return {tokens.span(), accepted.span(), status.span()}; }
  void download_into(specdec_test::owned_outputs& host) const {
    host.tokens = tokens.download();
    host.num_accepted = accepted.download();
    host.status = status.download();
  }
};

//! Runs specdec::verify(exec::cuda, ...) and brings the outputs back; with `workspace`, through the
//! caller-owned workspace overload.
template <class Rule, class T>
specdec_test::owned_outputs run_cuda(const Rule& rule, const specdec_test::owned_batch<T>& host,
                                     const specdec::verify_options& options = {}, bool workspace = false) {
  const specdec::test::device_chain_batch<T> batch(host.view());
  specdec_test::owned_outputs out(host);
  const device_outputs dev(out);
  const specdec::chain_outputs view = dev.view();
  if (workspace) {
    device_array<std::byte> buffer(specdec::verify_workspace_bytes(specdec::exec::cuda, rule, batch.view, options));
    specdec::verify(specdec::exec::cuda, rule, batch.view, host.stream_span(), view, buffer.span(), options);
  } else {
    specdec::verify(specdec::exec::cuda, rule, batch.view, host.stream_span(), view, options);
  }
  dev.download_into(out);
  return out;
}

template <class Rule, class T>
specdec_test::owned_outputs run_seq(const Rule& rule, const specdec_test::owned_batch<T>& host,
                                    const specdec::verify_options& options = {}) {
  specdec_test::owned_outputs out(host);
  specdec::verify(specdec::exec::seq, rule, host.view(), host.stream_span(), out.view(), options);
  return out;
}

}  // namespace

TEST_CASE("cuda verify gives seq's tokens, counts and flags for every rule", "[cuda][verify]") {
  philox_stream s(stream_address{0xC0DA, 1, 0, 0, purpose::user});
  std::size_t requests = 0, flagged = 0, rejected = 0;
  const auto run = [&](auto tag, std::size_t V, std::size_t B, bool packed, bool check_norm) {
    using T = decltype(tag);
    const std::size_t max_n = 4;
    const auto reqs = specdec_test::make_requests<T>(s, B, max_n, V, 0.3, static_cast<std::uint32_t>(requests));
    const auto batch = specdec_test::build_batch(reqs, V, packed, max_n);
    const specdec::verify_options options{check_norm, 1e-3};
    specdec_test::for_each_rule([&](const auto& rule, const char* name) {
      const auto a = run_seq(rule, batch, options);
      const auto b = run_cuda(rule, batch, options);
      CAPTURE(name, V, B, packed, check_norm);
      REQUIRE(a.tokens == b.tokens);
      REQUIRE(a.num_accepted == b.num_accepted);
      REQUIRE(a.status == b.status);
      for (std::size_t r = 0; r < reqs.size(); ++r) {
        flagged += a.status[r] != specdec::verify_status::ok;
        rejected += static_cast<std::size_t>(a.num_accepted[r]) < reqs[r].drafts.size();
      }
      requests += reqs.size();
    });
  };
  for (const std::size_t V : {std::size_t{5}, std::size_t{37}, std::size_t{2048}, std::size_t{2049}, std::size_t{32000}})
    for (const bool packed : {true, false}) {
      run(float{}, V, 12, packed, false);
      run(double{}, V, 12, packed, V == 37);
    }
  run(float{}, 128256, 6, true, false);
  INFO(requests << " requests identical (" << rejected << " with a rejection, " << flagged << " flagged)");
  CHECK(flagged > 0);
  CHECK(rejected > 0);
}

TEST_CASE("cuda verify gives seq's tokens at the GPU benchmarks' shapes", "[cuda][verify][shapes]") {
  // B 1/16/64, gamma 4/8, V 32000/128256: with tests/backend/simd_cases.hpp's case of the same name
  // (the same inputs: same generator and seed), seq, simd and cuda give the same tokens. Tagged
  // [shapes]: the sanitizer runs leave it out (its batches are up to 0.5 GB).
  std::size_t requests = 0, rejected = 0;
  specdec_test::for_each_bench_shape_batch([&](const specdec_test::bench_shape& sh, const auto& batch) {
    specdec_test::for_each_rule([&](const auto& rule, const char* name) {
      const auto a = run_seq(rule, batch);
      const auto b = run_cuda(rule, batch);
      CAPTURE(name, sh.B, sh.gamma, sh.V);
      specdec_test::require_same_outputs(a, b);
      for (const auto n : a.num_accepted) rejected += static_cast<std::size_t>(n) < sh.gamma;
      requests += sh.B;
    });
  });
  INFO(requests << " requests identical, " << rejected << " with a rejection");
  CHECK(rejected > 0);
}

TEST_CASE("cuda verify: the workspace overload, a small workspace, an empty batch", "[cuda][verify]") {
  philox_stream s(stream_address{0xC0DA, 2, 0, 0, purpose::user});
  const std::size_t V = 4097;
  const auto reqs = specdec_test::make_requests<float>(s, 9, 5, V, 0.0, 0);
  const auto batch = specdec_test::build_batch(reqs, V, true);
  specdec_test::for_each_rule([&](const auto& rule, const char* name) {
    CAPTURE(name);
    const auto a = run_cuda(rule, batch, {}, false);
    const auto b = run_cuda(rule, batch, {}, true);
    CHECK(a.tokens == b.tokens);
    CHECK(a.num_accepted == b.num_accepted);
    CHECK(a.status == b.status);
  });

  const specdec::test::device_chain_batch<float> d(batch.view());
  specdec_test::owned_outputs out(batch);
  const device_outputs dev(out);
  const std::size_t need = specdec::verify_workspace_bytes(specdec::exec::cuda, specdec::strict, d.view);
  REQUIRE(need > 0);
  device_array<std::byte> small(need - 1);
  CHECK_THROWS_AS(specdec::verify(specdec::exec::cuda, specdec::strict, d.view, batch.stream_span(), dev.view(), small.span()),
                  specdec::error);

  const std::vector<std::int32_t> none;
  const specdec::chain_batch<float> empty{specdec::ragged_layout::packed(none), V, {}, {}, {}};
  CHECK_NOTHROW(specdec::verify(specdec::exec::cuda, specdec::strict, empty, {}, specdec::chain_outputs{}));
}

TEST_CASE("cuda verify: a request's tokens do not depend on the rest of its batch", "[cuda][verify][seeds]") {
  philox_stream s(stream_address{0xC0DA, 3, 0, 0, purpose::user});
  const std::size_t V = 3000;
  const auto reqs = specdec_test::make_requests<float>(s, 16, 5, V, 0.0, 0);
  const auto whole = run_cuda(specdec::strict, specdec_test::build_batch(reqs, V, true));
  // Every other request, in reverse order, in a batch of their own.
  std::vector<specdec_test::request_data<float>> part;
  for (std::size_t b = reqs.size(); b-- > 0;)
    if (b % 2 == 1) part.push_back(reqs[b]);
  const auto alone = run_cuda(specdec::strict, specdec_test::build_batch(part, V, true));
  for (std::size_t k = 0; k < part.size(); ++k) {
    const std::size_t b = reqs.size() - 1 - 2 * k;
    CAPTURE(b);
    CHECK(alone.emitted(k) == whole.emitted(b));
  }
}

TEST_CASE("cuda verify emits exactly the target distribution (strict), and a lossy rule fails the test",
          "[cuda][verify][distribution]") {
  // gamma = 2, context-free rows: every emitted token is distributed as p. N requests share the rows
  // and differ in their request id (their stream); the drafts are sampled from q on the host.
  const std::size_t V = 5, n = 2, N = 200000;
  const std::vector<double> p{0.05, 0.30, 0.10, 0.40, 0.15}, q{0.25, 0.10, 0.30, 0.05, 0.30};
  std::vector<specdec_test::request_data<double>> reqs(N);
  for (std::size_t b = 0; b < N; ++b) {
    auto& r = reqs[b];
    r.stream = specdec::random::request_stream{20261122, static_cast<std::uint32_t>(b), 0};
    for (std::size_t i = 0; i < n; ++i) {
      r.drafts.push_back(specdec::sample_categorical(std::span<const double>(q),
                                                     r.stream.open(static_cast<std::uint32_t>(i), purpose::draft).uniform())
                             .token);
      r.draft_rows.push_back(q);
      r.target_rows.push_back(p);
    }
    r.target_rows.push_back(p);
  }
  const auto batch = specdec_test::build_batch(reqs, V, true);
  const auto counts_of = [&](const specdec_test::owned_outputs& out) {
    std::vector<std::uint64_t> first(V, 0), second(V, 0);
    for (std::size_t b = 0; b < N; ++b) {
      const auto row = out.row(b);
      REQUIRE(specdec::in_vocabulary(row[0], V));
      ++first[static_cast<std::size_t>(row[0])];
      if (row[1] != specdec::no_token) ++second[static_cast<std::size_t>(row[1])];
    }
    return std::pair{first, second};
  };
  const auto [first, second] = counts_of(run_cuda(specdec::strict, batch));
  const auto g1 = specdec_test::chi_squared_gof(first, p), g2 = specdec_test::chi_squared_gof(second, p);
  INFO("seed 20261122, strict, first token: " << g1 << "; second: " << g2);
  CHECK(g1.p_value > 1e-6);
  CHECK(g2.p_value > 1e-6);
  // Negative control: lenience 0.5 is lossy (acceptance/lenient.hpp); its first token is not p.
  const auto [lfirst, lsecond] = counts_of(run_cuda(specdec::lenient_rule{0.5}, batch));
  const auto bad = specdec_test::chi_squared_gof(lfirst, p);
  INFO("negative control, lenient 0.5 vs p: " << bad);
  CHECK(bad.p_value < 1e-6);
}

TEST_CASE("cuda verify on garbage never emits a token outside [0, V)", "[cuda][verify][bad_input]") {
  philox_stream s(stream_address{0xC0DA, 5, 0, 0, purpose::user});
  const std::size_t V = 2100, B = 24, max_n = 4;
  for (int round = 0; round < 20; ++round) {
    auto reqs = specdec_test::make_requests<float>(s, B, max_n, V, 1.0, static_cast<std::uint32_t>(round));
    for (auto& r : reqs)  // and more damage: random bad values anywhere, ids far out of range
      for (auto& row : r.target_rows)
        if (s.uniform() < 0.3)
          specdec_test::spoil(row, static_cast<std::size_t>(s.uniform() * V), static_cast<int>(s.uniform() * 4));
    const auto batch = specdec_test::build_batch(reqs, V, round % 2 == 0, max_n);
    specdec_test::for_each_rule([&](const auto& rule, const char*) {
      const auto out = run_cuda(rule, batch);
      for (const token_id t : out.tokens) REQUIRE((t == specdec::no_token || specdec::in_vocabulary(t, V)));
      CHECK(out.tokens == run_seq(rule, batch).tokens);
    });
  }
}

namespace {
//! A logit row: Laplace(0, 3) entries.
template <class T>
std::vector<T> random_logits(philox_stream& s, std::size_t V) {
  std::vector<T> row(V);
  for (auto& x : row) x = static_cast<T>(3.0 * (s.exponential() - s.exponential()));
  return row;
}

//! Requests with logit rows, one per entry of `draft_params`; request b's drafts are sampled from its
//! seq-warped draft row (draft_params[b]).
template <class T>
std::vector<specdec_test::request_data<T>> logit_requests(philox_stream& s, const std::vector<specdec::warp_params>& draft_params,
                                                          std::size_t max_n, std::size_t V, std::uint32_t step) {
  const std::size_t B = draft_params.size();
  std::vector<specdec_test::request_data<T>> reqs(B);
  for (std::size_t b = 0; b < B; ++b) {
    auto& r = reqs[b];
    r.stream = specdec::random::request_stream{0xF05ED, static_cast<std::uint32_t>(b), step};
    const auto n = static_cast<std::size_t>(s.uniform() * static_cast<double>(max_n + 1));
    for (std::size_t i = 0; i < n; ++i) {
      auto q = random_logits<T>(s, V);
      std::vector<T> warped(V);
      (void)specdec::warp_logits(std::span<const T>(q), std::span<T>(warped), draft_params[b]);
      r.drafts.push_back(specdec::sample_categorical(std::span<const T>(warped), s.uniform()).token);
      r.draft_rows.push_back(std::move(q));
      r.target_rows.push_back(random_logits<T>(s, V));
    }
    r.target_rows.push_back(random_logits<T>(s, V));
    if (s.uniform() < 0.1) r.target_rows[0][0] = std::numeric_limits<T>::quiet_NaN();  // an unusable row
  }
  return reqs;
}

//! Runs specdec::verify_from_logits(exec::cuda, ...) (the fused path) and brings the outputs back.
template <class Rule, class T>
specdec_test::owned_outputs run_fused(const Rule& rule, const specdec_test::owned_batch<T>& host,
                                      const std::vector<specdec::warp_params>& target_params,
                                      const std::vector<specdec::warp_params>& draft_params) {
  const specdec::test::device_chain_batch<T> d(host.view());
  specdec_test::owned_outputs out(host);
  const device_outputs dev(out);
  specdec::verify_from_logits(specdec::exec::cuda, rule, d.view, target_params, draft_params, host.stream_span(), dev.view());
  dev.download_into(out);
  return out;
}
}  // namespace

TEST_CASE("cuda verify_from_logits (fused) agrees with seq", "[cuda][verify][logits]") {
  // The fused path's probabilities are softmax.cuh's, within its stated bound of seq's (16 ulp of
  // float); tokens can differ only where a uniform or a cumulative sum lands within that bound of a
  // boundary, so at least 99% of the requests must match seq exactly (measured rate printed).
  philox_stream s(stream_address{0xC0DA, 6, 0, 0, purpose::user});
  std::size_t requests = 0, identical = 0, invalid = 0;
  const auto run = [&](auto tag, std::size_t V, double t, bool packed) {
    using T = decltype(tag);
    const std::size_t max_n = 4;
    const std::vector<specdec::warp_params> params(16, specdec::warp_params{t});
    const auto reqs = logit_requests<T>(s, params, max_n, V, static_cast<std::uint32_t>(requests));
    const auto batch = specdec_test::build_batch(reqs, V, packed, max_n);
    specdec_test::for_each_rule([&](const auto& rule, const char* name) {
      specdec_test::owned_outputs a(batch);
      specdec::verify_from_logits(specdec::exec::seq, rule, batch.view(), params, {}, batch.stream_span(), a.view());
      const auto b = run_fused(rule, batch, params, {});
      CAPTURE(name, V, t, packed);
      for (std::size_t r = 0; r < reqs.size(); ++r) {
        const bool same = a.row(r) == b.row(r) && a.num_accepted[r] == b.num_accepted[r] && a.status[r] == b.status[r];
        identical += same;
        ++requests;
        // Unusable rows are decided exactly (no rounding): the flags always agree.
        CHECK(specdec::is_valid(a.status[r]) == specdec::is_valid(b.status[r]));
        invalid += !specdec::is_valid(a.status[r]);
        for (const token_id x : b.row(r)) REQUIRE((x == specdec::no_token || specdec::in_vocabulary(x, V)));
      }
    });
  };
  for (const std::size_t V : {std::size_t{37}, std::size_t{2049}, std::size_t{32000}})
    for (const double t : {0.0, 0.7, 1.0, 1.6}) {
      run(float{}, V, t, V != 2049);
      run(double{}, V, t, V == 2049);
    }
  const double rate = static_cast<double>(identical) / static_cast<double>(requests);
  INFO(identical << " of " << requests << " requests identical to seq (" << rate << "), " << invalid << " invalid");
  CHECK(rate >= 0.99);
  CHECK(invalid > 0);
}

namespace {
//! Parameters drawn from the grid of the filter test: T in {0, 0.7, 1, 1.6}, top-k in {0, 5, 50},
//! top-p in {1, 0.9, 0.5}, min-p in {0, 0.05}.
specdec::warp_params grid_params(philox_stream& s) {
  static constexpr double temperatures[] = {0.0, 0.7, 1.0, 1.6}, top_ps[] = {1.0, 0.9, 0.5}, min_ps[] = {0.0, 0.05};
  static constexpr int top_ks[] = {0, 5, 50};
  const auto pick = [&s](std::size_t n) { return static_cast<std::size_t>(s.uniform() * static_cast<double>(n)); };
  return specdec::warp_params{temperatures[pick(4)], top_ks[pick(3)], top_ps[pick(3)], min_ps[pick(2)]};
}

//! The fused path gives a row warp_logits' float probabilities exactly when it is greedy (the same
//! one-hot row) or filtered (T > 0 and top-k < V, top-p or min-p on); unfiltered rows keep the plain
//! softmax, without warp_logits' renormalisation.
bool same_rows_as_warp_logits(const specdec::warp_params& w, std::size_t V) {
  return w.temperature == 0.0 || (w.top_k > 0 && static_cast<std::size_t>(w.top_k) < V) || w.top_p < 1.0 || w.min_p > 0.0;
}

//! backend::cuda::warp_logits into device probability rows (one warp_params per row; padding rows
//! T = 1, no filter), then specdec::verify(exec::cuda, ...) on them: the unfused GPU path.
template <class Rule, class T>
specdec_test::owned_outputs run_warp_then_verify(const Rule& rule, const specdec_test::owned_batch<T>& host,
                                                 const std::vector<specdec::warp_params>& target_params,
                                                 const std::vector<specdec::warp_params>& draft_params) {
  const auto view = host.view();
  const std::size_t V = host.vocab, nt = view.layout.num_target_rows(), nd = view.layout.num_draft_rows();
  std::vector<specdec::warp_params> target_rows(nt), draft_rows(nd);
  for (std::size_t b = 0; b < host.batch_size(); ++b) {
    for (std::size_t i = 0; i <= view.layout.num_drafts(b); ++i) target_rows[view.layout.target_row(b, i)] = target_params[b];
    for (std::size_t i = 0; i < view.layout.num_drafts(b); ++i) draft_rows[view.layout.draft_row(b, i)] = draft_params[b];
  }
  const device_array<T> target_logits(host.target_rows), draft_logits(host.draft_rows);
  device_array<float> target_probs(nt * V), draft_probs(nd * V);
  device_array<specdec::row_status> target_status(nt), draft_status(nd);
  specdec::backend::cuda::warp_logits(cudaStream_t{}, target_logits.crows(V), target_probs.rows(V), target_rows,
                                      target_status.span());
  specdec::backend::cuda::warp_logits(cudaStream_t{}, draft_logits.crows(V), draft_probs.rows(V), draft_rows,
                                      draft_status.span());
  const device_array<token_id> drafts(host.draft_tokens);
  const specdec::chain_batch<float> probs{view.layout, V, drafts.cspan(), draft_probs.cspan(), target_probs.cspan()};
  specdec_test::owned_outputs out(host);
  const device_outputs dev(out);
  specdec::verify(specdec::exec::cuda, rule, probs, host.stream_span(), dev.view());
  dev.download_into(out);
  return out;
}
}  // namespace

TEST_CASE("cuda verify_from_logits (fused) with top-k, top-p and min-p: warp_logits + verify bit for bit, seq on >= 99%",
          "[cuda][verify][logits][filters]") {
  // Request b draws its target and draft parameters from the grid (the draft's are the target's half
  // of the time), so every batch mixes filtered, unfiltered and greedy rows. Expected:
  //  - against backend::cuda::warp_logits + verify: the same probabilities for every row that is read
  //    when each is greedy or filtered (`same_rows_as_warp_logits`; rows of requests with a NaN logit
  //    differ in kind: unusable there, zero rows here), hence the same tokens, counts and flags;
  //  - against seq: the softmax bound of softmax.cuh and the top-p boundary bound of filter.cuh (plus
  //    float rounding of double logits' filtered rows), so tokens differ only where a uniform, a
  //    cumulative sum or a filter boundary falls within them: >= 99% of requests identical (printed).
  philox_stream s(stream_address{0xC0DA, 7, 0, 0, purpose::user});
  std::size_t requests = 0, identical = 0, compared = 0, filtered = 0, invalid = 0;
  const auto run = [&](auto tag, std::size_t V, bool packed) {
    using T = decltype(tag);
    const std::size_t B = 16, max_n = 4;
    std::vector<specdec::warp_params> target_params(B), draft_params(B);
    for (std::size_t b = 0; b < B; ++b) {
      target_params[b] = grid_params(s);
      draft_params[b] = s.uniform() < 0.5 ? target_params[b] : grid_params(s);
    }
    const auto reqs = logit_requests<T>(s, draft_params, max_n, V, static_cast<std::uint32_t>(requests));
    const auto batch = specdec_test::build_batch(reqs, V, packed, max_n);
    specdec_test::for_each_rule([&](const auto& rule, const char* name) {
      constexpr bool reads_q = specdec::reads_draft_distribution<std::decay_t<decltype(rule)>>;
      specdec_test::owned_outputs a(batch);
      specdec::verify_from_logits(specdec::exec::seq, rule, batch.view(), target_params, draft_params, batch.stream_span(),
                                  a.view());
      const auto b = run_fused(rule, batch, target_params, draft_params);
      const auto c = run_warp_then_verify(rule, batch, target_params, draft_params);
      CAPTURE(name, V, packed, sizeof(T));
      for (std::size_t r = 0; r < B; ++r) {
        CAPTURE(r, target_params[r].temperature, target_params[r].top_k, target_params[r].top_p, target_params[r].min_p,
                draft_params[r].temperature, draft_params[r].top_k, draft_params[r].top_p, draft_params[r].min_p);
        for (const token_id x : b.row(r)) REQUIRE((x == specdec::no_token || specdec::in_vocabulary(x, V)));
        // Unusable rows are decided exactly (no rounding): the flags always agree with seq.
        CHECK(specdec::is_valid(a.status[r]) == specdec::is_valid(b.status[r]));
        const bool same = a.row(r) == b.row(r) && a.num_accepted[r] == b.num_accepted[r] && a.status[r] == b.status[r];
        identical += same;
        ++requests;
        invalid += !specdec::is_valid(a.status[r]);
        const bool target_filtered = same_rows_as_warp_logits(target_params[r], V) && target_params[r].temperature > 0.0;
        filtered += target_filtered;
        const bool nan_row = std::isnan(static_cast<double>(reqs[r].target_rows[0][0]));
        if (!nan_row && same_rows_as_warp_logits(target_params[r], V) &&
            (!reads_q || same_rows_as_warp_logits(draft_params[r], V))) {
          ++compared;
          CHECK(b.row(r) == c.row(r));
          CHECK(b.num_accepted[r] == c.num_accepted[r]);
          CHECK(b.status[r] == c.status[r]);
        }
      }
    });
  };
  for (const std::size_t V : {std::size_t{37}, std::size_t{2049}, std::size_t{32000}})
    for (int round = 0; round < 2; ++round) {
      run(float{}, V, (V != 2049) == (round == 0));
      run(double{}, V, (V == 2049) == (round == 0));
    }
  const double rate = static_cast<double>(identical) / static_cast<double>(requests);
  INFO(identical << " of " << requests << " requests identical to seq (" << rate << "); " << compared
                 << " compared bit for bit with warp_logits + verify; " << filtered << " with filtered target rows; " << invalid
                 << " invalid");
  CHECK(rate >= 0.99);
  CHECK(compared > 0);
  CHECK(filtered > 0);
  CHECK(invalid > 0);
}
