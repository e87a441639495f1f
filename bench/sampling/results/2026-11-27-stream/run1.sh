#!/usr/bin/env bash
# Run 1 (H100): is the probabilities race at B=128 limited by its stream of
# rows or by the race? rejection_bench (HEAD) against rejection_bench_stream
# (the same tree built with -DSV_EXP_STREAM_ONLY, stream-only.patch:
# SweepShare stages every quad as before but races only each thread's first
# quad and adds the other values; outcomes are valid but not the sampler's,
# timing is the stream's), alternating per shape, two rounds. The first
# attempt, which raced nothing, was refused by the bench's outcome check.
#   scripts/gpu-bundle.sh /tmp/st .gpu-st rejection_bench rejection_bench_stream
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-st/lib
for round in 1 2; do
  for shape in probabilities,128,8,151936 probabilities,8,8,151936 logprobs,128,8,151936; do
    for bin in rejection_bench rejection_bench_stream; do
      echo "round $round $bin $shape: $(.gpu-st/bin/$bin --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E 'ours median')"
    done
  done
done
