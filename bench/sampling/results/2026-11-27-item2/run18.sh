#!/usr/bin/env bash
# run17's PW cost the headline log-probabilities ~1% (a compare and a
# branch on the seeded path). PW2 computes the mask inside the warp's
# seeding branch (only while unseeded) and ANDs it in: HEAD (f0f0338), PW,
# PW2 alternating, three rounds; rejection_cuda_test of PW2.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test
#   with and without the change; scripts/gpu-bundle.sh build-gpu .gpu-r
#   rejection_bench, binaries renamed rejection_bench_head / _pw / _pw2; rejection_cuda_test_pw is PW2's.
# Run (H100): carry .gpu-r
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-r/lib
B=.gpu-r/bin
$B/rejection_cuda_test_pw > "$OUT/run18-tests-pw2.txt" 2>&1; echo "pw2 rc=$?" >> "$OUT/run18-tests-pw2.txt"
tail -2 "$OUT/run18-tests-pw2.txt"
for round in 1 2 3; do
  for spec in "logprobs disjoint" "logits disjoint" "logprobs peaked" "probabilities peaked" "logits peaked"; do
    set -- $spec
    for v in rejection_bench_head rejection_bench_pw rejection_bench_pw2; do
      printf '%-22s round %d %-9s ' "$v" "$round" "$2"
      $B/$v --only "$1,8,8,151936" --shape "$2" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run18-ab.txt" 2>&1
awk '{m=""; f=""; for(i=1;i<=NF;i++){if($i=="median" && m=="") m=$(i+1); else if($i=="median") f=$(i+1)}; print $1, $3, $4, $5, m, f}' "$OUT/run18-ab.txt"
