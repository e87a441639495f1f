#!/bin/bash
# Run 4: after the review commit that gives the race's flag bits and outcome
# precedence one definition (RaceOutcomeCode, shared by the device merge and
# FinishRejectionOutcomes): the sampling, executor and served suites, memcheck
# of the sampling kernels, and two rounds of the headline shapes (both merges)
# to check the timings did not move. Bundle as run 1 (build-gpu at the
# review commit), packed.
cd .gpu-pack && tar xzf bundle.tgz && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for t in rejection_finish_test rejection_cuda_test cuda_executor_test sampled_server_test; do
  echo "== $t"
  timeout 300 ./bin/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure" | head -20
done
echo "== memcheck rejection_cuda_test"
timeout 280 compute-sanitizer --tool memcheck --error-exitcode 3 ./bin/rejection_cuda_test --gtest_brief=1 \
  --gtest_filter='RejectionCudaTest.*' 2>&1 | grep -E "PASSED|FAILED|ERROR SUMMARY"
for round in 1 2; do
  for shape in "logits,8,8,151936" "probabilities,8,8,151936" "logprobs,8,8,151936" "probabilities,128,8,151936"; do
    echo "== round $round | $shape"
    ./bin/rejection_bench --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|error|code|differ"
  done
done
