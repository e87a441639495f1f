#!/bin/bash
# Run 1: the host-merged launches replayed from a CUDA graph (rejection_bench
# --graph: one graph captured per input copy, PDL launches captured as they
# are) against the same launches on the stream and the read floor, each
# shape in one process, two rounds, on the H200 (the kind lent).
# Bundle (build-gpu at e9401a0 + --graph):
#   scripts/gpu-bundle.sh build-gpu .gpu-pack rejection_bench
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
for round in 1 2; do
  for shape in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" "logits,1,8,151936 --dtype bf16" \
               "probabilities,8,8,151936" "logprobs,8,8,151936" "probabilities,128,8,151936"; do
    echo "== round $round | $shape"
    timeout 120 ./bin/rejection_bench --only $shape --graph --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|graph replay|error|differ|: "
  done
done
echo "== topk/topp"
./bin/rejection_bench --only logits,8,8,151936 --top-k 50 --top-p 0.9 --graph --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|graph replay|host merge|error"
