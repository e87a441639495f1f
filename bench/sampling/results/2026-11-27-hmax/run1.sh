#!/usr/bin/env bash
# Run 1 (H100): the row pass's per-thread maximum and minimum of 16-bit
# values taken two at a time in their own format (max.NaN / min.NaN on
# bf16x2 or f16x2, then one conversion each) instead of one float
# comparison per value; LoadChunk hands the stored quads to FullChunkStats,
# which unpacks them for the weights. hmax.patch against b0869c5 (kernels of
# 2ce133b); base = HEAD build.
# Build: the patched tree, cmake -S . -B build-hmax -G Ninja
#   -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90, targets
#   rejection_bench rejection_cuda_test.
# clean: b0869c5 plus the decision-input refactor (build-gpu at that tree).
# Run (H100): carry .gpu-hmax
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-hmax/lib
B=.gpu-hmax/bin
for v in hmax clean; do echo "== $v"; $B/rejection_cuda_test_$v 2>&1 | tail -3; done > "$OUT/run1-tests.txt"
cat "$OUT/run1-tests.txt"
for round in 1 2 3; do
  for spec in "logits,32,8,151936 --dtype bf16" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" "logits,32,8,151936 --dtype fp16" "logits,8,8,151936"; do
    [ "$round" = 3 ] && [ "$spec" != "logits,32,8,151936 --dtype bf16" ] && continue
    set -- $spec
    for v in base hmax; do
      printf '%-5s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k|read floor" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
# The decision's input loads factored (LoadDecisionInputs for the preload
# and the decision's own reads; no `loaded` flag): expected unchanged.
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "probabilities,8,8,151936" "logprobs,8,8,151936"; do
    set -- $spec
    for v in base clean; do
      printf '%-5s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run1-clean-ab.txt" 2>&1
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//' "$OUT/run1-ab.txt" "$OUT/run1-clean-ab.txt"
