#!/usr/bin/env bash
# Real-model benchmark: model-free drafting on real GGUF models through llama.cpp, side by side with
# llama.cpp's own n-gram drafting (llama-lookup), on the same models, prompts, parameters and threads.
#
# For each target (Gemma 3 270M Q4_K_M, SmolLM2 135M Instruct Q4_1; scripts/get-models.sh), each
# thread count and each workload of bench/prompts/ (grounded, code, open: 16 prompts each), it runs
#   specdec-llama --method none | ngram | suffix | suffix --suffix-tree (trees verified as trees on
#   llama.cpp's KV cache)   x   --rule greedy (T 0) | sample-and-match (T 0.7)
#   llama-lookup (llama.cpp's prompt lookup; greedy, and its sampling at T 0.7, which is sample-and-match)
# one prompt at a time (specdec-llama --sequential; llama-lookup once per prompt), gamma / n_draft 8,
# stopping at the end-of-generation token or after $TOKENS tokens. specdec's drafters run with
# transformers' heuristic length schedule (--length heuristic: within [1, 8], +2 after a round with
# every draft accepted, -1 after a rejection) and n-grams of 3 to 5 tokens: on a CPU each drafted row
# costs the target's output layer (a third to a half of a forward for Gemma's 262,144 tokens), so
# a drafter that guesses less and better wins; llama-lookup runs with its own defaults. Generation is timed apart from
# prompt processing, as llama.cpp reports it: specdec-llama's "generation" (every step after the first)
# and llama-lookup's "decoded ... in ... seconds". Each figure is generation tokens / generation
# seconds summed over the workload's prompts; with REPEATS > 1 the median of the repeats.
#
# Usage: bench/real_models.sh            (after a build with the llama.cpp integration, e.g. scripts/demo.sh)
# Environment:
#   BUILD_DIR   where specdec-llama was built [build-demo, else build]
#   TOKENS      most tokens per prompt [64]      THREADS   thread counts ["1 2"]
#   REPEATS     runs of every configuration [1]  MODELS    which targets ["gemma smollm2"]
#   WORKLOADS   which files of bench/prompts/ ["grounded code open"]
#   OUT         results folder [bench/results/real-models-<date>]
# Writes $OUT/runs.csv (one line per configuration and repeat), $OUT/summary.md (bench/real_models_report.py)
# and $OUT/machine.txt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$([[ -x "$ROOT/build-demo/tools/specdec-llama" ]] && echo "$ROOT/build-demo" || echo "$ROOT/build")}"
TOOL="$BUILD_DIR/tools/specdec-llama"
TOKENS="${TOKENS:-64}"
THREADS="${THREADS:-1 2}"
REPEATS="${REPEATS:-1}"
MODEL_NAMES="${MODELS:-gemma smollm2}"
OUT="${OUT:-$ROOT/bench/results/real-models-$(date +%F)}"
[[ -x "$TOOL" ]] || { echo "real_models.sh: no $TOOL (build with the llama.cpp integration first)" >&2; exit 1; }

LLAMA="$("$ROOT/scripts/get-llama-cpp.sh" --examples | tail -1)/install"
MODEL_DIR="$("$ROOT/scripts/get-models.sh" | tail -1)"
LOOKUP="$LLAMA/bin/llama-lookup"
export LD_LIBRARY_PATH="$LLAMA/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$OUT"
{
  echo "date: $(date -u '+%F %T UTC')"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  lscpu | grep -E '^(Model name|CPU\(s\)|Vendor ID|Flags)' | sed 's/^Flags:\s*/flags: /' | cut -c1-400
  echo "memory: $(free -g | awk '/Mem:/ {print $2 " GiB"}')"
  echo "llama.cpp: $LLAMA (llama-cpp-python 0.3.36's vendor tree, native, no AMX)"
  echo "tokens: $TOKENS, threads: $THREADS, repeats: $REPEATS, gamma/n_draft: 8"
} > "$OUT/machine.txt"
cat "$OUT/machine.txt"

csv="$OUT/runs.csv"
echo "model,threads,workload,engine,method,rule,repeat,prompts,generated,seconds,drafted,accepted,target_forwards" > "$csv"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

model_file() {
  case "$1" in
    gemma) echo "$MODEL_DIR/gemma-3-270m-q4_k_m.gguf" ;;
    smollm2) echo "$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    *) echo "real_models.sh: unknown model $1" >&2; exit 2 ;;
  esac
}

# specdec MODEL THREADS WORKLOAD METHOD RULE REPEAT: one specdec-llama run over the workload's prompts.
specdec() {
  local rule_args=(--rule greedy --temperature 0)
  [[ "$5" == sample-and-match ]] && rule_args=(--rule sample-and-match --temperature 0.7)
  local log="$tmp/specdec.log" method_args=(--method "$4")
  [[ "$4" == suffix-tree ]] && method_args=(--method suffix --suffix-tree)
  "$TOOL" --target "$(model_file "$1")" "${method_args[@]}" "${rule_args[@]}" --gamma 8 --length heuristic --ngram-min 3 \
    --ngram-max 5 --tokens "$TOKENS" --threads "$2" \
    --prompts-file "$ROOT/bench/prompts/$3.txt" --sequential --stop-at-eos --quiet > "$log"
  local gen drafted fwd
  gen="$(sed -nE 's/.*generation: ([0-9]+) tokens in ([0-9.]+) s.*/\1,\2/p' "$log")"
  drafted="$(sed -nE 's/^drafted ([0-9]+), accepted ([0-9]+),.*/\1,\2/p' "$log")"
  fwd="$(sed -nE 's/^target forwards ([0-9]+) .*/\1/p' "$log")"
  echo "$1,$2,$3,specdec,$4,$5,$6,$(wc -l < "$ROOT/bench/prompts/$3.txt"),$gen,$drafted,$fwd" >> "$csv"
}

# lookup MODEL THREADS WORKLOAD RULE REPEAT: llama-lookup once per prompt, its figures summed.
lookup() {
  local temp=0
  [[ "$4" == sample-and-match ]] && temp=0.7
  local n=0 generated=0 seconds=0 drafted=0 accepted=0 line
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ -z "$line" ]] && continue
    printf '%b' "$line" > "$tmp/prompt.txt"
    "$LOOKUP" -m "$(model_file "$1")" -f "$tmp/prompt.txt" -n "$TOKENS" -t "$2" --spec-draft-n-max 8 --temp "$temp" \
      --seed 20261129 -c 2048 > "$tmp/lookup.log" 2>&1
    read -r g s < <(sed -nE 's/.*decoded +([0-9]+) tokens in +([0-9.]+) seconds.*/\1 \2/p' "$tmp/lookup.log")
    read -r d < <(sed -nE 's/.*n_drafted += ([0-9]+).*/\1/p' "$tmp/lookup.log")
    read -r a < <(sed -nE 's/.*n_accept += ([0-9]+).*/\1/p' "$tmp/lookup.log")
    n=$((n + 1)); generated=$((generated + g)); drafted=$((drafted + d)); accepted=$((accepted + a))
    seconds="$(awk -v a="$seconds" -v b="$s" 'BEGIN { printf "%.4f", a + b }')"
  done < "$ROOT/bench/prompts/$3.txt"
  echo "$1,$2,$3,llama-lookup,ngram,$4,$5,$n,$generated,$seconds,$drafted,$accepted," >> "$csv"
}

for model in $MODEL_NAMES; do
  for threads in $THREADS; do
    for workload in ${WORKLOADS:-grounded code open}; do
      for repeat in $(seq 1 "$REPEATS"); do
        for rule in greedy sample-and-match; do
          for method in none ngram suffix suffix-tree; do
            specdec "$model" "$threads" "$workload" "$method" "$rule" "$repeat"
          done
          lookup "$model" "$threads" "$workload" "$rule" "$repeat"
        done
        echo "done: $model, $threads thread(s), $workload, repeat $repeat" >&2
      done
    done
  done
done
python3 "$ROOT/bench/real_models_report.py" "$csv" "$OUT/machine.txt" > "$OUT/summary.md"
cat "$OUT/summary.md"
