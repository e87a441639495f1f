#!/usr/bin/env bash
# Closing run of the 2026-11-27 session (H100): c553fe9 (NOW) against
# 323f2e4 (BASE, the session's start), alternating per shape; every issue-17
# shape with its read floor, two rounds (the item-2 pair, probabilities and
# log-probabilities at B=8, four). rejection_cuda_test, its memcheck, and the
# served sampled suite on the GPU; PyTorch (bench/python/sampling_torch_baseline.py --quick).
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test
#   sampled_server_test; scripts/gpu-bundle.sh build-gpu .gpu-now
#   rejection_bench rejection_cuda_test sampled_server_test; .gpu-base/bin/
#   rejection_bench is 323f2e4's (stripped).
# Run (H100): carry .gpu-base .gpu-now
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-now/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/run15-environment.txt"
.gpu-now/bin/rejection_cuda_test > "$OUT/run15-tests.txt" 2>&1; echo "rejection_cuda_test rc=$?" >> "$OUT/run15-tests.txt"
tail -2 "$OUT/run15-tests.txt"
timeout 300 compute-sanitizer --tool memcheck .gpu-now/bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.*' > "$OUT/run15-memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/run15-memcheck.txt"
tail -2 "$OUT/run15-memcheck.txt"
for round in 1 2 3 4; do
  for spec in "probabilities,8" "logprobs,8" "probabilities,128" "logits,1" "logits,8" "logits,32" "logits,128" "logits,8 --dtype bf16" "logits,128 --dtype bf16"; do
    set -- $spec
    if [ "$round" -gt 2 ] && [ "$1" != "probabilities,8" ] && [ "$1" != "logprobs,8" ]; then continue; fi
    for v in base now; do
      printf '%-4s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      .gpu-$v/bin/rejection_bench --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k"
    done
  done
done > "$OUT/run15-ab.txt" 2>&1
timeout 200 .gpu-now/bin/sampled_server_test > "$OUT/run15-sampled-server.txt" 2>&1; echo "sampled_server_test rc=$?" >> "$OUT/run15-sampled-server.txt"
tail -3 "$OUT/run15-sampled-server.txt"
grep "ours median" "$OUT/run15-ab.txt" | awk '{for(i=1;i<=NF;i++){if($i=="median") m=$(i+1); if($i=="floor") f=$(i+1)}; printf "%s %s %s %s %s %s %.2f\n", $1,$3,$4,$5,$6,m,m/f}'
grep "top-k" "$OUT/run15-ab.txt" | awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, "filtered", m}'
# PyTorch in the same run (vectorized baselines, --quick: B = 1 and 8).
timeout 300 python3 bench/python/sampling_torch_baseline.py --quick --csv "$OUT/run15-torch.csv" > "$OUT/run15-torch.txt" 2>&1
echo "torch rc=$?" >> "$OUT/run15-torch.txt"
grep -E "B=8 +gamma=8 V=151936|rc=" "$OUT/run15-torch.txt"
