#!/usr/bin/env bash
# Fetches llama.cpp and builds it as a CPU Release library for specdec's optional llama.cpp
# integration (target specdec::llama_cpp, docs/llama-cpp.md).
#
# llama.cpp's source comes from the source distribution of llama-cpp-python on PyPI (its
# vendor/llama.cpp/ directory), downloaded with `pip download`; nothing else touches the network.
# Everything lives in one cache directory, reused by later runs:
#   $CACHE/llama_cpp_python-$VERSION.tar.gz   the source distribution
#   $CACHE/src/                               llama.cpp's source tree (gguf-py/, models/ggml-vocab-*.gguf)
#   $CACHE/build/                             the CMake build
#   $CACHE/install/                           the installed library: find_package(llama) with
#                                             CMAKE_PREFIX_PATH=$CACHE/install (bin/ holds the examples)
# The last line printed is $CACHE. specdec's CMake looks there by default (SPECDEC_LLAMA_CPP_ROOT).
#
# Usage: scripts/get-llama-cpp.sh [--examples]
#   --examples   also build llama.cpp's llama-speculative-simple, llama-simple and llama-lookup (for
#                bench/llama_cpp_side_by_side.sh and bench/real_models.sh); the library alone is what
#                the tests need.
# Code generation: native (GGML_NATIVE=ON, -march=native) with the AMX instructions left out
# (-mno-amx-tile -mno-amx-int8 -mno-amx-bf16; GCC honours an explicit -mno-* whatever its place
# relative to -march). -march=native alone compiles ggml's AMX matrix kernels in on any CPU that
# advertises AMX, and on the virtual machines this project runs on the first AMX instruction
# (tilezero, in a quantized matrix product) faults with SIGILL: the CPUID bits are set but the
# tile state is not usable by the guest. Without AMX, quantized products take the AVX-512/AVX2 paths.
# Environment:
#   SPECDEC_LLAMA_CPP_ROOT     the cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/specdec/llama.cpp-$VERSION)
#   SPECDEC_LLAMA_CPP_VERSION  the llama-cpp-python version (default 0.3.36)
#   SPECDEC_LLAMA_CPP_JOBS     parallel build jobs (default: nproc)
set -euo pipefail

VERSION="${SPECDEC_LLAMA_CPP_VERSION:-0.3.36}"
CACHE="${SPECDEC_LLAMA_CPP_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/specdec/llama.cpp-$VERSION}"
JOBS="${SPECDEC_LLAMA_CPP_JOBS:-$(nproc 2>/dev/null || echo 2)}"
examples=0
for arg in "$@"; do
  case "$arg" in
    --examples) examples=1 ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "get-llama-cpp.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

PYTHON="${SPECDEC_PYTHON:-/usr/bin/python3}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
mkdir -p "$CACHE"
sdist="$CACHE/llama_cpp_python-$VERSION.tar.gz"

if [[ ! -f "$sdist" ]]; then
  echo "get-llama-cpp: downloading llama-cpp-python $VERSION (source distribution) with pip" >&2
  if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    echo "get-llama-cpp: pip is missing (apt-get install python3-pip)" >&2
    exit 1
  fi
  tmp="$(mktemp -d "$CACHE/download.XXXXXX")"
  # Only this package as a source distribution; its build requirements (for the metadata step) as wheels.
  "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-python --dest "$tmp" "llama-cpp-python==$VERSION"
  mv "$tmp"/llama_cpp_python-"$VERSION".tar.gz "$sdist"
  rm -rf "$tmp"
fi

if [[ ! -f "$CACHE/src/CMakeLists.txt" ]]; then
  echo "get-llama-cpp: unpacking llama.cpp from $sdist" >&2
  rm -rf "$CACHE/src" "$CACHE/unpack"
  mkdir -p "$CACHE/unpack"
  tar -xzf "$sdist" -C "$CACHE/unpack" "llama_cpp_python-$VERSION/vendor/llama.cpp"
  mv "$CACHE/unpack/llama_cpp_python-$VERSION/vendor/llama.cpp" "$CACHE/src"
  rm -rf "$CACHE/unpack"
fi

no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# The flags are part of the cache's identity: a build made with other flags is rebuilt.
config_id="native-noamx-1"
if [[ -f "$CACHE/install/.specdec-config" && "$(cat "$CACHE/install/.specdec-config")" != "$config_id" ]] ||
  [[ -f "$CACHE/install/.specdec-library" && ! -f "$CACHE/install/.specdec-config" ]]; then
  echo "get-llama-cpp: the cached build used other flags; rebuilding" >&2
  rm -rf "$CACHE/build" "$CACHE/install"
fi
cmake_common=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF
  "-DCMAKE_C_FLAGS=$no_amx" "-DCMAKE_CXX_FLAGS=$no_amx" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_IS_DEV=OFF "-DCMAKE_INSTALL_PREFIX=$CACHE/install" "-DCMAKE_INSTALL_RPATH=$CACHE/install/lib")
generator=()
if [[ ! -f "$CACHE/build/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi

# The library: a shared libllama + ggml for the CPU of this machine (GGML_NATIVE), installed with its
# headers and CMake package.
if [[ ! -f "$CACHE/install/.specdec-library" ]]; then
  echo "get-llama-cpp: building the llama library (CPU, Release, -j$JOBS)" >&2
  cmake -S "$CACHE/src" -B "$CACHE/build" "${generator[@]}" "${cmake_common[@]}" \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_COMMON=OFF >/dev/null
  cmake --build "$CACHE/build" -j "$JOBS"
  cmake --install "$CACHE/build" >/dev/null
  echo "$config_id" > "$CACHE/install/.specdec-config"
  touch "$CACHE/install/.specdec-library"
fi

# The examples the side-by-side benchmark runs (they need llama.cpp's common library).
if [[ "$examples" == 1 && ! -f "$CACHE/install/.specdec-examples" ]]; then
  echo "get-llama-cpp: building llama-speculative-simple, llama-simple and llama-lookup (-j$JOBS)" >&2
  cmake -S "$CACHE/src" -B "$CACHE/build" "${cmake_common[@]}" -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_COMMON=ON >/dev/null
  cmake --build "$CACHE/build" -j "$JOBS" --target llama-speculative-simple llama-simple llama-lookup
  mkdir -p "$CACHE/install/bin"
  cp "$CACHE/build/bin/llama-speculative-simple" "$CACHE/build/bin/llama-simple" "$CACHE/build/bin/llama-lookup" \
    "$CACHE/install/bin/"
  touch "$CACHE/install/.specdec-examples"
fi
echo "$CACHE"
