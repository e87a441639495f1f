#!/usr/bin/env bash
# Run 1 (H100): the row pass's loads marked L2 evict-first
# (createpolicy.fractional.L2::evict_first + ld.global.nc.L2::cache_hint in
# LoadChunk, macro SV_EXP_EVICT_FIRST), so its stream does not push the
# combine's and the race's code (and scratch) out of L2 before they run.
# base = 45d637d's kernels; ef = evict-first; tl / tlef = the same two with
# the timeline stamps of bench/sampling/results/2026-11-27-timeline.
# Build: cmake -S . -B build-ef -G Ninja -DCMAKE_BUILD_TYPE=Release \
#   -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-DSV_EXP_EVICT_FIRST
#   (build-tlef: "-DSV_EXP_EVICT_FIRST -DSV_EXP_TIMELINE"); each binary
#   copied as rejection_bench_<variant> into /tmp/efb, then
#   scripts/gpu-bundle.sh /tmp/efb .gpu-ef rejection_bench_base ...
# Run (H100): carry .gpu-ef
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-ef/lib
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936" "logits,128,8,151936" "logits,32,8,151936 --dtype bf16"; do
    set -- $spec
    for v in rejection_bench_base rejection_bench_ef; do
      printf '%-22s round %d %-34s ' "$v" "$round" "$spec"
      .gpu-ef/bin/$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
for spec in "logits,8,8,151936" "logits,1,8,151936"; do
  set -- $spec
  for v in rejection_bench_tl rejection_bench_tlef; do
    echo "== $v $spec"
    .gpu-ef/bin/$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|timeline|  race|iter" | head -22
  done
done > "$OUT/run1-timeline.txt" 2>&1
cat "$OUT/run1-ab.txt"; grep -E "==|timeline|decided|iter 0|swept|outcome|ours" "$OUT/run1-timeline.txt"
