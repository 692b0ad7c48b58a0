#!/bin/bash
# Follow-up: the cases whose three-round ratio fell outside 0.95-1.05, again, interleaved, min time 1 s.
OUT=/work/main/bench/results/chain-walk-2026-11-29/check
mkdir -p $OUT
LOG=$OUT/loads.txt
for r in 1 2 3; do
  for b in chain_rules verify from_logits simd_verify decode_step; do
    for v in base new; do
      wt=/work/wt-bench-$v
      case $b in
        chain_rules) exe=/work/chainwalk-extra/bench_chain_rules_$v; f='/seq/' ;;
        verify) exe=$wt/build-bench/bench/bench_verify; f='BM_verify_strict/(B:1/gamma:8/V:128256|B:64/gamma:4/V:128256|B:16/gamma:4/V:32000)' ;;
        from_logits) exe=$wt/build-bench/bench/bench_simd_verify_from_logits; f='BM_(strict/draft logits|sample_and_match)/avx2/gamma:(4|8)/V:128256/dram' ;;
        simd_verify) exe=$wt/build-bench/bench/bench_simd_verify; f='BM_verify/avx2/B:64/gamma:4/V:32000' ;;
        decode_step) exe=$wt/build-bench/bench/bench_decode_step; f='B:(256/V:32000|64/V:128256)' ;;
      esac
      echo "$(date -u +%FT%TZ) r$r $v $b load: $(uptime | sed 's/.*load average: //')" >> $LOG
      (cd $wt && taskset -c 1 $exe "--benchmark_filter=$f" --benchmark_min_time=1 --benchmark_out=$OUT/r$r-$v-$b.json --benchmark_out_format=json > $OUT/r$r-$v-$b.txt 2>&1)
      echo "$(date -u +%FT%TZ) r$r $v $b rc=$?" >> $LOG
    done
  done
done
echo "$(date -u +%FT%TZ) end load: $(uptime | sed 's/.*load average: //')" >> $LOG
