#!/usr/bin/env bash
# Run 2 (H100): the committed change (RowPassKernel at 8 blocks per SM for
# 16-bit rows, fp32 unchanged) against 1bc3dc8: rejection_cuda_test,
# memcheck over RejectionCudaTest.*, racecheck of the row-pass, filtered
# and batches-in-a-row tests, then alternating A/B, three rounds.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-d rejection_bench rejection_cuda_test;
#   1bc3dc8's rejection_bench as .gpu-d/bin/rejection_bench_base.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
B=.gpu-d/bin
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$OUT/run2-environment.txt" 2>&1
timeout 300 $B/rejection_cuda_test --gtest_brief=1 > "$OUT/run2-tests.txt" 2>&1; echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/run2-tests.txt | tr '\n' ' ')"
timeout 400 compute-sanitizer --tool memcheck $B/rejection_cuda_test --gtest_filter='RejectionCudaTest.*' > "$OUT/run2-memcheck.txt" 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $OUT/run2-memcheck.txt)"
timeout 300 compute-sanitizer --tool racecheck $B/rejection_cuda_test --gtest_filter='RejectionCudaTest.GreedyFiltered*:RejectionCudaTest.RowPass*:RejectionCudaTest.BatchesInARow*:RejectionCudaTest.EachRowIsNormalized*' > "$OUT/run2-racecheck.txt" 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/run2-racecheck.txt)"
for round in 1 2 3; do
  for spec in "logits,8,8,151936 --dtype bf16" "logits,8,8,151936 --dtype fp16" "logits,1,8,151936 --dtype bf16" "logits,16,8,151936 --dtype bf16" "logits,8,8,151936"; do
    set -- $spec
    for v in rejection_bench_base rejection_bench; do
      printf '%-22s round %d %-34s ' "$v" "$round" "$spec"
      $B/$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch [0-9.]+ us \| row chunks [0-9]+//'
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
cat "$OUT/run2-ab.txt"
