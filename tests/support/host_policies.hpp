// The execution policies a test body runs under on the host: exec::seq, and exec::simd where the simd
// backend is compiled in. One body for every policy, in place of per-policy copies in #if blocks:
//   TEMPLATE_LIST_TEST_CASE("...", "[tags]", specdec_test::host_policies) { TestType policy; ... }
//   specdec_test::for_each_host_policy([&](const auto& policy) { ... });
#pragma once

#include <tuple>

#include "specdec/exec/policy.hpp"

namespace specdec_test {

#if SPECDEC_ENABLE_SIMD
using host_policies = std::tuple<specdec::exec::sequenced_policy, specdec::exec::simd_policy<>>;
#else
using host_policies = std::tuple<specdec::exec::sequenced_policy>;
#endif

//! Calls `body(policy)` once for each of `host_policies`.
template <class Body>
void for_each_host_policy(Body&& body) {
  std::apply([&](auto... policy) { (body(policy), ...); }, host_policies{});
}

}  // namespace specdec_test
