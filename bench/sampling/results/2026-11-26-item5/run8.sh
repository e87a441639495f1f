#!/usr/bin/env bash
# ncu source counters of the race at the headline (B=8): log-probabilities
# against probabilities (item 2), a42d7a6 (H100).
# Run (H100): carry .gpu-final
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-final/lib
for kind in probabilities logprobs; do
  ncu --section SourceCounters --section WarpStateStats --section SpeedOfLight --section SchedulerStats -k regex:AcceptRaceKernel -s 40 -c 1 \
    -o "$OUT/run8-$kind" .gpu-final/bin/rejection_bench --only $kind,8,8,151936 --runs 5 --csv /dev/null > /dev/null 2>&1
  ncu -i "$OUT/run8-$kind.ncu-rep" --page source --csv --print-source sass > "$OUT/run8-$kind-sass.csv" 2>&1
  ncu -i "$OUT/run8-$kind.ncu-rep" --page details > "$OUT/run8-$kind-details.txt" 2>&1
  rm -f "$OUT/run8-$kind.ncu-rep"
done
grep -E "Duration|Issued Warp|Elapsed Cycles|No Eligible" "$OUT"/run8-*-details.txt
