#!/usr/bin/env bash
# The zero-quad skip variants v2, v3, v4 (runs 3, 4, 5; see README) against
# HEAD's kernels (base), alternating per shape:
# probabilities at B = 8, 32, 128 on every row shape; log-probabilities and
# fp32 logits at B = 8 and 128, peaked and disjoint (logits lines include
# the bench's top-k 50 + top-p 0.9 row).
# Bundle as run2.sh. Run: bash bench/sampling/results/2026-11-28-shapes/run3.sh .gpu-ab $OUT/run3
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
bench() {  # binary only shape
  "$bundle/bin/$1" --only "$2" --shape "$3" --runs 200 --csv /dev/null 2>&1 |
    grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' '
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
for round in ${OTHER_ROUNDS:-1 2}; do
  for only in logprobs,8,8,151936 logprobs,128,8,151936 logits,8,8,151936 logits,128,8,151936; do
    for shape in peaked disjoint; do
      for binary in rejection_bench_base rejection_bench; do
        echo "r$round $binary $shape $(bench "$binary" "$only" "$shape")"
      done
    done
  done
done 2>&1 | tee "$out/others.txt"
