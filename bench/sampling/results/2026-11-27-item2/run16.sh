#!/usr/bin/env bash
# The exact log-probability weights with a branch-free ExpDet (H100). BF =
# c553fe9 + ExpDetBranchFree (ExpDet's operations with its early returns
# and scaling branches as selects; bit for bit ExpDet, sampling_math_test
# checks every 251st float and every float near the branches) in
# LogProbabilityQuad's exact weights. Against c553fe9, alternating, four
# rounds; rejection_cuda_test of BF.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-r rejection_bench, renamed
#   rejection_bench_bf; rejection_bench_c553 is run15's NOW binary.
# Run (H100): carry .gpu-r
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-r/lib
B=.gpu-r/bin
$B/rejection_cuda_test_bf > "$OUT/run16-tests-bf.txt" 2>&1; echo "bf rc=$?" >> "$OUT/run16-tests-bf.txt"
tail -2 "$OUT/run16-tests-bf.txt"
for round in 1 2 3 4; do
  for spec in "probabilities,8" "logprobs,8" "logprobs,1" "logprobs,32" "logprobs,128"; do
    for v in rejection_bench_c553 rejection_bench_bf; do
      printf '%-22s round %d ' "$v" "$round"
      $B/$v --only "$spec,8,151936" --runs 200 --csv /dev/null | grep -E "ours median"
    done
  done
done > "$OUT/run16-ab.txt" 2>&1
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, m}' "$OUT/run16-ab.txt"
