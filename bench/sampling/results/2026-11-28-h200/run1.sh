#!/bin/bash
# Run 1: issue #17's shapes on the H200 (the kind lent on 2026-11-28; every
# earlier #17 figure is from an H100): parity first, then the quick
# sampling bench with PyTorch in the same run (scripts/gpu-sampling.sh),
# then each #17 shape with rejection_bench --only (both merges and the read
# floor per shape, two rounds), then greedy_bench --quick for item 4.
# Bundle (build-gpu at 1207f42; kernels as at e49f828):
#   scripts/gpu-bundle.sh build-gpu .gpu-pack rejection_bench greedy_bench rejection_cuda_test
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
echo "== rejection_cuda_test"
timeout 200 ./bin/rejection_cuda_test 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|Failure" | head
echo "== gpu-sampling --quick --no-tests"
timeout 280 bash ../scripts/gpu-sampling.sh . /tmp/s --quick --no-tests --archive $OUT/sampling.tgz 2>&1 | tail -12
for round in 1 2; do
  for shape in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" "logits,32,8,151936" \
               "probabilities,8,8,151936" "logprobs,8,8,151936" "probabilities,128,8,151936"; do
    echo "== round $round | $shape"
    ./bin/rejection_bench --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|host merge|read floor|error|differ"
  done
done
echo "== topk/topp"
./bin/rejection_bench --only logits,8,8,151936 --top-k 50 --top-p 0.9 --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|host merge|error"
echo "== greedy_bench --quick"
timeout 200 ./bin/greedy_bench --quick --runs 200 > $OUT/greedy.txt 2>&1; tail -30 $OUT/greedy.txt
