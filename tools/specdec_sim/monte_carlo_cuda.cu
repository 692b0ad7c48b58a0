// The cuda side of specdec-sim --policy cuda (see monte_carlo.hpp): the GPU simulators through
// the policy entries of simulate/with_policy.hpp, on the default stream. Compiled only when the tool
// is built with CUDA.
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "monte_carlo.hpp"
#include "specdec/simulate/with_policy.hpp"

namespace specdec_sim::gpu {

namespace sim = specdec::simulate;

void require_device() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0)
    throw std::runtime_error(std::string("--policy cuda: no CUDA device (") +
                             (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") + ")");
}

sim::sd::iteration_tally sd_chain(double alpha, std::size_t gamma, const sim::run_options& options) {
  return sim::sd::chain(specdec::exec::cuda, alpha, gamma, options);
}

sim::sd::iteration_tally sv_accepted(std::span<const double> a, std::size_t gamma, const sim::run_options& options) {
  return sim::sv::accepted(specdec::exec::cuda, a, gamma, options);
}

sim::sprinter::run_tally sprinter_chain(double eta_tp, double eta_fp, int r, const sim::run_options& options) {
  return sim::sprinter::verifier_chain(specdec::exec::cuda, eta_tp, eta_fp, r, options);
}

}  // namespace specdec_sim::gpu
