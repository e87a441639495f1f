#!/usr/bin/env bash
# Run 3 (H100): the committed form against 45d637d (base): evict-first
# row-pass loads, the runs kernel's bulk evict-first prefetch, 1/T handed
# from the pass to the combine, and the sampled rows' normalizers handed
# from the decision's lanes to the race blocks (no re-read after the
# decision). Tests first (parity, memcheck, racecheck, served), then
# alternating per shape, two rounds.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test sampled_server_test;
#   base = 45d637d's rejection_bench; scripts/gpu-bundle.sh /tmp/newb .gpu-new ...
# Run (H100): carry .gpu-new
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-new/lib
B=.gpu-new/bin
{
  $B/rejection_cuda_test 2>&1 | tail -3
  compute-sanitizer --tool memcheck $B/rejection_cuda_test --gtest_filter='RejectionCudaTest.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -3
  compute-sanitizer --tool racecheck $B/rejection_cuda_test --gtest_filter='*RowPass*:*Filter*:*BatchesInARow*:*Temperature*' 2>&1 | grep -E "HAZARD|RACECHECK SUMMARY|PASSED|FAILED" | tail -3
  [ -x $B/sampled_server_test ] && $B/sampled_server_test 2>&1 | tail -2
} > "$OUT/run3-tests.txt" 2>&1
cat "$OUT/run3-tests.txt"
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936 --dtype bf16" "logits,8,8,151936 --dtype fp16" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" "logits,128,8,151936" "logits,128,8,151936 --dtype bf16" "probabilities,8,8,151936" "logprobs,8,8,151936"; do
    set -- $spec
    for v in base new; do
      printf '%-5s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run3-ab.txt" 2>&1
cat "$OUT/run3-ab.txt" | sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//'
