#!/usr/bin/env bash
# Run 4: run 3 found runs of 4 chunks ahead of one-chunk blocks at 16-bit
# B=16 and 24 (13 and 20 single-chunk waves); this looks below: B = 1, 4,
# 8, 12 with --row-chunks 1 / 2 / 4 (and 3 at bf16 B=8), two rounds. Same
# bundle as run 3.
# Run: bash bench/sampling/results/2026-11-29-unpack-late/run4.sh .gpu-w $OUT/run4
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
bench() {  # round, args...
  local round=$1
  shift
  timeout 60 "$bundle/bin/rejection_bench" --only "$@" --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
  echo "r$round $* | $(grep -E '^(logits|probabilities)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
}
for round in ${ROUNDS:-1 2}; do
  for n in 1 2 3 4; do bench "$round" logits,8,8,151936 --dtype bf16 --row-chunks $n; done
  for n in 1 2 4; do bench "$round" logits,8,8,151936 --dtype fp16 --row-chunks $n; done
  for n in 1 2 4; do bench "$round" logits,12,8,151936 --dtype bf16 --row-chunks $n; done
  for n in 1 2; do bench "$round" logits,4,8,151936 --dtype bf16 --row-chunks $n; done
  for n in 1 2; do bench "$round" logits,1,8,151936 --dtype bf16 --row-chunks $n; done
done 2>&1 | tee "$out/crossover.txt"
rm -f "$out/last.txt"
