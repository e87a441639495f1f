#!/usr/bin/env bash
# The hopeless test folded into the ex2 values (H100). V7 = 84bac8a (V6) +
# LogProbabilityQuad's HopefulTarget / HopefulResidual: the bounds' constants
# folded into the threshold once a quad (2-3 instructions an element instead
# of 6-9). rejection_cuda_test of V7, memcheck of the log-probability tests,
# ncu source counters (warm) of V7 log-probabilities at B=8; A/B against
# 323f2e4 and V6, alternating, three rounds.
# Build: working tree at V7 (v7-folded-hopeless-test.diff in this folder, on 84bac8a), cmake --build
#   build-gpu --target rejection_bench rejection_cuda_test, stripped to
#   .gpu-t/bin/*_v7; rejection_bench_v6 is 84bac8a's.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
$B/rejection_cuda_test_v7 > "$OUT/run5-tests-v7.txt" 2>&1; echo "v7 rc=$?" >> "$OUT/run5-tests-v7.txt"
tail -2 "$OUT/run5-tests-v7.txt"
compute-sanitizer --tool memcheck $B/rejection_cuda_test_v7 --gtest_filter='*LogProbab*:*RaceBlocksPerSm*' > "$OUT/run5-memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/run5-memcheck.txt"
tail -2 "$OUT/run5-memcheck.txt"
ncu --cache-control none --section SourceCounters --section WarpStateStats -k regex:AcceptRaceKernel -s 40 -c 1 \
  -o "$OUT/run5-v7-logprobs" $B/rejection_bench_v7 --only logprobs,8,8,151936 --runs 5 --csv /dev/null > /dev/null 2>&1
ncu -i "$OUT/run5-v7-logprobs.ncu-rep" --page source --csv --print-source sass > "$OUT/run5-v7-logprobs-sass.csv" 2>&1
rm -f "$OUT/run5-v7-logprobs.ncu-rep"
for round in 1 2 3; do
  for spec in "probabilities,8" "logprobs,8" "logprobs,1" "logprobs,32" "logprobs,128"; do
    set -- $spec
    for v in rejection_bench rejection_bench_v6 rejection_bench_v7; do
      printf '%-20s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      $B/$v --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median"
    done
  done
done > "$OUT/run5-ab.txt" 2>&1
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $5, $6, m}' "$OUT/run5-ab.txt"
