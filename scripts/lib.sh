# shellcheck shell=bash
# Shared by scripts/test.sh and scripts/demo.sh (sourced, not run).

# section TEXT: a visible header in the log.
section() { printf '\n==== %s ====\n' "$*" >&2; }

# configure BUILD_DIR [CMAKE ARGS...]: a Release configure of the repository, with Ninja when it is
# installed (only for a new build directory) and the extra arguments of $SPECDEC_CMAKE_ARGS last.
configure() {
  local build_dir="$1"
  shift
  local extra_args=() generator_args=()
  if [[ -n "${SPECDEC_CMAKE_ARGS:-}" ]]; then
    read -r -a extra_args <<< "$SPECDEC_CMAKE_ARGS"
  fi
  if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
    generator_args=(-G Ninja)
  fi
  cmake -S "$ROOT" -B "$build_dir" "${generator_args[@]}" -DCMAKE_BUILD_TYPE=Release "$@" "${extra_args[@]}"
}
