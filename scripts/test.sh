#!/usr/bin/env bash
# Builds specdec with tests, benchmarks and examples and runs every test through CTest.
#   scripts/test.sh                        build in ./build (Release)
#   BUILD_DIR=/tmp/b scripts/test.sh       another build directory
#   SPECDEC_CMAKE_ARGS="-DSPECDEC_ENABLE_CUDA=OFF" scripts/test.sh   extra CMake arguments
#   SPECDEC_SKIP_DEPS=1 scripts/test.sh    do not check/install Debian packages
# CUDA is auto-detected (nvcc on PATH or in /usr/local/cuda/bin); GPU tests exit 77 (skipped)
# on machines without a GPU. Exits non-zero on any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$(realpath -m "${BUILD_DIR:-$ROOT/build}")"
JOBS="$(nproc 2>/dev/null || echo 2)"

source "$ROOT/scripts/lib.sh"

section "dependencies"
"$ROOT/scripts/install-deps.sh"

if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if command -v nvcc >/dev/null 2>&1; then
  echo "CUDA compiler: $(command -v nvcc) (CMake decides whether it is usable)"
else
  echo "CUDA compiler: none (GPU parts are not built)"
fi

section "configure ($BUILD_DIR)"
configure "$BUILD_DIR" -DSPECDEC_BUILD_TESTS=ON -DSPECDEC_BUILD_BENCH=ON -DSPECDEC_BUILD_EXAMPLES=ON

section "build (-j$JOBS)"
cmake --build "$BUILD_DIR" -j "$JOBS"

section "test (-j$JOBS)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"

section "all tests passed"
