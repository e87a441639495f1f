#!/usr/bin/env bash
# Run 4 (H100): the fix for run 3's regression: the exact-logits race's
# sampled-row normalizers leave the block's Decision broadcast for a shared
# struct of their own (probabilities and log-probabilities back to 128 bytes
# of static shared memory). rejection_cuda_test on the fix, then the fix, HEAD
# (d837c1e) and 45d637d alternating, three rounds.
#   scripts/gpu-bundle.sh /tmp/st2 .gpu-st rejection_bench_fix rejection_bench_head rejection_bench_45d637d rejection_cuda_test
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-st/lib
timeout 200 .gpu-st/bin/rejection_cuda_test > "$OUT/run4-rejection_cuda_test.txt" 2>&1
echo "rejection_cuda_test rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/run4-rejection_cuda_test.txt" | tr '\n' ' ')"
for round in 1 2 3; do
  for shape in probabilities,128,8,151936 probabilities,8,8,151936 logprobs,128,8,151936 logits,8,8,151936; do
    for bin in rejection_bench_fix rejection_bench_head rejection_bench_45d637d; do
      echo "round $round $bin $shape: $(.gpu-st/bin/$bin --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E 'ours median' | sed 's/ | read floor\(.\{0,22\}\).*/ | floor\1/')"
    done
  done
done
