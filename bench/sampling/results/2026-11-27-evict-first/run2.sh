#!/usr/bin/env bash
# Run 2 (H100): evict-first row-pass loads (ef, run 1's) against 45d637d
# (gpu), and three additions on top of ef: efinv = the pass hands each row's
# 1/T to the combine (SV_EXP_PASS_INVT: no offsets search and temperature
# read on the combine's chain); efrace = the race's cp.async copies also
# evict-first (SV_EXP_RACE_EF); efruns = the runs kernel's L2 prefetch as one
# cp.async.bulk.prefetch.L2 a chunk with an evict-first policy
# (SV_EXP_RUNS_BULK). Alternating per shape, two rounds.
# Build: as run 1, CMAKE_CUDA_FLAGS "-DSV_EXP_EVICT_FIRST [-DSV_EXP_...]",
#   binaries copied as rejection_bench_<variant> into /tmp/efb, bundled with
#   scripts/gpu-bundle.sh /tmp/efb .gpu-ef rejection_bench_gpu ...
# Run (H100): carry .gpu-ef
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-ef/lib
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936 --dtype bf16" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" "logits,128,8,151936" "logits,128,8,151936 --dtype bf16" "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936"; do
    set -- $spec
    for v in gpu ef efinv efrace efruns; do
      printf '%-7s round %d %-34s ' "$v" "$round" "$spec"
      .gpu-ef/bin/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
cat "$OUT/run2-ab.txt"
