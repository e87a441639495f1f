#!/usr/bin/env bash
# No finalize kernel: the race block that takes its sequence's last ticket
# (an acq_rel atomic after its atomicMax) writes the outcome and clears the
# word, flags and ticket. A/B on the H100 against a42d7a6 (.gpu-final),
# alternating per shape, two rounds; parity, memcheck and racecheck of NEW.
# Run (H100): carry .gpu-final .gpu-exp
set -u
shapes="probabilities,1 probabilities,8 probabilities,32 probabilities,128 logprobs,8 logits,8"
for round in 1 2; do
  for s in $shapes; do
    for v in final exp; do printf '%-5s round %d  ' "$v" "$round"; LD_LIBRARY_PATH=$PWD/.gpu-final/lib .gpu-$v/bin/rejection_bench --only "$s,8,151936" --runs 300 --csv /dev/null | grep "ours median"; done
  done
done > "$OUT/run13-ab.txt" 2>&1
export LD_LIBRARY_PATH=$PWD/.gpu-exp/lib
.gpu-exp/bin/rejection_cuda_test > "$OUT/run13-tests.txt" 2>&1; echo "parity rc=$?" >> "$OUT/run13-tests.txt"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 .gpu-exp/bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.MatchesTheCpuReferenceAcrossTheGrid:RejectionCudaTest.BadValuesAndIdsAreReportedLikeTheReference:RejectionCudaTest.GraphReplaysGiveTheSameResults:RejectionCudaTest.RaceBlocksPerSmChangeNoOutcome' > "$OUT/run13-memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/run13-memcheck.txt"
tail -2 "$OUT/run13-tests.txt"; tail -2 "$OUT/run13-memcheck.txt"
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, m}' "$OUT/run13-ab.txt"
