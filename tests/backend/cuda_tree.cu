// GPU tree verification (backend/cuda/verify_tree.cuh) and block verification
// (backend/cuda/verify_block.cuh) against the seq oracle: the same tokens, paths, accepted counts and
// status flags for the same streams, for every tree rule the cuda backend implements (target_only,
// greedy, sample_and_match, strict / multi-step, recursive_rejection), on random trees of several
// shapes (random, chain, star, ternary, root only; duplicated siblings), V in {7, 3000, 70000}, float
// and double rows, with spoiled requests (NaN, infinite and negative entries, rows without mass,
// unnormalised rows, node tokens outside [0, V)) and with normalisation checks; the workspace
// overloads; and a garbage fuzz in which no token outside [-1, V) and no path entry outside the tree
// may appear. Block verification on chains (packed and padded) likewise. Exits 77 without a GPU.
// Host-side checks of the same code (the walks replayed on the host, workspace sizes, shape errors)
// are in cuda_tree_host.cu.

// seq's verify_one instantiated for `block` has its chain loop after an `if constexpr` return, which
// nvcc reports as unreachable (#128-D) in every CUDA unit that runs seq's block verification.
#pragma nv_diag_suppress 128

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "backend/cuda_tree_cases.hpp"
#include "support/batch_builder.hpp"
#include "support/device_array.cuh"
#include "support/random_requests.hpp"

namespace {

using namespace cuda_tree_test;
using specdec::random::purpose;
using specdec::random::stream_address;
using specdec::test::device_array;

//! Device copies of a tree batch's spans; `view` has the host layout and device spans.
template <class T>
struct device_trees {
  device_array<token_id> tokens;
  device_array<T> draft_rows, target_rows;
  specdec::tree_batch<T> view;
  explicit device_trees(const tree_case<T>& c)
      : tokens(c.tokens), draft_rows(c.draft_rows), target_rows(c.target_rows), view(c.view()) {
    view.tokens = tokens.cspan();
    view.draft_rows = draft_rows.cspan();
    view.target_rows = target_rows.cspan();
  }
};

//! specdec::verify_tree(exec::cuda, ...) on device copies, the outputs brought back; with
//! `workspace`, through the caller-owned workspace overload.
template <class Rule, class T>
tree_result_rows run_cuda(const Rule& rule, const tree_case<T>& c, const specdec::verify_options& options = {},
                          bool workspace = false) {
  const device_trees<T> d(c);
  tree_result_rows host(c.layout.batch_size(), c.width());
  const device_array<token_id> tokens(host.tokens);
  const device_array<std::int32_t> path(host.path), accepted(host.accepted);
  const device_array<verify_status> status(host.status);
  const specdec::tree_outputs out{tokens.span(), path.span(), accepted.span(), status.span()};
  const auto streams = std::span<const request_stream>(c.streams);
  if (workspace) {
    device_array<std::byte> buffer(specdec::verify_tree_workspace_bytes(specdec::exec::cuda, rule, d.view, options));
    specdec::verify_tree(specdec::exec::cuda, rule, d.view, streams, out, buffer.span(), options);
  } else {
    specdec::verify_tree(specdec::exec::cuda, rule, d.view, streams, out, options);
  }
  host.tokens = tokens.download();
  host.path = path.download();
  host.accepted = accepted.download();
  host.status = status.download();
  return host;
}

//! specdec::verify(exec::cuda, block, ...) on device copies.
template <class T>
specdec_test::owned_outputs run_block_cuda(const specdec_test::owned_batch<T>& host, const specdec::verify_options& options,
                                           bool workspace) {
  const specdec::test::device_chain_batch<T> batch(host.view());
  specdec_test::owned_outputs out(host);
  const device_array<token_id> tokens(out.tokens);
  const device_array<std::int32_t> accepted(out.num_accepted);
  const device_array<verify_status> status(out.status);
  const specdec::chain_outputs view{tokens.span(), accepted.span(), status.span()};
  if (workspace) {
    device_array<std::byte> buffer(specdec::verify_workspace_bytes(specdec::exec::cuda, specdec::block, batch.view, options));
    specdec::verify(specdec::exec::cuda, specdec::block, batch.view, host.stream_span(), view, buffer.span(), options);
  } else {
    specdec::verify(specdec::exec::cuda, specdec::block, batch.view, host.stream_span(), view, options);
  }
  out.tokens = tokens.download();
  out.num_accepted = accepted.download();
  out.status = status.download();
  return out;
}

void require_same(const tree_result_rows& a, const tree_result_rows& b) {
  REQUIRE(a.tokens == b.tokens);
  REQUIRE(a.path == b.path);
  REQUIRE(a.accepted == b.accepted);
  REQUIRE(a.status == b.status);
}

//! The output invariants every request must satisfy, whatever its rows held.
template <class T>
void require_well_formed(const tree_case<T>& c, const tree_result_rows& o) {
  const std::size_t width = c.width();
  for (std::size_t b = 0; b < c.layout.batch_size(); ++b) {
    const auto n = static_cast<std::int32_t>(c.layout.num_nodes(b));
    const std::int32_t k = o.accepted[b];
    REQUIRE(k >= 0);
    REQUIRE(static_cast<std::size_t>(k) < width);
    for (std::size_t j = 0; j < width; ++j) {
      const token_id t = o.tokens[b * width + j];
      const std::int32_t v = o.path[b * width + j];
      REQUIRE((t == specdec::no_token || specdec::in_vocabulary(t, c.vocab)));
      REQUIRE((v == specdec::no_node || (v >= 0 && v < n)));
      if (static_cast<std::int32_t>(j) > k) REQUIRE(t == specdec::no_token);
    }
    if (!specdec::is_valid(o.status[b])) REQUIRE(o.tokens[b * width + static_cast<std::size_t>(k)] == specdec::no_token);
  }
}

//! Compares cuda with seq on one batch for every rule; counts what the batch exercised.
struct tally {
  std::size_t batches = 0, flagged = 0, deep = 0, fallback = 0;
};
template <class T>
void compare_all_rules(const tree_case<T>& c, const specdec::verify_options& options, bool workspace, tally& t) {
  for_each_cuda_tree_rule([&](const auto& rule, const char* name) {
    CAPTURE(name, c.vocab, options.check_normalisation, workspace);
    const auto a = run_seq(rule, c, options);
    const auto b = run_cuda(rule, c, options, workspace);
    require_same(a, b);
    require_well_formed(c, b);
    ++t.batches;
    for (std::size_t r = 0; r < a.status.size(); ++r) {
      t.flagged += !specdec::is_valid(a.status[r]);
      t.deep += a.accepted[r] >= 2;
      t.fallback += specdec::has_flag(a.status[r], verify_status::residual_fallback);
    }
  });
}

}  // namespace

TEST_CASE("cuda verify_tree gives seq's tokens, paths, counts and statuses for every rule it implements", "[cuda][tree]") {
  philox_stream s(stream_address{0x7C0D, 1, 0, 0, purpose::user});
  tally t;
  const auto run = [&](auto tag, std::size_t V) {
    using T = decltype(tag);
    for (const shape sh : all_shapes)
      for (int rep = 0; rep < (V > 1000 ? 2 : 6); ++rep) {
        const auto c = make_trees<T>(s, V, 8, sh, V > 1000 ? 10 : 18, 0.3);
        compare_all_rules(c, specdec::verify_options{rep == 1, 1e-3}, rep == 2, t);
      }
  };
  for (const std::size_t V : {std::size_t{7}, std::size_t{3000}}) {
    run(float{}, V);
    run(double{}, V);
  }
  INFO(t.batches << " batches identical; " << t.flagged << " requests flagged, " << t.deep << " with >= 2 accepted, "
                 << t.fallback << " residual fallbacks");
  CHECK(t.flagged > 0);
  CHECK(t.deep > 0);
  CHECK(t.fallback > 0);
}

TEST_CASE("cuda verify_tree gives seq's outputs at V = 70000 (35 sampling tiles)", "[cuda][tree][shapes]") {
  // Tagged [shapes]: the sanitizer runs leave the large rows out.
  philox_stream s(stream_address{0x7C0D, 2, 0, 0, purpose::user});
  tally t;
  for (const shape sh : {shape::random, shape::star, shape::wide}) {
    compare_all_rules(make_trees<float>(s, 70000, 4, sh, 8, 0.25), specdec::verify_options{}, sh == shape::star, t);
    compare_all_rules(make_trees<double>(s, 70000, 3, sh, 6, 0.25), specdec::verify_options{sh == shape::wide, 1e-3}, false, t);
  }
  INFO(t.batches << " batches identical; " << t.flagged << " requests flagged");
  CHECK(t.batches > 0);
}

TEST_CASE("cuda verify_tree: a chain tree gives the cuda chain verifier's tokens", "[cuda][tree]") {
  // strict, greedy and sample-and-match on a chain tree are the chain rules (acceptance/tree.hpp).
  philox_stream s(stream_address{0x7C0D, 3, 0, 0, purpose::user});
  for (const std::size_t V : {std::size_t{7}, std::size_t{3000}}) {
    const auto c = make_trees<float>(s, V, 10, shape::chain, 7, 0.0);
    specdec_test::owned_batch<float> chains;
    chains.vocab = V;
    chains.streams = c.streams;
    for (std::size_t b = 0; b < c.layout.batch_size(); ++b) {
      const std::size_t n = c.layout.num_nodes(b) - 1, row0 = c.layout.node_row(b, 0);
      chains.num_drafts.push_back(static_cast<std::int32_t>(n));
      for (std::size_t i = 1; i <= n; ++i) chains.draft_tokens.push_back(c.tokens[row0 + i]);
      chains.draft_rows.insert(chains.draft_rows.end(), c.draft_rows.begin() + static_cast<std::ptrdiff_t>(row0 * V),
                               c.draft_rows.begin() + static_cast<std::ptrdiff_t>((row0 + n) * V));
      chains.target_rows.insert(chains.target_rows.end(), c.target_rows.begin() + static_cast<std::ptrdiff_t>(row0 * V),
                                c.target_rows.begin() + static_cast<std::ptrdiff_t>((row0 + n + 1) * V));
    }
    const auto check = [&](const auto& rule) {
      const auto tree = run_cuda(rule, c);
      specdec_test::owned_outputs chain(chains);
      const specdec::test::device_chain_batch<float> d(chains.view());
      const device_array<token_id> tokens(chain.tokens);
      const device_array<std::int32_t> accepted(chain.num_accepted);
      const device_array<verify_status> status(chain.status);
      specdec::verify(specdec::exec::cuda, rule, d.view, chains.stream_span(),
                      specdec::chain_outputs{tokens.span(), accepted.span(), status.span()});
      REQUIRE(tree.tokens == tokens.download());
      REQUIRE(tree.accepted == accepted.download());
      REQUIRE(tree.status == status.download());
    };
    check(specdec::strict);
    check(specdec::greedy);
    check(specdec::sample_and_match);
  }
}

TEST_CASE("cuda block verification gives seq's tokens, counts and statuses on chains", "[cuda][block]") {
  philox_stream s(stream_address{0x7C0D, 4, 0, 0, purpose::user});
  std::size_t requests = 0, flagged = 0, partial = 0;
  const auto run = [&](auto tag, std::size_t V, std::size_t B, std::size_t max_n, std::uint32_t rep) {
    using T = decltype(tag);
    const auto reqs = specdec_test::make_requests<T>(s, B, max_n, V, 0.3, rep);
    for (const bool packed : {true, false}) {
      const auto batch = specdec_test::build_batch(reqs, V, packed, max_n);
      const specdec::verify_options options{rep % 3 == 1, 1e-3};
      specdec_test::owned_outputs a(batch);
      specdec::verify(specdec::exec::seq, specdec::block, batch.view(), batch.stream_span(), a.view(), options);
      const auto b = run_block_cuda(batch, options, rep % 2 == 0);
      CAPTURE(V, B, packed, rep);
      REQUIRE(a.tokens == b.tokens);
      REQUIRE(a.num_accepted == b.num_accepted);
      REQUIRE(a.status == b.status);
      for (std::size_t r = 0; r < reqs.size(); ++r) {
        flagged += !specdec::is_valid(a.status[r]);
        partial += static_cast<std::size_t>(a.num_accepted[r]) < reqs[r].drafts.size();
        for (const token_id x : b.row(r)) REQUIRE((x == specdec::no_token || specdec::in_vocabulary(x, V)));
      }
      requests += reqs.size();
    }
  };
  for (std::uint32_t rep = 0; rep < 8; ++rep) {
    run(float{}, 7, 16, 6, rep);
    run(double{}, 7, 16, 6, rep);
    run(float{}, 3000, 12, 5, rep);
    run(double{}, 3000, 12, 5, rep);
  }
  INFO(requests << " requests identical (" << partial << " stopped early, " << flagged << " flagged)");
  CHECK(flagged > 0);
  CHECK(partial > 0);
}

TEST_CASE("cuda block verification gives seq's outputs at V = 70000", "[cuda][block][shapes]") {
  philox_stream s(stream_address{0x7C0D, 5, 0, 0, purpose::user});
  for (std::uint32_t rep = 0; rep < 2; ++rep) {
    const auto reqf = specdec_test::make_requests<float>(s, 6, 8, 70000, 0.2, rep);
    const auto reqd = specdec_test::make_requests<double>(s, 4, 6, 70000, 0.2, rep);
    const auto check = [&](const auto& batch) {
      specdec_test::owned_outputs a(batch);
      specdec::verify(specdec::exec::seq, specdec::block, batch.view(), batch.stream_span(), a.view());
      const auto b = run_block_cuda(batch, {}, rep == 1);
      REQUIRE(a.tokens == b.tokens);
      REQUIRE(a.num_accepted == b.num_accepted);
      REQUIRE(a.status == b.status);
    };
    check(specdec_test::build_batch(reqf, 70000, true));
    check(specdec_test::build_batch(reqd, 70000, false, 6));
  }
}

TEST_CASE("cuda tree and block verification on garbage: seq's statuses, never a token outside [-1, V)",
          "[cuda][tree][block][bad_input]") {
  // Rows of garbage (NaN, infinities, negatives, huge values, zeros, subnormals mixed in) and node
  // tokens sometimes outside [0, V): whatever seq reports, cuda reports, and the outputs stay well formed.
  philox_stream s(stream_address{0x7C0D, 6, 0, 0, purpose::user});
  const auto garbage = [&](auto& rows) {
    using T = typename std::remove_reference_t<decltype(rows)>::value_type;
    const T bad[] = {std::numeric_limits<T>::quiet_NaN(),  std::numeric_limits<T>::infinity(),  T(-0.5), T(1e30), T(0),
                     std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::infinity(), T(2)};
    for (auto& x : rows)
      if (s.uniform() < 0.02) x = bad[static_cast<std::size_t>(s.uniform() * 8.0) % 8];
  };
  tally t;
  for (std::uint32_t rep = 0; rep < 12; ++rep) {
    const std::size_t V = rep % 2 == 0 ? 7 : 2100;
    auto c = make_trees<double>(s, V, 8, all_shapes[rep % all_shapes.size()], 12, 0.5);
    garbage(c.target_rows);
    garbage(c.draft_rows);
    for (std::size_t i = 0; i < c.tokens.size(); ++i)
      if (s.uniform() < 0.03)
        c.tokens[i] = static_cast<token_id>(s.uniform() * static_cast<double>(2 * V)) - static_cast<token_id>(V / 2);
    compare_all_rules(c, specdec::verify_options{rep % 3 == 0, 1e-3}, false, t);

    auto reqs = specdec_test::make_requests<float>(s, 10, 5, V, 0.5, rep);
    for (auto& r : reqs) {
      for (auto& row : r.target_rows) garbage(row);
      for (auto& row : r.draft_rows) garbage(row);
    }
    const auto batch = specdec_test::build_batch(reqs, V, true);
    specdec_test::owned_outputs a(batch);
    specdec::verify(specdec::exec::seq, specdec::block, batch.view(), batch.stream_span(), a.view());
    const auto b = run_block_cuda(batch, {}, false);
    REQUIRE(a.tokens == b.tokens);
    REQUIRE(a.num_accepted == b.num_accepted);
    REQUIRE(a.status == b.status);
    for (const token_id x : b.tokens) REQUIRE((x == specdec::no_token || specdec::in_vocabulary(x, V)));
  }
  INFO(t.batches << " garbage batches identical; " << t.flagged << " requests flagged");
  CHECK(t.flagged > 0);
}
