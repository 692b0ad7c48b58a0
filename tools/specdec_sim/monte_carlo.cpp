// --policy and the dispatch of the Monte-Carlo calls (see monte_carlo.hpp).
#include "monte_carlo.hpp"

#include <stdexcept>
#include <string>

#include "specdec/simulate/with_policy.hpp"

namespace specdec_sim {

namespace sim = specdec::simulate;

specdec::exec::backend policy_of(const option_parser& o) {
  const std::string p = o.text("policy");
  if (p == "seq") return specdec::exec::backend::seq;
  if (p != "cuda") throw usage_error("--policy takes seq or cuda, got '" + p + "'");
#if defined(SPECDEC_SIM_WITH_CUDA)
  gpu::require_device();
  return specdec::exec::backend::cuda;
#else
  throw std::runtime_error("--policy cuda: this specdec-sim was built without CUDA (configure with a CUDA compiler, "
                           "-DSPECDEC_ENABLE_CUDA=ON, to build it with); use --policy seq");
#endif
}

#if !defined(SPECDEC_SIM_WITH_CUDA)
namespace gpu {
namespace {
[[noreturn]] void unavailable() { throw std::logic_error("specdec-sim: built without CUDA"); }
}  // namespace
void require_device() { unavailable(); }
sim::sd::iteration_tally sd_chain(double, std::size_t, const sim::run_options&) { unavailable(); }
sim::sd::iteration_tally sv_accepted(std::span<const double>, std::size_t, const sim::run_options&) { unavailable(); }
sim::sprinter::run_tally sprinter_chain(double, double, int, const sim::run_options&) { unavailable(); }
}  // namespace gpu
#endif

sim::sd::iteration_tally sd_chain(specdec::exec::backend policy, double alpha, std::size_t gamma,
                                  const sim::run_options& options) {
  if (policy == specdec::exec::backend::cuda) return gpu::sd_chain(alpha, gamma, options);
  return sim::sd::chain(specdec::exec::seq, alpha, gamma, options);
}

sim::sd::iteration_tally sv_accepted(specdec::exec::backend policy, std::span<const double> a, std::size_t gamma,
                                     const sim::run_options& options) {
  if (policy == specdec::exec::backend::cuda) return gpu::sv_accepted(a, gamma, options);
  return sim::sv::accepted(specdec::exec::seq, a, gamma, options);
}

sim::sprinter::run_tally sprinter_chain(specdec::exec::backend policy, double eta_tp, double eta_fp, int r,
                                        const sim::run_options& options) {
  if (policy == specdec::exec::backend::cuda) return gpu::sprinter_chain(eta_tp, eta_fp, r, options);
  return sim::sprinter::verifier_chain(specdec::exec::seq, eta_tp, eta_fp, r, options);
}

}  // namespace specdec_sim
