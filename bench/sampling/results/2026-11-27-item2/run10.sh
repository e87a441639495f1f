#!/usr/bin/env bash
# Why the decision takes ~3.5 us at B=8 (6,900 cycles from entry to the
# barrier, run 6) but ~1.3 us at B=1 and ~1.8 us at B=32: clock64 stamps on
# thread 0 around the decision's loads (params, draft token, values), summed
# over every launch (temporary hooks on 84bac8a, not committed); "nopf" also
# drops warps 1-2's L2 prefetch of the candidate rows. H100.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
for spec in probabilities,1 probabilities,8 probabilities,32 probabilities,128 logprobs,8; do
  for v in dec dec_nopf; do
    printf '%-9s %-18s ' "$v" "$spec"
    SPECVERIFY_PHASES=1 $B/rejection_bench_$v --only "$spec,8,151936" --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|decision" | sed -E 's/ +/ /g; s/\| read floor.*//' | tr '\n' ' '
    echo
  done
done > "$OUT/run10-decision.txt" 2>&1
cat "$OUT/run10-decision.txt"
