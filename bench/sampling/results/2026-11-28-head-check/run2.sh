#!/bin/bash
# Run 2: item 2 alone (log-probabilities against probabilities, B=8, gamma=8,
# V=151,936, both merges), four rounds, after run 1 put the host-merged ratio
# at 1.095 / 1.104. Bundle: scripts/gpu-bundle.sh build-gpu .gpu-pack
# bench/rejection_bench (build-gpu at 4f0c7ac's kernels), stripped.
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,serial --format=csv,noheader
for round in 1 2 3 4; do
  for shape in "probabilities,8,8,151936" "logprobs,8,8,151936"; do
    echo "== round $round | $shape"
    ./bin/rejection_bench --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|error|code|differ"
  done
done
