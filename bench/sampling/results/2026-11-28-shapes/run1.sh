#!/usr/bin/env bash
# rejection_bench on every row shape (peaked, flat, disjoint, identical and
# mixed: sequence i takes shape i % 4, the load generator's served workload),
# gamma 8, V = 151,936: probabilities B = 8 and 128, fp32 logits B = 8.
# Bundle (here): scripts/gpu-bundle.sh build-gpu .gpu-sh bench/rejection_bench
# Run (GPU machine): bash bench/sampling/results/2026-11-28-shapes/run1.sh .gpu-sh $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for round in ${ROUNDS:-1 2}; do
  for only in ${SHAPES_ONLY:-probabilities,8,8,151936 probabilities,128,8,151936 logits,8,8,151936}; do
    for shape in peaked flat disjoint identical mixed; do
      echo "== round $round $only $shape"
      "$bundle/bin/rejection_bench" --only "$only" --shape "$shape" --runs 200 --csv /dev/null 2>&1 | grep -v '^#' | tail -4
    done
  done
done 2>&1 | tee "$out/shapes.txt"
