#!/bin/bash
# Run 1: the race reading the batch's draft offsets and draft tokens from its
# kernel parameters (by value, __grid_constant__) instead of device memory,
# so the decision's first loads are the values at the drafted tokens
# (inline.patch against 8e9ffc0; rejection_bench --inline-decision-inputs
# passes the host copies). The same binary with and without the flag,
# alternating, two rounds. Bundle: .gpu-pack/bin/rejection_bench from the
# patched tree (Release, sm_90).
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for round in 1 2; do
  for shape in "probabilities,8,8,151936" "probabilities,1,8,151936" "probabilities,32,8,151936" \
               "probabilities,128,8,151936" "logprobs,8,8,151936" "logits,8,8,151936"; do
    for flag in "" "--inline-decision-inputs"; do
      echo "== round $round | $shape | ${flag:-device arrays}"
      ./bin/rejection_bench --only $shape --runs 200 --csv /dev/null $flag 2>&1 | grep -E "ours median|error|code|differ"
    done
  done
done
