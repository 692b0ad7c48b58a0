//! \file simulate/with_policy.hpp
//! \brief The Monte-Carlo simulators through an execution policy (exec/dispatch.hpp):
//! `exec::seq` (and `exec::simd`, which has no simulator of its own) runs the CPU simulators of
//! simulate/sd.hpp, sv.hpp and sprinter.hpp; `exec::cuda` runs backend/cuda/simulate.cuh on the
//! policy's stream, with the same Philox draws and so the same counts, and returns when it is done.
//! Inputs are host memory on every backend.
#pragma once

#include <span>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/exec/backends.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/sprinter.hpp"
#include "specdec/simulate/sv.hpp"

namespace specdec::simulate::sd {

//! `chain(alpha, gamma, options)` on `Policy`'s backend (Leviathan eq. (1)).
//! \throws specdec::error as the CPU simulator; specdec::cuda_error on CUDA errors
template <exec::ExecutionPolicy Policy>
iteration_tally chain(const Policy& policy, double alpha, std::size_t gamma, const run_options& options) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::simulate::sd::chain");
  return exec::dispatch<algorithm::simulate_sd_chain>(policy, alpha, gamma, options);
}

//! `chain(alphas, options)` (position-dependent acceptance) on `Policy`'s backend.
template <exec::ExecutionPolicy Policy>
iteration_tally chain(const Policy& policy, std::span<const double> alphas, const run_options& options) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::simulate::sd::chain");
  return exec::dispatch<algorithm::simulate_sd_chain>(policy, alphas, options);
}

//! `token_process(rule, p, q, gamma, options)` on `Policy`'s backend (the cuda backend: V at most
//! count_tally's histogram limit; the rule's `accepts` host/device code, as strict and lenient).
template <exec::ExecutionPolicy Policy, RejectionRule Rule>
token_process_result token_process(const Policy& policy, const Rule& rule, std::span<const double> p, std::span<const double> q,
                                   std::size_t gamma, const run_options& options) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::simulate::sd::token_process");
  return exec::dispatch<algorithm::simulate_sd_token_process>(policy, rule, p, q, gamma, options);
}

}  // namespace specdec::simulate::sd

namespace specdec::simulate::sv {

//! `accepted(a, gamma, options)` (SV's N, appendix D eq. (3)) on `Policy`'s backend.
template <exec::ExecutionPolicy Policy>
sd::iteration_tally accepted(const Policy& policy, std::span<const double> a, std::size_t gamma, const run_options& options) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::simulate::sv::accepted");
  return exec::dispatch<algorithm::simulate_sv_accepted>(policy, a, gamma, options);
}

}  // namespace specdec::simulate::sv

namespace specdec::simulate::sprinter {

//! `verifier_chain(eta_tp, eta_fp, r, options)` (SPRINTER Thm 3.3) on `Policy`'s backend.
template <exec::ExecutionPolicy Policy>
run_tally verifier_chain(const Policy& policy, double eta_tp, double eta_fp, int r, const run_options& options) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::simulate::sprinter::verifier_chain");
  return exec::dispatch<algorithm::simulate_sprinter_chain>(policy, eta_tp, eta_fp, r, options);
}

//! `token_process(p, q, eta_tp, eta_fp, options)` on `Policy`'s backend (cuda: V at most
//! count_tally's histogram limit).
template <exec::ExecutionPolicy Policy>
token_process_result token_process(const Policy& policy, std::span<const double> p, std::span<const double> q, double eta_tp,
                                   double eta_fp, const run_options& options) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::simulate::sprinter::token_process");
  return exec::dispatch<algorithm::simulate_sprinter_token_process>(policy, p, q, eta_tp, eta_fp, options);
}

}  // namespace specdec::simulate::sprinter
