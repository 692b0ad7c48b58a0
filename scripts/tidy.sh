#!/usr/bin/env bash
# Runs clang-tidy (the checks of .clang-tidy) over every public header: one header-check translation unit per header
# (cmake/specdecHeaderCheck.cmake), the core group first, then simd, learn, stats and conformance; CUDA headers are not checked.
#   scripts/tidy.sh                         configure build-tidy/ (compile commands; nothing is built) and check
#   scripts/tidy.sh tests/acceptance/tree.cpp ...   also these sources (their own code and the specdec headers)
#   TIDY_GROUPS="core simd" scripts/tidy.sh only these header groups (core simd learn stats conformance; "" = sources only)
#   TIDY_BUILD_DIR=/tmp/t  CLANG_TIDY=clang-tidy-18  TIDY_JOBS=2   build directory, binary, parallel runs
# Time on one core (clang-tidy 14): about 8 minutes for the 132 header units, about a minute more per test source, so
# this is a script to run before a release or after a large change, not a CI step. Header units instantiate no template:
# pass a few tests to have the templates they use checked too. Prints each finding once; exits non-zero on any.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/lib.sh"   # find_clang_tool
BUILD_DIR="$(realpath -m "${TIDY_BUILD_DIR:-$ROOT/build-tidy}")"
GROUPS_TO_CHECK="${TIDY_GROUPS-core simd learn stats conformance}"
JOBS="${TIDY_JOBS:-1}"

CT="$(find_clang_tool clang-tidy CLANG_TIDY)"

# Header-check units are written at configure time, so configuring is enough (a re-configure picks up new headers).
generator_args=()
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
  generator_args=(-G Ninja)
fi
cmake -S "$ROOT" -B "$BUILD_DIR" "${generator_args[@]}" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_BUILD_TYPE=Release \
  -DSPECDEC_BUILD_TESTS=ON -DSPECDEC_BUILD_BENCH=OFF -DSPECDEC_BUILD_EXAMPLES=OFF -DSPECDEC_ENABLE_CUDA=OFF >/dev/null

sources=()
for g in $GROUPS_TO_CHECK; do
  if [[ -d "$BUILD_DIR/tests/header_check/$g" ]]; then
    while IFS= read -r f; do sources+=("$f"); done < <(find "$BUILD_DIR/tests/header_check/$g" -name '*.cpp' | sort)
  elif [[ -n "${TIDY_GROUPS+set}" ]]; then
    echo "scripts/tidy.sh: no $g header checks (no such headers, or their dependency is off)" >&2
  fi
done
for f in "$@"; do sources+=("$(realpath -m "$f")"); done
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "scripts/tidy.sh: nothing to check" >&2
  exit 2
fi

log_dir="$BUILD_DIR/tidy-logs"
rm -rf "$log_dir"
mkdir -p "$log_dir"
echo "clang-tidy ($CT) on ${#sources[@]} translation units, $JOBS at a time; logs in $log_dir" >&2
start=$SECONDS
# Each unit writes its own log; a non-zero exit (a warning, with --warnings-as-errors, or a compile error) is recorded.
# shellcheck disable=SC2016  # the sh -c script expands its own positional parameters
printf '%s\0' "${sources[@]}" | xargs -0 -P "$JOBS" -I{} sh -c '
  log="$2/$(echo "$3" | tr / _).log"
  "$1" -p "$4" --quiet --warnings-as-errors="*" "$3" >"$log" 2>&1 || echo "$3" >>"$2/failed"
' sh "$CT" "$log_dir" {} "$BUILD_DIR"

# A header's finding shows up in every unit that includes it: print each one once.
findings="$(cat "$log_dir"/*.log | grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error): ' | sort -u || true)"
echo "clang-tidy took $((SECONDS - start)) s" >&2
if [[ -s "$log_dir/failed" ]]; then
  if [[ -n "$findings" ]]; then
    printf '%s\n' "$findings"
    echo "scripts/tidy.sh: $(printf '%s\n' "$findings" | wc -l) finding(s) in $(wc -l <"$log_dir/failed") unit(s); details in $log_dir" >&2
  else
    echo "scripts/tidy.sh: clang-tidy failed on:" >&2
    cat "$log_dir/failed" >&2
  fi
  exit 1
fi
echo "scripts/tidy.sh: no findings" >&2
