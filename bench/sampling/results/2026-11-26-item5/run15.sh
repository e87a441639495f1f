#!/usr/bin/env bash
# PyTorch in the same run as the closing numbers (H100): the vectorized
# PyTorch rejection sampling baselines (bench/python/sampling_torch_baseline.py
# --quick: B = 1 and 8) beside rejection_bench of 78a9b2a at the headline.
# Run (H100): carry .gpu-now
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-now/lib
for spec in probabilities logprobs logits; do
  .gpu-now/bin/rejection_bench --only $spec,8,8,151936 --runs 300 --csv /dev/null | grep "ours median"
done > "$OUT/run15-ours.txt" 2>&1
timeout 300 python3 bench/python/sampling_torch_baseline.py --quick --csv "$OUT/run15-torch.csv" > "$OUT/run15-torch.txt" 2>&1
echo "torch rc=$?" >> "$OUT/run15-torch.txt"
cat "$OUT/run15-ours.txt"; grep -E "B=8 +gamma=8 V=151936|rc=" "$OUT/run15-torch.txt"
