#!/usr/bin/env bash
# Run 1: (a) the row-pass kernels' slot order and row address through
# shared helpers (SlotOfOrder, SlotRowAddress: a refactor, but the cubin's
# RowPassKernel code differs, so it is timed); (b) RowCheckKernel, which
# needs 32 registers since 3ce0f7a's parent, compiled for 8 blocks per SM
# for fp32 rows too (was 6). rb_3ce: HEAD's kernels (73e67cf); rb_ref: (a);
# rb_chk8: (a) + (b). Alternating, two rounds; the full-row check rows
# (validate_full_rows) come from the CSV. rejection_cuda_test of (a) + (b).
# Bundle: .gpu-r/bin holds the three rejection_bench builds and
# rejection_cuda_test, with scripts/gpu-bundle.sh's libraries.
# Run: bash bench/sampling/results/2026-11-29-row-slots/run1.sh .gpu-r $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
timeout 200 "$bundle/bin/rejection_cuda_test" > "$out/rejection_cuda_test.txt" 2>&1
echo "rejection_cuda_test: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/rejection_cuda_test.txt" | tr '\n' ' ')"
for round in ${ROUNDS:-1 2}; do
  for args in "logits,8,8,151936" "logits,32,8,151936" "logits,1,8,151936" "logits,1,8,151936 --dtype bf16" \
      "logits,8,8,151936 --dtype bf16" "probabilities,8,8,151936" "logprobs,8,8,151936"; do
    for binary in rb_3ce rb_ref rb_chk8; do
      # shellcheck disable=SC2086
      timeout 60 "$bundle/bin/$binary" --only $args --runs 200 --csv "$out/last.csv" > "$out/last.txt" 2>&1
      echo "r$round $binary $args | $(grep -E '^(logits|probabilities|logprobs)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ') | full-row check: $(grep full_row_check "$out/last.csv" | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/last.txt" "$out/last.csv"
