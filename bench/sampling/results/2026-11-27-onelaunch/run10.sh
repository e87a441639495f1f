#!/usr/bin/env bash
# Run 10: the exact-logits row pass takes the draft rows first for every
# batch (it did only for filtered ones), so the target rows are the ones the
# L2 holds when the race reads its row at k; against 95b94da, alternating,
# three rounds; peaked (the headline), identical (q = p: every race a bonus
# race) and disjoint rows (residual races at k = 0). Parity first.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-t rejection_bench rejection_cuda_test;
#   95b94da's rejection_bench as .gpu-t/bin/rejection_bench_95b94da.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
timeout 300 $B/rejection_cuda_test > "$OUT/run10-tests.txt" 2>&1; echo "rc=$?" >> "$OUT/run10-tests.txt"
tail -2 "$OUT/run10-tests.txt"
for round in 1 2 3; do
  for spec in "logits,1,8,151936 fp32 peaked" "logits,8,8,151936 fp32 peaked" "logits,8,8,151936 bf16 peaked" \
              "logits,32,8,151936 fp32 peaked" "logits,128,8,151936 fp32 peaked" \
              "logits,8,8,151936 fp32 identical" "logits,8,8,151936 fp32 disjoint"; do
    set -- $spec
    if [ "$round" -gt 2 ] && [ "$1" = "logits,128,8,151936" ]; then continue; fi
    for v in rejection_bench_95b94da rejection_bench; do
      printf '%-25s round %d %-38s ' "$v" "$round" "$spec"
      timeout 120 $B/$v --only "$1" --dtype "$2" --shape "$3" --runs 200 --csv /dev/null 2>/dev/null | grep -E "ours median|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run10-ab.txt" 2>&1
awk '{m=""; f=""; for(i=1;i<=NF;i++){if($i=="median" && m=="") m=$(i+1); else if($i=="median") f=$(i+1)}; print $1, $3, $4, $5, $6, "ours", m, "filtered", f}' "$OUT/run10-ab.txt"
