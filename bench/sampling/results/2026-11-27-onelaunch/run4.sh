#!/usr/bin/env bash
# Run 4: the one-chunk row pass with warp 0 alone looking up the row's
# temperature (published by the block's first barrier) against b2468ea,
# alternating, three rounds; parity first.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-w rejection_bench rejection_cuda_test;
#   b2468ea's rejection_bench (the change stashed) stripped to
#   .gpu-w/bin/rejection_bench_b2468ea.
# Run (H100): carry .gpu-w
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-w/lib
B=.gpu-w/bin
timeout 300 $B/rejection_cuda_test > "$OUT/run4-tests.txt" 2>&1; echo "rc=$?" >> "$OUT/run4-tests.txt"
tail -2 "$OUT/run4-tests.txt"
for round in 1 2 3; do
  for spec in "logits,1,8,151936 fp32" "logits,8,8,151936 fp32" "logits,8,8,151936 bf16" "logits,32,8,151936 fp32" "logits,128,8,151936 fp32"; do
    set -- $spec
    for v in rejection_bench_b2468ea rejection_bench; do
      printf '%-25s round %d %-26s ' "$v" "$round" "$spec"
      timeout 120 $B/$v --only "$1" --dtype "$2" --runs 200 --csv /dev/null 2>/dev/null | grep -E "ours median|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run4-ab.txt" 2>&1
awk '{m=""; f=""; for(i=1;i<=NF;i++){if($i=="median" && m=="") m=$(i+1); else if($i=="median") f=$(i+1)}; print $1, $3, $4, $5, "ours", m, "filtered", f}' "$OUT/run4-ab.txt"
