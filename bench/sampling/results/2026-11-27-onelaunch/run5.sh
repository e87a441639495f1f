#!/usr/bin/env bash
# Run 5: ncu of b2468ea's race kernel at B=8, exact logits against
# probabilities (warm caches, --cache-control none): where the logits
# race's extra ~5 us go. Bundle: .gpu-w (rejection_bench_b2468ea).
# Run (H100): carry .gpu-w
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-w/lib
B=.gpu-w/bin
for kind in logits probabilities; do
  ncu --cache-control none --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
      --section SchedulerStats --section SourceCounters -k regex:AcceptRaceKernel -s 40 -c 1 \
      -o "$OUT/run5-$kind" $B/rejection_bench_b2468ea --only "$kind,8,8,151936" --runs 200 --csv /dev/null > /dev/null 2>&1
  ncu -i "$OUT/run5-$kind.ncu-rep" --page details > "$OUT/run5-$kind-details.txt" 2>&1
  ncu -i "$OUT/run5-$kind.ncu-rep" --page source --csv --print-source sass > "$OUT/run5-$kind-sass.csv" 2>&1
  grep -E "Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Instructions$|Executed Instructions " "$OUT/run5-$kind-details.txt" | head -20
done
ncu --cache-control none --metrics gpu__time_duration.sum -k regex:"RowPass|Combine|AcceptRace" -s 60 -c 9 \
    $B/rejection_bench_b2468ea --only logits,8,8,151936 --runs 200 --csv /dev/null 2>&1 | grep -E "RowPass|Combine|AcceptRace|gpu__time" > "$OUT/run5-durations.txt"
cat "$OUT/run5-durations.txt"
