#!/usr/bin/env bash
# Run 3: how long a run of chunks should be now that pairs are cheaper:
# rejection_bench (HEAD, e6ebe67) --row-chunks N at bf16 B=32, 64, 128 and
# fp16 B=128 (38 chunks a row: runs of 8 leave 8,8,8,8,6; 10 leave
# 10,10,10,8; 13 leave 13,13,12; 19 two halves), two rounds.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-r rejection_bench
# Run: bash bench/sampling/results/2026-11-29-pair-max/run3.sh .gpu-r $OUT/run3
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
bench() {  # label args...
  local label=$1
  shift
  timeout 60 "$bundle/bin/rejection_bench" --only "$@" --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
  echo "$label $* | $(grep -E '^logits' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
}
for round in 1 2; do
  for n in 4 5 6 8; do bench "r$round" logits,32,8,151936 --dtype bf16 --row-chunks $n; done
  for n in 6 8 10 13; do bench "r$round" logits,64,8,151936 --dtype bf16 --row-chunks $n; done
  for n in 8 10 13 19; do bench "r$round" logits,128,8,151936 --dtype bf16 --row-chunks $n; done
  for n in 8 10 13; do bench "r$round" logits,128,8,151936 --dtype fp16 --row-chunks $n; done
done 2>&1 | tee "$out/runs.txt"
rm -f "$out/last.txt"
