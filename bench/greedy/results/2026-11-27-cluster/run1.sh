#!/usr/bin/env bash
# Run 1 (H100): the cluster experiment at the stress point, alpha 0.9 and 0.6.
# Bundle: nvcc (line in README.md) -> /tmp/cv; scripts/gpu-bundle.sh /tmp/cv .gpu-g cluster_variants
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-g/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$OUT/run1-environment.txt" 2>&1
for a in 0.9 0.6; do
  timeout 200 .gpu-g/bin/cluster_variants 32 128 $a 2 > "$OUT/run1-alpha$a.txt" 2>&1; echo "alpha $a rc=$?"
  cat "$OUT/run1-alpha$a.txt"
done
