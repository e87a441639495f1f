#!/usr/bin/env bash
# Exact logits: HEAD (base), the two-phase sweep with the weightless-quad
# skip in every race (v4, run 6), and the same without the skip in the
# exact-logits race (v5: rejection_bench_v5), alternating, three rounds,
# fp32 B=1 / B=8, bf16 B=8 (each with its top-k 50 + top-p 0.9 line), and
# fp32 B=8 / B=128 disjoint.
# Bundle as run2.sh plus bin/rejection_bench_v5.
# Run: bash bench/sampling/results/2026-11-28-shapes/run7.sh .gpu-ab $OUT/run7
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for round in ${ROUNDS:-1 2 3}; do
  for args in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" \
              "logits,8,8,151936 --shape disjoint" "logits,128,8,151936 --shape disjoint"; do
    [ "$round" != 1 ] && [[ "$args" == *128* ]] && continue
    for binary in rejection_bench_base rejection_bench rejection_bench_v5; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
