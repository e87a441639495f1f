#!/usr/bin/env bash
# run13's FIX brought filtered logits back (B=8 78.6 us against 79.2 at
# 323f2e4) but its selects on the logit bounds undid the unfiltered gain of
# 84af35f (B=8 54.6 against 53.8). FIX2 = 84bac8a + the weight before the
# logarithm in the exact step + LogitApprox returns -1 for a filtered target
# value (both its bounds negative: never hopeful) and 0 for a filtered draft
# value (bounds +-2^-126 / Z), no selects. BASE 323f2e4, NOW 84bac8a, FIX2,
# alternating, two rounds (B=8 probabilities and log-probabilities four);
# rejection_cuda_test of FIX2.
# Build: the fix on 84bac8a, cmake --build build-gpu --target rejection_bench
#   rejection_cuda_test, stripped to .gpu-r/bin/*_fix2;
#   .gpu-r/bin/rejection_bench_84bac8a is run12's NOW binary.
# Run (H100): carry .gpu-r (BASE, NOW and FIX binaries with the libraries of a rejection_bench bundle)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-r/lib
B=.gpu-r/bin
$B/rejection_cuda_test_fix2 > "$OUT/run14-tests-fix.txt" 2>&1; echo "fix2 rc=$?" >> "$OUT/run14-tests-fix.txt"
tail -2 "$OUT/run14-tests-fix.txt"
for round in 1 2 3 4; do
  for spec in "probabilities,8" "logprobs,8" "logits,1" "logits,8" "logits,32" "logits,128" "logits,8 --dtype bf16" "logits,128 --dtype bf16"; do
    set -- $spec
    if [ "$round" -gt 2 ] && [ "$1" != "probabilities,8" ] && [ "$1" != "logprobs,8" ]; then continue; fi
    for v in rejection_bench rejection_bench_84bac8a rejection_bench_fix2; do
      printf '%-24s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      $B/$v --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run14-ab.txt" 2>&1
awk '{m=""; f=""; for(i=1;i<=NF;i++){if($i=="median" && m=="") m=$(i+1); else if($i=="median") f=$(i+1)}; print $1, $3, $5, $6, m, f}' "$OUT/run14-ab.txt"
