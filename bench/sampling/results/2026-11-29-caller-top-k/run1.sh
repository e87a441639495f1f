#!/usr/bin/env bash
# Run 1: probability and log-probability rows as an engine sends them after
# its own top-k (the bench's new --caller-top-k K: each row keeps its K most
# likely tokens, renormalized; zeros, or -inf, elsewhere) against the dense
# rows of the same seed, in one process each, two rounds. Kernels of
# 902d3d4 (unchanged since); the race skips quads without weight
# (47b06ee), which filtered rows are almost entirely.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-k rejection_bench
# Run: bash bench/sampling/results/2026-11-29-caller-top-k/run1.sh .gpu-k $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for round in ${ROUNDS:-1 2}; do
  for args in "probabilities,8,8,151936" "probabilities,32,8,151936" "probabilities,128,8,151936" \
      "logprobs,8,8,151936" "probabilities,8,8,151936 --dtype bf16"; do
    for filter in "" "--caller-top-k 50" "--caller-top-k 1000"; do
      # shellcheck disable=SC2086
      "$bundle/bin/rejection_bench" --only $args $filter --runs 200 --csv "$out/bench.csv" > "$out/last.txt" 2>&1
      echo "r$round $args $filter | $(grep -E '^(probabilities|logprobs)' "$out/last.txt" | head -1 | sed -E 's/ +/ /g; s/ p95 [0-9.]+//g')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
cp "$out/bench.csv" "$out/bench-all.csv"
rm -f "$out/bench.csv" "$out/last.txt"
