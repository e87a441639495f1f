#!/usr/bin/env bash
# Closing run of the session (H100): 78a9b2a (NOW) against 7e8ccab (BASE,
# the session's start), alternating per shape, two rounds, every issue-17
# shape with its read floor; the served sampled suite on the GPU.
# (rejection_cuda_test and memcheck of this kernel code: run 13.)
# Build: cmake --build build-gpu --target rejection_bench sampled_server_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-now rejection_bench sampled_server_test
# Run (H100): carry .gpu-base (bin/rejection_bench of 7e8ccab) .gpu-now
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-now/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/run14-environment.txt"
for round in 1 2; do
  for spec in "probabilities,8" "probabilities,128" "logprobs,8" "logits,1" "logits,8" "logits,32" "logits,128" "logits,8 --dtype bf16" "logits,128 --dtype bf16"; do
    set -- $spec
    for v in base now; do
      printf '%-4s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      .gpu-$v/bin/rejection_bench --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k"
    done
  done
done > "$OUT/run14-ab.txt" 2>&1
timeout 200 .gpu-now/bin/sampled_server_test > "$OUT/run14-sampled-server.txt" 2>&1; echo "sampled_server_test rc=$?" >> "$OUT/run14-sampled-server.txt"
tail -3 "$OUT/run14-sampled-server.txt"
grep "ours median" "$OUT/run14-ab.txt" | awk '{for(i=1;i<=NF;i++){if($i=="median") m=$(i+1); if($i=="floor") f=$(i+1)}; printf "%s %s %s %s %s %s %.2f\n", $1,$3,$4,$5,$6,m,m/f}'
grep "top-k" "$OUT/run14-ab.txt" | awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, "filtered", m}'
