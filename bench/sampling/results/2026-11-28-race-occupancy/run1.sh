#!/bin/bash
# Run 1: race blocks per SM (the launcher plans 2) at the B=8 shapes whose
# sweep is a latency chain, with HEAD's rejection_bench (4f0c7ac's kernels):
# 1, 2 and 3 blocks per SM (3 takes the kernel compiled for 3, 80
# registers), alternating, two rounds. Bundle: scripts/gpu-bundle.sh
# build-gpu .gpu-pack bench/rejection_bench, stripped.
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for round in 1 2; do
  for shape in "probabilities,8,8,151936" "logprobs,8,8,151936" "logits,8,8,151936" "probabilities,128,8,151936"; do
    for bps in 2 3 1; do
      echo "== round $round | $shape | blocks/SM $bps"
      ./bin/rejection_bench --only $shape --blocks-per-sm $bps --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|error|code|differ"
    done
  done
done
