// The Catch2 main of the GPU tests (tests/**/*.cu). With no usable CUDA device it prints why and
// exits 77, which CTest reports as "skipped" (SKIP_RETURN_CODE), so machines without a GPU pass.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char* argv[]) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("specdec: no CUDA device (%s); skipping GPU tests\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
