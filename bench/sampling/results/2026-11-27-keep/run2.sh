#!/usr/bin/env bash
# Run 2 (H100): run 1's idea with the per-load policy choice made cheap
# (run 1's modulo and loop per load slowed the pass itself, even at B=128
# where it kept 1% of the bytes). keep.patch against b0869c5: the launcher
# plans the race before the pass and hands the pass, per chunk, a 32-bit
# mask of the (round, warp) segments of 128 values that lie in a race
# share's first SV_EXP_KEEP x 1024 values; LoadChunk picks the evict_normal
# policy for those by one shift and select per load. keep0: the same code
# with an empty mask (its cost alone); keep1 / keep2: the first one / two
# sweep steps of every share kept (~18 / ~36 MB at fp32 B=8).
# Build: -DCMAKE_CUDA_FLAGS=-DSV_EXP_KEEP=0 / 1 / 2 (build-keep_0 .. _2),
#   targets rejection_bench rejection_cuda_test; base = HEAD.
# Run (H100): carry .gpu-keep
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-keep/lib
B=.gpu-keep/bin
for v in keep1; do echo "== $v"; $B/rejection_cuda_test_$v 2>&1 | tail -3; done > "$OUT/run2-tests.txt"
cat "$OUT/run2-tests.txt"
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" "logits,128,8,151936"; do
    set -- $spec
    for v in base keep0 keep1 keep2; do
      printf '%-6s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//; s/\| read floor [0-9.]+ us \([0-9.]+ MB\)//' "$OUT/run2-ab.txt"
