#!/usr/bin/env bash
# Run 1 (H100): does a cold instruction cache make the race's first sweep
# step slow? warm.patch (against b0869c5, kernels of 2ce133b):
#   noinline: the three SweepShare instantiations become __noinline__
#             functions (SweepShareCall), one copy of each sweep's code;
#   warm2:    the same, plus warps 1-3 (residual sweep) and 4-7 (bonus sweep)
#             run one dry sweep step on the block's first quads (results
#             discarded) before the decision: while the exact-logits race
#             waits for the normalizers, and (=2) in the other modes beside
#             warp 0's decision.
# Build: -DCMAKE_CUDA_FLAGS=-DSV_EXP_NOINLINE / -DSV_EXP_WARM=2 (build dirs
#   build-noinline, build-warm_2), targets rejection_bench rejection_cuda_test.
# Run (H100): carry .gpu-warm
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-warm/lib
B=.gpu-warm/bin
$B/rejection_cuda_test_warm2 2>&1 | tail -3 > "$OUT/run1-tests.txt"
cat "$OUT/run1-tests.txt"
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936"; do
    set -- $spec
    for v in base noinline warm2; do
      printf '%-8s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//; s/\| read floor [0-9.]+ us \([0-9.]+ MB\)//' "$OUT/run1-ab.txt"
