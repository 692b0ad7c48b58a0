//! \file backend/simd/verify_tree.hpp
//! \brief Tree verification on the simd backend: seq's walk (backend/seq/verify_tree.hpp) run with
//! the simd row kernels of chain verification. Same tokens, paths and flags as seq: the scalar
//! steps are seq's code, and the row draws follow the determinism contract.
#pragma once

#include <span>

#include "specdec/backend/seq/verify_tree.hpp"
#include "specdec/backend/simd/verify.hpp"

namespace specdec::backend::simd {

//! `specdec::verify_tree(exec::simd_policy<Arch>{}, ...)` lands here.
template <class Arch, TreeRule Rule, class T>
void verify_tree(const Rule& rule, const tree_batch<T>& batch, std::span<const random::request_stream> streams,
                 const tree_outputs& out, const verify_options& options) {
  SPECDEC_REQUIRE_SIMD_ARCH(Arch, "specdec::verify_tree");
  seq::detail::verify_tree_with<verify_kernels<Arch>>(rule, batch, streams, out, options);
}

//! `specdec::verify_tree_from_logits(exec::simd_policy<Arch>{}, ...)` lands here: rows warped by
//! `backend::simd::warp_logits`.
template <class Arch, TreeRule Rule, class T>
void verify_tree_from_logits(const Rule& rule, const tree_batch<T>& batch, std::span<const warp_params> target_params,
                             std::span<const random::request_stream> streams, const tree_outputs& out,
                             const verify_options& options) {
  SPECDEC_REQUIRE_SIMD_ARCH(Arch, "specdec::verify_tree_from_logits");
  seq::detail::verify_tree_from_logits_with<verify_kernels<Arch>>(rule, batch, target_params, streams, out, options);
}

}  // namespace specdec::backend::simd
