#!/usr/bin/env bash
# Run 3 (H100): run 1's binaries (decision head, both parts) against
# 1bc3dc8 at B=128 (probabilities, log-probabilities), where the decision's
# reads come from DRAM; three rounds, alternating.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
for round in 1 2 3; do
  for spec in "probabilities,128" "logprobs,128"; do
    for v in rejection_bench_base rejection_bench rejection_bench_guess; do
      printf '%-22s round %d ' "$v" "$round"
      .gpu-d/bin/$v --only "$spec,8,151936" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'
    done
  done
done > "$OUT/run3-ab.txt" 2>&1
cat "$OUT/run3-ab.txt"
