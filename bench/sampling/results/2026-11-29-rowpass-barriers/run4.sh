#!/usr/bin/env bash
# The committed change: C (warp 0 looks the row's temperature up in the
# one-chunk pass) and runs of chunks only from 48 single-chunk waves (16
# before). Its parity suite, the CUDA executor and a real server on it,
# racecheck of the row-pass cases, then base (rejection_bench_base, the
# parent commit's kernels) and it (rejection_bench) alternating, three
# rounds, every logits dtype and size the launcher treats differently, and
# the probability and log-probability paths (unchanged kernels) as controls.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-d rejection_cuda_test
# rejection_bench cuda_executor_test sampled_server_test, plus
# bin/rejection_bench_base; xz-compressed to fit the carry limit.
# Run: bash bench/sampling/results/2026-11-29-rowpass-barriers/run4.sh .gpu-d $OUT/run4
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test sampled_server_test; do
  "$bundle/bin/$t" 2>&1 | tail -40 > "$out/$t.txt"
  echo "$t: $(tail -n 1 "$out/$t.txt")"
done
compute-sanitizer --tool racecheck "$bundle/bin/rejection_cuda_test" \
  --gtest_filter='*RowPass*:*Temperature*:*Greedy*:*WarpMaxima*' > "$out/racecheck.txt" 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/racecheck.txt" | tr '\n' ' ')"
for round in ${ROUNDS:-1 2 3}; do
  for args in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,8,8,151936 --dtype fp16" \
              "logits,1,8,151936" "logits,1,8,151936 --dtype bf16" "logits,32,8,151936" \
              "logits,32,8,151936 --dtype bf16" "logits,48,8,151936 --dtype bf16" \
              "logits,64,8,151936 --dtype bf16" "logits,128,8,151936" \
              "logits,8,8,151936 --top-k 50 --top-p 0.9" "probabilities,8,8,151936" "logprobs,8,8,151936"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
