#!/usr/bin/env bash
# run12 showed filtered logits (top-k 50 + top-p 0.9) 5-9% slower at
# 84bac8a than at 323f2e4: LogitQuad's bounds of a value below the threshold
# became 2^-126 / Z instead of 0, so every filtered-out entrant was hopeful in
# warps not yet seeded (most warps of a top-k row). FIX = 84bac8a + those
# bounds exactly 0 again (LogitApprox -1 sentinel) + the exact step computes
# the weight before the logarithm (a hopeful entrant of weight 0 costs no
# LogDet). BASE 323f2e4, NOW 84bac8a, FIX alternating, two rounds (B=8
# probabilities and log-probabilities four); rejection_cuda_test of FIX.
# Build: the fix on 84bac8a, cmake --build build-gpu --target rejection_bench
#   rejection_cuda_test, stripped to .gpu-r/bin/*_fix;
#   .gpu-r/bin/rejection_bench_84bac8a is run12's NOW binary.
# Run (H100): carry .gpu-r (BASE, NOW and FIX binaries with the libraries of a rejection_bench bundle)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-r/lib
B=.gpu-r/bin
$B/rejection_cuda_test_fix > "$OUT/run13-tests-fix.txt" 2>&1; echo "fix rc=$?" >> "$OUT/run13-tests-fix.txt"
tail -2 "$OUT/run13-tests-fix.txt"
for round in 1 2 3 4; do
  for spec in "probabilities,8" "logprobs,8" "logits,1" "logits,8" "logits,32" "logits,128" "logits,8 --dtype bf16" "logits,128 --dtype bf16"; do
    set -- $spec
    if [ "$round" -gt 2 ] && [ "$1" != "probabilities,8" ] && [ "$1" != "logprobs,8" ]; then continue; fi
    for v in rejection_bench rejection_bench_84bac8a rejection_bench_fix; do
      printf '%-24s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      $B/$v --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run13-ab.txt" 2>&1
awk '{m=""; f=""; for(i=1;i<=NF;i++){if($i=="median" && m=="") m=$(i+1); else if($i=="median") f=$(i+1)}; print $1, $3, $5, $6, m, f}' "$OUT/run13-ab.txt"
