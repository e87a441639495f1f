#!/usr/bin/env bash
# run7's experiment build plus, per warp, a log2 histogram of the sweep's
# first-iteration cycles, and per sequence the slowest warp's first
# iteration, the exact offers taken and the unseeded quads (temporary hooks on
# 84bac8a, not committed: run6-8-phase-clocks.diff), H100, B=8.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
for spec in probabilities,8 logprobs,8; do
  SPECVERIFY_PHASES=1 $B/rejection_bench_phases --only "$spec,8,151936" --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|phases|sweep|histogram|per sequence" | sed -E 's/ +/ /g; s/\| read floor.*//'
done > "$OUT/run8-phases.txt" 2>&1
cat "$OUT/run8-phases.txt"
