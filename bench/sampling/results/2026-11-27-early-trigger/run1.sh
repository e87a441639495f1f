#!/usr/bin/env bash
# Issue #17 item 1: the logits chain's dependent grids launched early.
# The row pass never triggered its programmatic dependent, so the combine grid
# was only launched as the pass's last blocks left; the combine triggered the
# race only after its own wait. Variants (early-trigger.patch, macro
# SV_TRIGGER, against e963a40 whose sampling kernels are d9f7d3e's):
#   v1: every row-pass block triggers at its start (the combine launches
#       once the pass's last wave is resident, and waits there);
#   v2: v1 + the combine triggers before its wait (the race grid is resident
#       and done with its pre-wait loads when the combine completes).
# griddepcontrol.wait still waits for the primary grid's completion and
# memory flush, so nothing read changes.
# Builds (one worktree of e963a40 with the patch, two build dirs; base = main's build-gpu):
#   cmake -S . -B build-v1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-DSV_TRIGGER=1
#   cmake -S . -B build-v2 ... -DCMAKE_CUDA_FLAGS=-DSV_TRIGGER=2
#   ninja -C build-v1 rejection_bench; ninja -C build-v2 rejection_bench rejection_cuda_test
#   scripts/gpu-bundle.sh build-gpu .gpu-t rejection_bench; cp build-v1/bench/rejection_bench .gpu-t/bin/rejection_bench_v1
#   cp build-v2/bench/rejection_bench .gpu-t/bin/rejection_bench_v2; cp build-v2/tests/kernels/rejection_cuda_test .gpu-t/bin/rejection_cuda_test_v2
# Run: run(carry=[".gpu-t"]): bash bench/sampling/results/2026-11-27-early-trigger/run1.sh .gpu-t $OUT
set -u
b=$1/bin
export LD_LIBRARY_PATH=$1/lib
out=$2
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
"$b/rejection_cuda_test_v2" > "$out/tests-v2.txt" 2>&1; echo "rejection_cuda_test_v2 rc=$?" | tee -a "$out/machine.txt"
tail -3 "$out/tests-v2.txt"
shapes=("logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" "logits,32,8,151936" "logits,128,8,151936 --dtype bf16" "probabilities,8,8,151936")
for round in 1 2 3; do
  for shape in "${shapes[@]}"; do
    read -ra args <<< "$shape"
    for v in base v1 v2; do
      bin=$b/rejection_bench
      [ "$v" != base ] && bin=$b/rejection_bench_$v
      "$bin" --only "${args[@]}" --runs 200 --csv /dev/null 2>&1 | grep -E "ours median|top-k" | sed -E 's/ +/ /g' |
        while IFS= read -r line; do echo "round $round $v $shape: $line"; done | tee -a "$out/ab.txt"
    done
  done
done
