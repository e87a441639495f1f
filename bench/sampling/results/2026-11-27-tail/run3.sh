#!/usr/bin/env bash
# Run 3 (H100): does the runs-of-chunks crossover still pick the faster
# kernel after the runs kernel's evict-first bulk prefetch (7f1c9ec)?
# rejection_bench of 2ce133b with --row-chunks 1 (one chunk a block) and 8
# (runs), 16-bit rows at B = 16, 24, 32, two rounds (the --row-chunks 0
# lines only print the option's range: it takes 1-8).
# Run (H100): carry .gpu-fin (run2.sh's bundle)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-fin/lib
B=.gpu-fin/bin
for round in 1 2; do
  for spec in "logits,16,8,151936 --dtype bf16" "logits,24,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" "logits,24,8,151936 --dtype fp16"; do
    set -- $spec
    for chunks in 0 1 8; do
      printf 'round %d %-34s --row-chunks %d  ' "$round" "$spec" "$chunks"
      $B/rejection_bench_new --only "$1" "${@:2}" --row-chunks $chunks --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch [0-9.]+ us//; s/gamma=8 V=151936 //'
    done
  done
done > "$OUT/run3-crossover.txt" 2>&1
cat "$OUT/run3-crossover.txt"
