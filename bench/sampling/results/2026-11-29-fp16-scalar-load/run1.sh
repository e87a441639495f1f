#!/usr/bin/env bash
# Prepared on 2026-11-29, run at 12:36 UTC (README.md, run 1; kept):
# fp16 values read one at a time (LoadOne: a row's partial last quad, the
# race's and filter's single values) through the hardware conversion, as
# UnpackQuad already reads whole quads, instead of the software
# Float16BitsToFloat (variant.patch). ptxas (sm_90): RowPassRunKernel<fp16>
# 48 -> 0 bytes spilled, FilterKernel<fp16> 50/56 -> 36/36,
# AcceptRaceKernel<fp16> 95 -> 96 and 110 -> 108 registers; nothing else
# changes. Same bits for every fp16 value but NaN payloads (invalid either
# way). Suites on the variant, then HEAD (rb_base) and the variant (rb_var)
# alternating, two rounds, fp16 logits at item 1's batch sizes, filtered
# B=8, fp16 probabilities B=8.
# Build: rejection_bench at HEAD -> .gpu-h/bin/rb_base; git apply variant.patch;
#   rejection_bench -> .gpu-h/bin/rb_var; scripts/gpu-bundle.sh build-gpu .gpu-h
#   rejection_cuda_test cuda_executor_test (its libraries serve both benches).
# Run: bash bench/sampling/results/2026-11-29-fp16-scalar-load/run1.sh .gpu-h $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test; do
  timeout 200 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2}; do
  for args in "logits,1,8,151936" "logits,8,8,151936" "logits,32,8,151936" "logits,64,8,151936" \
      "logits,128,8,151936" "probabilities,8,8,151936"; do
    for binary in rb_base rb_var; do
      # shellcheck disable=SC2086
      timeout 60 "$bundle/bin/$binary" --only $args --dtype fp16 --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
      echo "r$round $binary $args fp16 | $(grep -E '^(logits|probabilities)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/last.txt"
