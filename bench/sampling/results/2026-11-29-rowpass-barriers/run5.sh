#!/usr/bin/env bash
# The committed change against base once more, for what run 4 did not time:
# the full-row check of probability and log-probability rows (the same
# one-chunk kernel in its check mode, which now waits at the lookup's
# barrier too; the bench times it at the headline shape and writes it to
# the CSV only), bf16 B=24 (runs before, one-chunk blocks now) and fp16
# B=32. Base (rejection_bench_base, efdf8fb's kernels) and the change
# (rejection_bench) alternating, three rounds.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-e rejection_bench, plus
# bin/rejection_bench_base.
# Run: bash bench/sampling/results/2026-11-29-rowpass-barriers/run5.sh .gpu-e $OUT/run5
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for round in ${ROUNDS:-1 2 3}; do
  for args in "probabilities,8,8,151936" "logprobs,8,8,151936" "logits,24,8,151936 --dtype bf16" \
              "logits,32,8,151936 --dtype fp16"; do
    for binary in rejection_bench_base rejection_bench; do
      csv="$out/r$round-$binary-$(echo "$args" | tr ' ,' '__').csv"
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv "$csv" 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')| full-row check: $(grep full_row_check "$csv" | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
