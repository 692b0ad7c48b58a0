//! \file exec/dispatch.hpp
//! \brief How a public algorithm reaches a backend: one customisation point,
//! `exec::implementation<Backend, Algorithm>`, and `exec::dispatch`.
//!
//! A public entry such as `specdec::verify(policy, ...)` names no backend: it calls
//! `exec::dispatch<algorithm::verify>(policy, args...)`, which runs
//! `implementation<backend_of<Policy>, algorithm::verify>::run(policy, args...)`. A backend provides
//! an algorithm by specialising `implementation` in its registration header
//! (`backend/NAME/algorithms.hpp`, listed once in exec/backends.hpp); the algorithms' tags are in
//! exec/algorithms.hpp. Resolution, at compile time:
//! 1. the policy's backend implements the algorithm: that implementation runs;
//! 2. otherwise, on a host backend, when the tag says seq is a correct substitute
//!    (`Algorithm::seq_substitutes`), seq's implementation runs (same results, seq's speed);
//! 3. otherwise compilation fails in `exec::missing_implementation<Algorithm, Policy>`, whose two
//!    arguments name the algorithm and the policy.
#pragma once

#include <type_traits>
#include <utility>

#include "specdec/exec/policy.hpp"

namespace specdec::exec {

//! Backend `B`'s implementation of `Algorithm`: a backend specialises it with a static
//! `run(const Policy&, Args&&...)` taking the public entry's arguments. Not defined: not implemented.
template <backend B, class Algorithm>
struct implementation;

//! True when backend `B` registered an implementation of `Algorithm`.
template <backend B, class Algorithm>
concept implements = requires {
  sizeof(implementation<B, Algorithm>);
};

//! Instantiated only when `Policy`'s backend has no implementation of `Algorithm` and seq may not
//! stand in for it (device memory, or a tag that forbids it); the compiler's message names both.
template <class Algorithm, class Policy>
struct missing_implementation {
  static_assert(!std::is_same_v<Algorithm, Algorithm>,
                "specdec: this backend has no implementation of this algorithm (the template arguments of "
                "exec::missing_implementation name the algorithm and the policy); host policies fall back to seq "
                "only where the algorithm allows it");
};

//! Fails compilation, naming the algorithm, when `Policy` selects a backend that is not enabled.
#define SPECDEC_REQUIRE_BACKEND(Policy, algorithm)                                                \
  static_assert(::specdec::exec::backend_of<Policy> != ::specdec::exec::backend::simd ||          \
                    ::specdec::exec::backend_enabled<::specdec::exec::backend::simd>,             \
                algorithm ": the simd backend is not enabled; link specdec::simd (needs xsimd)"); \
  static_assert(::specdec::exec::backend_of<Policy> != ::specdec::exec::backend::cuda ||          \
                    ::specdec::exec::backend_enabled<::specdec::exec::backend::cuda>,             \
                algorithm ": the cuda backend is not enabled; link specdec::cuda and compile this file with nvcc")

//! Runs `Algorithm` on `policy`'s backend (see the file comment for the resolution order).
template <class Algorithm, ExecutionPolicy Policy, class... Args>
decltype(auto) dispatch(const Policy& policy, Args&&... args) {
  constexpr backend b = backend_of<Policy>;
  if constexpr (implements<b, Algorithm>) {
    return implementation<b, Algorithm>::run(policy, std::forward<Args>(args)...);
  } else if constexpr (b != backend::cuda && Algorithm::seq_substitutes && implements<backend::seq, Algorithm>) {
    return implementation<backend::seq, Algorithm>::run(sequenced_policy{}, std::forward<Args>(args)...);
  } else {
    [[maybe_unused]] missing_implementation<Algorithm, std::remove_cvref_t<Policy>> fails;
  }
}

}  // namespace specdec::exec
