#!/usr/bin/env bash
# Source-level profile of the probabilities race at B=128 (H100, 7e8ccab):
# per-SASS-instruction warp stall samples and instruction counts.
# Run (H100): carry .gpu-base (scripts/gpu-bundle.sh build-gpu .gpu-base rejection_bench)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-base/lib
ncu --section SourceCounters --section WarpStateStats --section InstructionStats -k regex:AcceptRaceKernel -s 40 -c 1 \
  -o "$OUT/run2-race128" .gpu-base/bin/rejection_bench --only probabilities,128,8,151936 --runs 5 --csv /dev/null > "$OUT/run2-log.txt" 2>&1
ncu -i "$OUT/run2-race128.ncu-rep" --page source --csv --print-source sass > "$OUT/run2-race128-sass.csv" 2>&1
ncu -i "$OUT/run2-race128.ncu-rep" --page details > "$OUT/run2-race128-details.txt" 2>&1
ls -la "$OUT"; tail -5 "$OUT/run2-log.txt"; head -c 1500 "$OUT/run2-race128-sass.csv"
