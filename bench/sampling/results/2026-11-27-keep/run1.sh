#!/usr/bin/env bash
# Run 1 (H100): the row pass reads the head of every race share at normal
# L2 priority (the rest stays evict-first), so the race's first sweep
# step(s) find their data in L2 whichever row the decision picks.
# keep.patch against b0869c5 (kernels of 2ce133b): the launcher plans the
# race (G, share length) before the pass; LoadChunk reads the first
# SV_EXP_KEEP x 1024 elements of each share of each row with an
# evict_normal policy. keep1: the first sweep step (~18 MB at fp32 B=8),
# keep2: the first two (~36 MB).
# Build: -DCMAKE_CUDA_FLAGS=-DSV_EXP_KEEP=1 / =2 (build dirs build-keep_1,
#   build-keep_2), targets rejection_bench rejection_cuda_test; base = HEAD.
# Run (H100): carry .gpu-keep
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-keep/lib
B=.gpu-keep/bin
for v in keep1 keep2; do echo "== $v"; $B/rejection_cuda_test_$v 2>&1 | tail -3; done > "$OUT/run1-tests.txt"
cat "$OUT/run1-tests.txt"
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" "logits,128,8,151936"; do
    set -- $spec
    for v in base keep1 keep2; do
      printf '%-6s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//; s/\| read floor [0-9.]+ us \([0-9.]+ MB\)//' "$OUT/run1-ab.txt"
