#!/bin/sh
# scripts/get-models.sh --check must refuse a model file of the wrong size or checksum: exit 1 and a
# message naming the file (nothing is downloaded).
# Usage: get_models_refuses_corrupt_file.sh path/to/scripts/get-models.sh
d=$(mktemp -d) || exit 2
head -c 4096 /dev/zero > "$d/gemma-3-270m-q4_k_m.gguf"
out=$(SPECDEC_MODELS_ROOT="$d" "$1" --check 2>&1)
rc=$?
rm -rf "$d"
echo "$out"
test "$rc" = 1 && echo "$out" | grep -q "gemma-3-270m-q4_k_m.gguf is missing or is not the expected file"
