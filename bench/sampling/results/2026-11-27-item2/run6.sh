#!/usr/bin/env bash
# Where log-probabilities' extra time at B=8 goes (H100): an experiment build
# of 84bac8a whose race kernel adds clock64 stamps on thread 0 of every block
# (entry, after the decision's barrier, after the sweep's barrier, after the
# ticket) and sums them over every launch of the process (temporary hooks,
# not committed: SpecverifyExpDumpPhases). Probabilities and log-probabilities
# at B = 1, 8, 32, two rounds; the timed medians are of the instrumented
# kernel (a few atomics more per block).
# Build: the hooks of run6-8-phase-clocks.diff (its run6 subset) on 84bac8a, cmake --build build-gpu --target
#   rejection_bench, stripped to .gpu-t/bin/rejection_bench_phases.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv > "$OUT/run6-clocks.txt"
for round in 1 2; do
  for spec in probabilities,8 logprobs,8 probabilities,1 logprobs,1 probabilities,32 logprobs,32; do
    printf 'round %d %-16s ' "$round" "$spec"
    SPECVERIFY_PHASES=1 $B/rejection_bench_phases --only "$spec,8,151936" --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|phases" | tr '\n' ' '
    echo
  done
done > "$OUT/run6-phases.txt" 2>&1
cat "$OUT/run6-phases.txt" | sed -E 's/ +/ /g' | cut -c1-400
