#!/usr/bin/env bash
# Run 4: after the review's refactor (FullChunkStats and FullChunkPairStats
# share ChunkLaneWeightSum; ptxas: fp16's one-chunk and runs kernels no
# longer spill): parity, then f25d617's kernels (rejection_bench_base) and
# it alternating, one round, as a check that nothing moved against run 1.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-r rejection_bench rejection_cuda_test,
#   plus bin/rejection_bench_base (f25d617's build).
# Run: bash bench/sampling/results/2026-11-29-chunk-pairs/run4.sh .gpu-r $OUT/run4
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
timeout 200 "$bundle/bin/rejection_cuda_test" > "$out/rejection_cuda_test.txt" 2>&1
echo "rejection_cuda_test: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/rejection_cuda_test.txt" | tr '\n' ' ')"
for args in "logits,8,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" "logits,8,8,151936 --dtype fp16" \
    "logits,128,8,151936 --dtype fp16" "logits,8,8,151936"; do
  for binary in rejection_bench_base rejection_bench; do
    # shellcheck disable=SC2086
    echo "$binary $args | $(timeout 60 "$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
      grep -E '^logits' | head -1 | sed -E 's/ +/ /g; s/ p95 [0-9.]+//g; s/G=[0-9]+ copies=[0-9]+ //; s/ \| launch [0-9.]+ us//')"
  done
done 2>&1 | tee "$out/ab.txt"
