#!/usr/bin/env bash
# Seeding from every entrant (H100). Runs 6-8 (phase clocks) put
# log-probabilities' extra time at B=8 in the sweep's first iteration, where
# each warp takes ~3 exact offers (ExpDet polynomials on the chain) after a
# seed from each lane's heaviest entrant. V8 = 84bac8a + the bounded quads
# (log-probabilities, exact logits) seed from the smallest KeyUpperBound of
# all four entrants of a lane; V9 = V8 + every kind does. Against 323f2e4 and
# V6 (84bac8a), alternating, three rounds; rejection_cuda_test of V9.
# Build: temporary macro SPECVERIFY_EXP_SEED (1: V8, 2: V9) on 84bac8a,
#   cmake --build build-gpu --target rejection_bench rejection_cuda_test,
#   stripped to .gpu-t/bin/*_v8 / *_v9.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
$B/rejection_cuda_test_v9 > "$OUT/run9-tests-v9.txt" 2>&1; echo "v9 rc=$?" >> "$OUT/run9-tests-v9.txt"
tail -2 "$OUT/run9-tests-v9.txt"
for round in 1 2 3; do
  for spec in "probabilities,8" "logprobs,8" "probabilities,128" "logprobs,1" "logprobs,32" "logits,8"; do
    set -- $spec
    for v in rejection_bench rejection_bench_v6 rejection_bench_v8 rejection_bench_v9; do
      printf '%-20s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      $B/$v --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median"
    done
  done
done > "$OUT/run9-ab.txt" 2>&1
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $5, $6, m}' "$OUT/run9-ab.txt"
