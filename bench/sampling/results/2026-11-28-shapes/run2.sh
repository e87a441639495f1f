#!/usr/bin/env bash
# v1 of the zero-quad skip (new) against HEAD's kernels (base), alternating per
# shape, probabilities at B = 8, 32 and 128 on every row shape; then (base
# only) logits and log-probabilities at B = 128 disjoint and mixed.
# Bundle (here): scripts/gpu-bundle.sh build-gpu .gpu-ab bench/rejection_bench
#   tests/kernels/rejection_cuda_test, plus the base build's rejection_bench
#   as bin/rejection_bench_base.
# Run (GPU machine): bash bench/sampling/results/2026-11-28-shapes/run2.sh .gpu-ab $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
bench() {  # binary only shape
  "$bundle/bin/$1" --only "$2" --shape "$3" --runs 200 --csv /dev/null 2>&1 | grep -E '^(probabilities|logits|logprobs)'
}
if [ -z "${SKIP_TESTS:-}" ]; then
  "$bundle/bin/rejection_cuda_test" 2>&1 | tail -40 > "$out/tests.txt"
  tail -3 "$out/tests.txt"
fi
for round in ${ROUNDS:-1 2}; do
  for only in probabilities,8,8,151936 probabilities,32,8,151936 probabilities,128,8,151936; do
    for shape in peaked flat disjoint identical mixed; do
      for binary in rejection_bench_base rejection_bench; do
        echo "r$round $binary $shape $(bench "$binary" "$only" "$shape")"
      done
    done
  done
done 2>&1 | tee "$out/ab.txt"
for only in logits,128,8,151936 logprobs,128,8,151936; do
  for shape in peaked disjoint mixed; do
    echo "base $shape $(bench rejection_bench_base "$only" "$shape")"
  done
done 2>&1 | tee "$out/others.txt"
