#!/usr/bin/env bash
# The race's cold branches marked unlikely (__builtin_expect: seeding, the
# exact path of hopeful entrants, the target race while it is fed), so the
# compiler lays them out after the sweep loop: A/B on the H100 against
# a42d7a6 (OLD, .gpu-final) alternating per shape, two rounds; parity of NEW.
# ncu (run 8) put 35% of the log-probability race's stall samples at B=8 on
# instruction fetch: its loop body (~12.6 KB of SASS) was longer than the
# probabilities' (~10 KB), which stalled 6.5% there.
# NEW was a42d7a6 with __builtin_expect(..., 0) on those four branches of
# RaceOneQuad / RaceBoundedQuad; not kept, so not in the committed source.
# Run (H100): carry .gpu-final .gpu-exp
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-final/lib
shapes="probabilities,1 probabilities,8 probabilities,32 probabilities,128 logprobs,8 logprobs,32 logprobs,128 logits,8 logits,32"
for round in 1 2; do
  for s in $shapes; do
    for v in final exp; do printf '%-5s round %d  ' "$v" "$round"; .gpu-$v/bin/rejection_bench --only "$s,8,151936" --runs 300 --csv /dev/null | grep "ours median"; done
  done
  for v in final exp; do printf '%-5s round %d bf16 ' "$v" "$round"; .gpu-$v/bin/rejection_bench --only probabilities,8,8,151936 --dtype bf16 --runs 300 --csv /dev/null | grep "ours median"; done
done > "$OUT/run9-ab.txt" 2>&1
.gpu-exp/bin/rejection_cuda_test > "$OUT/run9-tests.txt" 2>&1; echo "parity rc=$?" >> "$OUT/run9-tests.txt"
tail -2 "$OUT/run9-tests.txt"
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, m}' "$OUT/run9-ab.txt"
