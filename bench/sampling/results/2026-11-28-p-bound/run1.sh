#!/bin/bash
# Run 1: the residual race's hopeless test on p's bound alone (p-bound.patch:
# max(0, p - q) <= p, so the hot path takes no ex2 of the draft values; the
# draft bounds are computed only for the seeding and the certainty test)
# against HEAD's kernels, alternating, three rounds; then the patched
# kernels' parity suite. Bundle: scripts/gpu-bundle.sh build-gpu .gpu-pack
# bench/rejection_bench (HEAD = 4f0c7ac's kernels), plus the patched build's
# rejection_bench (as rejection_bench_exp) and rejection_cuda_test (as
# rejection_cuda_test_exp), from a worktree at b70a620 + the patch built with
# -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90; all stripped.
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for round in 1 2 3; do
  for shape in "logits,8,8,151936" "logprobs,8,8,151936" "probabilities,8,8,151936" "logits,32,8,151936" "logprobs,128,8,151936"; do
    for bin in rejection_bench rejection_bench_exp; do
      echo "== round $round | $shape | $bin"
      ./bin/$bin --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|error|code|differ"
    done
  done
  for bin in rejection_bench rejection_bench_exp; do
    echo "== round $round | logits,8,8,151936 bf16 | $bin"
    ./bin/$bin --only logits,8,8,151936 --dtype bf16 --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|error|code|differ"
  done
done
echo "== rejection_cuda_test_exp"
timeout 300 ./bin/rejection_cuda_test_exp 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure" | head -20
