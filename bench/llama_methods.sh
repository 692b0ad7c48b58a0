#!/usr/bin/env bash
# Every method on llama.cpp, in one run: tokens/s, tokens per target forward, positions scored per
# target forward, acceptance and where generation time goes, against target-only decoding and chain
# drafting, medians over REPEATS runs.
#
# Two parts, both through specdec-llama on one prompt at a time (--sequential), greedy (T 0) with
# the greedy rules, generation timed apart from prompt processing:
#   real   on real GGUF targets (scripts/get-models.sh; MODELS, default gemma), the methods that need no
#          draft model (none of them has a smaller sibling of its vocabulary here): target only,
#          n-gram prompt lookup, suffix chains, suffix trees verified as trees. Chains and trees get
#          the same --gamma, so at most the same positions per target forward.
#   test   on llama.cpp's tiny random-weight test models (built by the CTest fixture into
#          $BUILD_DIR/llama_models: target.gguf and the draft DRAFT, default draft-layers2), the
#          methods that need a draft model: target only, chain SD, EAGLE-2 dynamic trees, static
#          trees, MTAD's beams, SPRINTER (its verifier trained first on TRAIN labelled drafts) and SV
#          (companion COMPANION, its estimator profiled first). Those models measure overhead and
#          mechanism, not speedups: their draft costs about what the target costs (docs/llama-cpp.md).
#   self   SmolLM2 135M drafted for by itself (the only same-vocabulary pair of the real models):
#          target only, chain SD, SPRINTER, SV (SmolLM2 its own companion too). A degenerate pair:
#          every draft is the target's own token under greedy decoding, so it measures what each
#          method's machinery costs on a real model, not what a smaller draft would gain.
#   cross  a real target drafted for by a real model of another vocabulary (Gemma 3 270M by SmolLM2
#          135M, docs/cross-vocabulary.md): target only, TLI and SLEM.
#   batch  SmolLM2 135M drafted for by itself with the PROMPTS prompts as one batch (not --sequential):
#          target only, chain SD, dynamic and static trees, MTAD's beams, SPRINTER and SV, each with
#          the requests' draft forwards (SV: companion forwards) merged into one llama_decode per level,
#          beam step, SPRINTER draft step or SV round (the default) and on their own (--no-gather,
#          label suffix -own). SPRINTER's verifier is trained and SV's estimator profiled once per
#          workload (--save-verifier, --save-sv-profile) and read by every run.
#
# Usage: bench/llama_methods.sh   (after a build with the llama.cpp integration and its tests' models)
# Environment:
#   BUILD_DIR  the build [build]     TOKENS  tokens per prompt [64]     THREADS  [2]
#   REPEATS    runs per configuration [3]   PROMPTS  prompts per workload (the first N) [8]
#   MODELS     real targets ["gemma"]      WORKLOADS  files of bench/prompts/ ["grounded code"]
#   PARTS      ["real test"; add "cross" for the cross-vocabulary pair, "self" for SmolLM2 drafting for itself,
#              "batch" for the batched trees, beams, SPRINTER and SV]
#   DRAFT      the test models' draft [draft-layers2]   COMPANION  SV's companion among them [draft-layers1]
#   METHODS    only these method labels (e.g. "none sd sprinter sprinter-hidden sv") [all]   TRAIN  SPRINTER's training drafts [400]
#   OUT        results folder [bench/results/llama-methods-<date>]
# Writes $OUT/runs.csv, $OUT/summary.md (bench/llama_methods_report.py) and $OUT/machine.txt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
TOOL="$BUILD_DIR/tools/specdec-llama"
TOKENS="${TOKENS:-64}"
THREADS="${THREADS:-2}"
REPEATS="${REPEATS:-3}"
PROMPTS="${PROMPTS:-8}"
PARTS="${PARTS:-real test}"
DRAFT="${DRAFT:-draft-layers2}"
COMPANION="${COMPANION:-draft-layers1}"
TRAIN="${TRAIN:-400}"
METHODS="${METHODS:-}"
OUT="${OUT:-$ROOT/bench/results/llama-methods-$(date +%F)}"
[[ -x "$TOOL" ]] || { echo "llama_methods.sh: no $TOOL (build with the llama.cpp integration first)" >&2; exit 1; }
TEST_MODELS="$BUILD_DIR/llama_models"

mkdir -p "$OUT"
{
  echo "date: $(date -u '+%F %T UTC')"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  lscpu | grep -E '^(Model name|CPU\(s\)|Vendor ID)'
  echo "memory: $(free -g | awk '/Mem:/ {print $2 " GiB"}')"
  echo "tokens: $TOKENS, threads: $THREADS, repeats: $REPEATS, prompts per workload: $PROMPTS, parts: $PARTS${METHODS:+, methods: $METHODS}"
  echo "load before the run: $(uptime | sed 's/.*load average/load average/')"
} > "$OUT/machine.txt"
cat "$OUT/machine.txt"

csv="$OUT/runs.csv"
echo "part,model,workload,method,repeat,requests,prompt_tokens,generated,gen_seconds,target_s,draft_s,verify_s,target_forwards,positions,drafted,accepted,setup_s" > "$csv"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# run PART MODEL WORKLOAD LABEL REPEAT ARGS...: one specdec-llama run, one CSV line (none when
# METHODS leaves LABEL out). setup_s: SPRINTER's training or SV's profiling before decoding. The
# prompts run one after another (--sequential) but in the batch part.
run() {
  local part="$1" model="$2" workload="$3" label="$4" repeat="$5"
  shift 5
  [[ -z "$METHODS" || " $METHODS " == *" $label "* ]] || return 0
  head -n "$PROMPTS" "$ROOT/bench/prompts/$workload.txt" > "$tmp/prompts.txt"
  local order=(--sequential)
  [[ "$part" == batch ]] && order=()
  "$TOOL" "$@" --temperature 0 --tokens "$TOKENS" --threads "$THREADS" --prompts-file "$tmp/prompts.txt" "${order[@]}" \
    --stop-at-eos --quiet > "$tmp/log"
  local prompt gen split fwd drafted
  prompt="$(sed -nE 's/^prompt: ([0-9]+) tokens in first steps.*generation: ([0-9]+) tokens in ([0-9.]+) s.*/\1,\2,\3/p' "$tmp/log")"
  split="$(sed -nE 's/^generation time: target forward ([0-9.]+) s, drafting ([0-9.]+) s, verification ([0-9.]+) s.*/\1,\2,\3/p' "$tmp/log")"
  fwd="$(sed -nE 's/^target forwards ([0-9]+) \(llama_decode [0-9]+\), positions ([0-9]+).*/\1,\2/p' "$tmp/log")"
  drafted="$(sed -nE 's/^drafted ([0-9]+), accepted ([0-9]+),.*/\1,\2/p' "$tmp/log")"
  local setup
  setup="$(sed -nE 's/^(sprinter verifier|sv profile): .*; ([0-9.]+) s$/\2/p' "$tmp/log")"
  echo "$part,$model,$workload,$label,$repeat,$(wc -l < "$tmp/prompts.txt"),$prompt,$split,$fwd,$drafted,${setup:-0}" >> "$csv"
}

if [[ " $PARTS " == *" real "* ]]; then
  MODEL_DIR="$("$ROOT/scripts/get-models.sh" | tail -1)"
  for model in ${MODELS:-gemma}; do
    case "$model" in
      gemma) file="$MODEL_DIR/gemma-3-270m-q4_k_m.gguf" ;;
      smollm2) file="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
      *) echo "llama_methods.sh: unknown model $model" >&2; exit 2 ;;
    esac
    for workload in ${WORKLOADS:-grounded code}; do
      for repeat in $(seq 1 "$REPEATS"); do
        run real "$model" "$workload" none "$repeat" --target "$file" --method none --rule greedy
        run real "$model" "$workload" ngram "$repeat" --target "$file" --method ngram --rule greedy --gamma 6 --ngram-min 3 --ngram-max 5
        run real "$model" "$workload" suffix-chain "$repeat" --target "$file" --method suffix --rule greedy --gamma 6
        run real "$model" "$workload" suffix-tree "$repeat" --target "$file" --method suffix --suffix-tree --rule greedy --gamma 6
        echo "done: real, $model, $workload, repeat $repeat" >&2
      done
    done
  done
fi

if [[ " $PARTS " == *" test "* ]]; then
  [[ -f "$TEST_MODELS/target.gguf" ]] || { echo "llama_methods.sh: no $TEST_MODELS/target.gguf (ctest -R make_models)" >&2; exit 1; }
  pair=(--target "$TEST_MODELS/target.gguf" --draft "$TEST_MODELS/$DRAFT.gguf")
  for workload in ${WORKLOADS:-grounded code}; do
    for repeat in $(seq 1 "$REPEATS"); do
      run test "$DRAFT" "$workload" none "$repeat" --target "$TEST_MODELS/target.gguf" --method none --rule greedy
      run test "$DRAFT" "$workload" sd "$repeat" "${pair[@]}" --method sd --rule greedy --gamma 4
      run test "$DRAFT" "$workload" tree-dynamic "$repeat" "${pair[@]}" --method tree --tree dynamic --tree-width 2 --tree-nodes 6 --gamma 4 --rule greedy
      run test "$DRAFT" "$workload" tree-static "$repeat" "${pair[@]}" --method tree --tree static --tree-width 2 --gamma 3 --rule greedy
      run test "$DRAFT" "$workload" mtad "$repeat" "${pair[@]}" --method mtad --beams 4 --tau 0.5 --gamma 4
      run test "$DRAFT" "$workload" sprinter "$repeat" "${pair[@]}" --method sprinter --train-verifier "$TRAIN" --max-run 8
      run test "$DRAFT" "$workload" sprinter-hidden "$repeat" "${pair[@]}" --method sprinter --verifier-features hidden \
        --train-verifier "$TRAIN" --max-run 8
      run test "$DRAFT" "$workload" sv "$repeat" "${pair[@]}" --method sv --companion "$TEST_MODELS/$COMPANION.gguf" --gamma 4
      echo "done: test, $DRAFT, $workload, repeat $repeat" >&2
    done
  done
fi
if [[ " $PARTS " == *" cross "* ]]; then
  MODEL_DIR="$("$ROOT/scripts/get-models.sh" | tail -1)"
  gemma="$MODEL_DIR/gemma-3-270m-q4_k_m.gguf"
  smol="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
  for workload in ${WORKLOADS:-grounded code}; do
    for repeat in $(seq 1 "$REPEATS"); do
      run cross gemma+smollm2 "$workload" none "$repeat" --target "$gemma" --method none --rule greedy
      run cross gemma+smollm2 "$workload" tli "$repeat" --target "$gemma" --draft "$smol" --cross-vocab tli --rule greedy --gamma 4
      run cross gemma+smollm2 "$workload" slem "$repeat" --target "$gemma" --draft "$smol" --cross-vocab slem --rule greedy --gamma 4
      echo "done: cross, $workload, repeat $repeat" >&2
    done
  done
fi
if [[ " $PARTS " == *" self "* ]]; then
  MODEL_DIR="$("$ROOT/scripts/get-models.sh" | tail -1)"
  smol="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
  for workload in ${WORKLOADS:-grounded code}; do
    for repeat in $(seq 1 "$REPEATS"); do
      run self smollm2+smollm2 "$workload" none "$repeat" --target "$smol" --method none --rule greedy
      run self smollm2+smollm2 "$workload" sd "$repeat" --target "$smol" --draft "$smol" --method sd --rule greedy --gamma 4
      run self smollm2+smollm2 "$workload" sprinter "$repeat" --target "$smol" --draft "$smol" --method sprinter \
        --train-verifier "$TRAIN" --max-run 8
      run self smollm2+smollm2 "$workload" sprinter-hidden "$repeat" --target "$smol" --draft "$smol" --method sprinter \
        --verifier-features hidden --train-verifier "$TRAIN" --max-run 8
      run self smollm2+smollm2 "$workload" sv "$repeat" --target "$smol" --draft "$smol" --method sv --companion "$smol" --gamma 4
      echo "done: self, $workload, repeat $repeat" >&2
    done
  done
fi
if [[ " $PARTS " == *" batch "* ]]; then
  MODEL_DIR="$("$ROOT/scripts/get-models.sh" | tail -1)"
  smol="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
  self=(--target "$smol" --draft "$smol")
  for workload in ${WORKLOADS:-grounded code}; do
    head -n "$PROMPTS" "$ROOT/bench/prompts/$workload.txt" > "$tmp/setup-prompts.txt"
    learnt=(--prompts-file "$tmp/setup-prompts.txt" --tokens 1 --threads "$THREADS" --quiet)
    "$TOOL" "${self[@]}" --method sprinter --train-verifier "$TRAIN" --max-run 8 --save-verifier "$tmp/verifier.txt" "${learnt[@]}" > /dev/null
    "$TOOL" "${self[@]}" --method sv --companion "$smol" --gamma 4 --save-sv-profile "$tmp/sv-profile.txt" "${learnt[@]}" > /dev/null
    for repeat in $(seq 1 "$REPEATS"); do
      run batch smollm2+smollm2 "$workload" none "$repeat" --target "$smol" --method none --rule greedy
      run batch smollm2+smollm2 "$workload" sd "$repeat" "${self[@]}" --method sd --rule greedy --gamma 4
      for own in "" "--no-gather"; do
        suffix="${own:+-own}"
        run batch smollm2+smollm2 "$workload" "tree-dynamic$suffix" "$repeat" "${self[@]}" --method tree --tree dynamic \
          --tree-width 2 --tree-nodes 6 --gamma 4 --rule greedy $own
        run batch smollm2+smollm2 "$workload" "tree-static$suffix" "$repeat" "${self[@]}" --method tree --tree static \
          --tree-width 2 --gamma 3 --rule greedy $own
        run batch smollm2+smollm2 "$workload" "mtad$suffix" "$repeat" "${self[@]}" --method mtad --beams 4 --tau 0.5 --gamma 4 $own
        run batch smollm2+smollm2 "$workload" "sprinter$suffix" "$repeat" "${self[@]}" --method sprinter --max-run 8 \
          --load-verifier "$tmp/verifier.txt" $own
        run batch smollm2+smollm2 "$workload" "sv$suffix" "$repeat" "${self[@]}" --method sv --companion "$smol" --gamma 4 \
          --load-sv-profile "$tmp/sv-profile.txt" $own
      done
      echo "done: batch, $workload, repeat $repeat" >&2
    done
  done
fi
echo "load after the run: $(uptime | sed 's/.*load average/load average/')" >> "$OUT/machine.txt"
python3 "$ROOT/bench/llama_methods_report.py" "$csv" "$OUT/machine.txt" > "$OUT/summary.md"
cat "$OUT/summary.md"
