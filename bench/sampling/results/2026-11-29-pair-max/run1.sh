#!/usr/bin/env bash
# Chunk pairs' maxima and validity as one 16-bit pair (FullChunkPairStats):
# suites on the variant (and its compute_75 PTX build, JIT-compiled here, for
# the pre-sm_80 PairExtreme), HEAD (rb_base) and the variant (rb_var)
# alternating, two rounds, 16-bit logits where runs of chunks take pairs
# (B >= 8 at gamma 8) and fp32 B=8 as a control; memcheck / racecheck over
# the row-pass cases.
# Build: rejection_bench at HEAD -> .gpu-p/bin/rb_base; the change ->
#   .gpu-p/bin/rb_var; scripts/gpu-bundle.sh build-gpu .gpu-p rejection_cuda_test
#   cuda_executor_test; a build with -DCMAKE_CUDA_ARCHITECTURES=75-virtual of
#   rejection_cuda_test -> .gpu-p/bin/rejection_cuda_test_75.
# Run: bash bench/sampling/results/2026-11-29-pair-max/run1.sh .gpu-p $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test rejection_cuda_test_75; do
  [ -x "$bundle/bin/$t" ] || continue
  timeout 300 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2}; do
  for args in "logits,8,8,151936 --dtype bf16" "logits,16,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" \
      "logits,64,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" "logits,32,8,151936 --dtype fp16" \
      "logits,128,8,151936 --dtype fp16" "logits,8,8,151936"; do
    for binary in rb_base rb_var; do
      # shellcheck disable=SC2086
      timeout 60 "$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
      echo "r$round $binary $args | $(grep -E '^(logits|probabilities)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/last.txt"
filter='*RowPassRuns*:*SixteenBit*:*FilteredRowsFromWarpMaxima*'
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
