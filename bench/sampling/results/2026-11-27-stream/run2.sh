#!/usr/bin/env bash
# Run 2 (H100): probabilities B=128 and B=8 at HEAD (d837c1e) against the
# kernels of 45d637d (the last commit PERFORMANCE.md's B=128 figure, 62.85
# us, was measured at), alternating, three rounds: is 63.8-64.2 us today a
# regression or the day's machine?
#   git worktree add /tmp/wt-old 45d637d; cmake -S /tmp/wt-old -B /tmp/build-old ... ; build rejection_bench
#   scripts/gpu-bundle.sh /tmp/st .gpu-st rejection_bench rejection_bench_45d637d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-st/lib
for round in 1 2 3; do
  for shape in probabilities,128,8,151936 probabilities,8,8,151936; do
    for bin in rejection_bench rejection_bench_45d637d; do
      echo "round $round $bin $shape: $(.gpu-st/bin/$bin --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E 'ours median')"
    done
  done
done
