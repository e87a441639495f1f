#!/usr/bin/env bash
# Run 1: why do filtered batches lose with runs of chunks? In
# RowPassRunKernel a filtered batch's target rows copy each chunk pair's
# warp maxima (for the top-k / top-p filter) out of shared memory after the
# pair's reductions, behind an extra block barrier per pair. The variant
# (rb_var, run1-variant.patch) leaves consecutive pairs' maxima in
# alternate halves of max_shared and drops that barrier (ptxas: the bf16
# runs kernel now spills 28 bytes, fp16 82; other ways of storing them
# spilled more). rb_base: HEAD's kernels (4b28192). bf16 logits at B = 8,
# 24, 32 with --row-chunks 1 and 4 (each call also times top-k 50 +
# top-p 0.9 on the shape) and B = 128 (runs of 8), alternating, two rounds;
# suites on the variant.
# Bundle: .gpu-f/bin holds rb_base, rb_var and the variant's rejection_cuda_test, with
#   scripts/gpu-bundle.sh's libraries.
# Run: bash bench/sampling/results/2026-11-29-filtered-runs/run1.sh .gpu-f $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
timeout 200 "$bundle/bin/rejection_cuda_test" > "$out/rejection_cuda_test.txt" 2>&1
echo "rejection_cuda_test: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/rejection_cuda_test.txt" | tr '\n' ' ')"
bench() {  # round, binary, args...
  local round=$1 binary=$2
  shift 2
  timeout 60 "$bundle/bin/$binary" --only "$@" --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
  echo "r$round $binary $* | $(grep -E '^(logits|probabilities)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
}
for round in ${ROUNDS:-1 2}; do
  for B in 8 24 32; do
    for n in 1 4; do
      for b in rb_base rb_var; do bench "$round" $b logits,$B,8,151936 --dtype bf16 --row-chunks $n; done
    done
  done
  for b in rb_base rb_var; do bench "$round" $b logits,128,8,151936 --dtype bf16; done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/last.txt"
filter='*RowPass*:*FilteredRows*'
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
  > "$out/racecheck.txt" 2>&1
echo "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/racecheck.txt" | tr '\n' ' ')"
