#!/usr/bin/env bash
# Run 2: rb_pair (run 1's change, e28a180), rb_fix (e28a180 + the launchers'
# sm_90 code check: must time the same, i.e. keep the programmatic dependent
# launches) and rb_sums (rb_fix + warp-sums.patch: each chunk's fixed-order
# sum finished by one warp after one barrier; ptxas: the 16-bit runs kernels
# spill 8 (bf16) and 92 (fp16) bytes), alternating, two rounds; then rb_fix
# with --row-chunks 1 and 4 (runs for filtered batches, and below 6 waves).
# Bundle: .gpu-q (../2026-11-29-portable-ptx/run1.sh) plus rb_pair, rb_fix, rb_sums.
# Run: bash bench/sampling/results/2026-11-29-pair-max/run2.sh .gpu-q $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
bench() {  # label binary args...
  local label=$1 binary=$2
  shift 2
  timeout 60 "$bundle/bin/$binary" --only "$@" --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
  echo "$label $binary $* | $(grep -E '^(logits|probabilities|log_probabilities)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
}
for round in 1 2; do
  for args in "logits,8,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" \
      "logits,128,8,151936 --dtype fp16" "logits,8,8,151936" "probabilities,8,8,151936"; do
    # shellcheck disable=SC2086
    for binary in rb_pair rb_fix rb_sums; do bench "r$round" $binary $args; done
  done
done 2>&1 | tee "$out/ab.txt"
for round in 1 2; do
  for B in 4 8 16 32; do
    for n in 1 4; do bench "r$round" rb_fix logits,$B,8,151936 --dtype bf16 --row-chunks $n; done
  done
done 2>&1 | tee "$out/plan.txt"
rm -f "$out/last.txt"
