#!/usr/bin/env bash
# Issue #17 item 5 (probabilities B=128 <= 1.1x the read floor): the race
# sweep's memory-level parallelism. Variants of the same source at
# 7e8ccab, built with experiment macros (rejection_sample.cu):
#   base   : as committed (cp.async lookahead 4)
#   la6/la8: cp.async lookahead 6 / 8 (SPECVERIFY_EXP_LOOKAHEAD)
#   bp4/bp8: plus one cp.async.bulk.prefetch.L2 per row and iteration,
#            4 / 8 iterations past the cp.async window (SPECVERIFY_EXP_BULK_AHEAD)
#   la2bp8 : lookahead 2 with the bulk prefetch 8 ahead
# Build (here): cmake -S . -B build-exp-<v> -G Ninja -DCMAKE_BUILD_TYPE=Release
#   -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_CUDA_FLAGS=<macros>";
#   cmake --build build-exp-<v> --target rejection_bench;
#   scripts/gpu-bundle.sh build-exp-<v> .gpu-<v> rejection_bench
# Run (H100): carry .gpu-base .gpu-la6 .gpu-la8 .gpu-bp4 .gpu-bp8 .gpu-la2bp8
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-base/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$OUT/run1-environment.txt"
for round in 1 2; do
  for v in base la6 la8 bp4 bp8 la2bp8; do
    for b in 8 32 128; do
      printf '%-7s round %d  ' "$v" "$round"
      ".gpu-$v/bin/rejection_bench" --only probabilities,$b,8,151936 --runs 300 --csv /dev/null | grep "ours median"
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
ncu $sec -k regex:AcceptRaceKernel -s 40 -c 1 .gpu-base/bin/rejection_bench --only probabilities,128,8,151936 --runs 5 --csv /dev/null > "$OUT/run1-ncu-race128.txt" 2>&1
ncu $sec -k regex:ReadRowsKernel -s 40 -c 1 .gpu-base/bin/rejection_bench --only probabilities,128,8,151936 --runs 5 --csv /dev/null > "$OUT/run1-ncu-floor128.txt" 2>&1
tail -40 "$OUT/run1-ab.txt"
