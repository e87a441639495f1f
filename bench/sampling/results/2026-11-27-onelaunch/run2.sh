#!/usr/bin/env bash
# Run 2: where the time goes, one launch against three. Variants of the
# run-1 tree built with SV_EXPERIMENT_STOP=1 (stop after the normalizer
# pass: phase 1 of the one-launch kernel; the row-pass launch alone) and =2
# (after the combine: phases 1-2; the pass and combine launches), and the
# full binary. Each process times the launcher's choice (one launch) and
# the three-launch path ("three launches") on the same inputs.
# Build: /tmp/var/build.sh NAME "-DSV_EXPERIMENT_STOP=N" (compile commands of
#   build-gpu plus the define, linked like rejection_bench), copied to
#   .gpu-o/bin/rejection_bench_stop1 / _stop2.
# Run (H100): carry .gpu-o
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-o/lib
B=.gpu-o/bin
for round in 1 2; do
  for spec in "logits,1,8,151936 fp32" "logits,8,8,151936 fp32" "logits,8,8,151936 bf16" "logits,32,8,151936 fp32"; do
    set -- $spec
    for v in rejection_bench_stop1 rejection_bench_stop2 rejection_bench; do
      printf '%-22s round %d %-26s ' "$v" "$round" "$spec"
      timeout 120 $B/$v --only "$1" --dtype "$2" --runs 200 --csv /dev/null 2>/dev/null | grep -E "ours median|three launches" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
sed -E 's/ +/ /g; s/gamma=8 V=151936 //g; s/\| launch.*//' "$OUT/run2-ab.txt"
