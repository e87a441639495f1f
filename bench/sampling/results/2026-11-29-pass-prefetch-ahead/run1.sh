#!/usr/bin/env bash
# Run 1: RowPassKernel blocks (one chunk each: fp32 rows, 16-bit rows below
# 32 single-chunk waves) request into L2 the chunk of the block
# SV_EXP_PREFETCH_WAVES x (resident blocks) places after them (one bulk
# prefetch by a thread of warp 1), so that a later wave's loads find L2. One
# experiment binary (SV_EXP_PASS_PREFETCH, run1-variant.patch) at distances
# 0.5, 1, 1.5 and 2 resident waves and without the variable (no prefetch),
# against HEAD's kernels (rejection_bench_base, 902d3d4), two rounds.
# Suites first: rejection_cuda_test without the variable (the pass as at
# HEAD) and with a distance of 1 (a prefetch changes no result); the CUDA
# executor, the served sampled path and the per-client limits on this tree.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-p rejection_bench rejection_cuda_test
#   cuda_executor_test sampled_server_test client_limits_test, plus bin/rejection_bench_base.
# Run: bash bench/sampling/results/2026-11-29-pass-prefetch-ahead/run1.sh .gpu-p $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test sampled_server_test client_limits_test; do
  timeout 200 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | tr '\n' ' ')"
done
SV_EXP_PREFETCH_WAVES=1 timeout 200 "$bundle/bin/rejection_cuda_test" > "$out/rejection_cuda_test-prefetch1.txt" 2>&1
echo "rejection_cuda_test (distance 1): rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/rejection_cuda_test-prefetch1.txt" | tr '\n' ' ')"
for round in ${ROUNDS:-1 2}; do
  for args in "logits,8,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" "logits,8,8,151936" \
      "logits,32,8,151936" "logits,1,8,151936 --dtype bf16"; do
    for variant in base none 0.5 1 1.5 2; do
      binary=rejection_bench
      [ "$variant" = base ] && binary=rejection_bench_base
      if [ "$variant" = base ] || [ "$variant" = none ]; then unset SV_EXP_PREFETCH_WAVES; else export SV_EXP_PREFETCH_WAVES=$variant; fi
      # shellcheck disable=SC2086
      "$bundle/bin/$binary" --only $args --runs 200 --csv "$out/bench.csv" > "$out/last.txt" 2>&1
      echo "r$round $variant $args | $(grep -E '^(logits|probabilities)' "$out/last.txt" | head -2 | sed -E 's/ +/ /g; s/ p95 [0-9.]+//g' | tr '\n' ' ')"
    done
    unset SV_EXP_PREFETCH_WAVES
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/bench.csv" "$out/last.txt"
