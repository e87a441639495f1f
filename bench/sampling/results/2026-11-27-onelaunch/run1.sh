#!/usr/bin/env bash
# Run 1: the one-launch exact-logits kernel (uncommitted working tree on
# 84ebeee) against the head binary (84ebeee), and the corrected read floor
# (distinct target and draft rows). Parity first.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-o rejection_bench rejection_cuda_test;
#   the head's rejection_bench (worktree of 84ebeee, same flags) stripped to
#   .gpu-o/bin/rejection_bench_head.
# Run (H100): carry .gpu-o
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-o/lib
B=.gpu-o/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/run1-environment.txt" 2>&1
timeout 300 $B/rejection_cuda_test > "$OUT/run1-tests.txt" 2>&1; echo "rc=$?" >> "$OUT/run1-tests.txt"
tail -3 "$OUT/run1-tests.txt"
grep -E "FAILED|Failure" "$OUT/run1-tests.txt" | head -20
for round in 1 2; do
  for spec in "logits,1,8,151936 fp32" "logits,8,8,151936 fp32" "logits,32,8,151936 fp32" "logits,8,8,151936 bf16" \
              "logits,128,8,151936 fp32" "logits,128,8,151936 bf16" "probabilities,8,8,151936 fp32" "probabilities,128,8,151936 fp32"; do
    set -- $spec
    for v in rejection_bench rejection_bench_head; do
      printf '%-22s round %d %-32s ' "$v" "$round" "$spec"
      timeout 120 $B/$v --only "$1" --dtype "$2" --runs 200 --csv /dev/null | grep -E "ours median|three launches|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
cat "$OUT/run1-ab.txt" | sed -E 's/ +/ /g' | cut -c1-400
