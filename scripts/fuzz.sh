#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz/ (one per entry point that takes untrusted data) for a
# while each, with AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   scripts/fuzz.sh                      every harness, 300 s each
#   scripts/fuzz.sh 60                   every harness, 60 s each
#   scripts/fuzz.sh 600 verify_tree      only the named harnesses (tests/fuzz/<name>.cpp)
#
# Environment: FUZZ_SECONDS (default 300; the first argument wins), BUILD_DIR (default
# <repo>/build-fuzz), FUZZ_WORK_DIR (default <BUILD_DIR>/fuzz-work), FUZZ_JOBS (parallel fuzzing
# processes per harness, default 1), FUZZ_CXXFLAGS (added to the compile flags, e.g. "-march=native"
# to fuzz the simd backend with AVX2/AVX-512 kernels instead of SSE2).
#
# It configures a clang++ Debug build with tests on (bench, examples and CUDA off) and
# CMAKE_CXX_FLAGS "-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all
# -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS" and -DSPECDEC_FUZZ=ON, builds the fuzz_<name>
# executables, and fuzzes each on <work>/<name>/corpus, which starts as a copy of
# tests/fuzz/corpus/<name>/ and keeps growing from run to run (the source tree is never written).
# A crash, a leak, a timeout (20 s), an allocation above 256 MB or an invariant violation leaves the
# input in <work>/<name>/artifacts/ and makes the script exit non-zero. At the end it prints the
# executions each harness reached (libFuzzer's -print_final_stats=1).
#
# Keeping a crash as a regression input, once the bug is fixed:
#   <BUILD_DIR>/tests/fuzz/bin/fuzz_<name> <work>/<name>/artifacts/crash-...   # reproduce (or debug)
#   cp <work>/<name>/artifacts/crash-... tests/fuzz/corpus/<name>/regression-<what-it-was>
# Every file in tests/fuzz/corpus/<name>/ is replayed by the CTest test fuzz/<name>_corpus in every
# build (any compiler), so the input stays a test. Add a Catch2 test of the fixed behaviour next to
# the code's other tests as well. New hand-made seeds: tests/fuzz/make_seeds.py.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH="${1:-${FUZZ_SECONDS:-300}}"
shift $(( $# > 0 ? 1 : 0 ))
BUILD_DIR="$(realpath -m "${BUILD_DIR:-$ROOT/build-fuzz}")"
WORK_DIR="$(realpath -m "${FUZZ_WORK_DIR:-$BUILD_DIR/fuzz-work}")"
JOBS="${FUZZ_JOBS:-1}"
BUILD_JOBS="$(nproc 2>/dev/null || echo 2)"

if ! [[ "$SECONDS_EACH" =~ ^[0-9]+$ ]]; then
  echo "scripts/fuzz.sh: the first argument is the number of seconds per harness, not '$SECONDS_EACH'" >&2
  exit 2
fi
if ! command -v clang++ >/dev/null 2>&1; then
  echo "scripts/fuzz.sh: needs clang++ (libFuzzer); install clang" >&2
  exit 2
fi

if (( $# > 0 )); then
  harnesses=("$@")
else
  harnesses=()
  for f in "$ROOT"/tests/fuzz/*.cpp; do
    name="$(basename "$f" .cpp)"
    [[ "$name" == replay_main ]] || harnesses+=("$name")
  done
fi

flags="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS"
flags="$flags ${FUZZ_CXXFLAGS:-}"
generator=()
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi
echo "==== configure ($BUILD_DIR)"
cmake -S "$ROOT" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_CXX_FLAGS=$flags" -DSPECDEC_FUZZ=ON -DSPECDEC_BUILD_TESTS=ON -DSPECDEC_BUILD_BENCH=OFF \
  -DSPECDEC_BUILD_EXAMPLES=OFF -DSPECDEC_ENABLE_CUDA=OFF >/dev/null

targets=()
for name in "${harnesses[@]}"; do
  [[ -f "$ROOT/tests/fuzz/$name.cpp" ]] || { echo "scripts/fuzz.sh: no harness tests/fuzz/$name.cpp" >&2; exit 2; }
  targets+=("fuzz_$name")
done
echo "==== build ${targets[*]} (-j$BUILD_JOBS)"
cmake --build "$BUILD_DIR" -j "$BUILD_JOBS" --target "${targets[@]}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
summary=()
for name in "${harnesses[@]}"; do
  fuzzer="$BUILD_DIR/tests/fuzz/bin/fuzz_$name"
  if [[ ! -x "$fuzzer" ]]; then  # a harness whose optional dependency is off
    summary+=("$(printf '%-24s not built (see the configure log)' "$name")")
    continue
  fi
  work="$WORK_DIR/$name"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp -n "$ROOT/tests/fuzz/corpus/$name/"* "$work/corpus/" 2>/dev/null || true
  args=(-max_total_time="$SECONDS_EACH" -print_final_stats=1 -timeout=20 -malloc_limit_mb=256
        -artifact_prefix="$work/artifacts/")
  [[ -f "$ROOT/tests/fuzz/$name.dict" ]] && args+=(-dict="$ROOT/tests/fuzz/$name.dict")
  if (( JOBS > 1 )); then
    args+=(-fork="$JOBS")
  fi
  echo "==== fuzz $name for $SECONDS_EACH s (log: $work/log.txt)"
  rc=0
  "$fuzzer" "${args[@]}" "$work/corpus" >"$work/log.txt" 2>&1 || rc=$?
  executions="$(grep -E '^stat::number_of_executed_units' "$work/log.txt" | tail -1 | awk '{print $2}')"
  if (( rc != 0 )); then
    status=1
    tail -n 40 "$work/log.txt" >&2
    summary+=("$(printf '%-24s FAILED (exit %d) after %s executions; input(s) in %s/artifacts/' "$name" "$rc" "${executions:-?}" "$work")")
  else
    summary+=("$(printf '%-24s %12s executions in %s s, corpus %s inputs' "$name" "${executions:-?}" "$SECONDS_EACH" \
      "$(find "$work/corpus" -type f | wc -l)")")
  fi
done

echo "==== summary"
printf '%s\n' "${summary[@]}"
exit "$status"
