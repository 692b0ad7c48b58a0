#!/bin/bash
# Interleaved base/new timing runs for the chain-walk comparison.
OUT=/work/main/bench/results/chain-walk-2026-11-29
mkdir -p $OUT
LOG=$OUT/loads.txt
deadline=$(date -u -d '2026-11-30 00:05:00' +%s)
while pgrep -f real_models.sh >/dev/null; do
  if [ $(date -u +%s) -ge $deadline ]; then echo "$(date -u +%FT%TZ) real_models.sh still running at the deadline; running anyway" >> $LOG; break; fi
  sleep 60
done
echo "$(date -u +%FT%TZ) start (real_models.sh running: $(pgrep -f real_models.sh | wc -l))" >> $LOG
declare -A BIN ARGS
BIN[verify]=build-bench/bench/bench_verify
ARGS[verify]="--benchmark_filter=BM_verify_strict"
BIN[simd_verify]=build-bench/bench/bench_simd_verify
ARGS[simd_verify]="--benchmark_filter=BM_verify/(seq|avx2)/"
BIN[from_logits]=build-bench/bench/bench_simd_verify_from_logits
ARGS[from_logits]="--benchmark_filter=BM_(strict/draft logits|sample_and_match)/avx2/.*/dram"
BIN[decode_step]=build-bench/bench/bench_decode_step
ARGS[decode_step]=""
for r in 1 2 3; do
  for b in verify simd_verify chain_rules from_logits decode_step; do
    for v in base new; do
      wt=/work/wt-bench-$v
      if [ $b = chain_rules ]; then exe=/work/chainwalk-extra/bench_chain_rules_$v; args="--benchmark_filter=/(seq|avx2)/"
      else exe=$wt/${BIN[$b]}; args="${ARGS[$b]}"; fi
      echo "$(date -u +%FT%TZ) r$r $v $b load: $(uptime | sed 's/.*load average: //') others: $(pgrep -f real_models.sh | wc -l)" >> $LOG
      (cd $wt && taskset -c 1 $exe ${args:+"$args"} --benchmark_out=$OUT/r$r-$v-$b.json --benchmark_out_format=json > $OUT/r$r-$v-$b.txt 2>&1)
      echo "$(date -u +%FT%TZ) r$r $v $b rc=$? " >> $LOG
    done
  done
done
echo "$(date -u +%FT%TZ) end load: $(uptime | sed 's/.*load average: //')" >> $LOG
