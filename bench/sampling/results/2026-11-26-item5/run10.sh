#!/usr/bin/env bash
# L2 prefetch-size hints on the race's cp.async copies (issue #17 item 5):
# cp.async.{cg,ca}.shared.global.L2::128B / L2::256B against none (a42d7a6,
# .gpu-final), H100, alternating per shape, two rounds. The variants are
# a42d7a6 built with a temporary SPECVERIFY_EXP_L2HINT="128B" / "256B" hook
# (not in the committed source).
# Run (H100): carry .gpu-final .gpu-h128 .gpu-h256
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-final/lib
for round in 1 2; do
  for s in probabilities,8 probabilities,128 logprobs,128 logits,8; do
    for v in final h128 h256; do printf '%-5s round %d  ' "$v" "$round"; .gpu-$v/bin/rejection_bench --only "$s,8,151936" --runs 300 --csv /dev/null | grep "ours median"; done
  done
  for v in final h128 h256; do printf '%-5s round %d bf16 ' "$v" "$round"; .gpu-$v/bin/rejection_bench --only probabilities,128,8,151936 --dtype bf16 --runs 300 --csv /dev/null | grep "ours median"; done
done > "$OUT/run10-ab.txt" 2>&1
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, m}' "$OUT/run10-ab.txt"
