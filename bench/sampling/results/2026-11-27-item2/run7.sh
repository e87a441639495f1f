#!/usr/bin/env bash
# run6's phase clocks, plus the sweep split per warp (lane 0): the first
# iteration against each later one (warps with more than one iteration).
# The hooks: run6-8-phase-clocks.diff without its histogram and per-sequence
# counters (those are run8's).
# Experiment build of 84bac8a (temporary hooks, not committed), H100.
# Build: as run6, with the sweep stamps; .gpu-t/bin/rejection_bench_phases.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
for spec in probabilities,8 logprobs,8 probabilities,32 logprobs,32 probabilities,128 logprobs,128; do
  printf '%-16s ' "$spec"
  SPECVERIFY_PHASES=1 $B/rejection_bench_phases --only "$spec,8,151936" --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|phases|sweep" | sed -E 's/ +/ /g; s/\| read floor.*//' | tr '\n' ' '
  echo
done > "$OUT/run7-phases.txt" 2>&1
cat "$OUT/run7-phases.txt"
