// Host-side checks of the cuda tree, block and chain verifiers (backend/cuda/verify_tree.cuh,
// verify_block.cuh, verify.cuh) that need no GPU and no CUDA driver (built with the ordinary Catch2 main):
//  - the kernels' walks (`walk_tree` for every rule the backend implements, `walk_block`, and the chain
//    walks of `plan_rejection` and `walk_targets`: backend/walks/, the walks seq runs too), replayed on
//    the host with host versions of the kernels' row operations built from seq's functions, against seq's
//    verify_tree / verify: tokens, paths, counts and statuses, on random trees of every shape and on
//    chains, with spoiled requests and normalisation checks. This
//    validates everything but the device row operations (primitives/request_block.cuh's block passes, which
//    follow the sampling contract; tests/backend/cuda_tree.cu compares them with seq on a GPU);
//  - `tree_layout_arrays` / `tree_layout_view` against the `tree_layout` they flatten;
//  - workspace sizes, and shape errors thrown before any CUDA call (a CUDA call here would throw
//    specdec::cuda_error: no driver); empty batches return without one;
//  - the compile-time refusals: k_seq and typical_rule have no cuda tree kernel, typical_rule no cuda
//    chain kernel, block verification no fused kernel from logits (`static_assert`s naming the rule
//    and the backend fire when they are called with exec::cuda; here their traits are checked).
// seq's verify_one instantiated for `block` has its chain loop after an `if constexpr` return, which
// nvcc reports as unreachable (#128-D) in every CUDA unit that runs seq's block verification.
#pragma nv_diag_suppress 128

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "backend/cuda_tree_cases.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/errors.hpp"
#include "support/random_requests.hpp"

namespace {

using namespace cuda_tree_test;
using specdec::random::purpose;
using specdec::random::stream_address;
namespace cu = specdec::backend::cuda;

static_assert(specdec::backend::cuda::verifies_tree<specdec::target_only_rule> &&
              specdec::backend::cuda::verifies_tree<specdec::greedy_rule> &&
              specdec::backend::cuda::verifies_tree<specdec::sample_and_match_rule> &&
              specdec::backend::cuda::verifies_tree<specdec::strict_rule> &&
              specdec::backend::cuda::verifies_tree<specdec::recursive_rejection_rule>);
static_assert(!specdec::backend::cuda::verifies_tree<specdec::k_seq_rule> &&
              !specdec::backend::cuda::verifies_tree<specdec::typical_rule>);
static_assert(cu::verifies_tree<specdec::strict_rule> && !cu::verifies_tree<specdec::k_seq_rule> &&
              !cu::verifies_tree<specdec::typical_rule>);
static_assert(specdec::backend::cuda::verifies_chain<specdec::block_rule> &&
              !specdec::backend::cuda::verifies_chain_from_logits<specdec::block_rule>);
static_assert(!specdec::backend::cuda::verifies_chain<specdec::typical_rule> &&
              specdec::backend::cuda::verifies_chain_from_logits<specdec::strict_rule>);

}  // namespace

TEST_CASE("cuda tree walk, replayed on the host, gives seq's outputs for every rule it implements", "[cuda][host][tree]") {
  philox_stream s(stream_address{0x7EE0, 1, 0, 0, purpose::user});
  std::size_t compared = 0, flagged = 0, deep = 0;
  const auto run = [&](auto tag, std::size_t V, shape sh, bool check) {
    using T = decltype(tag);
    const auto c = make_trees<T>(s, V, 6, sh, V > 1000 ? 9 : 16, 0.3);
    const specdec::verify_options options{check, 1e-3};
    for_each_cuda_tree_rule([&](const auto& rule, const char* name) {
      constexpr auto method = specdec::tree_method_of<std::remove_cvref_t<decltype(rule)>>::value;
      CAPTURE(name, V, static_cast<int>(sh), check);
      const auto a = run_seq(rule, c, options);
      const auto b = replay_tree<method>(c, options);
      REQUIRE(a.tokens == b.tokens);
      REQUIRE(a.path == b.path);
      REQUIRE(a.accepted == b.accepted);
      REQUIRE(a.status == b.status);
      ++compared;
      for (std::size_t r = 0; r < a.status.size(); ++r) {
        flagged += a.status[r] != verify_status::ok;
        deep += a.accepted[r] >= 2;
      }
    });
  };
  for (const std::size_t V : {std::size_t{7}, std::size_t{33}, std::size_t{3000}})
    for (const shape sh : all_shapes)
      for (int rep = 0; rep < (V > 1000 ? 2 : 8); ++rep) {
        run(double{}, V, sh, rep == 1);
        run(float{}, V, sh, false);
      }
  INFO(compared << " batches compared; " << flagged << " requests flagged, " << deep << " with >= 2 accepted");
  CHECK(flagged > 0);
  CHECK(deep > 0);
}

TEST_CASE("cuda block verification walk, replayed on the host, gives seq's outputs", "[cuda][host][block]") {
  philox_stream s(stream_address{0x7EE0, 2, 0, 0, purpose::user});
  for (const std::size_t V : {std::size_t{7}, std::size_t{40}, std::size_t{3000}})
    for (std::uint32_t rep = 0; rep < (V > 1000 ? 4u : 20u); ++rep) {
      const auto reqs = specdec_test::make_requests<double>(s, 10, 6, V, 0.3, rep);
      const auto reqf = specdec_test::make_requests<float>(s, 10, 6, V, 0.3, rep);
      const specdec::verify_options options{rep % 3 == 0, 1e-3};
      const auto check = [&](const auto& batch) {
        specdec_test::owned_outputs a(batch);
        specdec::verify(specdec::exec::seq, specdec::block, batch.view(), batch.stream_span(), a.view(), options);
        const auto b = replay_block(batch, options);
        CAPTURE(V, rep);
        REQUIRE(a.tokens == b.tokens);
        REQUIRE(a.num_accepted == b.num_accepted);
        REQUIRE(a.status == b.status);
      };
      check(specdec_test::build_batch(reqs, V, true));
      check(specdec_test::build_batch(reqf, V, false, 6));
    }
}

TEST_CASE("cuda chain verification walks, replayed on the host, give seq's outputs", "[cuda][host][verify]") {
  philox_stream s(stream_address{0x7EE0, 4, 0, 0, purpose::user});
  std::size_t flagged = 0, deep = 0;
  for (const std::size_t V : {std::size_t{7}, std::size_t{40}, std::size_t{3000}})
    for (std::uint32_t rep = 0; rep < (V > 1000 ? 4u : 20u); ++rep) {
      const auto reqs = specdec_test::make_requests<double>(s, 10, 10, V, 0.4, rep);
      const auto reqf = specdec_test::make_requests<float>(s, 10, 10, V, 0.4, rep);
      const specdec::verify_options options{rep % 3 == 0, 1e-3};
      const auto check = [&](const auto& batch) {
        specdec_test::for_each_rule([&](const auto& rule, const char* name) {
          specdec_test::owned_outputs a(batch);
          specdec::verify(specdec::exec::seq, rule, batch.view(), batch.stream_span(), a.view(), options);
          const auto b = replay_chain(rule, batch, options);
          CAPTURE(name, V, rep);
          REQUIRE(a.tokens == b.tokens);
          REQUIRE(a.num_accepted == b.num_accepted);
          REQUIRE(a.status == b.status);
          for (std::size_t r = 0; r < a.status.size(); ++r) {
            flagged += a.status[r] != verify_status::ok;
            deep += a.num_accepted[r] >= 2;
          }
        });
      };
      check(specdec_test::build_batch(reqs, V, true));
      check(specdec_test::build_batch(reqf, V, false, 10));
    }
  CHECK(flagged > 0);
  CHECK(deep > 0);
}

TEST_CASE("tree_layout_arrays flattens a tree_layout", "[cuda][host][tree]") {
  // SGLang-style lists keep the caller's sibling order (not ascending ids).
  const std::vector<std::int32_t> nodes{5, 1, 3}, first_child{2, -1, 4, -1, -1, /**/ -1, /**/ 2, -1, -1},
      next_sibling{-1, -1, 1, -1, 3, /**/ -1, /**/ -1, -1, 1};
  const auto layout = specdec::tree_layout::from_sibling_lists(nodes, first_child, next_sibling);
  const auto arrays = cu::tree_layout_arrays::of(layout);
  const cu::tree_layout_view v = arrays.view();
  REQUIRE(v.batch == 3);
  REQUIRE(v.max_depth == layout.max_depth());
  for (std::size_t b = 0; b < 3; ++b) {
    REQUIRE(v.num_nodes(b) == static_cast<std::int32_t>(layout.num_nodes(b)));
    for (std::int32_t n = 0; n < v.num_nodes(b); ++n) {
      const auto un = static_cast<std::size_t>(n);
      CHECK(v.node_row(b, n) == static_cast<std::int64_t>(layout.node_row(b, un)));
      CHECK(v.parent(b, n) == layout.parent(b, un));
      CHECK(v.first_child(b, n) == layout.first_child(b, un));
      CHECK(v.next_sibling(b, n) == layout.next_sibling(b, un));
      CHECK(v.depth(b, n) == layout.depth(b, un));
    }
  }
  CHECK(cu::tree_layout_arrays::of(specdec::tree_layout{}).view().batch == 0);
}

TEST_CASE("cuda tree and block verification: workspace sizes", "[cuda][host][memory]") {
  philox_stream s(stream_address{0x7EE0, 3, 0, 0, purpose::user});
  const std::size_t V = 5000, B = 4;
  const auto c = make_trees<float>(s, V, B, shape::random, 9, 0.0);
  const auto batch = c.view();
  const std::size_t greedy = cu::verify_tree_workspace_bytes(specdec::greedy, batch);
  const std::size_t matching = cu::verify_tree_workspace_bytes(specdec::sample_and_match, batch);
  const std::size_t target_only = cu::verify_tree_workspace_bytes(specdec::target_only, batch);
  const std::size_t strict = cu::verify_tree_workspace_bytes(specdec::strict, batch);
  const std::size_t recursive = cu::verify_tree_workspace_bytes(specdec::recursive_rejection, batch);
  CHECK(greedy % cu::workspace_plan::alignment == 0);
  CHECK(greedy == matching);
  CHECK(target_only > greedy);                       // the children lists
  CHECK(strict >= greedy + B * V * sizeof(double));  // one residual row of doubles per request
  CHECK(recursive > strict);
  CHECK(strict == cu::verify_tree_workspace_bytes(specdec::strict, batch));  // deterministic
  // An empty batch needs nothing (so the allocating overload allocates nothing).
  tree_case<float> empty;
  empty.vocab = V;
  empty.layout = specdec::tree_layout::from_parents({}, {});
  CHECK(cu::verify_tree_workspace_bytes(specdec::strict, empty.view()) == 0);

  const auto reqs = specdec_test::make_requests<float>(s, B, 6, V, 0.0, 0);
  const auto chains = specdec_test::build_batch(reqs, V, false, 6);
  const std::size_t block = cu::verify_block_workspace_bytes(specdec::block, chains.view());
  CHECK(block >= B * (specdec::detail::tile_count(V) + 7) * sizeof(double));
  CHECK(block % cu::workspace_plan::alignment == 0);
  const auto none = specdec_test::build_batch(std::vector<specdec_test::request_data<float>>{}, V, true);
  CHECK(cu::verify_block_workspace_bytes(specdec::block, none.view()) == 0);
}

TEST_CASE("cuda tree and block verification: shape errors before any CUDA call", "[cuda][host][api]") {
  // Host buffers stand in for device memory: every call below throws specdec::error (or returns)
  // before it dereferences a pointer or calls the CUDA runtime.
  const cudaStream_t stream = nullptr;
  philox_stream s(stream_address{0x7EE0, 4, 0, 0, purpose::user});
  const std::size_t V = 9;
  const auto c = make_trees<double>(s, V, 3, shape::random, 6, 0.0);
  const auto streams = std::span<const request_stream>(c.streams);
  std::vector<std::byte> none;
  SECTION("trees") {
    tree_result_rows out(3, c.width());
    std::vector<std::byte> ws(cu::verify_tree_workspace_bytes(specdec::strict, c.view()));
    auto bad_v = c.view();
    bad_v.vocab_size = V + 1;
    REQUIRE_THROWS_AS(cu::verify_tree(stream, specdec::strict, bad_v, streams, out.view(), ws), specdec::error);
    auto no_q = c.view();
    no_q.draft_rows = {};
    REQUIRE_THROWS_AS(cu::verify_tree(stream, specdec::strict, no_q, streams, out.view(), ws), specdec::error);
    auto short_tokens = c.view();
    short_tokens.tokens = short_tokens.tokens.first(short_tokens.tokens.size() - 1);
    REQUIRE_THROWS_AS(cu::verify_tree(stream, specdec::greedy, short_tokens, streams, out.view()), specdec::error);
    REQUIRE_THROWS_AS(cu::verify_tree(stream, specdec::greedy, c.view(), streams.first(2), out.view()), specdec::error);
    tree_result_rows narrow(3, c.width() - 1);
    REQUIRE_THROWS_AS(cu::verify_tree(stream, specdec::target_only, c.view(), streams, narrow.view()), specdec::error);
    auto view = out.view();
    view.status = view.status.first(2);
    REQUIRE_THROWS_AS(cu::verify_tree(stream, specdec::sample_and_match, c.view(), streams, view), specdec::error);
    REQUIRE_THROWS_AS(specdec::verify_tree(specdec::exec::cuda, specdec::strict, bad_v, streams, out.view()), specdec::error);
    // A small workspace.
    REQUIRE_THROWS_AS(
        cu::verify_tree(stream, specdec::strict, c.view(), streams, out.view(), std::span<std::byte>(ws).first(ws.size() - 1)),
        specdec::error);
    REQUIRE_THROWS_AS(specdec::verify_tree(specdec::exec::cuda, specdec::recursive_rejection, c.view(), streams, out.view(),
                                           std::span<std::byte>(none)),
                      specdec::error);
    // An empty batch returns without touching the device (and the allocating overload allocates nothing).
    tree_case<double> empty;
    empty.vocab = V;
    empty.layout = specdec::tree_layout::from_parents({}, {});
    tree_result_rows nothing(0, 1);
    REQUIRE_NOTHROW(cu::verify_tree(stream, specdec::strict, empty.view(), {}, nothing.view()));
    REQUIRE_NOTHROW(specdec::verify_tree(specdec::exec::cuda, specdec::target_only, empty.view(), {}, nothing.view()));
  }
  SECTION("block verification") {
    const auto reqs = specdec_test::make_requests<float>(s, 3, 4, V, 0.0, 0);
    const auto batch = specdec_test::build_batch(reqs, V, true);
    specdec_test::owned_outputs out(batch);
    std::vector<std::byte> ws(specdec::verify_workspace_bytes(specdec::exec::cuda, specdec::block, batch.view()));
    auto bad_v = batch.view();
    bad_v.vocab_size = V - 1;
    REQUIRE_THROWS_AS(specdec::verify(specdec::exec::cuda, specdec::block, bad_v, batch.stream_span(), out.view()),
                      specdec::error);
    auto no_q = batch.view();
    no_q.draft_rows = {};
    REQUIRE_THROWS_AS(cu::verify_block(stream, specdec::block, no_q, batch.stream_span(), out.view(), ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify_block(stream, specdec::block, batch.view(), batch.stream_span().first(2), out.view()),
                      specdec::error);
    auto view = out.view();
    view.tokens = view.tokens.first(view.tokens.size() - 1);
    REQUIRE_THROWS_AS(specdec::verify(specdec::exec::cuda, specdec::block, batch.view(), batch.stream_span(), view, ws),
                      specdec::error);
    REQUIRE_THROWS_AS(specdec::verify(specdec::exec::cuda, specdec::block, batch.view(), batch.stream_span(), out.view(),
                                      std::span<std::byte>(ws).first(ws.size() - 1)),
                      specdec::error);
    const auto none_batch = specdec_test::build_batch(std::vector<specdec_test::request_data<float>>{}, V, true);
    specdec_test::owned_outputs nothing(none_batch);
    REQUIRE_NOTHROW(
        specdec::verify(specdec::exec::cuda, specdec::block, none_batch.view(), none_batch.stream_span(), nothing.view()));
  }
}
