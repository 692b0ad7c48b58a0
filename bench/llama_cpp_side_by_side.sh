#!/usr/bin/env bash
# specdec-llama against llama.cpp's own speculative decoding (llama-speculative-simple), on the same
# GGUF pair, prompt, draft length, sampling parameters and token count, one thread each, medians of
# RUNS runs. Prints a Markdown table (bench/README.md, "llama.cpp side by side").
#
#   bench/llama_cpp_side_by_side.sh [--target T.gguf --draft D.gguf]
#
# Without --target/--draft it uses the test models of scripts/make-llama-test-models.py (target and
# draft-layers2, written into $BUILD_DIR/llama_models when missing).
# Settings (environment): RUNS (9), TOKENS (1024), GAMMA (4), PROMPT ("Once upon a time"),
# TEMP (0.8), BUILD_DIR (build-bench: configured and built here when specdec-llama is missing).
# The rows:
#   greedy            both greedy (llama.cpp --temp 0; specdec --rule greedy --temperature 0)
#   sample-and-match  llama.cpp at TEMP drafts greedily and keeps a draft iff the target's sample equals
#                     it; specdec the same (--rule sample-and-match --draft-greedy)
#   strict            specdec only: sampled drafts and the strict rule (exact, like the row above)
# Sampling: llama.cpp's defaults (top-k 40, top-p 0.95, min-p 0.05) passed to both explicitly.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${RUNS:-9}" TOKENS="${TOKENS:-1024}" GAMMA="${GAMMA:-4}" TEMP="${TEMP:-0.8}"
PROMPT="${PROMPT:-Once upon a time}"
BUILD_DIR="$(realpath -m "${BUILD_DIR:-$ROOT/build-bench}")"
target="" draft=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --target) target="$2"; shift 2 ;;
    --draft) draft="$2"; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "llama_cpp_side_by_side.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

source "$ROOT/scripts/lib.sh"
CACHE="$("$ROOT/scripts/get-llama-cpp.sh" --examples | tail -1)"
LLAMA_SPEC="$CACHE/install/bin/llama-speculative-simple"
if [[ ! -x "$BUILD_DIR/tools/specdec-llama" ]]; then
  configure "$BUILD_DIR" -DSPECDEC_LLAMA_CPP_ROOT="$CACHE" -DSPECDEC_ENABLE_LLAMA_CPP=ON >/dev/null
  cmake --build "$BUILD_DIR" --target specdec-llama -j "$(nproc)"
fi
SPECDEC_LLAMA="$BUILD_DIR/tools/specdec-llama"
if [[ -z "$target" ]]; then
  models="$BUILD_DIR/llama_models"
  [[ -f "$models/target.gguf" ]] ||
    /usr/bin/python3 "$ROOT/scripts/make-llama-test-models.py" --llama-cpp-src "$CACHE/src" --out "$models" >/dev/null
  target="$models/target.gguf" draft="$models/draft-layers2.gguf"
fi
sampling=(--top-k 40 --top-p 0.95 --min-p 0.05)
ctx=$((TOKENS + 256))

# llama: <temp> -> "tokens/s acceptance rounds" of one run (rounds = generated tokens - accepted drafts)
llama() {
  "$LLAMA_SPEC" -m "$target" -md "$draft" --spec-type draft-simple -p "$PROMPT" -n "$TOKENS" \
    --spec-draft-n-max "$GAMMA" --temp "$1" "${sampling[@]}" -c "$ctx" -t 1 -s 1 2>&1 |
    tr -d '\0' | awk '/decoded/ {n = $4; speed = $(NF - 1)} /n_accept/ {a = $NF} /accept    =/ {r = $NF}
      END {sub("%", "", r); printf "%s %.4f %d\n", speed, r / 100, n - a}'
}
# specdec: <args...> -> "tokens/s acceptance rounds"
specdec() {
  "$SPECDEC_LLAMA" --target "$target" --draft "$draft" --prompt "$PROMPT" --tokens "$TOKENS" --gamma "$GAMMA" \
    --threads 1 --quiet --ctx "$ctx" "${sampling[@]}" "$@" |
    awk '/tokens\/s/ {speed = $NF} /^target forwards/ {f = $3} /acceptance/ {a = $6; sub(",", "", a)}
      END {printf "%s %s %d\n", speed, a, f}'
}
# median of column <k> over the lines on stdin
median() { sort -g -k"$1,$1" | awk -v k="$1" '{v[NR] = $k} END {print v[int((NR + 1) / 2)]}'; }

measure() {  # measure <name> <command...>: RUNS runs, prints "tokens/s acceptance rounds" medians
  local out=""
  for _ in $(seq "$RUNS"); do out+="$("${@:2}")"$'\n'; done
  printf '%s %s %s\n' "$(median 1 <<< "$out")" "$(median 2 <<< "$out")" "$(median 3 <<< "$out")"
}

printf '| row | llama.cpp tokens/s | specdec tokens/s | ratio | llama.cpp acceptance | specdec acceptance | llama.cpp target rounds | specdec target forwards |\n'
printf '|---|---|---|---|---|---|---|---|\n'
row() {  # row <name> <llama temp or -> <specdec args...>
  local name="$1" temp="$2" l s
  shift 2
  if [[ "$temp" == "-" ]]; then l="- - -"; else l="$(measure llama llama "$temp")"; fi
  s="$(measure specdec specdec "$@")"
  read -r lt la lr <<< "$l"
  read -r st sa sr <<< "$s"
  local ratio="-"
  [[ "$lt" != "-" ]] && ratio="$(awk -v a="$st" -v b="$lt" 'BEGIN {printf "%.2fx", a / b}')"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$lt" "$st" "$ratio" "$la" "$sa" "$lr" "$sr"
}
row "greedy" 0 --rule greedy --temperature 0
row "sample-and-match, T $TEMP, greedy drafts" "$TEMP" --rule sample-and-match --draft-greedy --temperature "$TEMP"
row "strict, T $TEMP, sampled drafts" - --rule strict --temperature "$TEMP"
echo
echo "target $target, draft $draft, prompt \"$PROMPT\", $TOKENS tokens, gamma $GAMMA, $RUNS runs (medians), one thread"
