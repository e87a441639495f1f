#!/usr/bin/env bash
# Run 7: the head 95b94da (the decision-value prefetch compiled for exact
# logits only) against 84ebeee, alternating, three rounds: the
# log-probability pair (item 2) back where it was, exact logits as in run 6.
# Build: cmake --build build-gpu --target rejection_bench;
#   scripts/gpu-bundle.sh build-gpu .gpu-f rejection_bench; 84ebeee's binary
#   as .gpu-f/bin/rejection_bench_base.
# Run (H100): carry .gpu-f
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-f/lib
for round in 1 2 3; do
  for spec in "probabilities,8" "logprobs,8" "logits,1" "logits,8"; do
    for v in rejection_bench_base rejection_bench; do
      printf '%-22s round %d ' "$v" "$round"
      .gpu-f/bin/$v --only "$spec,8,151936" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'
    done
  done
done > "$OUT/run7-ab.txt" 2>&1
cat "$OUT/run7-ab.txt"
