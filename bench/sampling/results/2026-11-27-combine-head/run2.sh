#!/usr/bin/env bash
# Run 2 (H100): run 1's lookup before the wait, with the combine's trigger
# for the race grid moved to its start (trigger-first.patch), as
# rejection_bench_v2, against caeeac5 and run 1's build; three rounds.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
B=.gpu-d/bin
for round in 1 2 3; do
  for spec in "logits,1,8,151936" "logits,8,8,151936" "logits,8,8,151936 --dtype bf16"; do
    set -- $spec
    for v in rejection_bench_base rejection_bench rejection_bench_v2; do
      printf '%-22s round %d %-34s ' "$v" "$round" "$spec"
      $B/$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch [0-9.]+ us \| row chunks [0-9]+//'
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
cat "$OUT/run2-ab.txt"
