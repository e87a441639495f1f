#!/usr/bin/env bash
# Run 2 (H100): the dry run through the same inlined loop body (warm.patch):
# the race kernel's decision and sweep in a two-round loop (#pragma unroll 1):
#   warps 1-7 run round 0 on a dry share (the block's first quads of target
#   row 0; the residual instantiation; results and bounds discarded), then
#   all warps round 1 (the wait, warp 0's decision, the barrier, the real
#   sweep), so the dry run executes the real sweep's instruction addresses.
#   warm1: exact logits only (while the block waits for the normalizers);
#   warm2: every mode (beside warp 0's decision).
# Build: -DCMAKE_CUDA_FLAGS=-DSV_EXP_WARM=1 / =2 (build dirs build-warm_1,
#   build-warm_2), targets rejection_bench rejection_cuda_test; base = HEAD.
# Run (H100): carry .gpu-warm
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-warm/lib
B=.gpu-warm/bin
for v in warm1 warm2; do echo "== $v"; $B/rejection_cuda_test_$v 2>&1 | tail -3; done > "$OUT/run2-tests.txt"
cat "$OUT/run2-tests.txt"
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936"; do
    set -- $spec
    for v in base warm1 warm2; do
      printf '%-8s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//; s/\| read floor [0-9.]+ us \([0-9.]+ MB\)//' "$OUT/run2-ab.txt"
