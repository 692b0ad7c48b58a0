# shellcheck shell=bash
# Shared by the scripts under scripts/ (sourced, not run).

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

# find_clang_tool TOOL VAR: prints the path of $VAR if set, else of TOOL, TOOL-14 ... TOOL-30 (the
# first found); fails with a message naming the Debian package otherwise.
find_clang_tool() {
  local tool="$1" var="$2" v
  if [[ -n "${!var:-}" ]]; then
    command -v "${!var}" && return
    echo "$var=${!var} is not an executable" >&2
    return 1
  fi
  for v in "$tool" "$tool-14" $(seq -f "$tool-%g" 15 30); do
    command -v "$v" && return
  done
  echo "no $tool found (apt-get install $tool, or set $var)" >&2
  return 1
}
