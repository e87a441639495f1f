#!/bin/bash
# Run 2: host cost of the graph paths (rejection_bench --graph after the
# host-time lines were added): per batch, the stream launches, a pre-built
# graph's launch, and capture + cudaGraphExecUpdate + launch (what a server
# would do with new kernel arguments every batch), plus the device time of
# the updated graph. One round per shape, H200.
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for shape in "probabilities,8,8,151936" "logits,8,8,151936" "logits,1,8,151936" "logprobs,8,8,151936" \
             "probabilities,128,8,151936"; do
  echo "== $shape"
  timeout 120 ./bin/rejection_bench --only $shape --graph --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|graph|host us|capture|error|differ"
done
