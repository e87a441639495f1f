#!/bin/bash
# Run 1: the host-finished race merge (RejectionBatchOutput::race_slots) against
# the device merge, the same rejection_bench binary timing both per shape
# (cuda_rejection = device merge, "host merge" = slots folded on the host),
# with the read floor of the same run; two rounds over issue #17's shapes.
# Then the parity suite. Bundle: .gpu-pack (build-gpu,
# Release, CUDA arch 90): rejection_bench, rejection_cuda_test (the server
# suites in run 2: the bundle limit).
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
git_rev=$(cat REVISION 2>/dev/null); echo "revision: $git_rev"
for round in 1 2; do
  for shape in "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936" \
               "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" \
               "logits,1,8,151936 --dtype bf16" "logits,32,8,151936" "logits,128,8,151936 --dtype bf16"; do
    echo "== round $round | $shape"
    ./bin/rejection_bench --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|top-k|error|code|differ"
  done
done
for t in rejection_cuda_test; do
  echo "== $t"
  timeout 300 ./bin/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|Failure|error" | head -20
done
echo "== memcheck (host and device merges)"
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 ./bin/rejection_cuda_test \
  --gtest_filter='RejectionCudaTest.BatchesInARow*:RejectionCudaTest.GraphReplays*:RejectionCudaTest.BadValues*:RejectionCudaTest.HostMerge*:RejectionCudaTest.TargetShape*' 2>&1 | tail -4
echo "== racecheck"
timeout 300 compute-sanitizer --tool racecheck --error-exitcode 1 ./bin/rejection_cuda_test \
  --gtest_filter='RejectionCudaTest.GraphReplays*:RejectionCudaTest.BadValues*' 2>&1 | tail -3
