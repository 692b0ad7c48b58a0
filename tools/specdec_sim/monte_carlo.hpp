// The Monte-Carlo simulators the specdec-sim subcommands call, on the backend --policy names:
// seq (the CPU simulators of specdec/simulate) or cuda (backend/cuda/simulate.cuh, the same draws
// and so the same numbers). The cuda part lives in monte_carlo_cuda.cu, compiled only when the tool
// is built with CUDA (SPECDEC_SIM_WITH_CUDA); otherwise --policy cuda stops with an error.
#pragma once

#include <span>

#include "cli.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/sprinter.hpp"

namespace specdec_sim {


//! --policy of a subcommand (see option_parser::common): the backend the Monte-Carlo draws run on,
//! chosen at run time (the cuda calls live in a CUDA translation unit, so the choice is an
//! `exec::backend` value, not a policy type). \throws usage_error for an unknown value;
//! std::runtime_error for cuda when this specdec-sim was built without CUDA or no CUDA device is present.
specdec::exec::backend policy_of(const option_parser& o);

//! simulate::sd::chain(alpha, gamma, options) on `policy`.
specdec::simulate::sd::iteration_tally sd_chain(specdec::exec::backend policy, double alpha, std::size_t gamma,
                                                const specdec::simulate::run_options& options);
//! simulate::sv::accepted(a, gamma, options) on `policy`.
specdec::simulate::sd::iteration_tally sv_accepted(specdec::exec::backend policy, std::span<const double> a, std::size_t gamma,
                                                   const specdec::simulate::run_options& options);
//! simulate::sprinter::verifier_chain(eta_tp, eta_fp, r, options) on `policy`.
specdec::simulate::sprinter::run_tally sprinter_chain(specdec::exec::backend policy, double eta_tp, double eta_fp, int r,
                                                      const specdec::simulate::run_options& options);

//! The cuda versions: monte_carlo_cuda.cu in a build with CUDA; without CUDA, stubs that throw
//! (never reached: policy_of refuses cuda there).
namespace gpu {
void require_device();
specdec::simulate::sd::iteration_tally sd_chain(double alpha, std::size_t gamma, const specdec::simulate::run_options& options);
specdec::simulate::sd::iteration_tally sv_accepted(std::span<const double> a, std::size_t gamma,
                                                   const specdec::simulate::run_options& options);
specdec::simulate::sprinter::run_tally sprinter_chain(double eta_tp, double eta_fp, int r,
                                                      const specdec::simulate::run_options& options);
}  // namespace gpu

}  // namespace specdec_sim
