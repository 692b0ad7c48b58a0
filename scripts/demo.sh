#!/usr/bin/env bash
# Builds and runs the specdec demo (examples/demo.cpp) in a Release build.
#   scripts/demo.sh [demo arguments...]      e.g. scripts/demo.sh --help
#   DEMO_BUILD_DIR=/tmp/d scripts/demo.sh    another build directory (default ./build-demo)
#   SPECDEC_CMAKE_ARGS="..." / SPECDEC_SKIP_DEPS=1 as for scripts/test.sh
# The demo runs in the current directory, so relative file arguments work as usual.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$(realpath -m "${DEMO_BUILD_DIR:-$ROOT/build-demo}")"
JOBS="$(nproc 2>/dev/null || echo 2)"

source "$ROOT/scripts/lib.sh"

section "dependencies"
"$ROOT/scripts/install-deps.sh" --core >&2

section "configure ($BUILD_DIR)"
# The demo runs on the CPU: no tests, benchmarks or CUDA, so configuring stays quick.
configure "$BUILD_DIR" -DSPECDEC_BUILD_TESTS=OFF -DSPECDEC_BUILD_BENCH=OFF -DSPECDEC_BUILD_EXAMPLES=ON \
  -DSPECDEC_ENABLE_CUDA=OFF >&2

section "build specdec_demo and specdec-sim"
cmake --build "$BUILD_DIR" --target specdec_demo specdec_sv_batch_goodput specdec-sim -j "$JOBS" >&2

section "run"
"$BUILD_DIR/examples/specdec_demo" "$@"

section "SV's batch scheduler on the step decoder against every fixed gamma (goodput, continuous batching)"
"$BUILD_DIR/examples/specdec_sv_batch_goodput" "$@"

section "specdec-sim sprinter (SPRINTER Figures 5 and 6: theory curves with Monte-Carlo points)"
"$BUILD_DIR/tools/specdec-sim" sprinter --quiet --csv "$PWD/specdec-sim-sprinter.csv" --plot "$PWD/specdec-sim-sprinter.png"
echo "demo: wrote $PWD/specdec-sim-sprinter.png (and the CSV beside it)"
