#!/bin/bash
# Run 3: three more rounds of the shapes whose targets sit near the line
# (fp32 logits B=8 against 1.5x its floor, with top-k 50 + top-p 0.9 under
# both merges for item 3; probabilities B=8 and B=128; log-probabilities B=8),
# the benchmark now also timing the filtered call host-merged; then
# sampled_server_test with the new swept-row NaN case. Bundle: .gpu-pack
# (build-gpu, Release, CUDA arch 90): rejection_bench, sampled_server_test.
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "revision: $(cat REVISION)"
for round in 3 4 5; do
  for shape in "logits,8,8,151936" "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936"; do
    echo "== round $round | $shape"
    ./bin/rejection_bench --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|top-k|error|code|differ"
  done
done
echo "== sampled_server_test"
timeout 240 ./bin/sampled_server_test 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|Failure|NanOnly" | head -20
