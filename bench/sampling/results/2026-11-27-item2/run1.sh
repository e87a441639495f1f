#!/usr/bin/env bash
# First run of the 2026-11-27 session (H100):
# (a) the night session's run16: rejection_cuda_test of 323f2e4 (its new
#     BatchesInARowOnOneScratchMatch and the MixedWorkload refactor had only
#     been compiled), and the test against a build whose last race block does
#     not clear its ticket (rejection_cuda_test_broken), to show it can fail;
# (b) ncu of the race kernel at B=8 with warm caches (--cache-control none):
#     does log-probabilities' instruction-fetch stall share (35% with ncu's
#     default cache flush, run8 of 2026-11-26-item5) survive warm?
# (c) A/B: V1 (no fmaxf(.., 0) on the residual bounds of log-probability and
#     logit quads: the hopeful test and the seeding already ignore weights
#     <= 0) against 323f2e4, alternating, three rounds.
# Build: base = 323f2e4: cmake --build build-gpu --target rejection_bench
#   rejection_cuda_test; scripts/gpu-bundle.sh build-gpu .gpu-t
#   rejection_cuda_test rejection_bench; broken: the line
#   `a.scratch.race_tickets[i] = 0;` of AcceptRaceKernel deleted, built in
#   build-gpu2, stripped to .gpu-t/bin/rejection_cuda_test_broken; V1 built in
#   build-gpu, stripped to .gpu-t/bin/rejection_bench_v1.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/run1-environment.txt"
$B/rejection_cuda_test > "$OUT/run1-tests.txt" 2>&1; echo "real build rc=$?" >> "$OUT/run1-tests.txt"
$B/rejection_cuda_test_broken --gtest_filter='*BatchesInARow*:*GraphReplays*' > "$OUT/run1-broken.txt" 2>&1; echo "broken build rc=$?" >> "$OUT/run1-broken.txt"
tail -3 "$OUT/run1-tests.txt"; grep -E "FAILED|OK \]|rc=" "$OUT/run1-broken.txt" | head
for kind in probabilities logprobs; do
  ncu --cache-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight -k regex:AcceptRaceKernel -s 40 -c 1 \
    -o "$OUT/run1-$kind" $B/rejection_bench --only $kind,8,8,151936 --runs 5 --csv /dev/null > /dev/null 2>&1
  ncu -i "$OUT/run1-$kind.ncu-rep" --page source --csv --print-source sass > "$OUT/run1-$kind-sass.csv" 2>&1
  ncu -i "$OUT/run1-$kind.ncu-rep" --page details > "$OUT/run1-$kind-details.txt" 2>&1
  rm -f "$OUT/run1-$kind.ncu-rep"
done
grep -E "Duration|Issued Warp|Elapsed Cycles|No Instruction|Stall No" "$OUT"/run1-*-details.txt
for round in 1 2 3; do
  for shape in probabilities,8 logprobs,8 logits,8; do
    for v in rejection_bench rejection_bench_v1; do
      printf '%-20s round %d ' "$v" "$round"
      $B/$v --only "$shape,8,151936" --runs 200 --csv /dev/null | grep -E "ours median"
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
cat "$OUT/run1-ab.txt" | awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, m}'
