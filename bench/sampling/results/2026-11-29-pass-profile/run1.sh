#!/usr/bin/env bash
# ncu of the 16-bit logits pass at HEAD's kernels (4c4a165), H200: what bounds
# it where item 1's bf16 targets are missed on this device. RowPassRunKernel
# at bf16 B=128 (runs of 8), RowPassKernel at bf16 B=32 and B=8 (one chunk a
# block), and RowPassKernel at fp32 B=8 for comparison; each one launch after
# warm-up, caches flushed (ncu's default, like the bench's rotated inputs).
# Details, the SASS source page with stall samples, and the kernels' SASS.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-h rejection_bench greedy_bench rejection_cuda_test
# Run: bash bench/sampling/results/2026-11-29-pass-profile/run1.sh .gpu-h $OUT/run1
set -u
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$bundle/bin
profile() {  # <name> <kernel regex> <bench args...>
  local name=$1 kernel=$2
  shift 2
  timeout 200 ncu --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
      --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters \
      -k "regex:$kernel" -s 6 -c 1 -o "$out/$name" "$B/rejection_bench" --only "$@" --runs 10 --csv /dev/null \
      > "$out/$name-ncu.log" 2>&1
  ncu -i "$out/$name.ncu-rep" --page details > "$out/$name-details.txt" 2>&1
  ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name-sass.csv" 2>&1
  echo "== $name"
  grep -E "Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Executed Instructions |DRAM Throughput|Memory Throughput|No Eligible|Stall" \
    "$out/$name-details.txt" | head -24
}
profile bf16-b128-runs 'RowPassRunKernel' logits,128,8,151936 --dtype bf16
profile bf16-b32 'RowPassKernel' logits,32,8,151936 --dtype bf16
profile bf16-b8 'RowPassKernel' logits,8,8,151936 --dtype bf16
profile fp32-b8 'RowPassKernel' logits,8,8,151936
cuobjdump -sass "$B/rejection_bench" 2>&1 |
  awk '/Function :/ {keep = ($0 ~ /RowPass/)} keep' > "$out/sass-rowpass.txt"
echo "sass: $(grep -c 'Function :' "$out/sass-rowpass.txt") functions, $(wc -l < "$out/sass-rowpass.txt") lines"
rm -f "$out"/*.ncu-rep
