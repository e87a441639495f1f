#!/usr/bin/env bash
# Item 2 after a42d7a6: log-probabilities at the headline (B=8) against the
# probabilities of the same run, at 1 / 2 / 3 race blocks per SM (H100).
# Run (H100): carry .gpu-final (a42d7a6's build-gpu bundle)
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-final/lib
for round in 1 2 3; do
  for spec in probabilities logprobs; do
    for bps in 1 2 3; do
      printf '%-13s round %d bps %d  ' "$spec" "$round" "$bps"
      .gpu-final/bin/rejection_bench --only $spec,8,8,151936 --blocks-per-sm $bps --runs 300 --csv /dev/null | grep "ours median"
    done
  done
done > "$OUT/run7-item2.txt" 2>&1
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $5, m}' "$OUT/run7-item2.txt"
