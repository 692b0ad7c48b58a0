#!/usr/bin/env bash
# Installs what specdec's build, tests, benchmarks and examples need on Debian 12 (or Ubuntu):
# cmake, g++, ninja, Eigen, xsimd, Boost.Math, Catch2 v2, Google Benchmark, gnuplot, NumPy, pip, and clang with its
# sanitizer/libFuzzer runtimes, clang-format, clang-tidy and doxygen.
# Only the missing packages are installed (apt-get, through sudo when not root).
# Used by scripts/test.sh and scripts/demo.sh (--core: without the clang tools). Set SPECDEC_SKIP_DEPS=1
# to skip this step.
set -euo pipefail

if [[ "${SPECDEC_SKIP_DEPS:-0}" == "1" ]]; then
  echo "install-deps: SPECDEC_SKIP_DEPS=1, not checking packages"
  exit 0
fi

# package name -> why it is needed
packages=(
  cmake            # build system (>= 3.23; 3.25 for CMakePresets.json)
  g++              # C++20 compiler
  libeigen3-dev    # specdec::learn
  libxsimd-dev     # specdec::simd
  libboost-math-dev  # specdec::stats (header-only use)
  catch2           # tests (Catch2 v2)
  libbenchmark-dev # bench/
  gnuplot-nox      # specdec-sim --plot (tools/)
  ninja-build      # the generator of the CMake presets (CMakePresets.json)
  python3-numpy    # examples/conformance_numpy.py and scripts/make-llama-test-models.py (tests)
  python3-pip      # scripts/get-llama-cpp.sh, scripts/get-models.sh: llama.cpp's source and the real models from PyPI
  python3-venv     # python/run-tests.sh: the Python package's virtual environment
  python3-dev      # the Python package's extension module (Python.h)
)
# What only scripts/test.sh and the analysis scripts need (left out with --core, as scripts/demo.sh does).
if [[ "${1:-}" != "--core" ]]; then
  packages+=(
    clang            # second compiler: the sanitizer and fuzzing build (scripts/test.sh)
    libclang-rt-dev  # clang's AddressSanitizer, UBSan and libFuzzer runtimes
    clang-format     # scripts/format.sh
    clang-tidy       # scripts/tidy.sh
    doxygen          # the API reference (target docs; the docs stage of scripts/test.sh)
  )
fi

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: not a Debian-like system (no dpkg/apt-get); make sure these are installed:"
  printf '  %s\n' "${packages[@]}"
  exit 0
fi

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for p in "${packages[@]}"; do
  if installed "$p"; then
    continue
  fi
  # Tools installed some other way (e.g. a newer cmake from pip or Kitware) are fine too.
  case "$p" in
    cmake) command -v cmake >/dev/null 2>&1 && continue ;;
    g++) command -v g++ >/dev/null 2>&1 && continue ;;
    ninja-build) command -v ninja >/dev/null 2>&1 && continue ;;
  esac
  missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "install-deps: not root and no sudo; install these first: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
