#!/usr/bin/env bash
# Run 4 (H100): run 3 with the library copy unrolled 2 (one 16-byte load a thread per 8 KiB block); run 3: grid (chunks, b), 8 KiB blocks; run 1 plus the library GreedyPlannedPack and 8 / 32 KiB plan-in-memory tiles, at the stress point
# (alpha 0.9 and 0.6) and at the headline shape (b=32, gamma=8).
# Bundle: nvcc (line in README.md) -> /tmp/hp; scripts/gpu-bundle.sh /tmp/hp .gpu-hp host_plan_variants
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-hp/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; nproc; lscpu | grep "Model name"; } > "$OUT/run4-environment.txt" 2>&1
for shape in "32 128 0.9" "32 128 0.6" "32 8 0.9"; do
  set -- $shape
  f="$OUT/run4-b$1-g$2-a$3.txt"
  timeout 150 .gpu-hp/bin/host_plan_variants $1 $2 $3 2 > "$f" 2>&1; echo "shape $shape rc=$?"
  cat "$f"
done
