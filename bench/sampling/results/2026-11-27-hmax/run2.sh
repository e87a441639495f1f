#!/usr/bin/env bash
# Run 2 (H100): the committed packed 16-bit max/min in the row pass plus the
# decision-input refactor (HEAD) against b0869c5 (base): tests first
# (parity, memcheck, racecheck), then alternating per shape, two rounds.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   base = b0869c5's rejection_bench; scripts/gpu-bundle.sh /tmp/fin .gpu-fin
#   rejection_bench_new rejection_bench_base rejection_cuda_test
# Run (H100): carry .gpu-fin
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-fin/lib
B=.gpu-fin/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$OUT/run2-environment.txt" 2>&1
{
  $B/rejection_cuda_test 2>&1 | tail -3
  compute-sanitizer --tool memcheck $B/rejection_cuda_test --gtest_filter='RejectionCudaTest.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -3
  compute-sanitizer --tool racecheck $B/rejection_cuda_test --gtest_filter='*RowPass*:*Filter*:*BatchesInARow*:*Temperature*' 2>&1 | grep -E "HAZARD|RACECHECK SUMMARY|PASSED|FAILED" | tail -3
} > "$OUT/run2-tests.txt" 2>&1
cat "$OUT/run2-tests.txt"
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936 --dtype bf16" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" "logits,128,8,151936" "logits,128,8,151936 --dtype bf16" "logits,8,8,151936 --dtype fp16" "probabilities,8,8,151936" "logprobs,8,8,151936"; do
    set -- $spec
    for v in base new; do
      printf '%-5s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//' "$OUT/run2-ab.txt"
