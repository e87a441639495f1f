#!/bin/bash
# Run 1: the race's cp.async ring 5 and 6 quads per row and thread deep
# (lookahead5.patch; lookahead 6 is the same patch with 6) against HEAD's 4,
# alternating, two rounds; then the lookahead-5 kernels' parity suite.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-pack bench/rejection_bench
# (HEAD, 4f0c7ac's kernels) + rejection_bench_la5, rejection_bench_la6 and
# rejection_cuda_test_la5 from worktrees at 3a9fbe9 + the patch (Release,
# CUDA arch 90); all stripped.
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for round in 1 2; do
  for shape in "probabilities,8,8,151936" "logprobs,8,8,151936" "logits,8,8,151936" "probabilities,128,8,151936" "logits,32,8,151936" "logits,1,8,151936"; do
    for bin in rejection_bench rejection_bench_la5 rejection_bench_la6; do
      echo "== round $round | $shape | $bin"
      ./bin/$bin --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|error|code|differ"
    done
  done
  for bin in rejection_bench rejection_bench_la5 rejection_bench_la6; do
    echo "== round $round | logits,8,8,151936 bf16 | $bin"
    ./bin/$bin --only logits,8,8,151936 --dtype bf16 --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|error|code|differ"
  done
done
echo "== rejection_cuda_test_la5"
timeout 300 ./bin/rejection_cuda_test_la5 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure" | head -20
