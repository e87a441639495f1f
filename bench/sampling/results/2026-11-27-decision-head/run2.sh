#!/usr/bin/env bash
# Run 2 (H100): run 1's head split in two: rejection_bench_guess (only the
# guessed draft token, -DSV_NO_COIN) and rejection_bench_coin (only the coin
# before the wait, -DSV_NO_GUESS), against 1bc3dc8 and run 1's build (both),
# alternating, two rounds, the shapes run 1 moved.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
for round in 1 2; do
  for spec in "probabilities,8" "logprobs,8" "logits,1"; do
    for v in rejection_bench_base rejection_bench rejection_bench_guess rejection_bench_coin; do
      printf '%-22s round %d ' "$v" "$round"
      .gpu-d/bin/$v --only "$spec,8,151936" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
cat "$OUT/run2-ab.txt"
