#!/usr/bin/env bash
# The GPU validation suite: on a machine with an NVIDIA GPU, builds every GPU test and GPU benchmark,
# runs the tests (ctest -L gpu), compute-sanitizer memcheck and racecheck on the GPU test programs,
# every bench_cuda_* benchmark (JSON) and the PyTorch/FlashInfer baselines under bench/, and writes
# everything into one results directory. See docs/gpu-validation.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  cat <<EOF
usage: scripts/gpu-validate.sh [options] [RESULTS_DIR]

Builds and runs specdec's GPU tests and GPU benchmarks and writes the results to RESULTS_DIR
(default: \$OUT if set, else ./gpu-results). Exits non-zero when there is no CUDA device, when the
build fails, or when a test, a sanitizer run, a benchmark or a baseline fails.

options:
  --arch ARCHS       CMAKE_CUDA_ARCHITECTURES (default \${CUDA_ARCHITECTURES:-90}; e.g. 80, 89, "80;90")
  --build-dir DIR    build directory (default \${BUILD_DIR:-./build-gpu})
  --jobs N           parallel build jobs (default: the number of CPUs)
  --prebuilt         use the build directory as it is (configured and built elsewhere, e.g. on a
                     machine without a GPU, with the same paths): no configure, no build
  --no-sanitizer     skip compute-sanitizer (memcheck, racecheck)
  --no-bench         skip the benchmarks and the Python baselines
  --dry-run          check the machine and print the plan; build and run nothing (exit 0)
  -h, --help         this help

environment: SPECDEC_CMAKE_ARGS (extra CMake arguments), BENCH_ARGS (extra Google Benchmark arguments, e.g.
"--benchmark_repetitions=5 --benchmark_report_aggregates_only=true"), BASELINE_ARGS (extra
arguments of the baseline scripts, e.g. "--quick").

results: summary.txt (one line per step, PASS/FAIL/SKIP), system.txt (date, host, git commit,
driver, CUDA, compilers), nvidia-smi.txt, configure.log, build.log, ctest.log (+ ctest-junit.xml),
sanitizer.log, bench/<program>.json (+ .log), baselines/<script>.json (or .log).
EOF
}

ARCH="${CUDA_ARCHITECTURES:-90}"
BUILD_DIR="${BUILD_DIR:-$PWD/build-gpu}"
JOBS="$(nproc 2>/dev/null || echo 4)"
RESULTS="${OUT:-$PWD/gpu-results}"
SANITIZE=1
BENCH=1
PREBUILT=0
DRY_RUN=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --prebuilt) PREBUILT=1; shift ;;
    --no-sanitizer) SANITIZE=0; shift ;;
    --no-bench) BENCH=0; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -*) echo "gpu-validate: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) RESULTS="$1"; shift ;;
  esac
done
BUILD_DIR="$(realpath -m "$BUILD_DIR")"
RESULTS="$(realpath -m "$RESULTS")"

# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

# ---- the machine ----------------------------------------------------------------------------------
if ! command -v nvcc >/dev/null 2>&1; then
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [[ -n "$d" && -x "$d/bin/nvcc" ]]; then export PATH="$d/bin:$PATH"; break; fi
  done
fi
device_problem=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  device_problem="nvidia-smi not found (no NVIDIA driver)"
elif ! gpus="$(nvidia-smi -L 2>&1)" || ! grep -q '^GPU ' <<<"$gpus"; then
  device_problem="nvidia-smi lists no GPU: ${gpus:-nothing}"
fi
compiler_problem=""
command -v nvcc >/dev/null 2>&1 || compiler_problem="nvcc not found (install the CUDA toolkit or set CUDA_HOME)"
sanitizer=""
for c in "$(command -v compute-sanitizer 2>/dev/null || true)" "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")/compute-sanitizer" \
         /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  if [[ -n "$c" && -x "$c" ]]; then sanitizer="$c"; break; fi
done

if [[ $DRY_RUN -eq 1 ]]; then
  echo "gpu-validate (dry run): nothing is built or run"
  echo "  CUDA device:       ${device_problem:-$(nvidia-smi -L 2>/dev/null | head -n 4)}"
  [[ -n "$device_problem" ]] && echo "  (no CUDA device: a real run stops here with exit status 2)"
  echo "  nvcc:              ${compiler_problem:-$(command -v nvcc)}"
  echo "  compute-sanitizer: ${sanitizer:-not found (sanitizer runs would be skipped)}"
  echo "  build directory:   $BUILD_DIR (CMAKE_CUDA_ARCHITECTURES=$ARCH, -j$JOBS)"
  echo "  results:           $RESULTS"
  echo "  GPU tests:         $(cd "$ROOT/tests" && find . -name '*.cu' -path './*/*' | sed 's|^\./||' | sort | tr '\n' ' ')"
  echo "  GPU benchmarks:    $(cd "$ROOT/bench" && find . -maxdepth 1 -name '*.cu' | sed 's|^\./||' | sort | tr '\n' ' ')"
  echo "  baselines:         $(cd "$ROOT/bench" && find . -maxdepth 1 -name '*.py' | grep -Ei 'torch|flashinfer' | sed 's|^\./||' | sort | tr '\n' ' ')"
  echo "  steps: configure, build the targets named *cuda* and specdec-sim, ctest -L gpu,"
  echo "         compute-sanitizer memcheck + racecheck per GPU test, bench_cuda_* (JSON), baselines"
  exit 0
fi

if [[ -n "$device_problem" ]]; then
  echo "gpu-validate: no CUDA device: $device_problem" >&2
  exit 2
fi
if [[ -n "$compiler_problem" ]]; then
  echo "gpu-validate: no CUDA compiler: $compiler_problem" >&2
  exit 2
fi

mkdir -p "$RESULTS"
SUMMARY="$RESULTS/summary.txt"
: > "$SUMMARY"
failures=0
# record STATUS STEP [DETAIL]: one line of summary.txt (and the terminal).
record() {
  local status="$1" step="$2" detail="${3:-}"
  printf '%-5s %s%s\n' "$status" "$step" "${detail:+  ($detail)}" | tee -a "$SUMMARY"
  if [[ "$status" == FAIL ]]; then failures=$((failures + 1)); fi
}

section "system"
{
  echo "date:      $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:      $(hostname)"
  echo "kernel:    $(uname -srm)"
  echo "commit:    $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "gpus:"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.mem \
             --format=csv 2>/dev/null | sed 's/^/  /' || nvidia-smi -L | sed 's/^/  /'
  echo "driver:    $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  echo "cuda (driver API): $(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
  echo "nvcc:      $(nvcc --version | tail -n 2 | tr '\n' ' ')"
  echo "c++:       $(c++ --version 2>/dev/null | head -n 1)"
  echo "cmake:     $(cmake --version | head -n 1)"
  echo "sanitizer: ${sanitizer:-not found}"
  echo "arch:      CMAKE_CUDA_ARCHITECTURES=$ARCH"
  if [[ $PREBUILT -eq 1 ]]; then
    # The compilers that built the programs, not this machine's.
    echo "build:     prebuilt ($BUILD_DIR): $(grep -ho 'set(CMAKE_[A-Z]*_COMPILER_\(ID\|VERSION\) "[^"]*")' \
                                           "$BUILD_DIR"/CMakeFiles/*/CMake*Compiler.cmake 2>/dev/null | sed 's/set(CMAKE_//; s/)//' | tr '\n' ' ')"
  fi
} | tee "$RESULTS/system.txt"
nvidia-smi > "$RESULTS/nvidia-smi.txt" 2>&1 || true
nvidia-smi -q >> "$RESULTS/nvidia-smi.txt" 2>&1 || true

if [[ $PREBUILT -eq 1 ]]; then
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    record FAIL configure "--prebuilt: $BUILD_DIR has no CMakeCache.txt"
    exit 1
  fi
  record SKIP configure "--prebuilt: $BUILD_DIR as it is"
  record SKIP build "--prebuilt"
else
  section "configure ($BUILD_DIR)"
  if configure "$BUILD_DIR" -DSPECDEC_BUILD_TESTS=ON -DSPECDEC_BUILD_BENCH=ON -DSPECDEC_BUILD_EXAMPLES=ON \
       -DSPECDEC_ENABLE_CUDA=ON -DSPECDEC_BUILD_GPU_PROGRAMS=ON "-DCMAKE_CUDA_ARCHITECTURES=$ARCH" > "$RESULTS/configure.log" 2>&1; then
    record PASS configure
  else
    tail -n 30 "$RESULTS/configure.log" >&2
    record FAIL configure "see configure.log"
    exit 1
  fi

  # Every target whose name contains "cuda" (tests/**/*.cu -> test_*, bench/*.cu -> bench_*), and the
  # tool whose --policy cuda tests carry the gpu label.
  all_targets="$(cmake --build "$BUILD_DIR" --target help 2>/dev/null || true)"
  mapfile -t targets < <(grep -Eo '\b(test|bench)_[A-Za-z0-9_]*cuda[A-Za-z0-9_]*' <<<"$all_targets" | sort -u)
  if grep -q 'specdec-sim' <<<"$all_targets"; then targets+=(specdec-sim); fi
  echo "GPU targets: ${targets[*]:-none}"
  section "build (-j$JOBS)"
  if [[ ${#targets[@]} -eq 0 ]]; then
    record FAIL build "no GPU targets found: is CUDA enabled? see configure.log"
    exit 1
  fi
  # Keep going past a target that fails to build, so that the others are still validated.
  keep_going=()
  case "$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")" in
    Ninja*) keep_going=(-- -k 0) ;;
    *Makefiles*) keep_going=(-- -k) ;;
  esac
  if cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}" "${keep_going[@]}" > "$RESULTS/build.log" 2>&1; then
    record PASS build "${#targets[@]} targets"
  else
    grep -E 'FAILED:|error' "$RESULTS/build.log" | head -n 20 >&2 || true
    record FAIL build "see build.log; the targets that built are still run"
  fi
fi

section "GPU tests (ctest -L gpu)"
junit=()
if ctest --help 2>/dev/null | grep -q -- '--output-junit'; then junit=(--output-junit "$RESULTS/ctest-junit.xml"); fi
if ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure "${junit[@]}" > "$RESULTS/ctest.log" 2>&1; then
  record PASS "ctest -L gpu" "$(grep -Eo '[0-9]+% tests passed.*' "$RESULTS/ctest.log" | head -n 1)"
else
  record FAIL "ctest -L gpu" "see ctest.log"
fi
if grep -q 'Skipped' "$RESULTS/ctest.log"; then
  record FAIL "ctest -L gpu: skipped tests" "a GPU test skipped on a machine with a GPU: see ctest.log"
fi

if [[ $SANITIZE -eq 1 ]]; then
  section "compute-sanitizer (ctest -L sanitizer: memcheck and racecheck of every GPU test program)"
  if [[ -z "$sanitizer" ]]; then
    record SKIP compute-sanitizer "not found"
  # In parallel: the runs are independent processes, mostly bound by the tool's host side.
  elif ctest --test-dir "$BUILD_DIR" -L sanitizer -V -j "$JOBS" > "$RESULTS/sanitizer.log" 2>&1; then
    record PASS "ctest -L sanitizer" "$(grep -Eo '[0-9]+% tests passed.*' "$RESULTS/sanitizer.log" | head -n 1)"
  else
    record FAIL "ctest -L sanitizer" "see sanitizer.log"
  fi
  if [[ -n "$sanitizer" ]] && grep -q 'Skipped' "$RESULTS/sanitizer.log"; then
    record FAIL "ctest -L sanitizer: skipped tests" "a sanitizer run skipped on a machine with the tool: see sanitizer.log"
  fi
fi

if [[ $BENCH -eq 1 ]]; then
  section "benchmarks"
  mkdir -p "$RESULTS/bench"
  read -r -a bench_args <<< "${BENCH_ARGS:-}"
  mapfile -t benches < <(find "$BUILD_DIR/bench" -maxdepth 1 -type f -executable -name 'bench_cuda_*' 2>/dev/null | sort)
  [[ ${#benches[@]} -eq 0 ]] && record SKIP benchmarks "no bench_cuda_* built (Google Benchmark missing?)"
  for exe in "${benches[@]}"; do
    name="$(basename "$exe")"
    if "$exe" --benchmark_out="$RESULTS/bench/$name.json" --benchmark_out_format=json "${bench_args[@]}" \
         > "$RESULTS/bench/$name.log" 2>&1; then
      record PASS "$name" "bench/$name.json"
    else
      record FAIL "$name" "see bench/$name.log"
    fi
  done

  section "PyTorch / FlashInfer baselines"
  mkdir -p "$RESULTS/baselines"
  mapfile -t baselines < <(find "$ROOT/bench" -maxdepth 1 -type f -name '*.py' 2>/dev/null | grep -Ei 'torch|flashinfer' | sort)
  if [[ ${#baselines[@]} -eq 0 ]]; then
    record SKIP baselines "no bench/*torch*.py or bench/*flashinfer*.py"
  elif ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1; then
    record SKIP baselines "python3 cannot import torch with CUDA"
  else
    mapfile -t bench_json < <(find "$RESULTS/bench" -maxdepth 1 -name '*.json' 2>/dev/null | sort)
    for script in "${baselines[@]}"; do
      name="$(basename "$script" .py)"
      # Adapt to what the script offers: JSON output, and speedups against specdec's benchmark JSON.
      script_help="$(python3 "$script" --help 2>&1 || true)"
      read -r -a script_args <<< "${BASELINE_ARGS:-}"
      ext=log
      if grep -q -- '--json' <<<"$script_help"; then script_args+=(--json); ext=json; fi
      if grep -q -- '--specdec' <<<"$script_help" && [[ ${#bench_json[@]} -gt 0 ]]; then
        script_args+=(--specdec "${bench_json[@]}")
      fi
      if OUT="$RESULTS/baselines" python3 "$script" "${script_args[@]}" > "$RESULTS/baselines/$name.$ext" \
           2> "$RESULTS/baselines/$name.stderr.log"; then
        record PASS "$name" "baselines/$name.$ext"
      else
        record FAIL "$name" "see baselines/$name.stderr.log"
      fi
    done
  fi
fi

section "summary ($RESULTS)"
cat "$SUMMARY"
if [[ $failures -gt 0 ]]; then
  echo "gpu-validate: $failures step(s) failed" >&2
  exit 1
fi
echo "gpu-validate: all steps passed"
