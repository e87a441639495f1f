#!/usr/bin/env bash
# Run 6 (H100): the committed host-decided path. Kernel parity (every grid
# case through GreedyPlannedPack), memcheck on the planned pack, the CUDA
# executor and region tests (host decisions and both device paths), then
# greedy_bench --quick (host_decided beside fused, two-step and the D2D copy,
# same process).
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-s greedy_cuda_test cuda_executor_test \
#   cuda_region_test cuda_ipc_worker greedy_bench row_copy_cuda_test
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-s/lib
B=.gpu-s/bin
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$OUT/run6-environment.txt" 2>&1
timeout 300 $B/greedy_cuda_test > "$OUT/run6-greedy_cuda_test.txt" 2>&1; echo "greedy_cuda_test rc=$?"; tail -3 "$OUT/run6-greedy_cuda_test.txt"
timeout 120 $B/row_copy_cuda_test > "$OUT/run6-row_copy_cuda_test.txt" 2>&1; echo "row_copy_cuda_test rc=$?"; tail -1 "$OUT/run6-row_copy_cuda_test.txt"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/greedy_cuda_test --gtest_filter='GreedyPlanned*:Ragged/*:StagedTiles/*' > "$OUT/run6-memcheck.txt" 2>&1; echo "memcheck rc=$?"; tail -2 "$OUT/run6-memcheck.txt"
timeout 300 $B/cuda_executor_test > "$OUT/run6-cuda_executor_test.txt" 2>&1; echo "cuda_executor_test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/run6-cuda_executor_test.txt" | head
(cd $B && timeout 200 ./cuda_region_test) > "$OUT/run6-cuda_region_test.txt" 2>&1; echo "cuda_region_test rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/run6-cuda_region_test.txt" | head
timeout 400 $B/greedy_bench --quick --runs 200 --csv "$OUT/run6-greedy_bench.csv" > "$OUT/run6-greedy_bench.txt" 2>&1; echo "greedy_bench rc=$?"; cat "$OUT/run6-greedy_bench.txt" | grep -v calib
