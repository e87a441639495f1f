#!/usr/bin/env bash
# Race-loop trims (issue #17 item 5), A/B on the H100 against 7e8ccab (base):
#   all: the three trims below together (the working tree's build-gpu)
#   H  : the hopeful test in three instructions an element only
#   R  : every lane reads the block bound with a relaxed shared load only
#   S  : the staging ring's shared addresses converted once only
# H/R/S are the working tree's source built with the other two trims turned
# back by SPECVERIFY_EXP_OLD_{HOPEFUL,BOUND,STAGE} (CMAKE_CUDA_FLAGS).
# Run (H100): carry .gpu-base .gpu-all .gpu-H .gpu-R .gpu-S
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-base/lib
for round in 1 2; do
  for v in base all H R S; do
    for spec in probabilities,8 probabilities,32 probabilities,128 logprobs,8 logits,8; do
      printf '%-5s round %d  ' "$v" "$round"
      ".gpu-$v/bin/rejection_bench" --only ${spec},8,151936 --runs 300 --csv /dev/null | grep "ours median"
    done
  done
done > "$OUT/run3-ab.txt" 2>&1
.gpu-all/bin/rejection_cuda_test > "$OUT/run3-tests.txt" 2>&1; echo "parity rc=$?" >> "$OUT/run3-tests.txt"
timeout 240 compute-sanitizer --tool racecheck .gpu-all/bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.MatchesTheCpuReferenceAcrossTheGrid:RejectionCudaTest.LogProbabilityEdgeValuesMatch:RejectionCudaTest.GreedyFilteredAndSigmoidLogitsMatch' > "$OUT/run3-racecheck.txt" 2>&1; echo "racecheck rc=$?" >> "$OUT/run3-racecheck.txt"
cuobjdump -sass .gpu-all/bin/rejection_bench | awk '/Function : /{p = /AcceptRaceKernelILNS_11SampleDtypeE0ELNS0_8RaceModeE0ELi3E/} p' > "$OUT/run3-sass-all.txt" 2>&1
grep -c "" "$OUT/run3-sass-all.txt"; grep -n "STL\|LDL" "$OUT/run3-sass-all.txt" | head -20
tail -3 "$OUT/run3-tests.txt" "$OUT/run3-racecheck.txt"
cat "$OUT/run3-ab.txt" | awk '{print $1, $3, $5, $12}'
