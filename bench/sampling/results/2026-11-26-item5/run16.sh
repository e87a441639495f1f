#!/usr/bin/env bash
# The new test BatchesInARowOnOneScratchMatch (batches of every kind one after
# another on one scratch) can fail: run against a build whose last race block
# does not clear its sequence's ticket (rejection_cuda_test_broken), and the
# whole suite of the real build (H100).
# Build: cmake --build build-gpu --target rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-t rejection_cuda_test; then, with
#   the line `a.scratch.race_tickets[i] = 0;` of AcceptRaceKernel deleted,
#   build rejection_cuda_test in another build folder, copy it to
#   .gpu-t/bin/rejection_cuda_test_broken, and restore the line.
# Run on 2026-11-27 as run1 of ../2026-11-27-item2 (results there).
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
.gpu-t/bin/rejection_cuda_test > "$OUT/run16-tests.txt" 2>&1; echo "real build rc=$?" >> "$OUT/run16-tests.txt"
.gpu-t/bin/rejection_cuda_test_broken --gtest_filter='*BatchesInARow*:*GraphReplays*' > "$OUT/run16-broken.txt" 2>&1; echo "broken build rc=$?" >> "$OUT/run16-broken.txt"
tail -3 "$OUT/run16-tests.txt"; grep -E "FAILED|OK \]|rc=" "$OUT/run16-broken.txt" | head; grep -m3 "sequence" "$OUT/run16-broken.txt"
