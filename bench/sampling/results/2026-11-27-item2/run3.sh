#!/usr/bin/env bash
# One ex2 per value and quad (H100). run1's SASS: a warp's first quad ran 24
# MUFU ex2 for 8 log-probability values, because the seeding's branch and
# the certainty test recomputed the bounds the hot path computes.
# V4 = V1 + LogProbabilityQuad computes ex2.approx once per value at
# construction and derives every bound from it; V5 = V4 + the same for
# LogitQuad (exact logits). Against 323f2e4 and V1, alternating, three
# rounds; rejection_cuda_test of V5 (parity, statistical); ncu source
# counters (warm) of V5 log-probabilities.
# Build: working tree at each variant (V1 v1.diff in this folder, V4, V5),
#   cmake --build build-gpu --target rejection_bench rejection_cuda_test,
#   stripped to .gpu-t/bin/rejection_bench_vN, rejection_cuda_test_v5.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
$B/rejection_cuda_test_v5 > "$OUT/run3-tests-v5.txt" 2>&1; echo "v5 rc=$?" >> "$OUT/run3-tests-v5.txt"
tail -2 "$OUT/run3-tests-v5.txt"
ncu --cache-control none --section SourceCounters --section WarpStateStats -k regex:AcceptRaceKernel -s 40 -c 1 \
  -o "$OUT/run3-v5-logprobs" $B/rejection_bench_v5 --only logprobs,8,8,151936 --runs 5 --csv /dev/null > /dev/null 2>&1
ncu -i "$OUT/run3-v5-logprobs.ncu-rep" --page source --csv --print-source sass > "$OUT/run3-v5-logprobs-sass.csv" 2>&1
rm -f "$OUT/run3-v5-logprobs.ncu-rep"
for round in 1 2 3; do
  for spec in "probabilities,8" "logprobs,8" "logprobs,128" "logits,1" "logits,8" "logits,32" "logits,8 --dtype bf16"; do
    set -- $spec
    for v in rejection_bench rejection_bench_v1 rejection_bench_v4 rejection_bench_v5; do
      printf '%-20s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      $B/$v --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median"
    done
  done
done > "$OUT/run3-ab.txt" 2>&1
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, $6, m}' "$OUT/run3-ab.txt"
