#!/usr/bin/env bash
# Run 3: the combine kernel with one load per chunk (argmax carried through
# the reduction; the statistics' loads before the temperature's lookups)
# ("combine"), and that plus warp 3 of each race block bringing the
# decision's values into L2 before the wait ("prefetch"), against the head
# (84ebeee), alternating, three rounds. Parity of both first.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test
#   at each step; scripts/gpu-bundle.sh build-gpu .gpu-c ..., binaries
#   renamed _combine / _prefetch; rejection_bench_head as in run 1.
# Run (H100): carry .gpu-c
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-c/lib
B=.gpu-c/bin
for v in combine prefetch; do
  timeout 300 $B/rejection_cuda_test_$v > "$OUT/run3-tests-$v.txt" 2>&1; echo "rc=$?" >> "$OUT/run3-tests-$v.txt"
  echo "$v: $(tail -2 "$OUT/run3-tests-$v.txt" | tr '\n' ' ')"
done
for round in 1 2 3; do
  for spec in "logits,1,8,151936 fp32" "logits,8,8,151936 fp32" "logits,8,8,151936 bf16" "logits,32,8,151936 fp32"; do
    set -- $spec
    for v in rejection_bench_head rejection_bench_combine rejection_bench_prefetch; do
      printf '%-25s round %d %-26s ' "$v" "$round" "$spec"
      timeout 120 $B/$v --only "$1" --dtype "$2" --runs 200 --csv /dev/null 2>/dev/null | grep -E "ours median|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run3-ab.txt" 2>&1
awk '{m=""; f=""; for(i=1;i<=NF;i++){if($i=="median" && m=="") m=$(i+1); else if($i=="median") f=$(i+1)}; print $1, $3, $4, $5, "ours", m, "filtered", f}' "$OUT/run3-ab.txt"
