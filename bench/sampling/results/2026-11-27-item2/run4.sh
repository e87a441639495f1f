#!/usr/bin/env bash
# The log-probability decision from ex2 bounds (H100). V6 = V5 + warp 0's
# acceptance test coin * q <= p on log-probabilities settled from the ex2
# bounds, with the two ExpDet polynomials only in the ~0.2% band around the
# boundary (AcceptLogProbabilityDraft). rejection_cuda_test of V6 (with the
# new LogProbabilityAcceptanceAtTheCoinMatches, which puts drafted tokens in
# that band), memcheck of the log-probability tests; A/B against 323f2e4 and
# V5, alternating, three rounds.
# Build: working tree at V6 (= 84bac8a), cmake --build build-gpu --target
#   rejection_bench rejection_cuda_test, stripped to .gpu-t/bin/*_v6.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
$B/rejection_cuda_test_v6 > "$OUT/run4-tests-v6.txt" 2>&1; echo "v6 rc=$?" >> "$OUT/run4-tests-v6.txt"
tail -2 "$OUT/run4-tests-v6.txt"; grep -E "^\[  (FAILED|     OK) \].*LogProbab" "$OUT/run4-tests-v6.txt"
compute-sanitizer --tool memcheck $B/rejection_cuda_test_v6 --gtest_filter='*LogProbab*' > "$OUT/run4-memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/run4-memcheck.txt"
tail -2 "$OUT/run4-memcheck.txt"
for round in 1 2 3; do
  for spec in "probabilities,8" "logprobs,8" "logprobs,1" "logprobs,32" "logprobs,128"; do
    set -- $spec
    for v in rejection_bench rejection_bench_v5 rejection_bench_v6; do
      printf '%-20s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      $B/$v --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median"
    done
  done
done > "$OUT/run4-ab.txt" 2>&1
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $5, $6, m}' "$OUT/run4-ab.txt"
