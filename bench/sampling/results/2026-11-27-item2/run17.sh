#!/usr/bin/env bash
# Rows where most entrants weigh exactly 0 (H100). A warp with no bound yet
# keeps every entrant whose upper bound is > 0, and a -inf log-probability
# (or an off-support / -inf logit) has the bound 2^-126: a share with no
# entrant at all took each of its elements through the exact step. PW =
# f0f0338 + RaceOneQuad masks the hopeful entrants with the quad's
# PossiblyWeighted() while its scale is +inf (log-probabilities: v >
# -103.5; logits: t > -152 and above the threshold). HEAD = f0f0338 (with
# the bench's new --shape). Disjoint rows (half of each row off support)
# and the headline peaked rows, alternating, three rounds;
# rejection_cuda_test of PW.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test
#   with and without the change; scripts/gpu-bundle.sh build-gpu .gpu-r
#   rejection_bench, binaries renamed rejection_bench_head / _pw.
# Run (H100): carry .gpu-r
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-r/lib
B=.gpu-r/bin
$B/rejection_cuda_test_pw > "$OUT/run17-tests-pw.txt" 2>&1; echo "pw rc=$?" >> "$OUT/run17-tests-pw.txt"
tail -2 "$OUT/run17-tests-pw.txt"
for round in 1 2 3; do
  for spec in "logprobs disjoint" "probabilities disjoint" "logits disjoint" "logprobs peaked" "probabilities peaked" "logits peaked"; do
    set -- $spec
    for v in rejection_bench_head rejection_bench_pw; do
      printf '%-22s round %d %-9s ' "$v" "$round" "$2"
      $B/$v --only "$1,8,8,151936" --shape "$2" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run17-ab.txt" 2>&1
awk '{m=""; f=""; for(i=1;i<=NF;i++){if($i=="median" && m=="") m=$(i+1); else if($i=="median") f=$(i+1)}; print $1, $3, $4, $5, m, f}' "$OUT/run17-ab.txt"
