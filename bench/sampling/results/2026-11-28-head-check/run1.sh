#!/bin/bash
# Run 1: the kernels at 4f0c7ac (HEAD's kernels; its review commit replaced a
# device forwarder, built but not run on a GPU before) on the GPU: the
# sampling, executor and sampled-server suites, then two rounds of issue
# #17's headline shapes (both merges, the read floor in the same process).
# Bundle (build-gpu, Release, CUDA arch 90), stripped and packed because of
# the 64 MiB carry limit:
#   scripts/gpu-bundle.sh build-gpu .gpu-pack tests/kernels/rejection_cuda_test \
#     tests/kernels/rejection_finish_test tests/server/cuda_executor_test \
#     tests/server/sampled_server_test bench/rejection_bench
#   strip .gpu-pack/bin/*; (cd .gpu-pack && tar czf ../bundle.tgz bin lib)
#   rm -rf .gpu-pack; mkdir .gpu-pack; mv bundle.tgz .gpu-pack/
cd .gpu-pack && tar xzf bundle.tgz && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for t in rejection_finish_test rejection_cuda_test cuda_executor_test sampled_server_test; do
  echo "== $t"
  timeout 300 ./bin/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure" | head -20
done
for round in 1 2; do
  for shape in "logits,8,8,151936" "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936" "logits,1,8,151936"; do
    echo "== round $round | $shape"
    ./bin/rejection_bench --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|top-k|error|code|differ"
  done
  echo "== round $round | logits,8,8,151936 bf16"
  ./bin/rejection_bench --only logits,8,8,151936 --dtype bf16 --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|error|code|differ"
done
