#!/usr/bin/env bash
# Run 2 (H100): the committed executor (93ab945): cuda_executor_test (every
# path copied and mapped over the grid; overlapping slots all on the device,
# and mixed: batches up to 1000 draft tokens decided on the host) and
# cuda_region_test (region rows gathered straight to their packed place),
# the executor test once more under compute-sanitizer memcheck.
#   scripts/gpu-bundle.sh build-gpu .gpu-s cuda_executor_test cuda_region_test cuda_ipc_worker
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-s/lib
B=.gpu-s/bin
timeout 300 $B/cuda_executor_test > "$OUT/run2-cuda_executor_test.txt" 2>&1; echo "cuda_executor_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED|OK \]" "$OUT/run2-cuda_executor_test.txt" | head -30
(cd $B && timeout 200 ./cuda_region_test) > "$OUT/run2-cuda_region_test.txt" 2>&1; echo "cuda_region_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/run2-cuda_region_test.txt" | head
timeout 400 compute-sanitizer --tool memcheck --error-exitcode 9 $B/cuda_executor_test \
  --gtest_filter='EveryPath/*host_decided*:Decisions/*' > "$OUT/run2-memcheck.txt" 2>&1; echo "memcheck rc=$?"
tail -3 "$OUT/run2-memcheck.txt"
