#!/usr/bin/env bash
# variant-probabilities.patch: the bonus race in two loops for probabilities
# only (log-probability and logits bonus rows keep one loop): its parity
# suite, then base (rejection_bench_base) and variant (rejection_bench)
# alternating, three rounds, probabilities on peaked (item 5), bonus
# (identical) and mixed rows.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-d rejection_cuda_test rejection_bench,
# plus bin/rejection_bench_base built from the base commit.
# Run: bash bench/sampling/results/2026-11-28-bonus-phases/run3.sh .gpu-d $OUT/run3
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
"$bundle/bin/rejection_cuda_test" 2>&1 | tail -40 > "$out/tests.txt"
tail -1 "$out/tests.txt"
for round in ${ROUNDS:-1 2 3}; do
  for args in "probabilities,128,8,151936" "probabilities,128,8,151936 --shape identical" \
              "probabilities,128,8,151936 --shape mixed" "probabilities,8,8,151936" \
              "probabilities,8,8,151936 --shape mixed" "logprobs,8,8,151936"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
