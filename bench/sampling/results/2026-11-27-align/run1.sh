#!/usr/bin/env bash
# Run 1 (H100): does the race's dynamic staging ring want a 128-byte aligned
# start? (The exact-logits race has 160 bytes of static shared memory, the
# others 128 since 352ce91; the ring starts after them.) rejection_bench at
# 27d841a against the same tree with `extern __shared__ __align__(128)` on
# race_stage (align.patch), alternating, two rounds.
#   scripts/gpu-bundle.sh /tmp/st3 .gpu-al rejection_bench rejection_bench_align
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-al/lib
for round in 1 2; do
  for shape in logits,8,8,151936 logits,1,8,151936 logits,32,8,151936 probabilities,128,8,151936; do
    for bin in rejection_bench rejection_bench_align; do
      echo "round $round $bin $shape: $(.gpu-al/bin/$bin --only $shape --runs 200 --csv /dev/null 2>&1 | grep -E 'ours median' | sed 's/ | read floor\(.\{0,22\}\).*/ | floor\1/')"
    done
  done
done
