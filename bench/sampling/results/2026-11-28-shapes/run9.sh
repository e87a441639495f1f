#!/usr/bin/env bash
# v6 (not kept unless it says so in README): the sweep's second loop also
# without the race's seeding step (the first loop runs until the warp has
# stopped feeding the fallback race *and* seeded its residual race), against
# base and the committed v4, alternating, two rounds; v6's parity suite first.
# Bundle as run2.sh plus bin/rejection_bench_v6 and bin/rejection_cuda_test_v6.
# Run: bash bench/sampling/results/2026-11-28-shapes/run9.sh .gpu-ab $OUT/run9
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
"$bundle/bin/rejection_cuda_test_v6" 2>&1 | tail -40 > "$out/tests-v6.txt"
tail -1 "$out/tests-v6.txt"
for round in ${ROUNDS:-1 2}; do
  for args in "probabilities,8,8,151936" "probabilities,128,8,151936" "probabilities,128,8,151936 --shape disjoint" \
              "logprobs,8,8,151936" "logits,8,8,151936"; do
    for binary in rejection_bench_base rejection_bench rejection_bench_v6; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
