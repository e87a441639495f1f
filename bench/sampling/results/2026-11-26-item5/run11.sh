#!/usr/bin/env bash
# ncu source counters of the fp32 logits race at B=8 (a42d7a6, H100), and of
# the whole logits call's kernels (durations), to see what the tail after
# the row pass spends.
# Run (H100): carry .gpu-final
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-final/lib
ncu --section SourceCounters --section WarpStateStats --section SpeedOfLight --section SchedulerStats --section LaunchStats -k regex:AcceptRaceKernel -s 40 -c 1 \
  -o "$OUT/run11-logits-race" .gpu-final/bin/rejection_bench --only logits,8,8,151936 --runs 5 --csv /dev/null > /dev/null 2>&1
ncu -i "$OUT/run11-logits-race.ncu-rep" --page source --csv --print-source sass > "$OUT/run11-logits-race-sass.csv" 2>&1
ncu -i "$OUT/run11-logits-race.ncu-rep" --page details > "$OUT/run11-logits-race-details.txt" 2>&1
rm -f "$OUT/run11-logits-race.ncu-rep"
ncu --section SpeedOfLight -s 160 -c 8 .gpu-final/bin/rejection_bench --only logits,8,8,151936 --runs 5 --csv /dev/null > "$OUT/run11-logits-kernels.txt" 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration" "$OUT/run11-logits-kernels.txt" | head -40
grep -E "Duration|Issued Warp|Registers" "$OUT/run11-logits-race-details.txt"
