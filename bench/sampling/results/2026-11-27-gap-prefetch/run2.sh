#!/usr/bin/env bash
# Run 2: VARIANTS="exp lines" (lines: one prefetch.global.L2 a thread and line over the whole combine grid, after its work).
# Issue #17 item 1, upper bound of one idea: the race's sampled rows
# prefetched into L2 by the combine kernel, i.e. while DRAM is idle between
# the row pass and the race, with k taken from the previous launch over the
# same inputs (an oracle: the benchmark's copies are identical, so every
# launch has the same outcome). If even the oracle cannot take ~1 us off fp32
# B=8, a real decision in the combine cannot either.
#
# Patch: gap-prefetch.patch (against 8676d28's kernels, macro
# SV_EXP_PREFETCH_ORACLE). Builds (two build dirs of one worktree):
#   cmake -S . -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake -S . -B build-exp ... -DCMAKE_CUDA_FLAGS=-DSV_EXP_PREFETCH_ORACLE
#   cmake --build build-{base,exp} --target rejection_bench
#   scripts/gpu-bundle.sh build-base .gpu-pf rejection_bench; cp build-exp/.../rejection_bench .gpu-pf/bin/rejection_bench_exp
# Run: run(carry=[".gpu-pf"]): bash run1.sh .gpu-pf $OUT
set -u
b=$1/bin
export LD_LIBRARY_PATH=$1/lib
out=$2
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
shapes=("logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" "logits,32,8,151936")
for round in 1 2; do
  for shape in "${shapes[@]}"; do
    read -ra args <<< "$shape"
    for v in base ${VARIANTS:-exp}; do
      bin=$b/rejection_bench
      [ "$v" != base ] && bin=$b/rejection_bench_$v
      line=$("$bin" --only "${args[@]}" --runs 200 --csv /dev/null 2>&1 | grep -E "ours median" | head -1)
      echo "round $round $v $shape: $line" | tee -a "$out/ab.txt"
    done
  done
done
