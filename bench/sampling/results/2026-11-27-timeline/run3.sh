#!/usr/bin/env bash
# Run 1-3 (H100; run 2 adds per-block counts of the hopeful steps, run 3 stamps of thread 0 per sweep iteration): where the time of one launch goes. rejection_bench built with
# -DCMAKE_CUDA_FLAGS=-DSV_EXP_TIMELINE (timeline.patch): after the timed runs
# of each shape, three single launches (synchronized before and after) record
# %globaltimer at the row pass's first block start and last block end, the
# combine's, and each race block's entry, release from griddepcontrol.wait,
# decision, sweep end (block barrier), ticket and outcome write.
# Build: cmake -S . -B build-tl -G Ninja -DCMAKE_BUILD_TYPE=Release \
#   -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-DSV_EXP_TIMELINE
#   cmake --build build-tl --target rejection_bench
#   scripts/gpu-bundle.sh build-tl .gpu-tl rejection_bench
# Run (H100): carry .gpu-tl
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-tl/lib
for spec in "probabilities,8,8,151936" "logprobs,8,8,151936" "logits,8,8,151936" "logits,1,8,151936"  ; do
  set -- $spec
  echo "== $spec"
  .gpu-tl/bin/rejection_bench --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|timeline|  race|counts|iter"
done > "$OUT/run3.txt" 2>&1
cat "$OUT/run3.txt"
