#!/usr/bin/env bash
# run10 found the decision's draft-token load taking ~4,300 cycles at B=8
# (600-1,000 at B = 1, 32, 128). Is it the batch size, the blocks per
# sequence, or the bench's input copies (B=8 rotates 2)? Same experiment
# binary (decision clocks on 84bac8a), probabilities at B = 2..24 and B=8
# with 1 and 3 race blocks per SM. H100.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
for spec in "2" "4" "6" "8" "10" "12" "16" "24" "8 --blocks-per-sm 1" "8 --blocks-per-sm 3"; do
  set -- $spec
  printf '%-22s ' "B=$spec"
  SPECVERIFY_PHASES=1 $B/rejection_bench_dec --only "probabilities,$1,8,151936" "${@:2}" --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|decision" | sed -E 's/ +/ /g; s/\| read floor.*//; s/mean cycles: //' | tr '\n' ' '
  echo
done > "$OUT/run11-decision.txt" 2>&1
cat "$OUT/run11-decision.txt"
