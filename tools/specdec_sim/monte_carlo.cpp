// --policy and the dispatch of the Monte-Carlo calls (see monte_carlo.hpp).
#include "monte_carlo.hpp"

#include <stdexcept>
#include <string>

#include "specdec/simulate/sv.hpp"

namespace specdec_sim {

namespace sim = specdec::simulate;

mc_policy policy_of(const option_parser& o) {
  const std::string p = o.text("policy");
  if (p == "seq") return mc_policy::seq;
  if (p != "cuda") throw usage_error("--policy takes seq or cuda, got '" + p + "'");
#if defined(SPECDEC_SIM_WITH_CUDA)
  gpu::require_device();
  return mc_policy::cuda;
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
sim::sd::chain_result sd_chain(double, int, const sim::run_options&) { unavailable(); }
sim::sd::chain_result sv_accepted(std::span<const double>, int, const sim::run_options&) { unavailable(); }
sim::sprinter::chain_result sprinter_chain(double, double, int, const sim::run_options&) { unavailable(); }
}  // namespace gpu
#endif

sim::sd::chain_result sd_chain(mc_policy policy, double alpha, int gamma, const sim::run_options& options) {
  if (policy == mc_policy::cuda) return gpu::sd_chain(alpha, gamma, options);
  return sim::sd::chain(alpha, gamma, options);
}

sim::sd::chain_result sv_accepted(mc_policy policy, std::span<const double> a, int gamma, const sim::run_options& options) {
  if (policy == mc_policy::cuda) return gpu::sv_accepted(a, gamma, options);
  return sim::sv::accepted(a, gamma, options);
}

sim::sprinter::chain_result sprinter_chain(mc_policy policy, double eta_tp, double eta_fp, int r,
                                           const sim::run_options& options) {
  if (policy == mc_policy::cuda) return gpu::sprinter_chain(eta_tp, eta_fp, r, options);
  return sim::sprinter::verifier_chain(eta_tp, eta_fp, r, options);
}

}  // namespace specdec_sim
