#!/usr/bin/env bash
# Run 3 (H100): the new SixteenBitPassFindsInfinitiesAndNaNsInWholeChunks
# test on HEAD (the whole suite), and against a build whose packed minimum is
# broken on purpose (`low = 0.0f`: -inf goes unseen), where it must fail.
# Build: cmake --build build-gpu --target rejection_cuda_test; the broken one
#   from a worktree with that one line changed.
# Run (H100): carry .gpu-tb
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-tb/lib
{
  echo "== HEAD"; .gpu-tb/bin/rejection_cuda_test 2>&1 | grep -E "SixteenBit|PASSED|FAILED" | tail -5
  echo "== broken packed minimum"; .gpu-tb/bin/rejection_cuda_test_broken --gtest_filter='*SixteenBit*' 2>&1 | grep -E "sequence|SixteenBit|PASSED|FAILED" | head -12
} | tee "$OUT/run3-tests.txt"
