#!/usr/bin/env bash
# Runs every test binary of a bundle on the GPU machine, one output file each
# (the committed code's GPU suites, final-tests/). Two bundles, as the 60 MiB
# limit takes three server-test binaries apart:
#   scripts/gpu-bundle.sh build-gpu .gpu-v1 sampled_server_test tree_server_test row_copy_cuda_test
#   scripts/gpu-bundle.sh build-gpu .gpu-v2 region_server_test cuda_executor_test; strip .gpu-v*/bin/*
# Run: run(carry=[".gpu-v1"]): bash .../verify.sh .gpu-v1 $OUT/final-tests (then .gpu-v2), and
#   LD_LIBRARY_PATH=$PWD/.gpu-v1/lib compute-sanitizer --tool memcheck --error-exitcode 1 \
#     .gpu-v1/bin/sampled_server_test --gtest_filter='*PackedKvRows*:*InFlightTogether*'
#   LD_LIBRARY_PATH=$PWD/.gpu-v2/lib compute-sanitizer --tool memcheck --error-exitcode 1 \
#     .gpu-v2/bin/region_server_test --gtest_filter='*Sampled*/cuda'
set -u
b=$1; out=$2; mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/$b/lib
st=0
for t in "$b"/bin/*; do
  n=$(basename "$t")
  if "$t" > "$out/$n.txt" 2>&1; then echo "PASS $n $(grep -E '^\[  PASSED  \]' "$out/$n.txt")"; else echo "FAIL $n"; tail -20 "$out/$n.txt"; st=1; fi
  grep -E '^\[  SKIPPED \]' "$out/$n.txt" | head -2
done
exit $st
