#!/usr/bin/env bash
# Verification of the race-sweep trims and the 2-blocks-per-SM plan (issue
# #17 item 5) on the H100: NEW (the working tree, bundled as .gpu-final)
# against OLD (7e8ccab, .gpu-base), alternating per shape, two rounds; NEW
# at --blocks-per-sm 3 (the old plan from 32 sequences on); parity,
# statistics, memcheck and racecheck of NEW.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-final rejection_bench rejection_cuda_test
# Run (H100): carry .gpu-base .gpu-final
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/run6-environment.txt"
bench() {  # bundle spec [extra args]
  local bundle=$1 spec=$2
  shift 2
  LD_LIBRARY_PATH=$PWD/$bundle/lib "$bundle/bin/rejection_bench" --only "$spec" --runs 300 --csv /dev/null "$@" | grep "ours median"
}
shapes="probabilities,1 probabilities,8 probabilities,32 probabilities,64 probabilities,128 logprobs,8 logprobs,32 logprobs,128 logits,8 logits,32"
for round in 1 2; do
  for s in $shapes; do
    for v in base final; do printf '%-5s round %d  ' "$v" "$round"; bench .gpu-$v "$s,8,151936"; done
  done
  for s in probabilities,8 probabilities,128; do
    for v in base final; do printf '%-5s round %d bf16 ' "$v" "$round"; bench .gpu-$v "$s,8,151936" --dtype bf16; done
  done
done > "$OUT/run6-ab.txt" 2>&1
for s in probabilities,32 probabilities,64 probabilities,128 logprobs,128 logits,32; do
  printf 'final bps3  '; bench .gpu-final "$s,8,151936" --blocks-per-sm 3
done > "$OUT/run6-bps3.txt" 2>&1
export LD_LIBRARY_PATH=$PWD/.gpu-final/lib
.gpu-final/bin/rejection_cuda_test > "$OUT/run6-tests.txt" 2>&1; echo "parity rc=$?" >> "$OUT/run6-tests.txt"
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 .gpu-final/bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.*' > "$OUT/run6-memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/run6-memcheck.txt"
timeout 300 compute-sanitizer --tool racecheck --error-exitcode 1 .gpu-final/bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.MatchesTheCpuReferenceAcrossTheGrid:RejectionCudaTest.RaceBlocksPerSmChangeNoOutcome:RejectionCudaTest.LogProbabilityEdgeValuesMatch:RejectionCudaTest.GreedyFilteredAndSigmoidLogitsMatch' > "$OUT/run6-racecheck.txt" 2>&1; echo "racecheck rc=$?" >> "$OUT/run6-racecheck.txt"
tail -2 "$OUT/run6-tests.txt"; tail -3 "$OUT/run6-memcheck.txt"; tail -3 "$OUT/run6-racecheck.txt"
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, m}' "$OUT/run6-ab.txt" "$OUT/run6-bps3.txt"
